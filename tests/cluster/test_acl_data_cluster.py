"""Data-path ACLs on a three-node KRaft cluster: written through one broker, enforced by all.

Each node has PLAINTEXT and CONTROLLER listeners for the cluster's own traffic
(``User:ANONYMOUS``, a super user here, as a cluster whose internal listeners are not
authenticated must make it: followers fetch with CLUSTER_ACTION) and CLIENT
(SASL_PLAINTEXT, PLAIN users) for the test's principals. The ACLs travel in the metadata
log (AccessControlEntryRecord) to every broker's SecurityImage; each broker's Produce,
Fetch and group handlers decide from its own image.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from spool.protocol._generated import MetadataRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors
from tests.helpers.acl import STANDARD_AUTHORIZER, plain_request
from tests.helpers.cluster_proc import COMBINED, Cluster, reserve_port
from tests.helpers.secure_broker import plain_jaas

pytestmark = pytest.mark.timeout(300)

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("acl-data-cluster"), roles=(COMBINED,) * 3,
                proxied=False, overrides={
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                    "CONTROLLER:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
                    "sasl.enabled.mechanisms": "PLAIN",
                    "listener.name.client.plain.sasl.jaas.config": plain_jaas(USERS),
                    "authorizer.class.name": STANDARD_AUTHORIZER,
                    "super.users": "User:admin;User:ANONYMOUS"})
    ports: dict[int, int] = {}
    for node_id, n in c.nodes.items():
        s = reserve_port()
        n._reserved.append(s)  # released once the node listens, as its other ports
        ports[node_id] = s.getsockname()[1]
        c.node_overrides[node_id] = {
            "listeners": f"PLAINTEXT://{n.bootstrap},CONTROLLER://{n.controller_address},"
                         f"CLIENT://127.0.0.1:{ports[node_id]}",
            "advertised.listeners": f"PLAINTEXT://{n.bootstrap},"
                                    f"CLIENT://127.0.0.1:{ports[node_id]}"}
    c.start()
    c.wait_formed()
    c.wait_until("every broker serves", lambda: all(
        not isinstance(md := c.metadata(i), str) and len(md.brokers) == 3
        for i in c.nodes) or "not yet", 90)
    c.client_ports = ports  # type: ignore[attr-defined]
    yield c
    c.stop()


def conf(cluster, user: str, node: int, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{cluster.client_ports[node]}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user], **extra}


def metadata_code(cluster, node: int, user: str, topic: str) -> int:
    resp = plain_request("127.0.0.1", cluster.client_ports[node], user, USERS[user],
                         MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                         allow_auto_topic_creation=False), 12)
    return resp.topics[0].error_code


def produce(cluster, user: str, node: int, topic: str, n: int) -> list:
    """Delivery errors (None: delivered) of ``n`` acks=all records."""
    reports: list = []
    p = Producer(conf(cluster, user, node, acks="all", **{"message.timeout.ms": 20000}))
    for i in range(n):
        p.produce(topic, f"r{i}".encode(), on_delivery=lambda err, msg: reports.append(err))
    p.flush(30)
    return reports


def test_acls_written_through_one_broker_hold_on_every_broker(cluster):
    topic, group = f"shared-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf(cluster, "admin", 1))
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    cluster.wait_until("the topic is everywhere", lambda: all(
        metadata_code(cluster, i, "admin", topic) == 0 for i in cluster.nodes) or "not yet", 60)
    # no ACL yet: refused on every broker, the same answer for alice and bob
    assert {metadata_code(cluster, i, "alice", topic) for i in cluster.nodes} == {
        Errors.TOPIC_AUTHORIZATION_FAILED}
    assert [e.code() for e in produce(cluster, "alice", 3, topic, 1)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED]
    acls = [AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                       AclPermissionType.ALLOW)
            for rtype, name, op in ((ResourceType.TOPIC, topic, AclOperation.WRITE),
                                    (ResourceType.TOPIC, topic, AclOperation.READ),
                                    (ResourceType.GROUP, group, AclOperation.READ))]
    for f in admin.create_acls(acls, request_timeout=30).values():  # through node 1 only
        f.result()
    cluster.wait_until("every broker has the ACLs", lambda: all(
        metadata_code(cluster, i, "alice", topic) == 0 for i in cluster.nodes) or "not yet", 60)
    # partitions led by all three nodes: each broker's Produce check, and acks=all needs the
    # followers' fetches (User:ANONYMOUS, a super user) to go through
    assert produce(cluster, "alice", 3, topic, 30) == [None] * 30
    assert {metadata_code(cluster, i, "bob", topic) for i in cluster.nodes} == {
        Errors.TOPIC_AUTHORIZATION_FAILED}
    consumer = Consumer(conf(cluster, "alice", 2, **{"group.id": group,
                                                     "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([topic])
        values = set()
        for _ in range(120):
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                values.add(m.value())
            if len(values) == 30:
                break
        assert values == {f"r{i}".encode() for i in range(30)}
    finally:
        consumer.close()
