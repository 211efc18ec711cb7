"""Broker throughput with a real client: produce then consume, records/s and MB/s.

    python -m bench.broker [--records 200000] [--size 100] [--partitions 1] [--runs 3]

Starts a Spool broker (data in a temp dir, ephemeral port), produces
``--records`` records of ``--size`` bytes with confluent-kafka (acks=1,
linger.ms=5, batch.size 1 MiB, ``produce_batch`` without per-message
callbacks), then consumes them all back. Beside the produce figure it
reports the client's own ceiling: how fast the same records are merely
enqueued into librdkafka with no broker to send them to.
Prints a table of medians with min and max; tests never assert timings.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker_proc import BrokerProcess

BATCH = 10_000


def produce(conf: dict, topic: str, records: int, size: int) -> float:
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 21})
    value = b"x" * size
    chunk = [{"value": value} for _ in range(BATCH)]
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(BATCH, records - sent)
        accepted = p.produce_batch(topic, chunk[:n])
        sent += accepted
        p.poll(0)
        if accepted < n:
            p.poll(0.005)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return elapsed


def consume(conf: dict, topic: str, partitions: int, records: int) -> float:
    c = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1 << 20})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    got = 0
    t0 = time.perf_counter()
    while got < records:
        for m in c.consume(100_000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def enqueue_only(records: int, size: int) -> float:
    """Seconds to hand ``records`` to librdkafka's queue with no broker to send them to."""
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 60_000,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 1 << 22, "message.timeout.ms": 300_000,
                  "log_level": 0})
    value = b"x" * size
    chunk = [{"value": value} for _ in range(BATCH)]
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        sent += p.produce_batch("ceiling", chunk[: min(BATCH, records - sent)])
    elapsed = time.perf_counter() - t0
    p.purge()
    return elapsed


def run_workload(conf: dict, partitions: int, records: int, size: int, runs: int,
                 create: bool = True) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"produce": [], "consume": []}
    for i in range(runs):
        topic = f"bench-{partitions}-{size}-{i}-{time.time_ns()}"
        if create:
            admin = AdminClient(conf)
            admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)
        out["produce"].append(records / produce(conf, topic, records, size))
        out["consume"].append(records / consume(conf, topic, partitions, records))
    return out


def fmt(rates: list[float], size: int) -> str:
    med = statistics.median(rates)
    return (f"{med:>10,.0f} rec/s {med * size / 1e6:>7.1f} MB/s "
            f"(min {min(rates):,.0f}, max {max(rates):,.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            spool = run_workload({"bootstrap.servers": broker.bootstrap}, args.partitions,
                                 args.records, args.size, args.runs, True)
        finally:
            broker.stop()
    ceiling = [args.records / enqueue_only(args.records, args.size) for _ in range(args.runs)]
    print(f"{args.records:,} records of {args.size} B, {args.partitions} partition(s), "
          f"median of {args.runs}")
    print(f"  produce  spool          {fmt(spool['produce'], args.size)}")
    print(f"  produce  client enqueue {fmt(ceiling, args.size)}")
    ratio = statistics.median(spool["produce"]) / statistics.median(ceiling)
    print(f"  produce  spool / client enqueue ceiling = {ratio:.2f}")
    print(f"  consume  spool          {fmt(spool['consume'], args.size)}")


if __name__ == "__main__":
    main()
