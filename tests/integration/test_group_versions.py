"""What the newest group and coordinator versions (Kafka 4.2) add, on the wire.

The raw-socket client sends each version as a Kafka 4.2 client would and checks what it
carries: JoinGroup v9's skip_assignment for a rejoining static leader, DescribeGroups v6's
GROUP_ID_NOT_FOUND, FindCoordinator v6's share key type, the authorized operations of
Metadata v8-v10 / DescribeGroups when asked (without an authorizer: all of them),
OffsetCommit/OffsetFetch v10's topic IDs, v9's GROUP_ID_NOT_FOUND and Kafka's commit rules
for classic groups, OffsetFetch v8's several groups at once.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spool.protocol._generated import (
    AddOffsetsToTxnRequest,
    DescribeGroupsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from spool.protocol._generated.join_group_request import JoinGroupRequestProtocol
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from spool.protocol._generated.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from spool.protocol._generated.sync_group_request import SyncGroupRequestAssignment
from spool.protocol._generated.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from spool.protocol.errors import Errors
from spool.protocol.primitives import ZERO_UUID
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(60)

TOPIC_OPS = 3576  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
GROUP_OPS = 3400  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
CLUSTER_OPS = 8096  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS
#                     IDEMPOTENT_WRITE
OMITTED = -(2**31)


def _group() -> str:
    return f"gv-{time.monotonic_ns()}"


def _join(rc: RawClient, group: str, version: int, member_id: str = "", instance=None,
          metadata: bytes = b"meta", reason=None):
    return rc.request(11, version, JoinGroupRequest(
        group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer", reason=reason,
        protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)]))


def _stable_static_group(rc: RawClient, group: str) -> str:
    """A Stable group of one static member (instance "i1"), leader; its member id."""
    joined = _join(rc, group, 9, instance="i1", reason="starting")
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, joined.member_id)
    assert joined.skip_assignment is False
    sync = rc.request(14, 5, SyncGroupRequest(
        group_id=group, generation_id=1, member_id=joined.member_id, group_instance_id="i1",
        protocol_type="consumer", protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"A")]))
    assert sync.error_code == 0
    return joined.member_id


def test_static_leader_rejoining_a_stable_group_skips_assignment_from_v9(broker):
    group = _group()
    rc = RawClient(broker.bootstrap)
    try:
        old = _stable_static_group(rc, group)
        # the same instance restarts (empty member id): no rebalance, a new member id; at v9
        # the leader learns the members and is told to compute no assignment
        again = _join(rc, group, 9, instance="i1")
        assert again.error_code == 0 and again.member_id not in ("", old)
        assert (again.generation_id, again.leader, again.skip_assignment) == (
            1, again.member_id, True)
        assert [(m.member_id, m.group_instance_id, bytes(m.metadata)) for m in again.members] == [
            (again.member_id, "i1", b"meta")]
        # below v9 a rejoining static leader is answered as a follower: no members, and the
        # old leader id, so it does not assign
        older = _join(rc, group, 8, instance="i1")
        assert older.error_code == 0 and older.member_id != again.member_id
        assert (older.generation_id, older.leader, older.members) == (1, again.member_id, [])
    finally:
        rc.close()


def test_describe_groups_v6_unknown_group_is_group_id_not_found(broker):
    rc = RawClient(broker.bootstrap)
    group = _group()
    try:
        new = rc.request(15, 6, DescribeGroupsRequest(groups=[group]))
        g = new.groups[0]
        assert (g.error_code, g.group_state, g.members) == (Errors.GROUP_ID_NOT_FOUND, "Dead", [])
        assert g.error_message == f"Group {group} not found."
        old = rc.request(15, 5, DescribeGroupsRequest(groups=[group]))
        assert (old.groups[0].error_code, old.groups[0].group_state) == (0, "Dead")
    finally:
        rc.close()


def test_describe_groups_authorized_operations_only_when_asked(broker):
    rc = RawClient(broker.bootstrap)
    group = _group()
    try:
        _stable_static_group(rc, group)
        asked = rc.request(15, 6, DescribeGroupsRequest(groups=[group],
                                                        include_authorized_operations=True))
        assert (asked.groups[0].group_state, asked.groups[0].authorized_operations) == (
            "Stable", GROUP_OPS)
        plain = rc.request(15, 6, DescribeGroupsRequest(groups=[group]))
        assert plain.groups[0].authorized_operations == OMITTED
    finally:
        rc.close()


def test_find_coordinator_share_key_type(broker):
    rc = RawClient(broker.bootstrap)
    try:
        for version, want in ((5, (Errors.INVALID_REQUEST, -1)), (6, (0, 0))):
            got = rc.request(10, version, FindCoordinatorRequest(
                key_type=2, coordinator_keys=["group:topic-id:0"]))
            c = got.coordinators[0]
            assert (c.key, c.error_code, c.node_id) == ("group:topic-id:0", *want)
        groups = rc.request(10, 6, FindCoordinatorRequest(key_type=0, coordinator_keys=["g", ""]))
        assert [(c.key, c.error_code, c.node_id) for c in groups.coordinators] == [
            ("g", 0, 0), ("", Errors.INVALID_GROUP_ID, -1)]
    finally:
        rc.close()


def test_metadata_authorized_operations_by_version(broker, topic_name):
    rc = RawClient(broker.bootstrap)
    try:
        topics = [MetadataRequestTopic(name=topic_name), MetadataRequestTopic(name="no_such.x")]
        created = rc.request(3, 4, MetadataRequest(topics=topics[:1], allow_auto_topic_creation=True))
        assert created.topics[0].error_code in (0, Errors.LEADER_NOT_AVAILABLE)
        for version in (8, 10):
            got = rc.request(3, version, MetadataRequest(
                topics=topics, allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True))
            assert got.cluster_authorized_operations == CLUSTER_OPS
            by_name = {t.name: (t.error_code, t.topic_authorized_operations) for t in got.topics}
            # the unknown topic too, as Kafka (it sets them on every topic it answers)
            assert by_name["no_such.x"] == (Errors.UNKNOWN_TOPIC_OR_PARTITION, TOPIC_OPS)
            assert by_name[topic_name][1] == TOPIC_OPS
        # v11+ has no cluster operations; the topic's only when asked
        got = rc.request(3, 12, MetadataRequest(topics=topics[:1],
                                                include_topic_authorized_operations=True))
        assert got.topics[0].topic_authorized_operations == TOPIC_OPS
        plain = rc.request(3, 12, MetadataRequest(topics=topics[:1]))
        assert plain.topics[0].topic_authorized_operations == OMITTED
    finally:
        rc.close()


# ---- OffsetCommit 9-10, OffsetFetch 8-10


def _topic_id(rc: RawClient, topic: str):
    got = rc.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=True))
    assert got.topics[0].error_code in (0, Errors.LEADER_NOT_AVAILABLE)
    return got.topics[0].topic_id


def _commit(rc: RawClient, version: int, group: str, topic: str | None = None, topic_id=None,
            generation: int = -1, member_id: str = "", offset: int = 7) -> list:
    got = rc.request(8, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[OffsetCommitRequestTopic(name=topic or "", topic_id=topic_id or ZERO_UUID,
                                         partitions=[OffsetCommitRequestPartition(
                                             partition_index=0, committed_offset=offset,
                                             committed_metadata="m")])]))
    return [(t.topic_id if version >= 10 else t.name, [p.error_code for p in t.partitions])
            for t in got.topics]


def _fetch(rc: RawClient, version: int, groups: list[tuple[str, list | None]],
           require_stable: bool = False) -> dict:
    """{group: (error, {topic name or id: [(partition, offset, metadata, error)]})}."""
    def topics(ts):
        if ts is None:
            return None
        return [OffsetFetchRequestTopics(name=n if isinstance(n, str) else "",
                                         topic_id=n if not isinstance(n, str) else ZERO_UUID,
                                         partition_indexes=[0]) for n in ts]
    got = rc.request(9, version, OffsetFetchRequest(require_stable=require_stable, groups=[
        OffsetFetchRequestGroup(group_id=g, topics=topics(ts)) for g, ts in groups]))
    return {g.group_id: (g.error_code, {
        (t.topic_id if version >= 10 else t.name): [
            (p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for p in t.partitions] for t in g.topics}) for g in got.groups}


def test_offset_commit_and_fetch_by_topic_id_v10(broker, topic_name):
    rc = RawClient(broker.bootstrap)
    group, other = _group(), _group()
    try:
        tid = _topic_id(rc, topic_name)
        unknown = uuid.uuid4()
        assert _commit(rc, 10, group, topic_id=tid) == [(tid, [0])]
        assert _commit(rc, 10, group, topic_id=unknown) == [(unknown, [Errors.UNKNOWN_TOPIC_ID])]
        assert _commit(rc, 9, other, topic=topic_name, offset=3) == [(topic_name, [0])]
        # v10 asks by ID, v8 by name: the same commit
        assert _fetch(rc, 10, [(group, [tid, unknown])]) == {group: (0, {
            tid: [(0, 7, "m", 0)], unknown: [(0, -1, "", Errors.UNKNOWN_TOPIC_ID)]})}
        assert _fetch(rc, 8, [(group, [topic_name]), (other, None)]) == {
            group: (0, {topic_name: [(0, 7, "m", 0)]}),
            other: (0, {topic_name: [(0, 3, "m", 0)]})}
        # every committed topic, named by ID at v10
        assert _fetch(rc, 10, [(other, None)]) == {other: (0, {tid: [(0, 3, "m", 0)]})}
    finally:
        rc.close()


def test_offset_commit_generation_to_unknown_group_by_version(broker, topic_name):
    rc = RawClient(broker.bootstrap)
    try:
        _topic_id(rc, topic_name)
        group = _group()
        # a generation for a group that does not exist: GROUP_ID_NOT_FOUND from v9,
        # ILLEGAL_GENERATION before (older clients do not know the code)
        assert _commit(rc, 9, group, topic_name, generation=1, member_id="m") == [
            (topic_name, [Errors.GROUP_ID_NOT_FOUND])]
        assert _commit(rc, 8, group, topic_name, generation=1, member_id="m") == [
            (topic_name, [Errors.ILLEGAL_GENERATION])]
        # generation -1 (no group management) makes the group, a member id or not (Kafka's
        # simple group), and an Empty group takes such commits too
        assert _commit(rc, 9, group, topic_name, member_id="m") == [(topic_name, [0])]
        assert _commit(rc, 9, group, topic_name, member_id="x", offset=8) == [(topic_name, [0])]
        assert _fetch(rc, 9, [(group, [topic_name])])[group][1][topic_name] == [(0, 8, "m", 0)]
    finally:
        rc.close()


def test_offset_commit_by_a_static_member_of_a_stable_group(broker, topic_name):
    rc = RawClient(broker.bootstrap)
    group = _group()
    try:
        _topic_id(rc, topic_name)
        member = _stable_static_group(rc, group)
        ok = rc.request(8, 10, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=1, member_id=member,
            group_instance_id="i1", topics=[OffsetCommitRequestTopic(
                topic_id=_topic_id(rc, topic_name), partitions=[OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5, committed_metadata=None)])]))
        assert ok.topics[0].partitions[0].error_code == 0
        assert _commit(rc, 10, group, topic_id=_topic_id(rc, topic_name), generation=2,
                       member_id=member)[0][1] == [Errors.ILLEGAL_GENERATION]
        # no generation, no member: a Stable group refuses it
        assert _commit(rc, 10, group, topic_id=_topic_id(rc, topic_name))[0][1] == [
            Errors.UNKNOWN_MEMBER_ID]
    finally:
        rc.close()


def test_require_stable_fetch_sees_a_pending_transactional_commit_as_unstable(broker, topic_name):
    rc = RawClient(broker.bootstrap)
    group = _group()
    try:
        _topic_id(rc, topic_name)
        assert _commit(rc, 9, group, topic_name, offset=2) == [(topic_name, [0])]
        p = Producer({"bootstrap.servers": broker.bootstrap,
                      "transactional.id": f"stable-{topic_name}"})
        p.init_transactions(10)
        p.begin_transaction()
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        meta = c.consumer_group_metadata()  # generation -1: no group management
        c.close()
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 9)], meta, 10)
        pending = (0, -1, "", Errors.UNSTABLE_OFFSET_COMMIT)
        for version in (7, 8, 10):
            key = _topic_id(rc, topic_name) if version >= 10 else topic_name
            if version == 7:
                got = rc.request(9, 7, OffsetFetchRequest(group_id=group, require_stable=True,
                                                          topics=None))
                assert [(t.name, [(x.committed_offset, x.error_code) for x in t.partitions])
                        for t in got.topics] == [(topic_name, [(-1, pending[3])])]
                continue
            assert _fetch(rc, version, [(group, [key])], require_stable=True)[group] == (
                0, {key: [pending]})
        # without require_stable the last committed offset, as before
        assert _fetch(rc, 8, [(group, [topic_name])])[group] == (0, {topic_name: [(0, 2, "m", 0)]})
        p.commit_transaction(10)
        assert _fetch(rc, 8, [(group, [topic_name])], require_stable=True)[group] == (
            0, {topic_name: [(0, 9, "", 0)]})
    finally:
        rc.close()


def test_transactional_commit_is_taken_while_the_rebalance_completes(broker, topic_name):
    """Kafka spares TxnOffsetCommit the group-state check OffsetCommit makes: a member of
    a group whose rebalance is completing (joined, not yet synced) commits transactional
    offsets, where a plain commit is REBALANCE_IN_PROGRESS."""
    rc = RawClient(broker.bootstrap)
    group, txn = _group(), f"txn-{topic_name}"
    try:
        _topic_id(rc, topic_name)
        first = _join(rc, group, 9)
        joined = _join(rc, group, 9, member_id=first.member_id)
        assert (joined.error_code, joined.generation_id) == (0, 1)  # CompletingRebalance
        assert _commit(rc, 9, group, topic_name, generation=1, member_id=joined.member_id) == [
            (topic_name, [Errors.REBALANCE_IN_PROGRESS])]
        pid = rc.request(22, 4, InitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=30000, producer_id=-1,
            producer_epoch=-1))
        assert pid.error_code == 0
        ids = dict(transactional_id=txn, producer_id=pid.producer_id,
                   producer_epoch=pid.producer_epoch)
        assert rc.request(25, 3, AddOffsetsToTxnRequest(**ids, group_id=group)).error_code == 0
        got = rc.request(28, 3, TxnOffsetCommitRequest(
            **ids, group_id=group, generation_id=1, member_id=joined.member_id, topics=[
                TxnOffsetCommitRequestTopic(name=topic_name, partitions=[
                    TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=6,
                                                    committed_metadata="t")])]))
        assert [[p.error_code for p in t.partitions] for t in got.topics] == [[0]]
        assert rc.request(26, 3, EndTxnRequest(**ids, committed=True)).error_code == 0
        assert _fetch(rc, 9, [(group, [topic_name])])[group] == (0, {topic_name: [(0, 6, "t", 0)]})
    finally:
        rc.close()
