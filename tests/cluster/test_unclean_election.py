"""unclean.leader.election.enable on real processes (issue 14): when the last in-sync
replica of a partition dies, a topic that allows it gets a leader from outside the ISR
(the records only the dead leader had are lost, as Kafka warns); any other topic stays
offline until that broker comes back."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ON, OFF = "uncl-on", "uncl-off"


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


def consume(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """The first ``expected`` records of ``topic``-0 (fewer if not there within 20 s)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < expected:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(log start, high watermark) of ``topic``-0 as its leader answers ListOffsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_the_last_in_sync_replica_dies(cluster_factory):
    cluster = cluster_factory(replication_proxied=True, overrides={
        "replica.lag.time.max.ms": "2000", "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500"}).start()
    cluster.wait_formed()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name, configs in ((ON, {"unclean.leader.election.enable": "true"}), (OFF, {})):
        admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[1, 2]],
                                      config=configs)])[name].result(timeout=20)

    def state(topic: str, node: int = 3):
        p = cluster.partitions(node, topic)
        return p if isinstance(p, str) else (p[0].leader, tuple(sorted(p[0].isr)))

    def until(what: str, topic: str, expected, timeout: float = 30.0) -> None:
        cluster.wait_until(f"{topic}: {what}", lambda: state(topic) == expected
                           or f"{state(topic)}", timeout=timeout)

    for t in (ON, OFF):
        until("fully in sync", t, (1, (1, 2)))
    early = [f"early{i}".encode() for i in range(20)]
    late = [f"late{i}".encode() for i in range(20)]
    for t in (ON, OFF):
        produce(cluster.bootstrap, t, early)
        # the leader's high watermark is the least log end of the ISR: broker 2 has them
        cluster.wait_until(f"{t}: broker 2 has the early records", lambda t=t: end_offsets(
            cluster.nodes[1].bootstrap, t) == (0, len(early)) or "not yet")
    cluster.rnet.cut(2, 1)  # broker 2 no longer reaches leader 1...
    for t in (ON, OFF):
        produce(cluster.bootstrap, t, late)  # ...so these are on broker 1 only (acks=1)
    for t in (ON, OFF):  # and it falls behind: replica.lag.time.max.ms later, out of the ISR
        until("2 out of the ISR", t, (1, (1,)), timeout=20)
    cluster.nodes[1].kill()
    until("unclean leader 2", ON, (2, (2,)), timeout=20)
    assert state(OFF) == (-1, (1,))  # offline: only broker 1 had every record
    assert end_offsets(cluster.nodes[2].bootstrap, ON) == (0, len(early))  # late ones lost
    assert consume(cluster.nodes[2].bootstrap, ON, len(early)) == early
