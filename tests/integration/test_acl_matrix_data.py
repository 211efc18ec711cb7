"""The ACL matrix, data half: produce, fetch, offsets, metadata, groups, transactions.

One broker for the module (``tests.helpers.secure_broker``): a SASL_PLAINTEXT listener,
PLAIN users admin (``super.users``), alice, bob, carol and dave, Kafka's StandardAuthorizer
(``authorizer.class.name``), ``allow.everyone.if.no.acl.found`` false. ACLs are created as
users do, with confluent-kafka's AdminClient as admin; each test names its own topics,
groups and transactional ids, so the tests share the broker without sharing ACLs.

For each API: a principal without the ACL is refused with Kafka's error, placed where
Kafka places it (per partition, per topic, per group, or the whole request), and the data
is untouched (seen by admin); with the ACL the same call works. Exact placement is checked
on the wire (``spool.net.client.NodeClient`` authenticating with PLAIN), what users see
with confluent-kafka. A second broker checks ``allow.everyone.if.no.acl.found=true``.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AdminClient,
    NewTopic,
    ResourceType,
)

from spool.net.client import NodeClient
from spool.protocol._generated import (
    AddPartitionsToTxnRequest,
    DescribeClusterRequest,
    DescribeGroupsRequest,
    DescribeProducersRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
    share_fetch_request,
)
from spool.protocol._generated.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from spool.protocol._generated.describe_producers_request import TopicRequest
from spool.protocol._generated.describe_topic_partitions_request import TopicRequest as DtpTopic
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.join_group_request import JoinGroupRequestProtocol
from spool.protocol._generated.leave_group_request import MemberIdentity
from spool.protocol._generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from spool.protocol._generated.offset_delete_request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from spool.protocol._generated.offset_fetch_request import OffsetFetchRequestTopic
from spool.protocol._generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol._generated.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from spool.protocol._generated.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from spool.protocol.errors import Errors
from spool.protocol.primitives import ZERO_UUID
from spool.records.builder import BatchBuilder
from spool.security.client_config import ClientSecurity
from tests.helpers.acl import authorizing_broker, binding, grant, plain_request
from tests.helpers.secure_broker import PLAIN_LOGIN

pytestmark = pytest.mark.timeout(300)

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
         "dave": "dave-secret"}  # dave: the only one given ACLs on the cluster
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = Errors.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
R, W, D = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = authorizing_broker(tmp_path_factory.mktemp("acl-data") / "data", USERS)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient(broker.confluent("admin"))


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topic_acl(name, op, user="alice", **kw) -> AclBinding:
    return binding(ResourceType.TOPIC, name, op, user, **kw)


def group_acl(name, op, user="alice", **kw) -> AclBinding:
    return binding(ResourceType.GROUP, name, op, user, **kw)


def txn_acl(name, op, user="alice", **kw) -> AclBinding:
    return binding(ResourceType.TRANSACTIONAL_ID, name, op, user, **kw)


def create_topics(admin: AdminClient, *names: str, partitions: int = 1) -> None:
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(15)


def produce_as_admin(broker, topic: str, *values: bytes) -> None:
    p = Producer(broker.confluent("admin"))
    for v in values:
        p.produce(topic, v)
    assert p.flush(15) == 0


def watermarks(broker, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer(broker.confluent("admin", **{"group.id": "wm"}))
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def committed(broker, group: str, topic: str) -> int:
    c = Consumer(broker.confluent("admin", **{"group.id": group}))
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def _security(user: str) -> ClientSecurity:
    password = USERS.get(user, "admin-secret")
    return ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_LOGIN} required username="{user}" '
                            f'password="{password}";'})


def raw(broker, user: str, message, version: int):
    """One request as ``user`` (PLAIN), its decoded response."""
    host, port = broker.bootstrap().split(":")
    return plain_request(host, int(port), user, broker.password(user), message, version,
                         client_id="acl-matrix")


def batch(value: bytes = b"v", **kw) -> bytes:
    b = BatchBuilder(**kw)
    b.append(b"k", value, timestamp=1_700_000_000_000)
    return bytes(b.build())


def produce_request(*topics: str) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=t, partition_data=[PartitionProduceData(index=0, records=batch())])
        for t in topics])


def codes(response, topics_attr: str, parts_attr: str, name_attr: str = "name") -> dict:
    return {getattr(t, name_attr): [p.error_code for p in getattr(t, parts_attr)]
            for t in getattr(response, topics_attr)}


# ---- Produce


def test_produce_needs_write_on_each_topic(broker, admin):
    ok, read_only = _name("p-ok"), _name("p-ro")
    missing = _name("p-missing")
    create_topics(admin, ok, read_only)
    grant(admin, topic_acl(ok, W), topic_acl(read_only, D), topic_acl(read_only, R))
    resp = raw(broker, "alice", produce_request(ok, read_only, missing), 9)
    # per partition; a topic that does not exist is not disclosed (not UNKNOWN_TOPIC)
    assert codes(resp, "responses", "partition_responses") == {
        ok: [0], read_only: [TOPIC_DENIED], missing: [TOPIC_DENIED]}
    assert watermarks(broker, ok) == (0, 1)
    assert watermarks(broker, read_only) == (0, 0)
    assert missing not in admin.list_topics(timeout=10).topics


def test_produce_refusal_comes_before_the_acks_check(broker, admin):
    """Kafka authorizes first: a refused topic is TOPIC_AUTHORIZATION_FAILED even when the
    request's acks are invalid, an allowed one INVALID_REQUIRED_ACKS; nothing appended."""
    ok, denied = _name("pa-ok"), _name("pa-no")
    create_topics(admin, ok, denied)
    grant(admin, topic_acl(ok, W))
    req = produce_request(ok, denied)
    req.acks = 2
    assert codes(raw(broker, "alice", req, 9), "responses", "partition_responses") == {
        ok: [Errors.INVALID_REQUIRED_ACKS], denied: [TOPIC_DENIED]}
    assert watermarks(broker, ok) == (0, 0)


