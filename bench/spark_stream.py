"""Spark streaming benchmark: records/s of a ``readStream.format("spool")`` query end to end.

    python -m bench.spark_stream [--records 1000000] [--size 100] [--partitions 2] [--runs 3]
                                 [--bootstrap HOST:PORT]

Without ``--bootstrap`` a broker is started on a temp dir. The topic gets
``--records`` records with ``--size``-byte values; each run is a fresh
streaming query (new checkpoint, ``startingOffsets=earliest``,
``trigger(availableNow=True)``) into the ``noop`` sink, timed from
``start()`` to termination: offset planning, the checkpoint's offset and
commit logs, the executors' reads, every micro-batch. First the fixed cost
of a query that finds nothing to read (``startingOffsets=latest``) and a batch
read of the same records (``spark.read``, same session) for reference, then three settings:
everything in one micro-batch, ``maxOffsetsPerTrigger`` (a quarter of the
records), and ``maxBytesPerTrigger`` (about a quarter of the bytes, which
adds a DescribeLogDirs per trigger). Median of ``--runs`` after one warm-up
query (Python workers); timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def timed(action) -> float:
    t = time.perf_counter()
    action()
    return time.perf_counter() - t


def run(spark, bootstrap: str, topic: str, checkpoint: Path, opts: dict,
        starting: str = "earliest") -> tuple[float, int, int]:
    """(seconds, records, micro-batches) of one availableNow query into noop."""
    shutil.rmtree(checkpoint, ignore_errors=True)
    r = (spark.readStream.format("spool").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", starting))
    for k, v in opts.items():
        r = r.option(k, v)
    t = time.perf_counter()
    q = (r.load().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    took = time.perf_counter() - t
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    batches = [p for p in q.recentProgress if p.numInputRows > 0]
    return took, sum(p.numInputRows for p in batches), len(batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bootstrap", default=None)
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="spool-bench-spark-stream-"))
    broker = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        from tests.helpers.broker_proc import BrokerProcess

        broker = BrokerProcess(work / "data").start()
        bootstrap = broker.bootstrap
    try:
        topic = f"bench-spark-stream-{os.getpid()}"
        fill(bootstrap, topic, a.records, a.size, a.partitions)

        from spool.spark.session import local_session

        spark = local_session("bench-spark-stream", local_dir=work / "spark")
        run(spark, bootstrap, topic, work / "cp", {})  # warm-up: Python workers, JIT
        # about a quarter of the log (value + ~10 B of record framing) per trigger
        quarter_bytes = max(1, a.records * (a.size + 10) // 4)
        settings = [
            ("one micro-batch", {}),
            (f"maxOffsetsPerTrigger={a.records // 4}", {"maxOffsetsPerTrigger": str(a.records // 4)}),
            (f"maxBytesPerTrigger={quarter_bytes}", {"maxBytesPerTrigger": str(quarter_bytes)}),
        ]
        print(f"{a.records:,} records x {a.size} B, {a.partitions} partitions, "
              f"availableNow -> noop, median of {a.runs}; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        idle = statistics.median(
            run(spark, bootstrap, topic, work / "cp", {}, "latest")[0] for _ in range(a.runs))
        print(f"  {'query start-up, no records':34s}  0 batches  {idle:6.2f} s")
        batch_df = (spark.read.format("spool").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).load())
        batch_s = statistics.median(
            timed(lambda: batch_df.write.format("noop").mode("overwrite").save())
            for _ in range(a.runs))
        print(f"  {'batch read (spark.read), reference':34s}     -      {batch_s:6.2f} s  "
              f"{a.records / batch_s / 1e6:5.2f} M rec/s")
        for name, opts in settings:
            results = [run(spark, bootstrap, topic, work / "cp", opts) for _ in range(a.runs)]
            assert all(n == a.records for _, n, _ in results), results
            took = statistics.median(t for t, _, _ in results)
            batches = results[0][2]
            print(f"  {name:34s} {batches:2d} batches  {took:6.2f} s  "
                  f"{a.records / took / 1e6:5.2f} M rec/s  "
                  f"({a.records / max(took - idle, 1e-9) / 1e6:5.2f} M rec/s past start-up)")
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
