"""A cluster whose own traffic is authenticated (issue 16): brokers replicate over a SASL_SSL
inter-broker listener and the quorum talks over an SSL controller listener that requires client
certificates, configured with Kafka's keys only.

Each node (broker and controller) has three listeners (tests/helpers/secure_cluster.py):
PLAINTEXT for the test's clients, INTERNAL (SASL_SSL, PLAIN, ``inter.broker.listener.name``)
and CONTROLLER (SSL, ``ssl.client.auth=required``). Certificates come from a test CA; every
node's own certificate names 127.0.0.1, so Kafka's default
``ssl.endpoint.identification.algorithm=https`` holds. The credentials a broker presents are
the ``username``/``password`` of its INTERNAL listener's JAAS config, as Kafka's broker takes
them. One cluster for the module.

* The cluster forms (registration, heartbeats and Raft over mTLS), a topic with replication
  factor 3 gets a full ISR (replica fetches over SASL_SSL), and kill -9 of a partition leader
  while an idempotent acks=all producer writes loses no acknowledged record: the history
  checker reads every record through a consumer and from every replica's files
  (bench/reliability/replication.py's round), and the killed broker rejoins the ISR.
* A broker restarted with a wrong inter-broker password logs the refusal once per peer (which
  client, which peer, mechanism and user, the broker's message; not the password) and replicates
  nothing: its replica of a partition broker 1 leads stays empty and leaves the ISR, while the
  other two hold every record. With the password fixed it catches up and rejoins the ISR.
* With Kafka's authorizer on and an ACL on the cluster resource, only the nodes' own
  principals (``super.users``: User:broker from SASL, User:CN=node<i> from the client
  certificates) may CLUSTER_ACTION: all of the above works through them, and the test's
  anonymous client fetching as a follower is refused.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

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
from spool.protocol._generated import FetchRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol.errors import error_name
from tests.helpers.cluster_proc import Cluster, ClusterNode
from tests.helpers.history import RecordHistory
from tests.helpers.raw_client import RawClient
from tests.helpers.replica_logs import log_end_offset
from tests.helpers.secure_cluster import (
    JAAS_KEY,
    internal_jaas,
    secure_cluster,
    wait_formed,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = secure_cluster(tmp_path_factory.mktemp("secure-cluster"), overrides=OVERRIDES,
                       authorizer=True)
    try:
        c.start()
        wait_formed(c)  # (registered over mTLS, the image from Raft over mTLS)
        # An ACL on the cluster resource: from now on only a super user (a broker's own
        # principal) may CLUSTER_ACTION (follower fetches, registrations, heartbeats, Raft)
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "logger": QUIET})
        for f in admin.create_acls([AclBinding(
                ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                "User:admin", "*", AclOperation.ALTER, AclPermissionType.ALLOW)]).values():
            f.result(timeout=30)
        yield c
    finally:
        c.stop()


def create_topic(cluster: Cluster, new: NewTopic) -> None:
    """CreateTopics through the AdminClient; NOT_CONTROLLER (a controller that has just won
    an election is not active yet) is asked again."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": QUIET})

    def create():
        try:
            admin.create_topics([new])[new.topic].result(timeout=30)
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:  # (an earlier try's)
                return True
            if e.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
            return f"{e}"
        return True

    cluster.wait_until(f"{new.topic} created", create, 60)


def log_since(node: ClusterNode, mark: int) -> str:
    return node.log_path.read_bytes()[mark:].decode(errors="replace")


def log_marks(cluster: Cluster) -> dict[int, int]:
    return {i: n.log_path.stat().st_size for i, n in cluster.nodes.items()}


def test_replication_over_sasl_ssl_survives_a_leader_kill(cluster):
    marks = log_marks(cluster)
    create_topic(cluster, NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}))
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
    for i, n in cluster.nodes.items():
        log = log_since(n, marks[i])
        assert "Traceback" not in log, (i, log[-3000:])
        # a peer killed between its TLS handshake and its first answer looks, to a client
        # without a keystore, like a server refusing it for lack of a certificate (an EOF
        # before any answer; spool.net reports that as an authentication failure): the kill
        # makes it, CI saw it once. Any other authentication failure is a real one.
        refused = [line for line in log.splitlines() if "authentication failed" in line
                   and "the peer closed the connection before answering" not in line]
        assert refused == [], (i, refused[:5])