def test_confluent_producer_refused_then_allowed(broker, admin):
    topic = _name("p-client")
    create_topics(admin, topic)
    grant(admin, topic_acl(topic, D))
    reports: list = []
    p = Producer(broker.confluent("alice", **{"message.timeout.ms": 10000}))
    p.produce(topic, b"refused", on_delivery=lambda err, msg: reports.append(err))
    p.flush(15)
    assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert watermarks(broker, topic) == (0, 0)
    grant(admin, topic_acl(topic, W))
    reports.clear()
    p = Producer(broker.confluent("alice"))  # librdkafka keeps a refused topic refused
    p.produce(topic, b"allowed", on_delivery=lambda err, msg: reports.append(err))
    p.flush(15)
    assert reports == [None]
    assert watermarks(broker, topic) == (0, 1)


def test_acks_0_produce_refused_closes_the_connection(broker, admin):
    topic = _name("p-acks0")
    create_topics(admin, topic)
    grant(admin, topic_acl(topic, D))
    req = produce_request(topic)
    req.acks = 0
    host, port = broker.bootstrap().split(":")

    async def go() -> bool:
        """Whether the broker closed the connection (no answer comes either way)."""
        c = NodeClient(host, int(port), security=_security("alice"))
        try:
            try:
                await c.request(req, 9, expect_response=False)
            except ConnectionError:  # closed while the client was still draining its write
                return True
            for _ in range(500):  # the close, or 10 s of a connection left open
                if not c.connected:
                    return True
                await asyncio.sleep(0.02)
            return False
        finally:
            await c.close()

    assert asyncio.run(go())
    assert watermarks(broker, topic) == (0, 0)


def test_transactional_batches_need_write_on_the_transactional_id(broker, admin):
    topic, txn = _name("p-txn"), _name("txn")
    create_topics(admin, topic)
    grant(admin, topic_acl(topic, W))
    records = batch(producer_id=1000, producer_epoch=0, base_sequence=0, is_transactional=True)
    req = ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0,
                                                                           records=records)])])
    resp = raw(broker, "alice", req, 9)
    assert codes(resp, "responses", "partition_responses") == {topic: [TXN_DENIED]}
    assert watermarks(broker, topic) == (0, 0)


# ---- Fetch, ListOffsets, OffsetForLeaderEpoch


def fetch_request(*topics: str) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchTopic(topic=t, partitions=[FetchPartition(
                                partition=0, current_leader_epoch=-1, fetch_offset=0,
                                log_start_offset=-1, partition_max_bytes=1 << 20)])
                            for t in topics], forgotten_topics_data=[], rack_id="")


