"""Share group membership and offsets admin against a real broker, from a raw client:
ShareGroupHeartbeat (join, share-state initialization then assignment, sharing, leave),
ShareGroupDescribe, ListGroups type "share", DeleteGroups,
Describe/Alter/DeleteShareGroupOffsets, a deleted topic's share state, a classic JoinGroup
on a share group's id, the group surviving kill -9, group.share.enable=false; and
confluent-kafka ShareConsumers sharing a partition and acknowledging while they close.
One broker for the module; each test has its own group and topic.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import (
    AlterShareGroupOffsetsRequest,
    ApiVersionsRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
)
from spool.protocol._generated import alter_share_group_offsets_request as alterreq
from spool.protocol._generated import delete_share_group_offsets_request as delreq
from spool.protocol._generated import describe_share_group_offsets_request as descreq
from spool.protocol._generated.join_group_request import JoinGroupRequestProtocol
from spool.protocol.errors import Errors
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient
from tests.helpers.share import (
    OVERRIDES,
    assigned,
    hb,
    produce,
    set_group_config,
    until_assigned,
    wait_members,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("share-groups")
    with BrokerProcess(d / "data", {"num.partitions": "1", **OVERRIDES}) as b:
        yield b


def make_topic(bootstrap: str, partitions: int) -> str:
    name = f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def describe(rc, group):
    return rc.request(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups[0]


def offsets(rc, group, topic=None, partitions=(0,)):
    topics = None if topic is None else [descreq.DescribeShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=list(partitions))]
    resp = rc.request(90, 1, DescribeShareGroupOffsetsRequest(groups=[
        descreq.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]))
    return resp.groups[0]


def test_join_initialize_assign_share_and_leave(broker):
    topic = make_topic(broker.bootstrap, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker.bootstrap) as rc:
        first = hb(rc, group, "m1", 0, [topic])
        assert (first.error_code, first.member_id, first.member_epoch) == (0, "m1", 1)
        assert first.heartbeat_interval_ms == 500  # group.share.heartbeat.interval.ms
        a = until_assigned(rc, group, "m1", 1)
        tid = a.assignment.topic_partitions[0].topic_id
        assert assigned(a) == {tid: [0, 1]}
        b = hb(rc, group, "m2", 0, [topic])
        assert assigned(b) == {tid: [1]} or assigned(b) == {tid: [0]}
        a2 = hb(rc, group, "m1", a.member_epoch)
        assert a2.member_epoch == b.member_epoch
        assert sorted(assigned(a2)[tid] + assigned(b)[tid]) == [0, 1]
        # three members on two partitions: every member has one, one partition is shared
        c = hb(rc, group, "m3", 0, [topic])
        assert len(assigned(c)[tid]) == 1
        # the group's own share.heartbeat.interval.ms (a GROUP config) wins over the broker's
        set_group_config(broker.bootstrap, group, {"share.heartbeat.interval.ms": "700"})
        assert hb(rc, group, "m3", c.member_epoch).heartbeat_interval_ms == 700
        empty = hb(rc, group, "", 1)
        assert (empty.error_code, empty.error_message) == (Errors.INVALID_REQUEST,
                                                           "MemberId can't be empty.")
        d = describe(rc, group)
        assert (d.error_code, d.group_state, d.assignor_name) == (0, "Stable", "simple")
        assert sorted(m.member_id for m in d.members) == ["m1", "m2", "m3"]
        assert all(m.subscribed_topic_names == [topic] for m in d.members)
        named = {p.topic_name for m in d.members for p in m.assignment.topic_partitions}
        assert named <= {topic}
        assert hb(rc, group, "m1", 999).error_code == Errors.FENCED_MEMBER_EPOCH
        assert hb(rc, group, "ghost", 1).error_code == Errors.UNKNOWN_MEMBER_ID
        # a classic JoinGroup on a share group's id
        join = rc.request(11, 9, JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequestProtocol(name="range",
                                                                          metadata=b"")]))
        assert join.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
        listed = rc.request(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"]))
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in listed.groups if g.group_id == group] == [
            (group, "share", "Stable", "share")]
        deleted = rc.request(42, 2, DeleteGroupsRequest(groups_names=[group]))
        assert deleted.results[0].error_code == Errors.NON_EMPTY_GROUP
        for m in ("m1", "m2", "m3"):
            left = hb(rc, group, m, -1)
            assert (left.error_code, left.member_epoch) == (0, -1)
        assert describe(rc, group).group_state == "Empty"
        deleted = rc.request(42, 2, DeleteGroupsRequest(groups_names=[group]))
        assert deleted.results[0].error_code == 0
        gone = describe(rc, group)
        assert (gone.error_code, gone.error_message) == (Errors.GROUP_ID_NOT_FOUND,
                                                         f"Group {group} not found.")


def test_offsets_admin(broker):
    topic = make_topic(broker.bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker.bootstrap) as rc:
        hb(rc, group, "m1", 0, [topic])
        until_assigned(rc, group, "m1", 1)
        o = offsets(rc, group)
        assert o.error_code == 0 and [t.topic_name for t in o.topics] == [topic]
        assert [(p.partition_index, p.start_offset, p.error_code)
                for p in o.topics[0].partitions] == [(0, -1, 0)]
        alter = AlterShareGroupOffsetsRequest(group_id=group, topics=[
            alterreq.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                alterreq.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                start_offset=7)])])
        assert rc.request(91, 0, alter).error_code == Errors.NON_EMPTY_GROUP
        hb(rc, group, "m1", -1)
        alter.topics[0].partitions.append(alterreq.AlterShareGroupOffsetsRequestPartition(
            partition_index=3, start_offset=7))  # the topic has one partition
        altered = rc.request(91, 0, alter)
        assert altered.error_code == 0
        assert [p.error_code for p in altered.responses[0].partitions] == [
            0, Errors.UNKNOWN_TOPIC_OR_PARTITION]
        assert offsets(rc, group, topic).topics[0].partitions[0].start_offset == 7
        missing = offsets(rc, group, "no-such-topic")
        assert missing.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        dropped = rc.request(92, 0, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
            delreq.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]))
        assert dropped.error_code == 0 and dropped.responses[0].error_code == 0
        assert offsets(rc, group).topics == []
        assert offsets(rc, group, topic).topics[0].partitions[0].start_offset == -1
        other = offsets(rc, "never-was")
        assert other.error_code == Errors.GROUP_ID_NOT_FOUND
        nameless = rc.request(92, 0, DeleteShareGroupOffsetsRequest(group_id="", topics=[]))
        assert nameless.error_code == Errors.INVALID_GROUP_ID


def test_deleted_topic_loses_its_share_state(broker):
    topic = make_topic(broker.bootstrap, 2)
    keep = make_topic(broker.bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker.bootstrap) as rc:
        hb(rc, group, "m1", 0, [topic, keep])
        a = until_assigned(rc, group, "m1", 1)
        assert sorted(t.topic_name for t in offsets(rc, group).topics) == sorted([topic, keep])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic])[topic].result(15)
        deadline = time.monotonic() + 10
        while [t.topic_name for t in offsets(rc, group).topics] != [keep]:
            assert time.monotonic() < deadline, offsets(rc, group)
            time.sleep(0.05)
        b = hb(rc, group, "m1", a.member_epoch)
        assert b.error_code == 0
        assert [t.topic_id for t in b.assignment.topic_partitions] == [
            t.topic_id for t in offsets(rc, group).topics]


def test_group_survives_kill_9(broker):
    topic = make_topic(broker.bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker.bootstrap) as rc:
        hb(rc, group, "m1", 0, [topic])
        a = until_assigned(rc, group, "m1", 1)
        before = describe(rc, group)
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as rc:
        after = describe(rc, group)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch,
                                                              before.assignment_epoch)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [("m1", a.member_epoch)]
        again = hb(rc, group, "m1", a.member_epoch)
        assert (again.error_code, again.member_epoch) == (0, a.member_epoch)


def test_share_groups_disabled(tmp_path):
    with BrokerProcess(tmp_path / "data", {"group.share.enable": "false"}) as b:
        with RawClient(b.bootstrap) as rc:
            keys = {k.api_key for k in rc.request(18, 3, ApiVersionsRequest(
                client_software_name="t", client_software_version="1")).api_keys}
            assert not keys & {76, 77, 78, 79, 90, 91, 92} and 11 in keys
            assert hb(rc, "g", "m1", 0, ["t"]).error_code == Errors.UNSUPPORTED_VERSION


def test_only_classic_groups_served(tmp_path):
    """group.coordinator.rebalance.protocols=classic: ApiVersions advertises neither KIP-848's
    nor KIP-932's APIs (group.share.enable is still true) and both heartbeats answer
    UNSUPPORTED_VERSION."""
    with BrokerProcess(tmp_path / "data", {"group.coordinator.rebalance.protocols": "classic"}
                       ) as b, RawClient(b.bootstrap) as rc:
        keys = {k.api_key for k in rc.request(18, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).api_keys}
        assert not keys & {68, 69, 76, 77, 78, 79, 90, 91, 92} and 11 in keys
        assert hb(rc, "g", "m1", 0, ["t"]).error_code == Errors.UNSUPPORTED_VERSION
        assert rc.request(68, 0, ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=["t"], server_assignor=None, topic_partitions=[]),
        ).error_code == Errors.UNSUPPORTED_VERSION


def test_share_consumers_join_and_share_a_partition(broker):
    topic = make_topic(broker.bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_config(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, topic, 0, 50)
    consumers = [ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
                 for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic])
        got: set[int] = set()
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            for c in consumers:
                got |= {m.offset() for m in c.poll(0.2) or [] if m.error() is None}
        assert got == set(range(50))
        wait_members(broker.bootstrap, group, 2)  # each member's next heartbeat takes it
        with RawClient(broker.bootstrap) as rc:
            d = describe(rc, group)
        assert (d.error_code, d.group_state, len(d.members)) == (0, "Stable", 2)
        # one partition, two members: both are assigned it
        assert [[(p.topic_name, p.partitions) for p in m.assignment.topic_partitions]
                for m in d.members] == [[(topic, [0])]] * 2
    finally:
        for c in consumers:
            c.close()
    with RawClient(broker.bootstrap) as rc:
        assert describe(rc, group).group_state == "Empty"  # close left the group


def test_acknowledgements_sent_while_closing_count(broker):
    """A closing ShareConsumer leaves the group (ShareGroupHeartbeat -1) while it sends its
    last acknowledgements (FINAL epoch): they are accepted, not UNKNOWN_MEMBER_ID."""
    topic = make_topic(broker.bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_config(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, topic, 0, 10)
    outcomes: list = []
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.set_acknowledgement_commit_callback(lambda offsets, exc: outcomes.append(exc))
    c.subscribe([topic])
    got: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            for m in c.poll(0.2) or []:
                if m.error() is None:
                    got.append(m.offset())
                    c.acknowledge(m)
    finally:
        c.close()
    assert sorted(got) == list(range(10))
    assert outcomes and [e for e in outcomes if e is not None] == []
