"""The exactly-once acceptance test: a consume-transform-produce processor
(confluent-kafka, send_offsets_to_transaction) is kill -9'ed at random moments ten
times and restarted; ``output`` read with read_committed finally holds exactly one
transformed record per input record."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.consume import consume_values

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 4000
PARTITIONS = 3


def read_committed(bootstrap: str, topic: str, want: int, wait_s: float) -> list[bytes]:
    return consume_values({"bootstrap.servers": bootstrap, "group.id": "verify",
                           "enable.auto.commit": False, "isolation.level": "read_committed"},
                          topic, PARTITIONS, want, wait_s)


def start_processor(bootstrap: str, src: str, dst: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.eos_processor", bootstrap, src, dst, f"g-{src}",
         f"txn-{src}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.timeout(300)
def test_processor_killed_ten_times_outputs_each_record_once(fresh_broker, topic_name):
    fresh_broker.overrides.update({"transaction.state.log.num.partitions": "3",
                                   "offsets.topic.num.partitions": "3"})
    fresh_broker.start()
    bs = fresh_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(src, PARTITIONS), NewTopic(dst, PARTITIONS)]).values():
        f.result(10)
    def feed() -> None:  # the input keeps arriving while the processor is killed
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
        for i in range(RECORDS):
            p.produce(src, key=b"%d" % i, value=b"%06d" % i)
            if i % 10 == 9:
                p.poll(0)
                time.sleep(0.05)
        assert p.flush(30) == 0

    feeder = threading.Thread(target=feed)
    feeder.start()
    rng = random.Random(6)
    progress = []
    for _ in range(10):
        proc = start_processor(bs, src, dst)
        time.sleep(rng.uniform(0.5, 3.0))
        proc.kill()  # kill -9, wherever it is: mid-transaction, mid-commit, mid-join
        proc.wait()
        progress.append(len(read_committed(bs, dst, 0, 0.5)))
    feeder.join()
    proc = start_processor(bs, src, dst)
    try:
        got = read_committed(bs, dst, RECORDS, 5)
        deadline = time.monotonic() + 120
        while len(got) < RECORDS and time.monotonic() < deadline:
            if proc.poll() is not None:  # a fenced or rebalanced run exits: start another
                proc = start_processor(bs, src, dst)
            time.sleep(1)
            got = read_committed(bs, dst, RECORDS, 5)
    finally:
        proc.kill()
        proc.wait()
    assert any(0 < n < RECORDS for n in progress), f"no kill landed mid-stream: {progress}"
    assert len(got) == RECORDS, f"{len(got)} records, {len(got) - len(set(got))} duplicates"
    assert sorted(got) == [b"T:%06d" % i for i in range(RECORDS)]