def test_fetch_needs_read_on_each_topic(broker, admin):
    ok, described = _name("f-ok"), _name("f-desc")
    create_topics(admin, ok, described)
    produce_as_admin(broker, ok, b"a")
    produce_as_admin(broker, described, b"secret")
    grant(admin, topic_acl(ok, R), topic_acl(described, D))
    resp = raw(broker, "alice", fetch_request(ok, described), 12)
    assert codes(resp, "responses", "partitions", "topic") == {ok: [0], described: [TOPIC_DENIED]}
    got = {t.topic: t.partitions[0] for t in resp.responses}
    assert len(got[ok].records) > 0
    assert not got[described].records and got[described].high_watermark == -1


def test_follower_fetch_needs_cluster_action(broker, admin):
    topic = _name("f-follower")
    create_topics(admin, topic)
    produce_as_admin(broker, topic, b"a")
    grant(admin, topic_acl(topic, R))  # READ is not enough for a replica's fetch
    req = fetch_request(topic)
    req.replica_id = 7
    resp = raw(broker, "alice", req, 12)
    assert codes(resp, "responses", "partitions", "topic") == {topic: [TOPIC_DENIED]}


def test_confluent_consumer_refused_without_read(broker, admin):
    topic, group = _name("f-client"), _name("g")
    create_topics(admin, topic)
    produce_as_admin(broker, topic, b"secret")
    grant(admin, topic_acl(topic, D), group_acl(group, R))
    c = Consumer(broker.confluent("alice", **{"group.id": group,
                                             "auto.offset.reset": "earliest"}))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        errors, values = [], []
        for _ in range(40):
            m = c.poll(0.25)
            if m is None:
                continue
            (errors.append(m.error().code()) if m.error() else values.append(m.value()))
            if errors:
                break
        assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED] and values == []
    finally:
        c.close()


def test_list_offsets_and_leader_epochs_need_describe(broker, admin):
    ok, hidden = _name("lo-ok"), _name("lo-hidden")
    create_topics(admin, ok, hidden)
    grant(admin, topic_acl(ok, D))
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsTopic(name=t, partitions=[ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)]) for t in (ok, hidden)])
    assert codes(raw(broker, "alice", req, 7), "topics", "partitions") == {
        ok: [0], hidden: [TOPIC_DENIED]}
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderTopic(topic=t, partitions=[OffsetForLeaderPartition(
            partition=0, current_leader_epoch=-1, leader_epoch=0)]) for t in (ok, hidden)])
    assert codes(raw(broker, "alice", req, 4), "topics", "partitions", "topic") == {
        ok: [0], hidden: [TOPIC_DENIED]}


# ---- Metadata, DescribeTopicPartitions, DescribeProducers


def test_metadata_hides_topics_it_may_not_describe(broker, admin):
    seen, unseen = _name("m-seen"), _name("m-unseen")
    create_topics(admin, seen, unseen)
    grant(admin, topic_acl(seen, R))  # READ implies DESCRIBE
    listed = AdminClient(broker.confluent("alice")).list_topics(timeout=10).topics
    assert seen in listed and unseen not in listed
    ghost = _name("m-ghost")
    req = MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in (seen, unseen, ghost)],
                          allow_auto_topic_creation=False)
    resp = raw(broker, "alice", req, 12)
    got = {t.name: (t.error_code, t.topic_id) for t in resp.topics}
    assert got[seen][0] == 0 and got[seen][1] != ZERO_UUID
    # existing or not, the same answer and no topic id
    assert got[unseen] == got[ghost] == (TOPIC_DENIED, ZERO_UUID)


def test_topics_by_id_refused_with_the_id(broker, admin):
    seen, unseen = _name("id-seen"), _name("id-unseen")
    create_topics(admin, seen, unseen)
    produce_as_admin(broker, unseen, b"secret")
    grant(admin, topic_acl(seen, R))
    by_name = raw(broker, "admin", MetadataRequest(topics=[
        MetadataRequestTopic(name=n) for n in (seen, unseen)], allow_auto_topic_creation=False), 12)
    ids = {t.name: t.topic_id for t in by_name.topics}
    resp = raw(broker, "alice", MetadataRequest(topics=[
        MetadataRequestTopic(topic_id=ids[n], name=None) for n in (seen, unseen)],
        allow_auto_topic_creation=False), 12)
    got = {t.topic_id: (t.error_code, t.name) for t in resp.topics}
    assert got == {ids[seen]: (0, seen), ids[unseen]: (TOPIC_DENIED, None)}
    req = fetch_request(seen, unseen)
    for t in req.topics:
        t.topic_id, t.topic = ids[t.topic], ""
    resp = raw(broker, "alice", req, 13)
    got = {t.topic_id: [(p.error_code, len(p.records or b"")) for p in t.partitions]
           for t in resp.responses}
    assert got == {ids[seen]: [(0, 0)], ids[unseen]: [(TOPIC_DENIED, 0)]}


