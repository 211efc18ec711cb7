"""Admin ACLs on a KRaft node, where the broker forwards admin requests to the controller.

Spool forwards a request without Kafka's Envelope, so the broker's check of the client's
principal is the one that counts (``spool.broker.admin_authz``): only what the principal
may do reaches the controller, and the answer keeps the request's order. On the
controller's own listeners a caller allowed CLUSTER_ACTION (a broker) is trusted as a
forwarder; any other caller is checked there as Kafka's ControllerApis does.

One combined node (broker and controller: the forwarding path is the same as on three).
Listeners: PLAINTEXT and CONTROLLER for the node's own traffic (``User:ANONYMOUS``, a super
user here, as a cluster whose internal listeners are not authenticated must make it),
CLIENT (SASL_PLAINTEXT, PLAIN users) for the test's principals, and CTRLSASL, a second
controller listener with SASL, for a client talking to the controller directly.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from spool.protocol._generated import (
    AllocateProducerIdsRequest,
    BrokerHeartbeatRequest,
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeQuorumRequest,
    UnregisterBrokerRequest,
    VoteRequest,
)
from spool.protocol._generated import describe_quorum_request as dqr
from spool.protocol._generated.create_acls_request import AclCreation
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol.errors import Errors
from tests.helpers.acl import STANDARD_AUTHORIZER, plain_request
from tests.helpers.cluster_proc import COMBINED, Cluster, reserve_port
from tests.helpers.secure_broker import plain_jaas

pytestmark = pytest.mark.timeout(240)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
TAF, CAF = Errors.TOPIC_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    jaas = plain_jaas(USERS)
    cluster = Cluster(tmp_path_factory.mktemp("acl-cluster"), roles=(COMBINED,), proxied=False,
                      overrides={
                          "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                          "CONTROLLER:PLAINTEXT,CLIENT:SASL_PLAINTEXT,CTRLSASL:SASL_PLAINTEXT",
                          "controller.listener.names": "CONTROLLER,CTRLSASL",
                          "sasl.enabled.mechanisms": "PLAIN",
                          "listener.name.client.plain.sasl.jaas.config": jaas,
                          "listener.name.ctrlsasl.plain.sasl.jaas.config": jaas,
                          "authorizer.class.name": STANDARD_AUTHORIZER,
                          "super.users": "User:admin;User:ANONYMOUS"})
    n = cluster.nodes[1]
    ports: dict[str, int] = {}
    for name in ("CLIENT", "CTRLSASL"):
        s = reserve_port()
        n._reserved.append(s)  # released once the node listens, as its other ports
        ports[name] = s.getsockname()[1]
    cluster.node_overrides[1] = {
        "listeners": f"PLAINTEXT://{n.bootstrap},CONTROLLER://{n.controller_address},"
                     f"CLIENT://127.0.0.1:{ports['CLIENT']},"
                     f"CTRLSASL://127.0.0.1:{ports['CTRLSASL']}",
        "advertised.listeners": f"PLAINTEXT://{n.bootstrap},"
                                f"CLIENT://127.0.0.1:{ports['CLIENT']}"}
    cluster.start()
    cluster.wait_formed()
    cluster.wait_until("the broker serves", lambda: not isinstance(
        md := cluster.metadata(1), str) and len(md.brokers) == 1 or "not yet", 60)
    cluster.ports = ports  # type: ignore[attr-defined]
    yield cluster
    cluster.stop()


def _client(cluster: Cluster, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports['CLIENT']}",
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.username": user, "sasl.password": USERS[user]})


def _wire(port: int, user: str, message, version: int):
    return plain_request("127.0.0.1", port, user, USERS[user], message, version,
                         request_timeout_ms=20000)


def _code(future, timeout: float = 30) -> int:
    try:
        future.result(timeout)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def _topics(cluster: Cluster) -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return set(admin.list_topics(timeout=15).topics)


def _create(names: list[str]) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=1,
                                                      replication_factor=1) for n in names],
                               timeout_ms=20000)


def test_the_broker_checks_before_forwarding_and_keeps_the_order(node):
    super_admin = AdminClient({"bootstrap.servers": node.bootstrap})  # ANONYMOUS: super user
    for f in super_admin.create_acls([AclBinding(
            ResourceType.TOPIC, "bob-", ResourcePatternType.PREFIXED, "User:bob", "*", op,
            AclPermissionType.ALLOW) for op in (AclOperation.CREATE, AclOperation.DELETE)]
    ).values():
        f.result(15)
    client_port = node.ports["CLIENT"]
    made = _wire(client_port, "bob", _create(["bob-a", "other-b", "bob-c"]), 7)
    assert [(t.name, t.error_code) for t in made.topics] == [
        ("bob-a", 0), ("other-b", TAF), ("bob-c", 0)]
    node.wait_until("bob's topics in the broker's image", lambda: {"bob-a", "bob-c"} <= _topics(
        node) or "not yet", 30)
    assert "other-b" not in _topics(node)
    gone = _wire(client_port, "bob", DeleteTopicsRequest(
        topic_names=["bob-c", "bob-a-missing", "other-b"], timeout_ms=20000), 5)
    assert [(r.name, r.error_code) for r in gone.responses] == [
        ("bob-c", 0), ("bob-a-missing", Errors.UNKNOWN_TOPIC_OR_PARTITION), ("other-b", TAF)]

    alice = _client(node, "alice")
    assert _code(alice.delete_topics(["bob-a"])["bob-a"]) == TAF
    assert _code(alice.create_partitions([NewPartitions("bob-a", 2)])["bob-a"]) == TAF
    change = ConfigResource(ResourceType.TOPIC, "bob-a", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert _code(alice.incremental_alter_configs([change])[change]) == TAF
    res = ConfigResource(ResourceType.TOPIC, "bob-a")
    configs = super_admin.describe_configs([res])[res].result(15)
    assert configs["retention.ms"].value != "1" and "bob-a" in _topics(node)


def test_a_client_on_a_controller_listener_is_checked_there(node):
    super_admin = AdminClient({"bootstrap.servers": node.bootstrap})
    super_admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
    ctrl_port = node.ports["CTRLSASL"]
    made = _wire(ctrl_port, "alice", _create(["alice-direct"]), 7)
    assert [(t.name, t.error_code) for t in made.topics] == [("alice-direct", TAF)]
    gone = _wire(ctrl_port, "alice", DeleteTopicsRequest(topic_names=["kept"],
                                                         timeout_ms=20000), 5)
    assert [(r.name, r.error_code) for r in gone.responses] == [("kept", TAF)]
    assert "alice-direct" not in _topics(node) and "kept" in _topics(node)


def test_the_controllers_own_apis_need_acls_on_the_cluster(node):
    """CLUSTER_ACTION for what brokers and voters send, ALTER for UnregisterBroker and
    CreateAcls, DESCRIBE for DescribeQuorum (on the broker's listener too): refused whole,
    nothing written."""
    ctrl, client = node.ports["CTRLSASL"], node.ports["CLIENT"]
    quorum = DescribeQuorumRequest(topics=[dqr.TopicData(
        topic_name="__cluster_metadata", partitions=[dqr.PartitionData(partition_index=0)])])
    answers = {
        "heartbeat": _wire(ctrl, "alice", BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=1, want_shut_down=True), 1).error_code,
        "unregister": _wire(ctrl, "alice", UnregisterBrokerRequest(broker_id=1), 0).error_code,
        "producer_ids": _wire(ctrl, "alice", AllocateProducerIdsRequest(
            broker_id=1, broker_epoch=1), 0).error_code,
        "vote": _wire(ctrl, "alice", VoteRequest(topics=[]), 1).error_code,
        "quorum_on_controller": _wire(ctrl, "alice", quorum, 1).error_code,
        "quorum_on_broker": _wire(client, "alice", quorum, 1).error_code,
        "grant_herself_all": _wire(ctrl, "alice", CreateAclsRequest(creations=[AclCreation(
            resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
            principal="User:alice", host="*", operation=2, permission_type=3)]),
            3).results[0].error_code,
    }
    assert answers == dict.fromkeys(answers, CAF)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    assert len(admin.describe_cluster().result(15).nodes) == 1  # registered, not shut down
    assert admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(15) == []
