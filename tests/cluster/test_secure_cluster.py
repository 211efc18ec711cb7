"""A cluster whose own traffic is authenticated (issue 16): brokers replicate over a TLS
inter-broker listener and the quorum talks over an SSL controller listener that requires client
certificates, configured with Kafka's keys only.

Each node (broker and controller) has three listeners: PLAINTEXT for the test's clients,
INTERNAL (``INTERNAL_PROTOCOL``, ``inter.broker.listener.name``; SSL until SASL_SSL is
served, then SASL_SSL with PLAIN) and CONTROLLER (SSL, ``ssl.client.auth=required``).
Certificates come from a test CA; every node's own certificate names 127.0.0.1, so Kafka's
default ``ssl.endpoint.identification.algorithm=https`` holds. With SASL, the credentials a
broker presents are the ``username``/``password`` of its INTERNAL listener's JAAS config, as
Kafka's broker takes them.

* The cluster forms (registration, heartbeats and Raft over mTLS), a topic with replication
  factor 3 gets a full ISR (replica fetches over INTERNAL), and kill -9 of a partition leader
  while an idempotent acks=all producer writes loses no acknowledged record: the history
  checker reads every record through a consumer and from every replica's files
  (bench/reliability/replication.py's round), and the killed broker rejoins the ISR.
"""

from __future__ import annotations

import socket

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.replication import (
    OVERRIDES,
    PARTITIONS,
    QUIET,
    TOPIC,
    Writer,
    full_isr,
    judge,
    one_round,
)
from tests.helpers.certs import Pki
from tests.helpers.cluster_proc import Cluster, reserve_port
from tests.helpers.history import RecordHistory

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
INTERNAL_PROTOCOL = "SSL"


def internal_jaas(password: str = BROKER_PASSWORD) -> str:
    """The INTERNAL listener's PLAIN config: the users it accepts, and the login it presents."""
    return (f'{PLAIN_LOGIN} required username="{BROKER_USER}" password="{password}" '
            f'user_{BROKER_USER}="{BROKER_PASSWORD}";')


def secure_cluster(cluster_factory, tmp_path, *, wrong_password_node: int | None = None
                   ) -> Cluster:
    pki = Pki(tmp_path / "pki")
    cluster = cluster_factory(proxied=False, overrides={
        **OVERRIDES,
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,INTERNAL:" + INTERNAL_PROTOCOL + ",CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem),
        "listener.name.controller.ssl.client.auth": "required",
    })
    held: list[socket.socket] = []
    for n in cluster.nodes.values():
        ident = pki.issue(f"CN=node{n.node_id}", hosts=("127.0.0.1",))
        s = reserve_port()
        held.append(s)
        n._reserved.append(s)  # (released once the node listens, as its other ports)
        internal = f"127.0.0.1:{s.getsockname()[1]}"
        cluster.node_overrides[n.node_id] = {
            "listeners": f"PLAINTEXT://{n.bootstrap},INTERNAL://{internal},"
                         f"CONTROLLER://{n.controller_address}",
            "advertised.listeners": f"PLAINTEXT://{n.bootstrap},INTERNAL://{internal}",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ident.keystore_pem),
            "listener.name.internal.plain.sasl.jaas.config": internal_jaas(
                "wrong-secret" if n.node_id == wrong_password_node else BROKER_PASSWORD),
        }
    cluster.start()
    # formed: every broker lists the three (registered over mTLS, image from Raft over mTLS)
    cluster.wait_until("every broker lists three brokers and a controller", lambda: all(
        not isinstance(md := cluster.metadata(b.node_id), str) and len(md.brokers) == 3
        and md.controller_id > 0 for b in cluster.brokers) or "not yet", 90)
    return cluster


def test_replication_over_sasl_ssl_survives_a_leader_kill(cluster_factory, tmp_path):
    cluster = secure_cluster(cluster_factory, tmp_path)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": QUIET})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
        "min.insync.replicas": "2"})])[TOPIC].result(timeout=30)
    cluster.wait_until("every ISR full", full_isr(cluster, TOPIC, PARTITIONS), 60)
    history = RecordHistory()
    writer = Writer(cluster.bootstrap, history).start()
    try:
        r = one_round(cluster, history, 1)  # kill -9 a leader, new leader, restart, ISR full
    finally:
        unfinished = writer.stop()
    assert r["new_leader"] != r["killed"] and r["epoch_after"] > r["epoch_before"], r
    assert unfinished == 0 and writer.fatal is None, writer.errors
    assert len(history.acked()) > 0, history.counts()
    j = judge(cluster, history)
    assert sorted(j["records_read"]) == ["consumer", "replica 1", "replica 2", "replica 3"]
    assert j["violations"] == [], "\n".join(j["violations"][:30])
    assert j["diverged"] == [], "\n".join(j["diverged"])
    for n in cluster.nodes.values():
        log = n.log_tail(10**9)
        assert "Traceback" not in log and "authentication failed" not in log, n.node_id


pytestmark = pytest.mark.timeout(300)
