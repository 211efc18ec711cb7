"""ACL checks that the ACL matrix (test_acl_matrix_data / _admin) exercised only behind
another check, so that dropping them went unnoticed (found by breaking each check in turn:
docs in the commit messages). Each test here reaches the check on its own, on a real broker
(SASL_PLAINTEXT, PLAIN users, Kafka's StandardAuthorizer, admin a super user), as the
principal sees it on the wire, and checks that nothing happened.

- InitProducerId with a transactional id needs WRITE on the id. A client normally meets
  FindCoordinator first, which needs DESCRIBE on the id and refuses with the same error, so
  the matrix's librdkafka producer never reached InitProducerId: here alice may DESCRIBE
  the id (FindCoordinator answers) but not WRITE it.
- AddOffsetsToTxn needs READ on the group. librdkafka's send_offsets_to_transaction sends
  TxnOffsetCommit next, which needs the same READ and fails with the same error, so the
  matrix never saw AddOffsetsToTxn's own refusal; here it is sent alone, and the
  transaction is seen (DescribeTransactions) not to include the offsets topic.
- The cluster's authorized operations (DescribeCluster, Metadata v8-10) are 0 for a
  principal that may not DESCRIBE the cluster, even if it may do something else to it
  (Kafka's rule): the matrix's principals had either nothing or an operation implying
  DESCRIBE, so answering the list without the DESCRIBE test went unnoticed.
- The share coordinator's APIs (83-87) and FindCoordinator's share keys are for brokers:
  CLUSTER_ACTION on the cluster; no client of the matrix sends them.
- An ACL's host is the client's address as the broker sees it (127.0.0.1 here): the
  matrix's ACLs all have host ``*``, so a broker asking with any other host passed it.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    NewTopic,
    ResourceType,
)

from spool.protocol._generated import (
    AddOffsetsToTxnRequest,
    DescribeClusterRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    WriteShareGroupStateRequest,
)
from spool.protocol._generated import write_share_group_state_request as wreq
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.acl import AclOperation as Op
from spool.protocol.errors import Errors
from tests.helpers import acl
from tests.helpers.acl import authorizing_broker

pytestmark = pytest.mark.timeout(300)

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
TXN_DENIED = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = authorizing_broker(tmp_path_factory.mktemp("acl-gaps") / "data", USERS)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient(broker.confluent("admin"))


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def grant(admin: AdminClient, rtype, name: str, op, user: str = "alice", *, host: str = "*",
          deny: bool = False) -> None:
    acl.grant(admin, acl.binding(rtype, name, op, user, host=host, deny=deny))


def raw(broker, user: str, message, version: int):
    """One request as ``user`` (PLAIN), its decoded response."""
    host, port = broker.bootstrap().split(":")
    return acl.plain_request(host, int(port), user, broker.password(user), message, version,
                             client_id="acl-gaps")


def test_init_producer_id_needs_write_on_the_transactional_id(broker, admin):
    txn = _name("ipid")
    grant(admin, ResourceType.TRANSACTIONAL_ID, txn, AclOperation.DESCRIBE)
    # FindCoordinator passes with DESCRIBE...
    found = raw(broker, "alice", FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]), 4)
    assert [c.error_code for c in found.coordinators] == [0]
    # ...InitProducerId does not: it needs WRITE, and no producer id is given
    init = InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=60000,
                                 producer_id=-1, producer_epoch=-1)
    resp = raw(broker, "alice", init, 4)
    assert (resp.error_code, resp.producer_id) == (TXN_DENIED, -1)
    grant(admin, ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    resp = raw(broker, "alice", init, 4)
    assert resp.error_code == 0 and resp.producer_id >= 0


def test_an_acls_host_is_the_clients_address(broker, admin):
    """Through both of the handlers' ways to ask: a topic in Metadata (many names at once)
    and a group in FindCoordinator (one)."""
    topic, group = _name("hosts"), _name("hosts-group")
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(15)

    def refused() -> tuple[bool, bool]:
        req = MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False)
        (t,) = raw(broker, "alice", req, 12).topics
        (c,) = raw(broker, "alice", FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                   4).coordinators
        return (t.error_code == Errors.TOPIC_AUTHORIZATION_FAILED,
                c.error_code == Errors.GROUP_AUTHORIZATION_FAILED)

    def grant_both(host: str, deny: bool = False) -> None:
        grant(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE, host=host, deny=deny)
        grant(admin, ResourceType.GROUP, group, AclOperation.DESCRIBE, host=host, deny=deny)

    grant_both("10.11.12.13")  # another host's ALLOW
    assert refused() == (True, True)
    grant_both("127.0.0.1")  # this client's
    assert refused() == (False, False)
    grant_both("10.11.12.13", deny=True)  # a DENY for another host does not apply
    assert refused() == (False, False)
    grant_both("127.0.0.1", deny=True)
    assert refused() == (True, True)


def test_add_offsets_to_txn_needs_read_on_the_group(broker, admin):
    txn, group = _name("aot"), _name("aot-group")
    grant(admin, ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    init = raw(broker, "alice", InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1), 4)
    assert init.error_code == 0
    add = AddOffsetsToTxnRequest(transactional_id=txn, producer_id=init.producer_id,
                                 producer_epoch=init.producer_epoch, group_id=group)

    def in_transaction() -> list[str]:
        (state,) = raw(broker, "admin", DescribeTransactionsRequest(transactional_ids=[txn]),
                       0).transaction_states
        assert state.error_code == 0
        return [t.topic for t in state.topics]

    assert raw(broker, "alice", add, 3).error_code == Errors.GROUP_AUTHORIZATION_FAILED
    assert in_transaction() == []  # the group's offsets were not added
    grant(admin, ResourceType.GROUP, group, AclOperation.READ)
    assert raw(broker, "alice", add, 3).error_code == 0
    assert in_transaction() == ["__consumer_offsets"]


def test_cluster_operations_are_none_without_describe_on_the_cluster(broker, admin):
    def operations() -> tuple[int, int]:
        described = raw(broker, "bob", DescribeClusterRequest(
            include_cluster_authorized_operations=True), 0)
        assert described.error_code == 0
        metadata = raw(broker, "bob", MetadataRequest(
            topics=[], allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
            include_topic_authorized_operations=False), 10)
        return described.cluster_authorized_operations, metadata.cluster_authorized_operations

    assert operations() == (0, 0)
    # IDEMPOTENT_WRITE on the cluster does not imply DESCRIBE: still nothing is listed
    grant(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE, "bob")
    assert operations() == (0, 0)
    grant(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, "bob")
    listed = 1 << Op.DESCRIBE | 1 << Op.IDEMPOTENT_WRITE
    assert operations() == (listed, listed)


def test_share_state_apis_need_cluster_action(broker, admin):
    def write_and_find() -> tuple[int, int]:
        w = raw(broker, "carol", WriteShareGroupStateRequest(group_id="g", topics=[
            wreq.WriteStateData(topic_id=uuid.uuid4(), partitions=[wreq.PartitionData(
                partition=0, state_epoch=0, leader_epoch=0, start_offset=0,
                state_batches=[])])]), 0)
        f = raw(broker, "carol", FindCoordinatorRequest(key_type=2,
                                                        coordinator_keys=["g:x:0"]), 6)
        return w.results[0].partitions[0].error_code, f.coordinators[0].error_code

    denied = Errors.CLUSTER_AUTHORIZATION_FAILED
    assert write_and_find() == (denied, denied)
    grant(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, "carol")
    assert write_and_find() == (denied, denied)
    grant(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION, "carol")
    # allowed: the unknown topic id is the state machine's answer now
    assert write_and_find() == (Errors.UNKNOWN_TOPIC_OR_PARTITION, 0)


def test_consumer_group_heartbeat_and_describe_need_their_acls(broker, admin):
    """KIP-848, as KafkaApis: ConsumerGroupHeartbeat needs READ on the group and DESCRIBE on
    each subscribed topic; a regex subscription gets only the matching topics the member may
    DESCRIBE; ConsumerGroupDescribe needs DESCRIBE on the group."""
    from spool.protocol._generated import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupHeartbeatRequest,
    )

    prefix = _name("cgacl")
    topic, hidden, group = f"{prefix}-seen", f"{prefix}-hidden", _name("cgacl-group")
    for f in admin.create_topics([NewTopic(topic, 2, 1), NewTopic(hidden, 2, 1)]).values():
        f.result(15)

    def join(member: str, names=None, regex=None):
        return raw(broker, "alice", ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=names, subscribed_topic_regex=regex, topic_partitions=[]), 1)

    def describe(user: str):
        return raw(broker, user, ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]

    assert join("m1", [topic]).error_code == Errors.GROUP_AUTHORIZATION_FAILED
    assert describe("alice").error_code == Errors.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, group, AclOperation.READ)  # READ implies DESCRIBE
    r = join("m1", [topic])
    assert (r.error_code, r.error_message) == (
        Errors.TOPIC_AUTHORIZATION_FAILED, f"The following topics are not authorized: {topic}.")
    assert describe("admin").error_code == Errors.GROUP_ID_NOT_FOUND  # nothing was done
    grant(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    r = join("m1", [topic])
    assert (r.error_code, r.member_epoch) == (0, 1)
    seen_id = r.assignment.topic_partitions[0].topic_id
    r = join("m2", regex=f"{prefix}-.*")  # matches both topics, may describe one
    assert r.error_code == 0
    d = describe("alice")
    assert d.error_code == 0
    targets = {tp.topic_id for m in d.members for tp in m.target_assignment.topic_partitions}
    assert targets == {seen_id}


def test_share_group_heartbeat_and_describe_need_their_acls(broker, admin):
    """KIP-932, as KafkaApis: ShareGroupHeartbeat needs READ on the group and DESCRIBE on
    each subscribed topic (nothing is done without them); ShareGroupDescribe needs DESCRIBE
    on the group."""
    from spool.protocol._generated import (
        ShareGroupDescribeRequest,
        ShareGroupHeartbeatRequest,
    )

    topic, group = _name("sgacl"), _name("sgacl-group")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)

    def join():
        return raw(broker, "alice", ShareGroupHeartbeatRequest(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
            subscribed_topic_names=[topic]), 1)

    def describe(user: str):
        return raw(broker, user, ShareGroupDescribeRequest(group_ids=[group]), 1).groups[0]

    assert join().error_code == Errors.GROUP_AUTHORIZATION_FAILED
    assert describe("alice").error_code == Errors.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, group, AclOperation.READ)  # READ implies DESCRIBE
    assert join().error_code == Errors.TOPIC_AUTHORIZATION_FAILED
    assert describe("admin").error_code == Errors.GROUP_ID_NOT_FOUND  # nothing was done
    grant(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    r = join()
    assert (r.error_code, r.member_epoch) == (0, 1)
    d = describe("alice")
    assert (d.error_code, len(d.members)) == (0, 1)
