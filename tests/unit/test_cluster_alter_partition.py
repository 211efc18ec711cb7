"""AlterPartition: ISR changes asked by a partition's leader, checked as Kafka checks them."""

from __future__ import annotations

import uuid

import pytest

from spool.cluster.ops import ControllerConfig
from spool.protocol._generated import AlterPartitionRequest, PartitionChangeRecord
from spool.protocol._generated import alter_partition_request as apq
from spool.protocol.errors import Errors
from tests.helpers.cluster_harness import Harness


def cluster() -> tuple[Harness, uuid.UUID]:
    h = Harness(ControllerConfig())
    for b, rack in [(1, "a"), (2, "b"), (3, "c")]:
        h.start(b, rack)
    tid = h.create_topic("t", assignments={0: [1, 2, 3]}).topic_id
    return h, tid


def request(h, tid, isr, *, broker=1, leader_epoch=None, partition_epoch=None, version=3,
            epochs=None, recovery=0):
    part = h.image.partition(tid, 0)
    p = apq.PartitionData(
        partition_index=0,
        leader_epoch=part.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=part.partition_epoch if partition_epoch is None else partition_epoch,
        leader_recovery_state=recovery)
    if version >= 3:
        p.new_isr_with_epochs = [apq.BrokerState(broker_id=b, broker_epoch=(epochs or {}).get(
            b, h.epochs.get(b, -1))) for b in isr]
    else:
        p.new_isr = list(isr)
    return AlterPartitionRequest(broker_id=broker, broker_epoch=h.epochs[broker],
                                 topics=[apq.TopicData(topic_name="t", topic_id=tid,
                                                       partitions=[p])])


def alter(h, req, version=3):
    result = h.controller.alter_partition(req, version)
    return result.records, h.commit(result)


def test_the_leader_shrinks_then_expands_its_isr():
    h, tid = cluster()
    recs, resp = alter(h, request(h, tid, [1, 3]))
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[1, 3])]
    p = resp.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (
        0, 1, 0, [1, 3], 1)
    assert h.image.partition(tid, 0).isr == (1, 3)
    recs, resp = alter(h, request(h, tid, [1, 3, 2], version=2), version=2)
    assert recs == [PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[1, 3, 2])]
    assert resp.topics[0].partitions[0].partition_epoch == 2


def test_the_same_isr_writes_nothing_and_answers_the_state():
    h, tid = cluster()
    recs, resp = alter(h, request(h, tid, [1, 2, 3]))
    assert recs == [] and resp.topics[0].partitions[0].isr == [1, 2, 3]


@pytest.mark.parametrize("kw,code", [
    (dict(isr=[1, 2], leader_epoch=-1), Errors.FENCED_LEADER_EPOCH),
    (dict(isr=[1, 2], leader_epoch=5), Errors.NOT_CONTROLLER),
    (dict(isr=[1, 2], partition_epoch=7), Errors.NOT_CONTROLLER),
    (dict(isr=[1, 2], partition_epoch=-1), Errors.INVALID_UPDATE_VERSION),
    (dict(isr=[2, 3], broker=2), Errors.INVALID_REQUEST),  # not the leader
    (dict(isr=[2, 3]), Errors.INVALID_REQUEST),  # without the leader
    (dict(isr=[1, 1]), Errors.INVALID_REQUEST),
    (dict(isr=[1, 9]), Errors.INVALID_REQUEST),  # not a replica
    (dict(isr=[1], recovery=1), Errors.INVALID_REQUEST),  # RECOVERED -> RECOVERING
    (dict(isr=[1, 2], epochs={2: 12345}), Errors.INELIGIBLE_REPLICA),
])
def test_refusals_write_nothing(kw, code):
    h, tid = cluster()
    recs, resp = alter(h, request(h, tid, **kw))
    assert recs == []
    assert resp.topics[0].partitions[0].error_code == code


def test_a_fenced_replica_cannot_rejoin_the_isr():
    h, tid = cluster()
    alter(h, request(h, tid, [1, 3]))
    h.heartbeat(2, want_fence=True)
    for version, code in [(3, Errors.INELIGIBLE_REPLICA), (1, Errors.OPERATION_NOT_ATTEMPTED)]:
        recs, resp = alter(h, request(h, tid, [1, 3, 2], version=version), version)
        assert (recs, resp.topics[0].partitions[0].error_code) == ([], code)


def test_stale_broker_epoch_and_unknown_topic():
    h, tid = cluster()
    req = request(h, tid, [1, 2])
    req.broker_epoch += 1
    recs, resp = alter(h, req)
    assert (recs, resp.error_code) == ([], Errors.STALE_BROKER_EPOCH)
    req = request(h, tid, [1, 2])
    req.topics[0].topic_id = uuid.UUID(int=77)
    recs, resp = alter(h, req)
    assert resp.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_ID
    req = request(h, tid, [1, 2], version=1)
    req.topics[0].topic_name = "nope"
    recs, resp = alter(h, req, version=1)
    assert resp.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
