"""Client-side workloads, run identically against any Kafka-protocol broker.

Throughput runs use ``produce_batch`` without per-message callbacks (acks=1,
linger.ms=5, batch.size 1 MiB), so the client library is as little in the
way as it can be; latency runs use callbacks at a fixed rate. ``enqueue_only``
is the client's own ceiling: records handed to librdkafka with no broker.
"""

from __future__ import annotations

import struct
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CHUNK = 10_000
PRODUCER = {"acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 21}
CONSUMER = {"group.id": "bench", "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760, "queued.max.messages.kbytes": 1 << 20}
_TS = struct.Struct(">q")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str = "1") -> float:
    """Seconds to produce and have acknowledged ``records`` records of ``size`` bytes."""
    return produce_timed(bootstrap, topic, records, size, acks)[0]


def produce_timed(bootstrap: str, topic: str, records: int, size: int,
                  acks: str = "1") -> tuple[float, float]:
    """``produce``'s seconds, and the client's CPU seconds (this process, all its threads:
    Python and librdkafka's) over the same span."""
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER, "acks": acks})
    chunk = [{"value": b"x" * size}] * CHUNK
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(CHUNK, records - sent)
        accepted = p.produce_batch(topic, chunk[:n])
        sent += accepted
        p.poll(0)
        if accepted < n:
            p.poll(0.002)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return elapsed, cpu


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Each partition's high watermark (its record count when written from offset 0)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
                for p in range(partitions)]
    finally:
        c.close()


def consume(bootstrap: str, topic: str, partitions: int, records: int,
            extra: dict | None = None) -> float:
    """Seconds for one consumer to read ``records`` records from offset 0 (``extra``:
    more client configs, e.g. TLS)."""
    c = Consumer({"bootstrap.servers": bootstrap, **CONSUMER, **(extra or {})})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < records and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(100_000, 0.5) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return elapsed


def enqueue_only(records: int, size: int) -> float:
    """Seconds to hand ``records`` to librdkafka's queue with nowhere to send them (the
    producer's ceiling without any network; ``bench.mock_cluster`` gives the one with it)."""
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 60_000, "log_level": 0,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 1 << 22, "message.timeout.ms": 600_000})
    chunk = [{"value": b"x" * size}] * CHUNK
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        sent += p.produce_batch("ceiling", chunk[: min(CHUNK, records - sent)])
    elapsed = time.perf_counter() - t0
    p.purge()
    return elapsed


def paced(p: Producer, topic: str, rate: int, seconds: float, size: int, on_delivery=None,
           partitions: int = 0) -> int:
    """Produce at ``rate`` records/s for ``seconds``; each value starts with time.time_ns().
    ``partitions``: record i goes to partition i % partitions (0: the client's partitioner)."""
    pad = b"x" * max(0, size - 8)
    n_total = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n_total):
        target = t0 + i / rate
        while True:
            now = time.perf_counter()
            if now >= target:
                break
            p.poll(0)
            if target - now > 0.0005:
                time.sleep(0.0002)
        kw = {"on_delivery": on_delivery} if on_delivery else {}
        if partitions:
            kw["partition"] = i % partitions
        p.produce(topic, value=_TS.pack(time.time_ns()) + pad, **kw)
        p.poll(0)
    p.flush(60)
    return n_total


def produce_latency(bootstrap: str, topic: str, rate: int, seconds: float,
                    size: int = 100, acks: str = "1", linger_ms: int = 0) -> list[float]:
    """Milliseconds from produce() to the delivery report, at a fixed rate (acks=1 and
    linger.ms=0 unless ``acks`` and ``linger_ms`` say otherwise)."""
    lat: list[float] = []

    def on_delivery(err, msg):
        if err is None:
            lat.append((time.time_ns() - _TS.unpack_from(msg.value())[0]) / 1e6)

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms})
    paced(p, topic, rate, seconds, size, on_delivery)
    return lat


def end_to_end_latency(bootstrap: str, topic: str, rate: int, seconds: float,
                       size: int = 100) -> list[float]:
    """Milliseconds from produce() to the consumer receiving the record, at a fixed rate."""
    lat: list[float] = []
    ready = threading.Event()
    done = threading.Event()

    def consumer():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-e2e",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        c.assign([TopicPartition(topic, 0, 0)])
        ready.set()
        while not done.is_set() or len(lat) < expected[0]:
            m = c.poll(0.01)  # returns as soon as one record is there
            if m is not None and m.error() is None:
                lat.append((time.time_ns() - _TS.unpack_from(m.value())[0]) / 1e6)
            if done.is_set() and time.monotonic() > stop_by[0]:
                break
        c.close()

    expected = [int(rate * seconds)]
    stop_by = [float("inf")]
    t = threading.Thread(target=consumer, daemon=True)
    t.start()
    ready.wait(10)
    time.sleep(1.0)  # let the consumer's first fetch reach the broker
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    paced(p, topic, rate, seconds, size)
    stop_by[0] = time.monotonic() + 10
    done.set()
    t.join(15)
    return lat