def test_metadata_auto_creation_needs_create(broker, admin):
    topic = _name("m-auto")
    grant(admin, topic_acl(topic, D))
    req = MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                          allow_auto_topic_creation=True)
    assert [t.error_code for t in raw(broker, "alice", req, 12).topics] == [TOPIC_DENIED]
    assert topic not in admin.list_topics(timeout=10).topics
    grant(admin, topic_acl(topic, AclOperation.CREATE))
    assert [t.error_code for t in raw(broker, "alice", req, 12).topics] in (
        [0], [Errors.LEADER_NOT_AVAILABLE])
    assert topic in admin.list_topics(timeout=10).topics


def test_describe_topic_partitions_and_producers(broker, admin):
    seen, unseen = _name("d-seen"), _name("d-unseen")
    create_topics(admin, seen, unseen)
    grant(admin, topic_acl(seen, R))
    req = DescribeTopicPartitionsRequest(topics=[DtpTopic(name=n) for n in (seen, unseen)],
                                         response_partition_limit=100, cursor=None)
    resp = raw(broker, "alice", req, 0)
    assert [(t.name, t.error_code) for t in resp.topics] == [(seen, 0), (unseen, TOPIC_DENIED)]
    req = DescribeProducersRequest(topics=[TopicRequest(name=n, partition_indexes=[0])
                                           for n in (seen, unseen)])
    assert codes(raw(broker, "alice", req, 0), "topics", "partitions") == {
        seen: [0], unseen: [TOPIC_DENIED]}


def test_authorized_operations_are_what_the_acls_allow(broker, admin):
    topic, group = _name("ops"), _name("ops-g")
    create_topics(admin, topic)
    assert raw(broker, "admin", commit_request(group, topic, 1), 8).topics[0].partitions[
        0].error_code == 0
    grant(admin, topic_acl(topic, W), topic_acl(topic, AclOperation.ALTER_CONFIGS),
          group_acl(group, R))
    alice = AdminClient(broker.confluent("alice"))
    described = alice.describe_topics(TopicCollection([topic]),
                                      include_authorized_operations=True)[topic].result(15)
    assert set(described.authorized_operations) == {  # WRITE and ALTER_CONFIGS, and implied
        AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS}
    g = alice.describe_consumer_groups([group], include_authorized_operations=True)[
        group].result(15)
    assert set(g.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    # without DESCRIBE on the cluster: no cluster operation at all (Kafka answers 0)
    dave = AdminClient(broker.confluent("dave"))
    grant(admin, binding(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE,
                         "dave"))
    assert not dave.describe_cluster(include_authorized_operations=True).result(
        15).authorized_operations
    req = DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1)
    assert raw(broker, "dave", req, 1).cluster_authorized_operations == 0
    grant(admin, binding(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, "dave"))
    assert set(dave.describe_cluster(include_authorized_operations=True).result(
        15).authorized_operations) == {AclOperation.DESCRIBE, AclOperation.IDEMPOTENT_WRITE}
    everything = admin.describe_cluster(
        include_authorized_operations=True).result(15).authorized_operations
    assert AclOperation.CLUSTER_ACTION in everything and len(everything) == 7


# ---- prefixed ACLs, deny over allow, super users


def test_prefixed_allow_and_literal_deny(broker, admin):
    prefix = _name("team") + "-"
    open_, locked = prefix + "open", prefix + "locked"
    create_topics(admin, open_, locked)
    grant(admin, topic_acl(prefix, W, prefixed=True), topic_acl(prefix, D, prefixed=True),
          topic_acl(locked, W, deny=True))
    resp = raw(broker, "alice", produce_request(open_, locked), 9)
    assert codes(resp, "responses", "partition_responses") == {open_: [0], locked: [TOPIC_DENIED]}
    resp = raw(broker, "bob", produce_request(open_), 9)  # the ACLs name alice only
    assert codes(resp, "responses", "partition_responses") == {open_: [TOPIC_DENIED]}
    assert watermarks(broker, open_) == (0, 1)
    assert watermarks(broker, locked) == (0, 0)


