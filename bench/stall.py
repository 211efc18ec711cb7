"""Produce latency while the broker does blocking file work: partition creation and rolls.

    python -m bench.stall [--partitions 500] [--runs 3] [--roll-key internal.segment.bytes]

Starts a Spool broker. One client produces one small record at a time (acks=1,
a raw ProduceRequest, waiting for each answer) and records every round trip.
A second client produces 16 KiB records without pause into a topic whose
segments are 64 KiB, forcing a segment roll every few milliseconds. Each run
has two windows of the same length: "rolls" (the roller alone) and "rolls +
create" (a third client creating one topic of ``--partitions`` partitions
with CreateTopics; the window lasts until its answer). Prints p50, p99 and max
of the first client's latency in each window, and how long the creation took.

``--roll-key segment.bytes`` runs it against versions before the 1 MiB
minimum of ``segment.bytes`` (which took tiny segments directly).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import spool_broker
from spool.protocol._generated import ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient


def create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, config=config or {})])[topic].result(600)


class Latency:
    """Produce one record at a time to ``topic``-0 and keep each round trip (ms)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.client = RawClient(bootstrap, timeout=600)
        self.topic = topic
        self.samples: list[tuple[float, float]] = []  # (start monotonic, ms)
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            b = BatchBuilder()
            b.append(b"k", b"v%d" % i, timestamp=int(time.time() * 1000))
            req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
                TopicProduceData(name=self.topic, partition_data=[
                    PartitionProduceData(index=0, records=b.build())])])
            t0 = time.monotonic()
            resp = self.client.request(0, 9, req)
            self.samples.append((t0, (time.monotonic() - t0) * 1000))
            assert resp.responses[0].partition_responses[0].error_code == 0
            i += 1

    def window(self, start: float, end: float) -> list[float]:
        return [ms for t, ms in self.samples if start <= t < end]


def roll_forever(bootstrap: str, topic: str, stop) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    value = b"x" * 16384
    while not stop.is_set():
        try:
            p.produce(topic, value=value, partition=0)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(30)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def fmt(values: list[float]) -> str:
    return (f"p50 {statistics.median(values):7.1f} ms  p99 {pct(values, 0.99):7.1f} ms  "
            f"max {max(values):7.1f} ms  ({len(values)} requests)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--roll-key", default="internal.segment.bytes")
    args = ap.parse_args()
    quiet: list[float] = []
    busy: list[float] = []
    took: list[float] = []
    # the test-only key needs the broker's consent (internal.segment.bytes.enable)
    seam = {"internal.segment.bytes.enable": "true"} if args.roll_key.startswith("internal.") else {}
    with tempfile.TemporaryDirectory() as tmp, spool_broker(Path(tmp), seam) as b:
        create(b.bootstrap, "latency", 1)
        create(b.bootstrap, "roller", 1, {args.roll_key: "65536"})
        lat = Latency(b.bootstrap, "latency")
        # the roller's busy loop runs in a process of its own: in this one it would hold
        # the GIL and delay the latency client's own thread, not the broker
        spawn = multiprocessing.get_context("spawn")
        stop = spawn.Event()
        roller = spawn.Process(target=roll_forever, args=(b.bootstrap, "roller", stop),
                               daemon=True)
        threads = [threading.Thread(target=lat.run, daemon=True)]
        roller.start()
        for t in threads:
            t.start()
        time.sleep(1.0)  # warm up
        for run in range(args.runs):
            t0 = time.monotonic()
            create(b.bootstrap, f"wide-{run}", args.partitions)
            t1 = time.monotonic()
            took.append(t1 - t0)
            time.sleep(t1 - t0)  # the roller alone, for as long
            t2 = time.monotonic()
            busy += lat.window(t0, t1)
            quiet += lat.window(t1, t2)
        lat.stop.set()
        stop.set()
        for t in threads:
            t.join(60)
        roller.join(60)
    print(f"produce latency (acks=1, one record at a time) while another client forces a "
          f"segment roll every 64 KiB; {args.runs} runs")
    print(f"  rolls            {fmt(quiet)}")
    print(f"  rolls + create   {fmt(busy)}")
    print(f"  CreateTopics of {args.partitions} partitions took "
          f"{statistics.median(took):.2f} s (median)")


if __name__ == "__main__":
    main()
