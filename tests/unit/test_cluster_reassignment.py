"""Partition reassignment on the controller: AlterPartitionReassignments, the ISR change
that finishes it, cancellation, ListPartitionReassignments; Kafka's errors."""

from __future__ import annotations

import pytest

from spool.cluster.ops import ControllerConfig
from spool.protocol._generated import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ListPartitionReassignmentsRequest,
    PartitionChangeRecord,
)
from spool.protocol._generated import alter_partition_reassignments_request as aprq
from spool.protocol._generated import alter_partition_request as apq
from spool.protocol._generated import list_partition_reassignments_request as lprq
from spool.protocol.errors import Errors
from tests.helpers.cluster_harness import Harness


def cluster(configs=None):
    """Four brokers; "t" partition 0 on [1, 2, 3] led by 1, partition 1 on [2, 3, 4]."""
    h = Harness(ControllerConfig())
    for b in (1, 2, 3, 4):
        h.start(b)
    tid = h.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 4]},
                         configs=configs).topic_id
    return h, tid


def reassign(h, targets, *, allow_rf_change=True):
    """``targets``: {(topic, partition): replicas or None}; (records, {tp: (code, msg)})."""
    by_topic: dict[str, list] = {}
    for (t, p), replicas in targets.items():
        by_topic.setdefault(t, []).append(aprq.ReassignablePartition(partition_index=p,
                                                                     replicas=replicas))
    req = AlterPartitionReassignmentsRequest(
        timeout_ms=1000, allow_replication_factor_change=allow_rf_change,
        topics=[aprq.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    result = h.controller.alter_partition_reassignments(req)
    resp = h.commit(result)
    assert resp.error_code == 0
    return result.records, {(t.name, p.partition_index): (p.error_code, p.error_message)
                            for t in resp.responses for p in t.partitions}


def listed(h, topics=None):
    req = ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None if topics is None else [
        lprq.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
        for t, ps in topics.items()])
    resp = h.controller.list_partition_reassignments(req)
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in resp.topics for p in t.partitions}


def isr_change(h, tid, pid, isr, version=3):
    """The leader of ``pid`` asks for ``isr`` (AlterPartition); that partition's answer."""
    part = h.image.partition(tid, pid)
    req = AlterPartitionRequest(
        broker_id=part.leader, broker_epoch=h.epochs[part.leader],
        topics=[apq.TopicData(topic_name="t", topic_id=tid, partitions=[apq.PartitionData(
            partition_index=pid, leader_epoch=part.leader_epoch,
            partition_epoch=part.partition_epoch, leader_recovery_state=0,
            new_isr=list(isr),
            new_isr_with_epochs=[apq.BrokerState(broker_id=b, broker_epoch=h.epochs[b])
                                 for b in isr])])])
    return h.commit(h.controller.alter_partition(req, version)).topics[0].partitions[0]


def state(h, tid, pid):
    p = h.image.partition(tid, pid)
    return p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas


def test_a_move_adds_waits_for_the_isr_then_drops_the_old_replicas():
    h, tid = cluster()
    recs, res = reassign(h, {("t", 0): [4, 2, 3]})
    assert res == {("t", 0): (0, None)}
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, replicas=[4, 2, 3, 1],
                                          removing_replicas=[1], adding_replicas=[4])]
    assert state(h, tid, 0) == ((4, 2, 3, 1), (1, 2, 3), 1, (4,), (1,))
    assert listed(h) == {("t", 0): ([4, 2, 3, 1], [4], [1])}
    epoch = h.image.partition(tid, 0).leader_epoch
    # broker 4 caught up: the leader (1, being removed) puts it in the ISR, which completes
    # the reassignment and moves the leadership; the leader is told NEW_LEADER_ELECTED
    answer = isr_change(h, tid, 0, [1, 2, 3, 4])
    assert answer.error_code == Errors.NEW_LEADER_ELECTED
    assert state(h, tid, 0) == ((4, 2, 3), (2, 3, 4), 4, (), ())
    assert h.image.partition(tid, 0).leader_epoch == epoch + 1
    assert listed(h) == {}


def test_a_shrink_without_new_replicas_completes_at_once_and_bumps_the_epoch():
    h, tid = cluster()
    recs, res = reassign(h, {("t", 0): [1, 3]})
    assert res == {("t", 0): (0, None)}
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, leader=1, isr=[1, 3],
                                          replicas=[1, 3])]
    assert state(h, tid, 0) == ((1, 3), (1, 3), 1, (), ())
    assert h.image.partition(tid, 0).leader_epoch == 1
    _, res = reassign(h, {("t", 0): [3, 1]})  # a reorder: the replica order only
    assert state(h, tid, 0) == ((3, 1), (1, 3), 1, (), ())
    _, res = reassign(h, {("t", 0): [3, 1]})  # the same again: nothing to write
    assert res == {("t", 0): (0, None)}