def test_deny_for_everyone_beats_allow_but_not_a_super_user(broker, admin):
    topic = _name("deny-all")
    create_topics(admin, topic)
    grant(admin, topic_acl(topic, AclOperation.ALL), topic_acl(topic, W, "*", deny=True))
    resp = raw(broker, "alice", produce_request(topic), 9)
    assert codes(resp, "responses", "partition_responses") == {topic: [TOPIC_DENIED]}
    resp = raw(broker, "admin", produce_request(topic), 9)
    assert codes(resp, "responses", "partition_responses") == {topic: [0]}
    assert watermarks(broker, topic) == (0, 1)
    # the deny is of WRITE: ALL still allows alice to read
    assert codes(raw(broker, "alice", fetch_request(topic), 12), "responses", "partitions",
                 "topic") == {topic: [0]}


# ---- groups and committed offsets


def join_request(group: str) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                            member_id="", group_instance_id=None, protocol_type="consumer",
                            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
                            reason=None)


def commit_request(group: str, topic: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[OffsetCommitRequestTopic(
                                   name=topic, partitions=[OffsetCommitRequestPartition(
                                       partition_index=0, committed_offset=offset,
                                       committed_leader_epoch=-1, committed_metadata="")])])


def test_group_membership_needs_read_on_the_group(broker, admin):
    topic, group = _name("g-topic"), _name("g")
    create_topics(admin, topic)
    produce_as_admin(broker, topic, b"a")
    grant(admin, topic_acl(topic, R))
    assert raw(broker, "alice", join_request(group), 7).error_code == GROUP_DENIED
    c = Consumer(broker.confluent("alice", **{"group.id": group,
                                             "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        seen = []
        for _ in range(40):
            m = c.poll(0.25)
            if m is not None and m.error():
                seen.append(m.error().code())
                break
        assert seen == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    finally:
        c.close()
    grant(admin, group_acl(group, R))
    c = Consumer(broker.confluent("alice", **{"group.id": group,
                                             "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False}))
    try:
        c.subscribe([topic])
        m = None
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and not m.error():
                break
        assert m is not None and m.value() == b"a"
        c.commit(m, asynchronous=False)
    finally:
        c.close()
    assert committed(broker, group, topic) == 1


def test_sync_heartbeat_and_leave_need_read_on_the_group(broker, admin):
    topic, group = _name("sh-topic"), _name("sh")
    create_topics(admin, topic)
    member = Consumer(broker.confluent("admin", **{"group.id": group}))
    try:
        member.subscribe([topic])
        for _ in range(60):
            member.poll(0.25)
            if member.assignment():
                break
        assert member.assignment()
        (described,) = admin.describe_consumer_groups([group])[group].result(15).members
        member_id = described.member_id
        sync = SyncGroupRequest(group_id=group, generation_id=1, member_id=member_id,
                                assignments=[])
        beat = HeartbeatRequest(group_id=group, generation_id=1, member_id=member_id)
        leave = LeaveGroupRequest(group_id=group, members=[MemberIdentity(member_id=member_id)])
        assert raw(broker, "alice", sync, 5).error_code == GROUP_DENIED
        assert raw(broker, "alice", beat, 4).error_code == GROUP_DENIED
        refused = raw(broker, "alice", leave, 5)
        assert (refused.error_code, refused.members) == (GROUP_DENIED, [])
        # the member is still there: nothing alice sent reached the group
        still = admin.describe_consumer_groups([group])[group].result(15).members
        assert [m.member_id for m in still] == [member_id]
    finally:
        member.close()


def test_offset_commit_needs_read_on_group_and_topic(broker, admin):
    topic, other, group = _name("oc-topic"), _name("oc-other"), _name("oc")
    create_topics(admin, topic, other)
    grant(admin, group_acl(group, AclOperation.DESCRIBE, "bob"), topic_acl(topic, R, "bob"))
    resp = raw(broker, "bob", commit_request(group, topic, 5), 8)
    assert codes(resp, "topics", "partitions") == {topic: [GROUP_DENIED]}
    assert committed(broker, group, topic) < 0  # nothing committed
    grant(admin, group_acl(group, R, "bob"))
    req = commit_request(group, topic, 5)
    req.topics += commit_request(group, other, 5).topics
    resp = raw(broker, "bob", req, 8)
    assert codes(resp, "topics", "partitions") == {topic: [0], other: [TOPIC_DENIED]}
    assert committed(broker, group, topic) == 5
    assert committed(broker, group, other) < 0


def test_offset_fetch_and_delete(broker, admin):
    topic, hidden, group = _name("of-topic"), _name("of-hidden"), _name("of")
    create_topics(admin, topic, hidden)
    assert codes(raw(broker, "admin", commit_request(group, topic, 3), 8), "topics",
                 "partitions") == {topic: [0]}
    assert raw(broker, "admin", commit_request(group, hidden, 4), 8).topics[0].partitions[
        0].error_code == 0

    def fetch(user):
        return raw(broker, user, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic(name=t, partition_indexes=[0]) for t in (topic, hidden)],
            require_stable=False), 7)

    assert fetch("carol").error_code == GROUP_DENIED
    grant(admin, group_acl(group, D, "carol"), topic_acl(topic, D, "carol"))
    resp = fetch("carol")
    got = {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code)
           for t in resp.topics}
    assert resp.error_code == 0 and got == {topic: (3, 0), hidden: (-1, TOPIC_DENIED)}
    all_topics = raw(broker, "carol", OffsetFetchRequest(group_id=group, topics=None,
                                                          require_stable=False), 7)
    assert [t.name for t in all_topics.topics] == [topic]  # the hidden topic left out

    delete = OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequestTopic(
        name=t, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        for t in (topic, hidden)])
    assert raw(broker, "carol", delete, 0).error_code == GROUP_DENIED
    grant(admin, group_acl(group, AclOperation.DELETE, "carol"), topic_acl(topic, R, "carol"))
    resp = raw(broker, "carol", delete, 0)
    assert resp.error_code == 0
    assert codes(resp, "topics", "partitions") == {topic: [0], hidden: [TOPIC_DENIED]}
    assert committed(broker, group, topic) < 0
    assert committed(broker, group, hidden) == 4


def test_group_administration(broker, admin):
    topic, mine, theirs = _name("ga-topic"), _name("ga-mine"), _name("ga-theirs")
    create_topics(admin, topic)
    for g in (mine, theirs):
        assert raw(broker, "admin", commit_request(g, topic, 1), 8).topics[0].partitions[
            0].error_code == 0
    grant(admin, group_acl(mine, D))
    resp = raw(broker, "alice", DescribeGroupsRequest(groups=[mine, theirs],
                                                      include_authorized_operations=False), 5)
    assert [(g.group_id, g.error_code) for g in resp.groups] == [(mine, 0),
                                                                 (theirs, GROUP_DENIED)]
    listed = {g.group_id for g in raw(broker, "alice", ListGroupsRequest(states_filter=[]),
                                      4).groups}
    assert mine in listed and theirs not in listed
    alice = AdminClient(broker.confluent("alice"))
    with pytest.raises(KafkaException) as e:
        alice.delete_consumer_groups([mine])[mine].result(15)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert committed(broker, mine, topic) == 1  # still there
    grant(admin, group_acl(mine, AclOperation.DELETE))
    alice.delete_consumer_groups([mine])[mine].result(15)
    assert committed(broker, mine, topic) < 0


def test_find_coordinator_needs_describe(broker, admin):
    group, txn = _name("fc"), _name("fc-txn")
    for key_type, key, code in ((0, group, GROUP_DENIED), (1, txn, TXN_DENIED)):
        req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        assert [c.error_code for c in raw(broker, "alice", req, 4).coordinators] == [code]
    grant(admin, group_acl(group, D), txn_acl(txn, D))
    for key_type, key in ((0, group), (1, txn)):
        req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        assert [c.error_code for c in raw(broker, "alice", req, 4).coordinators] == [0]


# ---- producer ids and transactions


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(broker, admin):
    req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                producer_id=-1, producer_epoch=-1)
    resp = raw(broker, "carol", req, 4)
    assert (resp.error_code, resp.producer_id) == (CLUSTER_DENIED, -1)
    grant(admin, topic_acl(_name("anything"), W, "carol"))  # KIP-679: any topic's WRITE
    resp = raw(broker, "carol", req, 4)
    assert resp.error_code == 0 and resp.producer_id >= 0


def test_transactions_need_write_on_the_transactional_id_and_read_on_the_group(broker, admin):
    topic, txn, group = _name("t-topic"), _name("t-id"), _name("t-group")
    create_topics(admin, topic)
    grant(admin, topic_acl(topic, W), topic_acl(topic, R))
    p = Producer(broker.confluent("alice", **{"transactional.id": txn}))
    with pytest.raises(KafkaException) as e:
        p.init_transactions(15)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(admin, txn_acl(txn, W))
    p = Producer(broker.confluent("alice", **{"transactional.id": txn}))
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    c = Consumer(broker.confluent("alice", **{"group.id": group}))
    try:
        offsets = [TopicPartition(topic, 0, 1)]
        with pytest.raises(KafkaException) as e:  # AddOffsetsToTxn: READ on the group
            p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 15)
        assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(15)
    assert watermarks(broker, topic)[1] >= 2


