"""Exactly-once in a KIP-848 consumer group: two consume-transform-produce processors
(confluent-kafka 2.16, ``group.protocol=consumer``, ``send_offsets_to_transaction``: the
TxnOffsetCommit carries the member id and member epoch) share a 3-partition input; they
are killed with -9 in turn and restarted while the input keeps arriving, so partitions move
between members mid-stream. ``output`` read with read_committed finally holds exactly one
transformed record per input record, and the group's committed offsets are the input's ends.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.consume import consume_values

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 1500
PARTITIONS = 3
OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "4000",
    "group.consumer.min.session.timeout.ms": "3000",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("consumer-protocol-eos")
    with BrokerProcess(d / "data", OVERRIDES) as b:
        yield b


def read_committed(bootstrap: str, topic: str, want: int, wait_s: float) -> list[bytes]:
    return consume_values({"bootstrap.servers": bootstrap, "group.id": "verify",
                           "enable.auto.commit": False, "isolation.level": "read_committed"},
                          topic, PARTITIONS, want, wait_s)


def start(bootstrap: str, src: str, dst: str, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.eos_processor", bootstrap, src, dst, f"g-{src}",
         f"txn-{src}-{name}", "consumer"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_two_processors_killed_in_turn_output_each_record_once(broker):
    bs = broker.bootstrap
    src, dst = "eos848-in", "eos848-out"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(src, PARTITIONS), NewTopic(dst, PARTITIONS)]).values():
        f.result(15)

    def feed() -> None:  # the input keeps arriving while processors die and partitions move
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
        for i in range(RECORDS):
            p.produce(src, key=b"%d" % i, value=b"%06d" % i)
            if i % 10 == 9:
                p.poll(0)
                time.sleep(0.05)
        assert p.flush(30) == 0

    feeder = threading.Thread(target=feed)
    feeder.start()
    procs = {name: start(bs, src, dst, name) for name in ("a", "b")}
    rng = random.Random(848)
    progress = []
    try:
        for i in range(4):
            time.sleep(rng.uniform(1.0, 3.0))  # a random moment: mid-transaction, mid-rebalance
            victim = "ab"[i % 2]
            procs[victim].kill()  # kill -9
            procs[victim].wait()
            for name, proc in procs.items():
                if name == victim or proc.poll() is not None:
                    procs[name] = start(bs, src, dst, name)
            progress.append(len(read_committed(bs, dst, 0, 0.5)))
        feeder.join()
        got = read_committed(bs, dst, RECORDS, 5)
        deadline = time.monotonic() + 120
        while len(got) < RECORDS and time.monotonic() < deadline:
            for name, proc in procs.items():  # a fenced or rebalanced run exits: start another
                if proc.poll() is not None:
                    procs[name] = start(bs, src, dst, name)
            got = read_committed(bs, dst, RECORDS, 5)
        group = admin.describe_consumer_groups([f"g-{src}"])[f"g-{src}"].result(15)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
        feeder.join()
    assert any(0 < n < RECORDS for n in progress), f"no kill landed mid-stream: {progress}"
    assert len(got) == RECORDS, f"{len(got)} records, {len(got) - len(set(got))} duplicates"
    assert sorted(got) == [b"T:%06d" % i for i in range(RECORDS)]
    assert group.type.name == "CONSUMER", group.type
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(f"g-{src}")])[f"g-{src}"].result(15)
    offsets = {tp.partition: tp.offset for tp in committed.topic_partitions if tp.topic == src}
    ends = {}
    c = Consumer({"bootstrap.servers": bs, "group.id": "ends"})
    try:
        for p in range(PARTITIONS):
            ends[p] = c.get_watermark_offsets(TopicPartition(src, p), 10)[1]
    finally:
        c.close()
    # each input partition's committed offset is its end (the control records of the
    # producer's transactions are not in the input: it is not transactional)
    assert offsets == ends
