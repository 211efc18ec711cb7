"""Coordinator appends that fail, through the broker's coordinator log writer seam.

The broker runs as ``tests.helpers.faulty_broker``: its coordinators append
through a writer that fails (ENOSPC) the appends a fault file names. A
failed ``__consumer_offsets`` append must leave no trace (OffsetFetch
returns the previous commit, also after a restart; a group is not Stable
unless its assignment was written); a transaction marker
that fails must be retried until it is written, so the transaction
completes and the partition's last stable offset moves on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from spool.coordinator import partition_for
from spool.protocol._generated import (
    DescribeGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from spool.protocol._generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from spool.protocol._generated.offset_fetch_request import OffsetFetchRequestTopic
from spool.protocol._generated.sync_group_request import SyncGroupRequestAssignment
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient
from tests.integration.test_groups import _join
from tests.integration.test_transactions import SMALL, create, latest, read, txn_producer


def faults(path: Path, *rules: dict) -> None:
    path.write_text(json.dumps(list(rules)))


def fired(path: Path) -> list[str]:
    fired_path = Path(f"{path}.fired")
    return fired_path.read_text().splitlines() if fired_path.exists() else []


@pytest.fixture
def faulty(fresh_broker, tmp_path):
    fresh_broker.overrides.update(SMALL)
    fresh_broker.faults = tmp_path / "faults.json"
    faults(fresh_broker.faults)
    return fresh_broker


def commit(rc: RawClient, group: str, topic: str, offset: int) -> int:
    resp = rc.request(8, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]))
    return resp.topics[0].partitions[0].error_code


def fetched(bootstrap: str, group: str, topic: str) -> int:
    rc = RawClient(bootstrap)
    try:
        resp = rc.request(9, 7, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
        assert resp.error_code == 0
        return resp.topics[0].partitions[0].committed_offset
    finally:
        rc.close()


@pytest.mark.timeout(120)
def test_a_failed_offset_commit_is_never_fetched(faulty, topic_name):
    faulty.start()
    create(faulty.bootstrap, topic_name)
    rc = RawClient(faulty.bootstrap)
    try:
        faults(faulty.faults, {"match": "offsets", "action": "fail"})
        assert commit(rc, "g", topic_name, 5) == Errors.COORDINATOR_NOT_AVAILABLE
        assert fired(faulty.faults) == [f"offsets fail __consumer_offsets-{partition_for('g', 3)}"]
        assert fetched(faulty.bootstrap, "g", topic_name) == -1  # never written: nothing
        assert commit(rc, "g", topic_name, 7) == 0
        assert fetched(faulty.bootstrap, "g", topic_name) == 7
        faults(faulty.faults, {"match": "offsets", "action": "fail", "times": 1})
        assert commit(rc, "g", topic_name, 9) == Errors.COORDINATOR_NOT_AVAILABLE
        assert len(fired(faulty.faults)) == 2
        assert fetched(faulty.bootstrap, "g", topic_name) == 7  # the previous commit
    finally:
        rc.close()
    faulty.faults = None
    faulty.restart()  # kill -9: what the log holds is what memory held
    assert fetched(faulty.bootstrap, "g", topic_name) == 7


@pytest.mark.timeout(120)
def test_a_marker_that_fails_is_retried_until_the_transaction_completes(faulty, topic_name):
    faulty.start()
    create(faulty.bootstrap, topic_name)
    faults(faulty.faults, {"match": "marker", "topic": topic_name, "action": "fail", "times": 3})
    p = txn_producer(faulty.bootstrap, f"retry-{topic_name}")
    p.begin_transaction()
    for i in range(3):
        p.produce(topic_name, b"r%d" % i)
    p.commit_transaction(15)
    assert read(faulty.bootstrap, topic_name, expect=3, wait_s=15) == [b"r0", b"r1", b"r2"]
    assert fired(faulty.faults) == [f"marker fail {topic_name}-0"] * 3
    assert latest(faulty.bootstrap, topic_name, 1) == latest(faulty.bootstrap, topic_name, 0) == 4
    p.begin_transaction()  # the transaction is complete: the producer goes on
    p.produce(topic_name, b"r3")
    p.commit_transaction(15)
    assert read(faulty.bootstrap, topic_name, expect=4, wait_s=15) == [b"r0", b"r1", b"r2", b"r3"]
    assert latest(faulty.bootstrap, topic_name, 1) == 6


@pytest.mark.timeout(120)
def test_transactional_offsets_wait_for_their_retried_marker(faulty, topic_name):
    faulty.start()
    create(faulty.bootstrap, topic_name)
    faults(faulty.faults, {"match": "marker", "topic": "__consumer_offsets", "action": "fail",
                           "times": 2})
    group = Consumer({"bootstrap.servers": faulty.bootstrap, "group.id": "eos"})
    p = txn_producer(faulty.bootstrap, f"offsets-{topic_name}")
    try:
        p.begin_transaction()
        p.produce(topic_name, b"out")
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 42)],
                                      group.consumer_group_metadata(), 15)
        p.commit_transaction(15)
        assert read(faulty.bootstrap, topic_name, expect=1, wait_s=15) == [b"out"]
        assert len(fired(faulty.faults)) == 2
        # EndTxn was answered once PREPARE_COMMIT was written; the offsets show once the
        # retried marker reaches their partition
        deadline = time.monotonic() + 15
        while fetched(faulty.bootstrap, "eos", topic_name) != 42 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fetched(faulty.bootstrap, "eos", topic_name) == 42
    finally:
        group.close()


@pytest.mark.timeout(120)
def test_a_leader_sync_whose_group_record_fails_leaves_the_group_unsettled(faulty):
    faulty.start()
    rc = RawClient(faulty.bootstrap)
    try:
        first = _join(rc, "sync-fails")
        joined = _join(rc, "sync-fails", first.member_id)
        member, gen = joined.member_id, joined.generation_id
        assert (joined.error_code, joined.leader) == (0, member)

        def sync() -> tuple[int, bytes]:
            resp = rc.request(14, 5, SyncGroupRequest(
                group_id="sync-fails", generation_id=gen, member_id=member,
                protocol_type="consumer", protocol_name="range",
                assignments=[SyncGroupRequestAssignment(member_id=member, assignment=b"A")]))
            return resp.error_code, bytes(resp.assignment)

        def state() -> str:
            return rc.request(15, 5, DescribeGroupsRequest(groups=["sync-fails"])).groups[0].group_state

        faults(faulty.faults, {"match": "offsets", "action": "fail"})  # the GroupMetadata record
        assert sync() == (Errors.COORDINATOR_NOT_AVAILABLE, b"")
        assert state() == "CompletingRebalance"  # not Stable: that was never written
        assert sync() == (0, b"A")  # the retry settles the same generation
        assert state() == "Stable"
    finally:
        rc.close()


def cg_heartbeat(rc: RawClient, member: str, epoch: int, owned=None, topic=None):
    from spool.protocol._generated import ConsumerGroupHeartbeatRequest
    from spool.protocol._generated.consumer_group_heartbeat_request import TopicPartitions

    join = epoch == 0
    return rc.request(68, 1, ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id=member, member_epoch=epoch,
        rebalance_timeout_ms=30000 if join else -1,
        subscribed_topic_names=[topic] if join else None,
        topic_partitions=[] if join else (None if owned is None else [
            TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned])))


def cg_members(bootstrap: str) -> dict | int:
    from spool.protocol._generated import ConsumerGroupDescribeRequest

    rc = RawClient(bootstrap)
    try:
        g = rc.request(69, 1, ConsumerGroupDescribeRequest(group_ids=["cg"])).groups[0]
    finally:
        rc.close()
    if g.error_code:
        return g.error_code
    return {m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions
                                                 for p in tp.partitions)) for m in g.members}


@pytest.mark.timeout(120)
def test_a_consumer_group_heartbeat_whose_records_fail_leaves_no_trace(faulty, topic_name):
    """KIP-848: the heartbeat's records are applied as they are made; a failed append reverts
    the group (the join never happened, the revocation was never started), also after a
    restart."""
    faulty.start()
    create(faulty.bootstrap, topic_name, 2)
    rc = RawClient(faulty.bootstrap)
    try:
        faults(faulty.faults, {"match": "offsets", "action": "fail"})
        assert cg_heartbeat(rc, "m1", 0, topic=topic_name).error_code == \
            Errors.COORDINATOR_NOT_AVAILABLE
        assert cg_members(faulty.bootstrap) == Errors.GROUP_ID_NOT_FOUND
        faults(faulty.faults)
        r = cg_heartbeat(rc, "m1", 0, topic=topic_name)
        assert (r.error_code, r.member_epoch) == (0, 1)
        tid = r.assignment.topic_partitions[0].topic_id
        owned = [(tid, [0, 1])]
        assert cg_heartbeat(rc, "m2", 0, topic=topic_name).member_epoch == 2
        before = cg_members(faulty.bootstrap)
        assert before == {"m1": (1, [0, 1]), "m2": (2, [])}
        faults(faulty.faults, {"match": "offsets", "action": "fail"})
        # m1 would start revoking a partition: the record fails, nothing changes
        assert cg_heartbeat(rc, "m1", 1, owned).error_code == Errors.COORDINATOR_NOT_AVAILABLE
        assert cg_members(faulty.bootstrap) == before
        faults(faulty.faults)
    finally:
        rc.close()
    faulty.faults = None
    faulty.restart()  # kill -9: what the log holds is what memory held
    assert cg_members(faulty.bootstrap) == before
