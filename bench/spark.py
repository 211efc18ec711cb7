"""Spark benchmark: records/s from Spool into Spark beside Spark reading the same records from Parquet.

    python -m bench.spark [--records 1000000] [--size 100] [--partitions 2] [--runs 3]
                          [--bootstrap HOST:PORT]

Without ``--bootstrap`` a broker is started on a temp dir. The topic gets
``--records`` records with ``--size``-byte values; Spark (local[2]) reads
them all through ``format("spool")`` into the ``noop`` sink (every column
materialized, nothing written), then the same rows are written once to
Parquet and read back the same way. Best of ``--runs`` for each; the ratio
is Parquet's rate over Spool's. Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
         "queue.buffering.max.messages": 1_000_000, "compression.type": "none"}
    )
    value = os.urandom(size)
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return time.perf_counter() - t


def timed(action) -> float:
    t = time.perf_counter()
    action()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bootstrap", default=None)
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="spool-bench-spark-"))
    broker = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        from tests.helpers.broker_proc import BrokerProcess

        broker = BrokerProcess(work / "data").start()
        bootstrap = broker.bootstrap
    try:
        topic = f"bench-spark-{os.getpid()}"
        took = fill(bootstrap, topic, a.records, a.size, a.partitions)
        print(f"produced {a.records:,} x {a.size} B in {took:.1f} s ({a.records / took:,.0f} rec/s)")

        from spool.spark.session import local_session

        spark = local_session("bench-spark", local_dir=work / "spark")
        spool_df = (
            spark.read.format("spool").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load()
        )
        parquet = str(work / "table.parquet")
        spool_df.write.mode("overwrite").parquet(parquet)  # also warms up the Python workers
        parquet_df = spark.read.parquet(parquet)
        assert parquet_df.count() == a.records

        def noop(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        spool_s = min(timed(noop(spool_df)) for _ in range(a.runs))
        parquet_s = min(timed(noop(parquet_df)) for _ in range(a.runs))
        spool_rate, parquet_rate = a.records / spool_s, a.records / parquet_s
        print(f"spool   -> spark: {spool_s:6.2f} s  {spool_rate / 1e6:5.2f} M rec/s")
        print(f"parquet -> spark: {parquet_s:6.2f} s  {parquet_rate / 1e6:5.2f} M rec/s")
        print(f"ratio parquet/spool: {parquet_rate / spool_rate:.2f}x")
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
