"""Coordinators move with their partitions (issue 14), on real processes: a consumer group
keeps its committed offsets when the leader of its ``__consumer_offsets`` partition is
killed -9 (it rejoins on the new coordinator and resumes from the committed offset), and
the exactly-once consume-transform-produce processor of the exactly-once issue, run on a
3-broker cluster while brokers are killed -9 and restarted, ends with exactly one output
per input (read_committed)."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import FindCoordinatorRequest
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.consume import consume_values
from tests.helpers.raw_client import RawClient

ROOT = Path(__file__).resolve().parents[2]
RACKS = ("a", "b", "c")
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
}
QUIET = {"log_level": 0}


def coordinator(bootstrap: str, key: str, key_type: int) -> int | str:
    """The node FindCoordinator names for a group (0) or transactional id (1), asking the
    first node of ``bootstrap``."""
    try:
        c = RawClient(bootstrap.split(",")[0])
        try:
            r = c.request(10, 3, FindCoordinatorRequest(key=key, key_type=key_type))
        finally:
            c.close()
    except (OSError, ConnectionError) as e:
        return f"{key}: {e}"
    return r.node_id if r.error_code == 0 else f"{key}: error {r.error_code}"


def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})]
                        )[name].result(timeout=30)


def fully_replicated(cluster, topic: str):
    """Every partition of ``topic`` led and with all three replicas in its ISR."""
    parts = cluster.partitions(next(n for n in cluster.nodes if cluster.nodes[n].alive), topic)
    if isinstance(parts, str):
        return parts
    if not parts or any(p.leader < 0 or len(p.isr) != 3 for p in parts.values()):
        return f"{topic}: {parts}"
    return parts


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **QUIET})
    for i in range(n):
        p.produce(topic, value=b"%06d" % i, partition=i % partitions)
    assert p.flush(60) == 0


def consume(consumer: Consumer, n: int, timeout_s: float) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        for m in consumer.consume(n - len(got), 1.0):
            assert m.error() is None, m.error()
            got.append(m)
    return got


@pytest.mark.timeout(300)
def test_a_group_keeps_its_offsets_when_its_coordinator_is_killed(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, overrides=OVERRIDES,
                              proxied=False).start()
    cluster.wait_formed()
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, 3)
    cluster.wait_until("the input replicated", lambda: fully_replicated(cluster, topic), 60)
    produce(cluster.bootstrap, topic, 300, 3)
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, **QUIET}
    c1 = Consumer(conf)
    c1.subscribe([topic])
    first = consume(c1, 120, 60)
    assert len(first) == 120
    committed = c1.commit(asynchronous=False)
    want = {tp.partition: tp.offset for tp in committed}
    coord = cluster.wait_until("the group's coordinator",
                               lambda: coordinator(cluster.bootstrap, group, 0))
    cluster.wait_until("__consumer_offsets replicated",
                       lambda: fully_replicated(cluster, "__consumer_offsets"), 60)
    cluster.nodes[coord].kill()
    killed_at = time.monotonic()
    try:
        new = cluster.wait_until(
            "a new coordinator",
            lambda: (n if isinstance(n := coordinator(cluster.live_bootstrap([coord]), group, 0),
                                     int) and n != coord else f"coordinator {n}"), 60)
        assert new != coord
        # the group's members rejoin on the new coordinator, which has the offsets
        seen = c1.committed([TopicPartition(topic, p) for p in range(3)], timeout=60)
        assert {tp.partition: tp.offset for tp in seen} == want
        print(f"coordinator {coord} killed; {new} answered the committed offsets "
              f"{time.monotonic() - killed_at:.2f} s later")
        rest = consume(c1, 60, 60)
        assert len(rest) == 60
        final = {tp.partition: tp.offset for tp in c1.commit(asynchronous=False)}
        c1.close()
        c2 = Consumer({**conf, "bootstrap.servers": cluster.live_bootstrap([coord])})
        c2.subscribe([topic])
        tail = consume(c2, 120, 90)
        c2.close()
    finally:
        cluster.nodes[coord].start()
    values = [m.value() for m in first + rest + tail]
    assert sorted(values) == [b"%06d" % i for i in range(300)], "lost or duplicated records"
    # the second consumer started exactly where the first one last committed (a partition
    # it never read from has no offset: from the start, auto.offset.reset=earliest)
    starts: dict[int, int] = {}
    for m in tail:
        starts.setdefault(m.partition(), m.offset())
    assert starts == {p: max(final.get(p, 0), 0) for p in starts}


def read_committed(bootstrap: str, topic: str, partitions: int, want: int,
                   wait_s: float) -> list[bytes]:
    return consume_values(
        {"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:6]}",
         "enable.auto.commit": False, "isolation.level": "read_committed", **QUIET},
        topic, partitions, want, wait_s)


def start_processor(bootstrap: str, src: str, dst: str, log: Path) -> subprocess.Popen:
    """The processor, its librdkafka log appended to ``log``."""
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.eos_processor", bootstrap, src, dst,
             f"g-{src}", f"txn-{src}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=f)


@pytest.mark.timeout(600)
def test_exactly_once_processing_survives_broker_kills(cluster_factory, tmp_path):
    records, partitions = 3000, 3
    plog = tmp_path / "processor.log"
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, overrides=OVERRIDES,
                              proxied=False).start()
    cluster.wait_formed()
    name = uuid.uuid4().hex[:6]
    src, dst = f"eos-{name}-in", f"eos-{name}-out"
    create(cluster.bootstrap, src, partitions)
    create(cluster.bootstrap, dst, partitions)
    for t in (src, dst):
        cluster.wait_until(f"{t} replicated", lambda t=t: fully_replicated(cluster, t), 60)
    bs = cluster.bootstrap

    def feed() -> None:  # the input keeps arriving while brokers die
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 300_000, **QUIET})
        for i in range(records):
            p.produce(src, key=b"%d" % i, value=b"%06d" % i)
            if i % 10 == 9:
                p.poll(0)
                time.sleep(0.1)  # 100 records/s: the kills land while input arrives
        assert p.flush(300) == 0

    feeder = threading.Thread(target=feed)
    feeder.start()
    rng = random.Random(14)
    proc = start_processor(bs, src, dst, plog)
    restarts = 0
    killed: list[str] = []
    progress: list[int] = []
    try:
        for k in range(6):  # the transaction's coordinator, the group's, then another broker
            time.sleep(rng.uniform(2.0, 5.0))
            txn = cluster.wait_until("the transaction coordinator",
                                     lambda: coordinator(bs, f"txn-{src}", 1), 30)
            group = cluster.wait_until("the group coordinator",
                                       lambda: coordinator(bs, f"g-{src}", 0), 30)
            if k % 3 == 0:
                victim, what = cluster.nodes[txn], "transaction coordinator"
            elif k % 3 == 1:
                victim, what = cluster.nodes[group], "group coordinator"
            else:
                victim = cluster.nodes[1 + k % 3]
                what = "another broker"
            killed.append(f"{victim.node_id} ({what})")
            victim.kill()
            time.sleep(rng.uniform(1.0, 3.0))
            if proc.poll() is not None:  # a failed transaction exits: start another
                proc = start_processor(bs, src, dst, plog)
                restarts += 1
            victim.start()
            for t in (src, dst):
                cluster.wait_until(f"{t} back in sync", lambda t=t: fully_replicated(cluster, t),
                                   90)
            progress.append(len(read_committed(bs, dst, partitions, records, 2)))
        feeder.join(300)
        got = read_committed(bs, dst, partitions, records, 5)
        deadline = time.monotonic() + 180
        while len(got) < records and time.monotonic() < deadline:
            if proc.poll() is not None:
                proc = start_processor(bs, src, dst, plog)
                restarts += 1
            time.sleep(1)
            got = read_committed(bs, dst, partitions, records, 5)
    finally:
        proc.kill()
        proc.wait()
        feeder.join(5)
    print(f"killed: {', '.join(killed)}; outputs after each restart: {progress}; "
          f"{restarts} processor restarts")
    # the coordinators' kills (the first two) landed while input was still being processed
    assert any(n < records for n in progress[:2]), f"no kill landed mid-stream: {progress}"
    assert len(got) == records, f"{len(got)} records, {len(got) - len(set(got))} duplicates"
    assert sorted(got) == [b"T:%06d" % i for i in range(records)]
