"""Consumer groups and committed offsets against a real broker, in one process.

confluent-kafka for what users do (fan-out to two groups, commit with
metadata then ``kill -9`` the broker, admin list/describe/delete), and the
raw-socket client for the wire rules a library hides (MEMBER_ID_REQUIRED,
old versions, error codes for unknown members and generations, a JoinGroup
parked on one connection while others are served).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from spool.protocol._generated.join_group_request import JoinGroupRequestProtocol
from spool.protocol._generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from spool.protocol._generated.sync_group_request import SyncGroupRequestAssignment
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(90)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, topic: str, partitions: int = 3) -> None:
    a = admin(bootstrap)
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce(bootstrap: str, topic: str, n: int, prefix: str = "v") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"{prefix}-{i}".encode())
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, **extra})


def drain(c: Consumer, n: int, timeout: float = 30) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += [m for m in c.consume(1000, 0.5) if m.error() is None]
    return out


def test_two_groups_fan_out_and_keep_their_own_offsets(broker, topic_name):
    create(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name, 300)
    ga, gb = f"a-{topic_name}", f"b-{topic_name}"
    a, b = consumer(broker.bootstrap, ga), consumer(broker.bootstrap, gb)
    try:
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        got_a, got_b = drain(a, 300), drain(b, 300)
        assert sorted(m.value() for m in got_a) == sorted(m.value() for m in got_b)
        assert len({m.value() for m in got_a}) == 300
        a.commit(asynchronous=False)
        produce(broker.bootstrap, topic_name, 30, prefix="more")
        assert len(drain(a, 30)) == 30
        a.commit(asynchronous=False)
        parts = [TopicPartition(topic_name, p) for p in range(3)]
        assert sum(tp.offset for tp in a.committed(parts, timeout=10)) == 330
        assert all(tp.offset < 0 for tp in b.committed(parts, timeout=10))  # b committed nothing
    finally:
        a.close()
        b.close()


def test_committed_offsets_and_metadata_survive_broker_kill(fresh_broker, topic_name):
    fresh_broker.start()
    bs = fresh_broker.bootstrap
    create(bs, topic_name, 2)
    produce(bs, topic_name, 100)
    group = f"g-{topic_name}"
    c = consumer(bs, group)
    c.subscribe([topic_name])
    assert len(drain(c, 100)) == 100
    wanted = [TopicPartition(topic_name, 0, 7, metadata="seven"),
              TopicPartition(topic_name, 1, 11, metadata="m\u00e9ta-eleven")]
    c.commit(offsets=wanted, asynchronous=False)
    c.close()
    fresh_broker.kill()
    fresh_broker.start()
    c = consumer(bs, group)
    try:
        got = c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=15)
        assert [(tp.partition, tp.offset, tp.metadata) for tp in got] == [
            (0, 7, "seven"), (1, 11, "m\u00e9ta-eleven")]
        c.subscribe([topic_name])
        resumed = drain(c, 100 - 7 - 11)
        first = {}
        for m in resumed:
            first.setdefault(m.partition(), m.offset())
        assert first == {0: 7, 1: 11}
    finally:
        c.close()


def test_admin_lists_describes_and_deletes_groups(broker, topic_name):
    create(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 10)
    group = f"g-{topic_name}"
    c = consumer(broker.bootstrap, group, **{"client.id": "the-client"})
    a = admin(broker.bootstrap)
    try:
        c.subscribe([topic_name])
        assert len(drain(c, 10)) == 10
        c.commit(asynchronous=False)
        listed = a.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert group in {g.group_id for g in listed.valid}
        d = a.describe_consumer_groups([group])[group].result(10)
        assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "range"
        assert [m.client_id for m in d.members] == ["the-client"]
        assert {tp.partition for tp in d.members[0].assignment.topic_partitions} == {0, 1}
        busy = a.delete_consumer_groups([group])[group]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            busy.result(10)
    finally:
        c.close()
    req = ConsumerGroupTopicPartitions(group)
    offsets = a.list_consumer_group_offsets([req])[group].result(10)
    assert sum(tp.offset for tp in offsets.topic_partitions) == 10
    empty = a.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(10)
    assert group in {g.group_id for g in empty.valid}
    a.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in a.list_consumer_groups().result(10).valid}
    d = a.describe_consumer_groups([group])[group].result(10)
    assert d.state == ConsumerGroupState.DEAD


def test_alter_offsets_of_an_empty_group(broker, topic_name):
    create(broker.bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    a = admin(broker.bootstrap)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 3),
                                               TopicPartition(topic_name, 1, 4)])
    a.alter_consumer_group_offsets([req])[group].result(10)
    got = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.partition, tp.offset) for tp in got.topic_partitions) == [(0, 3), (1, 4)]


# ---- the wire, with the raw client


def _join(rc: RawClient, group: str, member_id: str = "", version: int = 7, instance=None):
    req = JoinGroupRequest(group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=10000,
                           member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                           protocols=[JoinGroupRequestProtocol(name="range", metadata=b"meta")])
    return rc.request(11, version, req)


def test_member_id_required_round_trip_and_errors(broker):
    group = f"raw-{time.monotonic_ns()}"
    rc = RawClient(broker.bootstrap)
    try:
        fc = rc.request(10, 3, FindCoordinatorRequest(key=group, key_type=0))
        assert (fc.error_code, fc.node_id, fc.port) == (0, 0, int(broker.bootstrap.rsplit(":")[1]))
        txn = rc.request(10, 3, FindCoordinatorRequest(key="t", key_type=1))
        assert (txn.error_code, txn.node_id) == (0, 0)  # the transaction coordinator (issue 6)
        first = _join(rc, group)
        assert first.error_code == Errors.MEMBER_ID_REQUIRED and first.member_id
        joined = _join(rc, group, first.member_id)
        assert (joined.error_code, joined.generation_id, joined.protocol_name) == (0, 1, "range")
        assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, b"meta")]
        sync = rc.request(14, 5, SyncGroupRequest(
            group_id=group, generation_id=1, member_id=first.member_id, protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"A")]))
        assert (sync.error_code, bytes(sync.assignment)) == (0, b"A")
        hb = lambda gen, mid: rc.request(12, 4, HeartbeatRequest(  # noqa: E731
            group_id=group, generation_id=gen, member_id=mid)).error_code
        assert hb(1, first.member_id) == 0
        assert hb(2, first.member_id) == Errors.ILLEGAL_GENERATION
        assert hb(1, "nobody") == Errors.UNKNOWN_MEMBER_ID
        commit = rc.request(8, 8, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=1, member_id=first.member_id, topics=[
                OffsetCommitRequestTopic(name="no-such-topic", partitions=[
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
        assert commit.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        fetch = rc.request(9, 7, OffsetFetchRequest(group_id=group, topics=None))
        assert (fetch.error_code, fetch.topics) == (0, [])
        listed = rc.request(16, 4, ListGroupsRequest(states_filter=["Stable"]))
        assert (group, "Stable") in {(g.group_id, g.group_state) for g in listed.groups}
        bad = _join(rc, group, version=7, member_id="")
        assert bad.error_code == Errors.MEMBER_ID_REQUIRED
    finally:
        rc.close()


def test_old_join_version_and_parked_join_does_not_block_others(broker):
    group = f"raw-{time.monotonic_ns()}"
    a, b, other = RawClient(broker.bootstrap), RawClient(broker.bootstrap), RawClient(broker.bootstrap)
    try:
        ja = _join(a, group, version=0)  # v0: no member id round trip
        assert ja.error_code == 0 and ja.generation_id == 1
        a.request(14, 0, SyncGroupRequest(group_id=group, generation_id=1, member_id=ja.member_id,
                                          assignments=[]))
        # b joins: the group rebalances and b's JoinGroup is parked until a rejoins
        first = _join(b, group)
        b.send(11, 7, JoinGroupRequest(
            group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=10000,
            member_id=first.member_id, protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"b")]))
        # meanwhile another connection is served at once
        assert other.request(16, 0, ListGroupsRequest()).error_code == 0
        hb = a.request(12, 0, HeartbeatRequest(group_id=group, generation_id=1, member_id=ja.member_id))
        assert hb.error_code == Errors.REBALANCE_IN_PROGRESS
        ra = _join(a, group, ja.member_id, version=0)
        _, rb = b.recv(11, 7)
        assert ra.error_code == rb.error_code == 0
        assert ra.generation_id == rb.generation_id == 2
        assert {m.member_id for m in ra.members} == {ja.member_id, first.member_id}
    finally:
        for c in (a, b, other):
            c.close()


def test_group_max_size_refuses_one_member_too_many(fresh_broker):
    fresh_broker.overrides["group.max.size"] = "2"
    fresh_broker.start()
    clients = [RawClient(fresh_broker.bootstrap) for _ in range(3)]
    try:
        first = [_join(rc, "capped") for rc in clients]
        assert [r.error_code for r in first] == [Errors.MEMBER_ID_REQUIRED] * 2 + [
            Errors.GROUP_MAX_SIZE_REACHED]
        assert first[2].member_id == ""
    finally:
        for rc in clients:
            rc.close()
    # SIGTERM stops it cleanly (exit 0), not killed after stop()'s 20 s: the group timer
    # loop used to miss its cancellation now and then and sleep on to the next deadline
    assert fresh_broker.stop() == 0
