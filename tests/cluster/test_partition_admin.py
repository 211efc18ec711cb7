"""Preferred leader elections and partition reassignments on a real 3-node cluster, asked
through client libraries (confluent-kafka's AdminClient.elect_leaders, kafka-python's
alter/list_partition_reassignments) at any broker: the broker forwards them to the active
controller, the metadata every broker serves shows the result (issue 14)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KTopicPartition
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient

from spool.protocol.errors import Errors

TOPIC = "admin-pa"
# a broker that stops heartbeating is fenced within seconds
FAST_FENCING = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}


def partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """{partition: (leader, replicas, sorted isr)} as one broker's Metadata answer has them."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        return {}
    return {p.id: (p.leader, list(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def everywhere(cluster, what: str, expected: dict, brokers=None, timeout: float = 30.0):
    """Wait until every (live) broker's metadata shows ``expected`` for TOPIC."""
    def check():
        seen = {b.node_id: partitions(b.bootstrap, TOPIC) for b in brokers or cluster.brokers}
        wrong = {n: p for n, p in seen.items()
                 if {k: v for k, v in p.items() if k in expected} != expected}
        return True if not wrong else f"{wrong}"
    cluster.wait_until(what, check, timeout=timeout)


def elect(bootstrap: str, *pids: int) -> dict[int, int]:
    """Preferred elections through confluent-kafka; {partition: error code (0: elected)}."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # (confluent-kafka 2.16's elect_leaders fails on its request_timeout keyword: defaults)
    f = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, p) for p in pids])
    try:
        result = f.result(timeout=20)
    except KafkaException as e:
        raise AssertionError(f"elect_leaders failed: {e}") from e
    return {tp.partition: 0 if err is None else err.code() for tp, err in result.items()}


def formed(cluster_factory, overrides: dict[str, str]) -> tuple:
    """A formed cluster with these broker overrides, and an AdminClient on it."""
    cluster = cluster_factory(overrides=overrides).start()
    cluster.wait_formed()
    return cluster, AdminClient({"bootstrap.servers": cluster.bootstrap})


def test_preferred_election_and_reassignments_through_any_broker(cluster_factory):
    cluster, admin = formed(cluster_factory,
                            {"auto.leader.rebalance.enable": "false", **FAST_FENCING})
    fs = admin.create_topics([NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2, 3], [2, 3, 1]])],
                             request_timeout=15)
    fs[TOPIC].result(timeout=20)
    too_many = admin.create_topics([NewTopic("admin-rf4", 1, 4)], request_timeout=15)
    with pytest.raises(KafkaException) as e:
        too_many["admin-rf4"].result(timeout=20)
    assert (e.value.args[0].code(), e.value.args[0].str()) == (
        Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 4 time(s): The "
        "target replication factor of 4 cannot be reached because only 3 broker(s) are "
        "registered.")
    everywhere(cluster, "the topic everywhere", {0: (1, [1, 2, 3], [1, 2, 3]),
                                                 1: (2, [2, 3, 1], [1, 2, 3])})
    b2, b3 = cluster.brokers[1].bootstrap, cluster.brokers[2].bootstrap
    kp = KafkaAdminClient(bootstrap_servers=b3, request_timeout_ms=20000)
    try:
        # the preferred replica leads already
        assert elect(b2, 0) == {0: Errors.ELECTION_NOT_NEEDED}
        # a reorder completes at once: the leader stays, preferred is now 2
        assert kp.alter_partition_reassignments({KTopicPartition(TOPIC, 0): [2, 1, 3]}) == {
            KTopicPartition(TOPIC, 0): None}
        everywhere(cluster, "the reorder", {0: (1, [2, 1, 3], [1, 2, 3])})
        assert kp.list_partition_reassignments() == {}
        assert elect(b3, 0) == {0: 0}
        everywhere(cluster, "broker 2 leading", {0: (2, [2, 1, 3], [1, 2, 3])})
        # shrinking to replicas in sync completes at once too
        kp.alter_partition_reassignments({KTopicPartition(TOPIC, 0): [2, 3]})
        everywhere(cluster, "the shrink", {0: (2, [2, 3], [2, 3])})
        # errors, per partition, as Kafka's
        assert kp.alter_partition_reassignments({
            KTopicPartition(TOPIC, 0): [2, 9], KTopicPartition(TOPIC, 1): None}) == {
            KTopicPartition(TOPIC, 0): kerrors.InvalidReplicationAssignmentError,
            KTopicPartition(TOPIC, 1): kerrors.NoReassignmentInProgressError}
        # a move to a broker that is down waits: listed until cancelled
        cluster.nodes[1].kill()
        def fenced_and_controller_known():
            md = AdminClient({"bootstrap.servers": b2}).list_topics(timeout=10)
            return (1 not in md.brokers and md.controller_id in (2, 3)) or f"{md.brokers}"
        cluster.wait_until("broker 1 fenced", fenced_and_controller_known)
        kp.close()  # kafka-python keeps asking the controller it knew (maybe node 1)
        kp = KafkaAdminClient(bootstrap_servers=b3, request_timeout_ms=20000)
        assert kp.alter_partition_reassignments({KTopicPartition(TOPIC, 0): [3, 1]}) == {
            KTopicPartition(TOPIC, 0): None}
        live = cluster.brokers[1:]
        everywhere(cluster, "the move started", {0: (2, [3, 1, 2], [2, 3])}, live)
        assert kp.list_partition_reassignments() == {KTopicPartition(TOPIC, 0): {
            "replicas": [3, 1, 2], "adding_replicas": [1], "removing_replicas": [2]}}
        assert kp.alter_partition_reassignments({KTopicPartition(TOPIC, 0): None}) == {
            KTopicPartition(TOPIC, 0): None}
        everywhere(cluster, "the move cancelled", {0: (2, [3, 2], [2, 3])}, live)
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()


def test_the_controller_moves_leaders_back_to_preferred_replicas_by_itself(cluster_factory):
    cluster, admin = formed(cluster_factory,
                            {"leader.imbalance.check.interval.seconds": "1", **FAST_FENCING})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])],
                        request_timeout=15)[TOPIC].result(timeout=20)
    everywhere(cluster, "the topic everywhere", {0: (1, [1, 2, 3], [1, 2, 3])})
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:  # 3 becomes the preferred replica; nobody asks for an election
        kp.alter_partition_reassignments({KTopicPartition(TOPIC, 0): [3, 1, 2]})
    finally:
        kp.close()
    everywhere(cluster, "broker 3 leading", {0: (3, [3, 1, 2], [1, 2, 3])})
    # its broker dies: leadership moves; back and caught up, it leads again
    cluster.nodes[3].kill()
    everywhere(cluster, "broker 1 leading", {0: (1, [3, 1, 2], [1, 2])}, cluster.brokers[:2])
    cluster.nodes[3].start()
    everywhere(cluster, "broker 3 leading again", {0: (3, [3, 1, 2], [1, 2, 3])}, timeout=60)


def test_a_reassignment_moves_the_records_then_drops_the_old_replica(cluster_factory):
    """Kafka's three steps on real processes: the new replica fetches what the leader has,
    the leader puts it in the ISR, the controller drops the old replica (which deletes its
    copy) and the new replica leads with every record."""
    cluster, admin = formed(cluster_factory, {"replica.lag.time.max.ms": "3000"})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1]])],
                        request_timeout=15)[TOPIC].result(timeout=20)
    everywhere(cluster, "the topic everywhere", {0: (1, [1], [1])})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    values = [f"v{i}".encode() for i in range(500)]
    for v in values:
        producer.produce(TOPIC, v, partition=0)
    assert producer.flush(30) == 0
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        assert kp.alter_partition_reassignments({KTopicPartition(TOPIC, 0): [2, 3]}) == {
            KTopicPartition(TOPIC, 0): None}
        everywhere(cluster, "the move done", {0: (2, [2, 3], [2, 3])}, timeout=60)
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()
    cluster.wait_until("broker 1 deleted its replica", lambda: not any(
        (cluster.nodes[1].data_dir).glob(f"{TOPIC}-0")) or "still there")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "pa-move",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == values
