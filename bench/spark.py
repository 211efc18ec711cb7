"""Spark benchmark: records/s from Spool into Spark beside Spark reading the same records from Parquet.

    python -m bench.spark [--cases 1000000x100,200000x1024] [--partitions 2] [--runs 3]
                          [--bootstrap HOST:PORT] [--conf KEY=VALUE ...] [--option KEY=VALUE ...]

Without ``--bootstrap`` a broker is started on a temp dir. For each case
(records x value bytes) a topic gets the records; Spark (local[2]) reads
them all through ``format("spool")`` into the ``noop`` sink (every column
materialized, nothing written), then the same rows are written once to
Parquet and read back the same way. Spool and Parquet take turns, ``--runs``
times each; the figures are the medians (min-max beside them). ``--conf``
sets Spark confs on the session, ``--option`` options of the spool reader.
Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
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


def _pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="1000000x100,200000x1024")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--option", action="append", default=[])
    a = ap.parse_args()
    cases = [tuple(int(x) for x in c.split("x")) for c in a.cases.split(",")]

    work = Path(tempfile.mkdtemp(prefix="spool-bench-spark-"))
    broker = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        from tests.helpers.broker_proc import BrokerProcess

        broker = BrokerProcess(work / "data").start()
        bootstrap = broker.bootstrap
    spark = None
    try:
        from spool.spark.session import local_session

        spark = local_session("bench-spark", local_dir=work / "spark")
        for key, value in _pairs(a.conf).items():
            spark.conf.set(key, value)
        rows = []
        for records, size in cases:
            topic = f"bench-spark-{os.getpid()}-{size}"
            took = fill(bootstrap, topic, records, size, a.partitions)
            print(f"produced {records:,} x {size} B in {took:.1f} s "
                  f"({records / took:,.0f} rec/s)", flush=True)
            reader = (spark.read.format("spool").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", topic))
            for key, value in _pairs(a.option).items():
                reader = reader.option(key, value)
            spool_df = reader.load()
            parquet = str(work / f"table-{size}.parquet")
            spool_df.write.mode("overwrite").parquet(parquet)  # also warms up the Python workers
            parquet_df = spark.read.parquet(parquet)
            assert parquet_df.count() == records

            def noop(df):
                return lambda: df.write.format("noop").mode("overwrite").save()

            spool_s, parquet_s = [], []
            for _ in range(a.runs):
                spool_s.append(timed(noop(spool_df)))
                parquet_s.append(timed(noop(parquet_df)))
            s, p = statistics.median(spool_s), statistics.median(parquet_s)
            rows.append((records, size, s, p, spool_s, parquet_s))
            print(f"  spool   -> spark: {s:6.2f} s  {records / s / 1e6:5.2f} M rec/s  "
                  f"(runs {', '.join(f'{x:.2f}' for x in spool_s)} s)", flush=True)
            print(f"  parquet -> spark: {p:6.2f} s  {records / p / 1e6:5.2f} M rec/s  "
                  f"(runs {', '.join(f'{x:.2f}' for x in parquet_s)} s)", flush=True)
        print("\n| case | Spool | Parquet | Spool / Parquet |\n|---|---|---|---|")
        for records, size, s, p, spool_s, parquet_s in rows:
            print(f"| {records:,} x {size} B | {s:.2f} s, {records / s / 1e6:.2f} M rec/s "
                  f"({min(spool_s):.2f}-{max(spool_s):.2f} s) | {p:.2f} s, "
                  f"{records / p / 1e6:.2f} M rec/s ({min(parquet_s):.2f}-{max(parquet_s):.2f} s)"
                  f" | {p / s:.2f} |")
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