def test_the_old_leader_keeps_leading_until_the_new_replicas_are_in_sync():
    h, tid = cluster()
    reassign(h, {("t", 1): [1, 2, 3]})  # 4 goes, 1 comes; leader 2 stays
    assert isr_change(h, tid, 1, [2, 3]).error_code == 0  # 4 fell behind: no completion
    assert state(h, tid, 1) == ((1, 2, 3, 4), (2, 3), 2, (1,), (4,))
    assert isr_change(h, tid, 1, [2, 3, 1]).error_code == 0
    assert state(h, tid, 1) == ((1, 2, 3), (2, 3, 1), 2, (), ())


def test_a_removing_leader_fenced_midway_hands_over_and_the_move_goes_on():
    h, tid = cluster()
    reassign(h, {("t", 0): [4, 2, 3]})
    h.heartbeat(1, want_fence=True)
    assert state(h, tid, 0) == ((4, 2, 3, 1), (2, 3), 2, (4,), (1,))
    assert isr_change(h, tid, 0, [2, 3, 4]).error_code == 0  # the leader stays: no error
    assert state(h, tid, 0) == ((4, 2, 3), (2, 3, 4), 2, (), ())


def test_cancel_reverts_to_the_original_replicas():
    h, tid = cluster()
    reassign(h, {("t", 0): [4, 2, 3]})
    recs, res = reassign(h, {("t", 0): None})
    assert res == {("t", 0): (0, None)}
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, leader=1,
                                          replicas=[2, 3, 1], removing_replicas=[],
                                          adding_replicas=[])]
    assert state(h, tid, 0) == ((2, 3, 1), (1, 2, 3), 1, (), ())
    assert listed(h) == {}
    _, res = reassign(h, {("t", 0): None})
    assert res == {("t", 0): (Errors.NO_REASSIGNMENT_IN_PROGRESS,
                              "No partition reassignment is in progress.")}


def _only_new_replicas_in_sync(configs=None):
    h, tid = cluster(configs)
    reassign(h, {("t", 0): [4, 2, 3]})
    isr_change(h, tid, 0, [1, 4])  # 2 and 3 fell behind, 4 caught up... then 1 dies
    h.heartbeat(1, want_fence=True)
    assert state(h, tid, 0) == ((4, 2, 3, 1), (4,), 4, (4,), (1,))
    return h, tid


def test_a_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it():
    h, tid = _only_new_replicas_in_sync()
    recs, res = reassign(h, {("t", 0): None})
    assert recs == []
    assert res == {("t", 0): (Errors.INVALID_REPLICA_ASSIGNMENT,
                              "Unable to revert partition assignment for t:0 because it would "
                              "require an unclean leader election.")}
    h, tid = _only_new_replicas_in_sync({"unclean.leader.election.enable": "true"})
    _, res = reassign(h, {("t", 0): None})
    assert res == {("t", 0): (0, None)}
    assert state(h, tid, 0) == ((2, 3, 1), (2,), 2, (), ())  # 4's records may be lost


@pytest.mark.parametrize("target, code, message", [
    ([], Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes an empty replica list."),
    ([1, 9], Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes broker 9, but no such broker is registered."),
    ([2, 1, 2], Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes the broker 2 more than once."),
])
def test_invalid_targets_write_nothing(target, code, message):
    h, tid = cluster()
    recs, res = reassign(h, {("t", 0): target, ("t", 1): [2, 3, 1]})
    assert res[("t", 0)] == (code, message)
    assert res[("t", 1)] == (0, None)  # one bad partition never fails the others
    assert [r.partition_id for r in recs] == [1]


def test_unknown_topics_and_partitions():
    h, _ = cluster()
    _, res = reassign(h, {("nope", 0): [1], ("t", 5): [1]})
    assert res == {("nope", 0): (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                 "Unable to find a topic named nope."),
                   ("t", 5): (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                              "Unable to find partition t:5.")}


def test_replication_factor_change_refused_when_the_request_says_so():
    h, tid = cluster()
    _, res = reassign(h, {("t", 0): [1, 2]}, allow_rf_change=False)
    assert res == {("t", 0): (Errors.INVALID_REPLICATION_FACTOR,
                              "The replication factor is changed from 3 to 2")}
    reassign(h, {("t", 0): [4, 2, 3]}, allow_rf_change=False)  # in progress: 4 replicas
    _, res = reassign(h, {("t", 0): [4, 1, 3]}, allow_rf_change=False)  # counted as 3
    assert res == {("t", 0): (0, None)}
    # as Kafka: the new move starts from the replicas as they are (4 is one already)
    assert state(h, tid, 0) == ((4, 1, 3, 2), (1, 2, 3), 1, (), (2,))


def test_list_named_partitions_skips_unknown_and_idle_ones():
    h, tid = cluster()
    reassign(h, {("t", 1): [1, 3, 4]})
    assert listed(h, {"t": [0, 1, 7], "nope": [0]}) == {("t", 1): ([1, 3, 4, 2], [1], [2])}
    assert listed(h, {"t": [0]}) == {}
