"""ElectLeaders, preferred-leader balancing, unclean elections."""

from __future__ import annotations

import pytest

from spool.protocol._generated import (
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    PartitionChangeRecord,
)
from spool.protocol._generated import elect_leaders_request as elq
from spool.protocol._generated import incremental_alter_configs_request as iacq
from spool.protocol.errors import Errors
from tests.helpers.cluster_harness import Harness

TIMEOUT = 9000


def failed_over() -> tuple[Harness, object]:
    """Three brokers, "t" with partition p preferring broker p+1; broker 1 was fenced and
    came back, so partition 0 is led by broker 2 with broker 1 out of its ISR."""
    h = Harness()
    for b in (1, 2, 3):
        h.start(b)
    tid = h.create_topic("t", assignments={0: [1, 2], 1: [2, 3], 2: [3, 1]}).topic_id
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    return h, tid


def elect(h, election_type, topics):
    req = ElectLeadersRequest(election_type=election_type, timeout_ms=1, topic_partitions=None
                              if topics is None else [elq.TopicPartitions(topic=t, partitions=p)
                                                      for t, p in topics.items()])
    result = h.controller.elect_leaders(req)
    return result.records, h.commit(result)


def results(resp):
    return {(r.topic, p.partition_id): p.error_code
            for r in resp.replica_election_results for p in r.partition_result}


def test_preferred_election_needs_the_preferred_replica_in_the_isr():
    h, tid = failed_over()
    assert h.image.partition(tid, 0).leader == 2
    recs, resp = elect(h, 0, {"t": [0, 1, 7], "nope": [0]})
    assert recs == []
    assert results(resp) == {("t", 0): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                             ("t", 1): Errors.ELECTION_NOT_NEEDED,
                             ("t", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                             ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    h.controller.replay(PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[2, 1]),
                        h.next_offset)  # broker 1 caught up: the leader re-added it
    h.log.append((h.next_offset, None))
    recs, resp = elect(h, 0, None)
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, leader=1)]
    assert results(resp) == {("t", 0): 0}  # every partition: not-needed ones left out
    p = h.image.partition(tid, 0)
    assert (p.leader, p.leader_epoch) == (1, 2)


def test_balance_moves_leaders_back_to_preferred_replicas_in_steps():
    h, tid = failed_over()
    assert h.commit(h.controller.balance_leaders()) is False  # broker 1 not in the ISR
    assert h.image.partition(tid, 0).leader == 2
    for pid, isr in [(0, [2, 1]), (2, [1, 3])]:
        h.controller.replay(PartitionChangeRecord(topic_id=tid, partition_id=pid, isr=isr),
                            h.next_offset)
        h.log.append((h.next_offset, None))
    h.controller.replay(PartitionChangeRecord(topic_id=tid, partition_id=2, leader=1),
                        h.next_offset)
    h.log.append((h.next_offset, None))
    assert [h.image.partition(tid, p).leader for p in range(3)] == [2, 2, 1]
    assert h.commit(h.controller.balance_leaders(max_elections=1)) is True
    assert h.commit(h.controller.balance_leaders(max_elections=1)) is False
    assert [h.image.partition(tid, p).leader for p in range(3)] == [1, 2, 3]
    assert h.controller.balance_leaders().records == []


def test_unclean_election_gives_a_leaderless_partition_an_out_of_sync_leader():
    h = Harness()
    for b in (1, 2):
        h.start(b)
    tid = h.create_topic("t", assignments={0: [1, 2]}).topic_id
    h.controller.replay(PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[1]),
                        h.next_offset)
    h.log.append((h.next_offset, None))
    h.heartbeat(1, want_fence=True)
    assert h.image.partition(tid, 0).leader == -1
    recs, resp = elect(h, 1, {"t": [0]})
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, leader=2, isr=[2],
                                          leader_recovery_state=1)]
    assert results(resp) == {("t", 0): 0}
    recs, resp = elect(h, 1, {"t": [0]})
    assert results(resp) == {("t", 0): Errors.ELECTION_NOT_NEEDED}


def _last_in_sync_fenced(topic_configs=None, cluster_configs=None):
    """Brokers 1 and 2; "t" on [1, 2] with ISR [1] (2 fell behind); then broker 1 dies."""
    h = Harness()
    for b in (1, 2):
        h.start(b)
    if cluster_configs:
        h.commit(h.controller.incremental_alter_configs(IncrementalAlterConfigsRequest(
            validate_only=False, resources=[iacq.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[
                    iacq.AlterableConfig(name=k, config_operation=0, value=v)
                    for k, v in cluster_configs.items()])])))
    tid = h.create_topic("t", assignments={0: [1, 2]}, configs=topic_configs).topic_id
    h.controller.replay(PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[1]),
                        h.next_offset)
    h.log.append((h.next_offset, None))
    h.heartbeat(1, want_fence=True)
    return h, tid


def test_fencing_the_last_isr_member_leaves_the_partition_leaderless_by_default():
    h, tid = _last_in_sync_fenced()
    p = h.image.partition(tid, 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (-1, (1,), 0)
    assert h.controller.elect_unclean_leaders().records == []


@pytest.mark.parametrize("where", ["topic", "cluster"])
def test_fencing_the_last_isr_member_elects_an_unclean_leader_where_allowed(where):
    key = {"unclean.leader.election.enable": "true"}
    h, tid = (_last_in_sync_fenced(topic_configs=key) if where == "topic"
              else _last_in_sync_fenced(cluster_configs=key))
    p = h.image.partition(tid, 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)  # RECOVERING


def test_allowing_unclean_elections_later_gives_leaderless_partitions_a_leader():
    h, tid = _last_in_sync_fenced()
    h.commit(h.controller.incremental_alter_configs(IncrementalAlterConfigsRequest(
        validate_only=False, resources=[iacq.AlterConfigsResource(
            resource_type=2, resource_name="t", configs=[iacq.AlterableConfig(
                name="unclean.leader.election.enable", config_operation=0, value="true")])])))
    assert h.image.partition(tid, 0).leader == -1  # nothing happens by itself...
    result = h.controller.elect_unclean_leaders()
    assert result.records == [PartitionChangeRecord(topic_id=tid, partition_id=0, leader=2,
                                                    isr=[2], leader_recovery_state=1)]
    assert h.commit(result) is False
    assert h.image.partition(tid, 0).leader == 2  # ...until the periodic check runs
    assert h.controller.elect_unclean_leaders().records == []