def test_transaction_apis_on_the_wire(broker, admin):
    topic, hidden, txn, group = _name("tw"), _name("tw-hidden"), _name("tw-id"), _name("tw-g")
    create_topics(admin, topic, hidden)

    def add(*topics):
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=[0])
                                 for t in topics])

    def added(resp) -> dict:
        return {t.name: [p.partition_error_code for p in t.results_by_partition]
                for t in resp.results_by_topic_v3_and_below}

    def offsets(*topics):
        return TxnOffsetCommitRequest(
            transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0, topics=[
                TxnOffsetCommitRequestTopic(name=t, partitions=[TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata="")])
                for t in topics])

    assert added(raw(broker, "alice", add(topic), 3)) == {topic: [TXN_DENIED]}
    end = EndTxnRequest(transactional_id=txn, producer_id=1, producer_epoch=0, committed=True)
    assert raw(broker, "alice", end, 3).error_code == TXN_DENIED
    assert codes(raw(broker, "alice", offsets(topic), 3), "topics", "partitions") == {
        topic: [TXN_DENIED]}
    grant(admin, txn_acl(txn, W), topic_acl(topic, W), topic_acl(topic, R))
    # WRITE on the id: now each topic's WRITE decides; internal topics never (Kafka's rule)
    assert added(raw(broker, "alice", add(topic, hidden, "__consumer_offsets"), 3)) == {
        topic: [Errors.OPERATION_NOT_ATTEMPTED], hidden: [TOPIC_DENIED],
        "__consumer_offsets": [TOPIC_DENIED]}
    assert codes(raw(broker, "alice", offsets(topic), 3), "topics", "partitions") == {
        topic: [GROUP_DENIED]}
    grant(admin, group_acl(group, R))
    resp = raw(broker, "alice", offsets(topic, hidden), 3)
    # past the checks, the transaction coordinator answers (producer 1 is not this id's)
    assert codes(resp, "topics", "partitions") == {
        topic: [Errors.INVALID_PRODUCER_ID_MAPPING], hidden: [TOPIC_DENIED]}
    # a broker's batched form (v4+) needs CLUSTER_ACTION
    batched = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id=txn, producer_id=1, producer_epoch=0, verify_only=True,
        topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])])])
    refused = raw(broker, "alice", batched, 4)
    assert (refused.error_code, refused.results_by_transaction) == (CLUSTER_DENIED, [])


