"""Leader elections on request (ElectLeaders) and leader balancing (preferred replicas).

ElectLeaders (Kafka's ``ReplicationControlManager.electLeaders``), per partition:
PREFERRED (0) makes the first replica the leader if it is in the ISR and active;
UNCLEAN (1) gives a leaderless partition a leader, from outside the ISR if need be.
Errors: UNKNOWN_TOPIC_OR_PARTITION; ELECTION_NOT_NEEDED (the preferred replica already
leads / the partition has a leader); PREFERRED_LEADER_NOT_AVAILABLE /
ELIGIBLE_LEADERS_NOT_AVAILABLE when no such leader can be elected. A request without
topic partitions means every partition, and then ELECTION_NOT_NEEDED ones are left out.

``balance_leaders`` is ``auto.leader.rebalance.enable``: after brokers came back,
move leadership to each partition's preferred replica where it is in the ISR and
active, at most ``max_elections`` per write (the reply says whether more remain);
the shell calls it every ``leader.imbalance.check.interval.seconds``.

``elect_unclean_leaders`` is Kafka's ``maybeElectUncleanLeaders``: a partition left
without a leader (its last ISR member fenced) whose topic enables
``unclean.leader.election.enable`` only later (a dynamic config) gets a leader from
outside the ISR; the shell calls it every ``unclean.leader.election.interval.ms``.
(A broker fenced while the topic already allows it triggers the unclean election at
once: ``topic_ops.isr_changes``.)
"""

from __future__ import annotations

from typing import Any

from spool.cluster.image import NO_LEADER, MetadataImage, PartitionRegistration
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.cluster.partition_change import Election, partition_change
from spool.cluster.topic_ops import unclean_election_enabled
from spool.protocol._generated import ElectLeadersRequest, ElectLeadersResponse
from spool.protocol._generated import elect_leaders_response as elr
from spool.protocol.errors import Errors, KafkaError

PREFERRED, UNCLEAN = 0, 1


def _acceptable(img: MetadataImage):
    return lambda r: r in img.brokers and img.brokers[r].active


def _elect(img: MetadataImage, topic: str, pid: int, election_type: int,
           records: list[Any]) -> KafkaError | None:
    t = img.topic(topic)
    if t is None:
        return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}")
    p = t.partitions.get(pid)
    if p is None:
        return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                          f"No such partition as {topic}-{pid}")
    preferred = election_type != UNCLEAN
    if (p.leader == p.replicas[0]) if preferred else (p.leader != NO_LEADER):
        return KafkaError(Errors.ELECTION_NOT_NEEDED)
    rec = partition_change(t.topic_id, pid, p, _acceptable(img),
                           election=Election.PREFERRED if preferred else Election.UNCLEAN)
    if rec is None:
        return KafkaError(Errors.PREFERRED_LEADER_NOT_AVAILABLE if preferred
                          else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    records.append(rec)
    return None


def elect_leaders(img: MetadataImage, req: ElectLeadersRequest
                  ) -> ControllerResult[ElectLeadersResponse]:
    """ElectLeaders (module doc); ``election_type`` is PREFERRED before v1."""
    records: list[Any] = []
    results = []
    every = req.topic_partitions is None
    wanted = ([(name, sorted(t.partitions)) for name, t in sorted(img.topics_by_name.items())]
              if every else [(t.topic, list(t.partitions)) for t in req.topic_partitions])
    for topic, pids in wanted:
        out = elr.ReplicaElectionResult(topic=topic, partition_result=[])
        results.append(out)
        for pid in pids:
            err = _elect(img, topic, pid, req.election_type, records)
            if every and err is not None and err.code == Errors.ELECTION_NOT_NEEDED:
                continue
            out.partition_result.append(elr.PartitionResult(
                partition_id=pid, error_code=0 if err is None else err.code,
                error_message=None if err is None else err.message))
    return ControllerResult(records, ElectLeadersResponse(
        throttle_time_ms=0, error_code=0, replica_election_results=results))


def _imbalanced(img: MetadataImage, p: PartitionRegistration) -> bool:
    first = p.replicas[0] if p.replicas else NO_LEADER
    return p.leader != first and first in p.isr and _acceptable(img)(first)


def balance_leaders(img: MetadataImage, max_elections: int = 1000) -> ControllerResult[bool]:
    """Preferred elections where the preferred replica could lead (module doc)."""
    records: list[Any] = []
    for name in sorted(img.topics_by_name):
        t = img.topics_by_name[name]
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            if not _imbalanced(img, p):
                continue
            if len(records) == max_elections:
                return ControllerResult(records, True)
            rec = partition_change(t.topic_id, pid, p, _acceptable(img),
                                   election=Election.PREFERRED)
            if rec is not None:
                records.append(rec)
    return ControllerResult(records, False)


def elect_unclean_leaders(img: MetadataImage, config: ControllerConfig,
                          max_elections: int = 1000) -> ControllerResult[bool]:
    """Unclean elections for leaderless partitions of topics that allow them (module
    doc); the reply is True when more may remain."""
    records: list[Any] = []
    for name in sorted(img.topics_by_name):
        t = img.topics_by_name[name]
        leaderless = [pid for pid in sorted(t.partitions)
                      if t.partitions[pid].leader == NO_LEADER]
        if not leaderless or not unclean_election_enabled(img, config, name):
            continue
        for pid in leaderless:
            if len(records) == max_elections:
                return ControllerResult(records, True)
            rec = partition_change(t.topic_id, pid, t.partitions[pid], _acceptable(img),
                                   election=Election.UNCLEAN)
            if rec is not None:
                records.append(rec)
    return ControllerResult(records, False)
