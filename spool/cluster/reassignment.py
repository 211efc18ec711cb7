"""Partition reassignment: AlterPartitionReassignments (45), ListPartitionReassignments (46).

Kafka's rules (``ReplicationControlManager.alterPartitionReassignments``,
``PartitionReassignmentReplicas``, ``PartitionReassignmentRevert``), in our own code.

A reassignment to ``target`` replicas goes in three steps:

1. One PartitionChangeRecord: ``replicas`` = target + the current replicas not in the
   target (``removing_replicas``), ``adding_replicas`` = target - current. The new
   replicas become followers and fetch from the leader.
2. The leader puts each new replica in the ISR once it has caught up (AlterPartition).
3. The change that makes the ISR hold every replica that stays finishes it (in
   ``partition_change``, whatever change that is): the removing replicas leave the
   replicas and the ISR, ``adding``/``removing`` are cleared, the leader moves if it
   was being removed (the leader's AlterPartition is then answered NEW_LEADER_ELECTED).

A target that needs no new replica (a reorder, a shrink whose remaining replicas are in
the ISR) completes at once, in the request's one record. A new target while one is in
progress starts from the partition as it is (replicas, adding and removing included).

``replicas`` null cancels: the adding replicas leave the replicas and the ISR, the
removing ones stay. If that empties the ISR (only added replicas were in sync) the
first remaining replica is made the ISR: an unclean election, refused with
INVALID_REPLICA_ASSIGNMENT unless the topic allows ``unclean.leader.election.enable``.

Errors, per partition, each with Kafka's message: UNKNOWN_TOPIC_OR_PARTITION;
NO_REASSIGNMENT_IN_PROGRESS (cancel without one); INVALID_REPLICA_ASSIGNMENT (an empty
list, an unregistered broker, a broker twice, an unclean revert);
INVALID_REPLICATION_FACTOR when the request (v1, KIP-860) says
``allow_replication_factor_change=false`` and the target's size differs from the
current replication factor (the size of the replica set once any ongoing reassignment
finishes). Every valid partition of the request is written in one atomic batch.

ListPartitionReassignments: every partition with adding or removing replicas (topics
null), or those among the named partitions; unknown topics and partitions are left
out, as Kafka does; topics without one are not listed.
"""

from __future__ import annotations

from typing import Any

from spool.cluster.image import MetadataImage, PartitionRegistration, TopicImage
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.cluster.partition_change import Election, partition_change
from spool.cluster.topic_ops import check_manual_assignment, unclean_election_enabled
from spool.protocol._generated import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from spool.protocol._generated import alter_partition_reassignments_response as aprr
from spool.protocol._generated import list_partition_reassignments_response as lprr
from spool.protocol._generated.partition_change_record import PartitionChangeRecord
from spool.protocol.errors import Errors, KafkaError


def in_progress(p: PartitionRegistration) -> bool:
    """Whether ``p`` is being reassigned (it has adding or removing replicas)."""
    return bool(p.adding_replicas or p.removing_replicas)


def _acceptable(img: MetadataImage):
    return lambda r: r in img.brokers and img.brokers[r].active


def _cancel(img: MetadataImage, config: ControllerConfig, topic: TopicImage, pid: int,
            part: PartitionRegistration) -> PartitionChangeRecord | None:
    if not in_progress(part):
        raise KafkaError(Errors.NO_REASSIGNMENT_IN_PROGRESS,
                         "No partition reassignment is in progress.")
    replicas = [r for r in part.replicas if r not in part.adding_replicas]
    isr = [r for r in part.isr if r not in part.adding_replicas]
    unclean = unclean_election_enabled(img, config, topic.name)
    if not isr:
        if not replicas:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT, "Invalid replica assignment: "
                             "addingReplicas contains all replicas.")
        if not unclean:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Unable to revert partition assignment for {topic.name}:{pid} "
                             f"because it would require an unclean leader election.")
        isr = [replicas[0]]
    return partition_change(
        topic.topic_id, pid, part, _acceptable(img), target_isr=isr,
        election=Election.UNCLEAN if unclean else Election.ONLINE,
        target_replicas=replicas, target_removing=[], target_adding=[])


def _change(img: MetadataImage, topic: TopicImage, pid: int, part: PartitionRegistration,
            target: list[int], allow_rf_change: bool) -> PartitionChangeRecord | None:
    check_manual_assignment(target, img, None)
    if not allow_rf_change:
        current = len(part.replicas) - len(part.removing_replicas)
        if current != len(target):
            raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                             f"The replication factor is changed from {current} to "
                             f"{len(target)}")
    removing = sorted(set(part.replicas) - set(target))
    adding = sorted(set(target) - set(part.replicas))
    return partition_change(
        topic.topic_id, pid, part, _acceptable(img),
        target_replicas=list(target) + removing, target_removing=removing,
        target_adding=adding)


def alter_partition_reassignments(
    img: MetadataImage, config: ControllerConfig, req: AlterPartitionReassignmentsRequest,
) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    """AlterPartitionReassignments (module doc)."""
    records: list[Any] = []
    responses = []
    allow_rf_change = getattr(req, "allow_replication_factor_change", True)
    for t in req.topics:
        out = aprr.ReassignableTopicResponse(name=t.name, partitions=[])
        responses.append(out)
        topic = img.topic(t.name)
        for p in t.partitions:
            code, message = 0, None
            try:
                if topic is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Unable to find a topic named {t.name}.")
                part = topic.partitions.get(p.partition_index)
                if part is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Unable to find partition {t.name}:{p.partition_index}.")
                if p.replicas is None:
                    rec = _cancel(img, config, topic, p.partition_index, part)
                else:
                    rec = _change(img, topic, p.partition_index, part, list(p.replicas),
                                  allow_rf_change)
                if rec is not None:
                    records.append(rec)
                    img = img.replay([rec])  # a partition named twice sees the first change
                    topic = img.topic(t.name)
            except KafkaError as e:
                code, message = e.code, e.message
            out.partitions.append(aprr.ReassignablePartitionResponse(
                partition_index=p.partition_index, error_code=code, error_message=message))
    return ControllerResult(records, AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=allow_rf_change, error_code=0,
        error_message=None, responses=responses))


def _ongoing(topic: TopicImage, pids) -> lprr.OngoingTopicReassignment | None:
    out = lprr.OngoingTopicReassignment(name=topic.name, partitions=[])
    for pid in pids:
        p = topic.partitions.get(pid)
        if p is not None and in_progress(p):
            out.partitions.append(lprr.OngoingPartitionReassignment(
                partition_index=pid, replicas=list(p.replicas),
                adding_replicas=list(p.adding_replicas),
                removing_replicas=list(p.removing_replicas)))
    return out if out.partitions else None


def list_partition_reassignments(img: MetadataImage, req: ListPartitionReassignmentsRequest
                                 ) -> ListPartitionReassignmentsResponse:
    """ListPartitionReassignments (module doc): a read, no records."""
    if req.topics is None:
        wanted = [(t, sorted(t.partitions)) for _, t in sorted(img.topics_by_name.items())]
    else:
        wanted = [(img.topic(t.name), t.partition_indexes) for t in req.topics]
    topics = [o for t, pids in wanted if t is not None
              for o in [_ongoing(t, pids)] if o is not None]
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0,
                                              error_message=None, topics=topics)