def test_describe_and_list_transactions(broker, admin):
    topic, txn = _name("dt"), _name("dt-id")
    create_topics(admin, topic)
    p = Producer(broker.confluent("admin", **{"transactional.id": txn}))
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"open")
    p.flush(15)
    try:
        refused = raw(broker, "bob", DescribeTransactionsRequest(transactional_ids=[txn]), 0)
        assert [s.error_code for s in refused.transaction_states] == [TXN_DENIED]
        listing = ListTransactionsRequest(state_filters=[], producer_id_filters=[])
        assert txn not in {s.transactional_id
                           for s in raw(broker, "bob", listing, 1).transaction_states}
        grant(admin, txn_acl(txn, D, "bob"))
        (state,) = raw(broker, "bob", DescribeTransactionsRequest(transactional_ids=[txn]),
                       0).transaction_states
        assert (state.error_code, state.transaction_state, state.topics) == (0, "Ongoing", [])
        assert txn in {s.transactional_id
                       for s in raw(broker, "bob", listing, 1).transaction_states}
        grant(admin, topic_acl(topic, D, "bob"))  # now the partition shows too
        (state,) = raw(broker, "bob", DescribeTransactionsRequest(transactional_ids=[txn]),
                       0).transaction_states
        assert [(t.topic, t.partitions) for t in state.topics] == [(topic, [0])]
    finally:
        p.abort_transaction(15)