def test_a_wrong_inter_broker_password_is_logged_and_replicates_nothing(cluster):
    topic = f"led-by-one-{uuid.uuid4().hex[:6]}"
    n3 = cluster.nodes[3]
    marks = log_marks(cluster)
    cluster.node_overrides[3][JAAS_KEY] = internal_jaas("wrong-secret")
    try:
        n3.restart()
        create_topic(cluster, NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                       config={"min.insync.replicas": "2"}))
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "logger": QUIET})
        for i in range(50):
            p.produce(topic, value=f"record-{i}".encode())
        assert p.flush(60) == 0
        cluster.wait_until("broker 3 logs a refusal", lambda: [
            line for line in log_since(n3, marks[3]).splitlines()
            if " ERROR " in line and "authentication failed" in line] or "none yet", 60)
        s = cluster.wait_until(f"{topic}-0's ISR without broker 3", lambda: (
            not isinstance(parts := cluster.partitions(1, topic), str)
            and 3 not in parts[0].isr and parts[0]) or f"{parts}", 60)
        assert (s.leader, s.replicas, s.isr) == (1, (1, 2, 3), (1, 2))
        ends = {n: log_end_offset(cluster.nodes[n].data_dir, topic, 0) for n in (1, 2, 3)}
        assert ends == {1: 50, 2: 50, 3: 0}
        log3 = log_since(n3, marks[3])
    finally:
        cluster.node_overrides[3][JAAS_KEY] = internal_jaas()
        n3.restart()
    errors = [line for line in log3.splitlines()
              if " ERROR " in line and "authentication failed" in line]
    # once per peer it fetches from (broker 1, and broker 2 for internal topics it leads),
    # however many times the fetcher retried
    peers = [line.split("NodeClient(", 1)[1].split(")", 1)[0] for line in errors]
    assert len(peers) == len(set(peers)), "\n".join(errors)
    assert errors, log3[-4000:]
    for line in errors:  # (a peer: broker 1's INTERNAL, and any other this broker follows)
        assert ("): authentication failed (SASL_SSL/PLAIN as broker): SASL_AUTHENTICATION_FAILED: "
                "Authentication failed: Invalid username or password (client replica-fetcher-3)"
                in line), "\n".join(errors)
    assert "wrong-secret" not in log3
    for n in (1, 2):  # the others authenticate each other and say nothing of the kind
        assert " ERROR " not in log_since(cluster.nodes[n], marks[n]), n
    # the password fixed, broker 3 catches up and is back in the ISR
    cluster.wait_until(f"{topic}-0's ISR full again", full_isr(cluster, topic, 1), 60)
    assert log_end_offset(n3.data_dir, topic, 0) == 50


def test_only_the_brokers_own_principals_may_fetch_as_followers(cluster):
    """The followers copy a record (acks=all, min.insync.replicas=3) although CLUSTER_ACTION
    is a super user's only: their fetches carry User:broker (SASL on INTERNAL). The test's own
    client (User:ANONYMOUS) asking the same as a follower is refused; as a consumer it reads."""
    topic = f"followed-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, NewTopic(topic, 1, 3, config={"min.insync.replicas": "3"}))
    cluster.wait_until(f"{topic}: ISR full", full_isr(cluster, topic, 1), 60)
    # acks=all with min.insync.replicas=3: acknowledged once both followers fetched it
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "logger": QUIET,
                  "message.timeout.ms": 30_000})
    delivered: list = []
    p.produce(topic, value=b"copied by both followers",
              on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(60) == 0 and delivered == [None], delivered

    def fetch(as_follower: bool) -> str:
        """Fetch v12 from the leader (as any broker names it now), as a follower of the
        partition or as a consumer; the partition's error, or why there is none yet."""
        parts = cluster.partitions(1, topic)
        if isinstance(parts, str):
            return parts
        s = parts[0]
        replica_id = next(r for r in s.replicas if r != s.leader) if as_follower else -1
        c = RawClient(cluster.nodes[s.leader].bootstrap, timeout=10)
        try:
            r = c.request(1, 12, FetchRequest(
                replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, topics=[FetchTopic(topic=topic, partitions=[
                    FetchPartition(partition=0, fetch_offset=0,
                                   partition_max_bytes=1 << 20)])]))
        finally:
            c.close()
        return error_name(r.responses[0].partitions[0].error_code)

    def answer(as_follower: bool):  # (a leadership move meanwhile: ask again)
        return lambda: ((e := fetch(as_follower)) != "NOT_LEADER_OR_FOLLOWER" and [e]) or e

    assert cluster.wait_until("a follower's fetch answered", answer(True), 30) == [
        "TOPIC_AUTHORIZATION_FAILED"]
    assert cluster.wait_until("a consumer's fetch answered", answer(False), 30) == ["NONE"]
