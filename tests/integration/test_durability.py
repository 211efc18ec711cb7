"""Acknowledged records survive kill -9 of the broker; the broker duplicates nothing."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3


def read_partition(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "d", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    out: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while len(out) < end and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                assert m.offset() not in out, "the broker returned an offset twice"
                out[m.offset()] = m.value()
    finally:
        c.close()
    return out


@pytest.mark.timeout(240)
def test_acks_all_records_survive_kill_9(fresh_broker, topic_name):
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, PARTITIONS)])[topic_name].result(10)

    acked: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            with lock:
                acked[(msg.partition(), msg.offset())] = msg.value()

    p = Producer({
        "bootstrap.servers": fresh_broker.bootstrap,
        "acks": "all",
        "linger.ms": 2,
        "message.timeout.ms": 60_000,
        "reconnect.backoff.max.ms": 200,
    })

    def produce_forever():
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic_name, key=b"%d" % (i % 100), value=b"record-%d" % i,
                          on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            p.poll(0.0005 if i % 100 else 0.01)

    t = threading.Thread(target=produce_forever, daemon=True)
    t.start()
    for _round in range(3):
        time.sleep(1.5)
        with lock:
            before = len(acked)
        fresh_broker.kill()  # kill -9 while the producer is sending
        time.sleep(0.3)
        fresh_broker.start()
        assert before > 0
    time.sleep(1.0)
    stop.set()
    t.join()
    assert p.flush(60) == 0

    with lock:
        snapshot = dict(acked)
    assert len(snapshot) > 1000
    for part in range(PARTITIONS):
        want = {off: v for (pp, off), v in snapshot.items() if pp == part}
        if not want:
            continue
        got = read_partition(fresh_broker.bootstrap, topic_name, part, max(want) + 1)
        missing = [off for off in want if got.get(off) != want[off]]
        assert not missing, f"partition {part}: {len(missing)} acknowledged records lost or changed"