def test_write_txn_markers_need_cluster_action(broker, admin):
    topic = _name("wtm")
    create_topics(admin, topic)
    grant(admin, topic_acl(topic, AclOperation.ALL))
    req = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=5, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
    resp = raw(broker, "alice", req, 1)
    assert codes(resp.markers[0], "topics", "partitions") == {topic: [CLUSTER_DENIED]}
    assert watermarks(broker, topic) == (0, 0)


# ---- allow.everyone.if.no.acl.found


def test_allow_everyone_if_no_acl_found(tmp_path):
    b = authorizing_broker(tmp_path / "data", USERS, {"allow.everyone.if.no.acl.found": "true"})
    try:
        adm = AdminClient(b.confluent("admin"))
        free, guarded = "free", "guarded"
        create_topics(adm, free, guarded)
        grant(adm, topic_acl(guarded, W, "bob"))  # an ACL: now only bob may write it
        resp = raw(b, "alice", produce_request(free, guarded), 9)
        assert codes(resp, "responses", "partition_responses") == {
            free: [0], guarded: [TOPIC_DENIED]}
        resp = raw(b, "bob", produce_request(guarded), 9)
        assert codes(resp, "responses", "partition_responses") == {guarded: [0]}
    finally:
        b.stop()


# ---- kafka-python and aiokafka see Kafka's exceptions


def test_kafka_python_and_aiokafka_see_kafkas_errors(broker, admin):
    import aiokafka
    import aiokafka.errors
    import kafka
    import kafka.errors

    topic, group = _name("kp"), _name("kp-g")
    create_topics(admin, topic)
    produce_as_admin(broker, topic, b"a")
    grant(admin, topic_acl(topic, D))
    # (idempotence off: an idempotent one would need a topic's WRITE for InitProducerId)
    producer = kafka.KafkaProducer(**broker.kafka_python("alice"), max_block_ms=10000,
                                   enable_idempotence=False)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send(topic, b"refused").get(timeout=15)
    finally:
        producer.close(timeout=5)
    assert watermarks(broker, topic) == (0, 1)

    grant(admin, topic_acl(topic, R))  # may read the topic, not join the group

    async def consume():
        c = aiokafka.AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                      **broker.kafka_python("alice"))
        try:
            with pytest.raises(aiokafka.errors.GroupAuthorizationFailedError):
                await c.start()  # FindCoordinator: DESCRIBE on the group
                await asyncio.wait_for(c.getone(), 15)
        finally:
            await c.stop()

    asyncio.run(consume())


# ---- ShareFetch, ShareAcknowledge (KIP-932)


def test_share_fetch_needs_read_on_the_group_then_each_topic(broker, admin):
    ok, described, group = _name("sf-ok"), _name("sf-desc"), _name("sg")
    create_topics(admin, ok, described)
    md = raw(broker, "admin", MetadataRequest(topics=[
        MetadataRequestTopic(name=n) for n in (ok, described)], allow_auto_topic_creation=False),
        12)
    ids = {t.name: t.topic_id for t in md.topics}
    req = ShareFetchRequest(
        group_id=group, member_id=uuid.uuid4().hex, share_session_epoch=0, max_wait_ms=0,
        min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100, topics=[
            share_fetch_request.FetchTopic(topic_id=ids[n], partitions=[
                share_fetch_request.FetchPartition(partition_index=0)]) for n in (ok, described)])
    grant(admin, topic_acl(ok, R), topic_acl(described, D))
    resp = raw(broker, "alice", req, 1)
    assert (resp.error_code, resp.responses) == (GROUP_DENIED, [])
    grant(admin, group_acl(group, R))
    resp = raw(broker, "alice", req, 1)
    assert resp.error_code == 0
    got = {t.topic_id: [p.error_code for p in t.partitions] for t in resp.responses}
    assert got == {ids[ok]: [0], ids[described]: [TOPIC_DENIED]}
    # ShareAcknowledge: READ on the group before anything else (even the session check)
    ack = ShareAcknowledgeRequest(group_id=_name("sg-other"), member_id=uuid.uuid4().hex,
                                  share_session_epoch=1, topics=[])
    assert raw(broker, "alice", ack, 1).error_code == GROUP_DENIED
    ack.group_id = group
    assert raw(broker, "alice", ack, 1).error_code == Errors.SHARE_SESSION_NOT_FOUND
