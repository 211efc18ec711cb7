"""Decode/encode rates of valueFormat=json|avro (spool.spark.formats), in records/s.

``python -m bench.spark_formats [--records N] [--spark N] [--runs R]``: one ~100-byte
record shape, decoded from an Arrow binary column as the source does on the
executors (json: the vectorized path, and the per-value path it falls back to;
avro: fastavro per value, with Confluent framing), and encoded from the struct
column as the sink does. Median of 3 runs of CPU time (process_time: the machine
is shared), one core.

With ``--spark N``: a broker on a temp dir, N records as JSON in one topic and as
framed Avro in another (2 partitions each), and Spark (local[2]) reading each
into the ``noop`` sink: binary ``value``, then ``valueFormat=json``, then
``valueFormat=avro``; wall-clock medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from spool.spark.formats import ColumnFormat, parse_column_format
from spool.spark.json_format import _slow

AVRO = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "qty", "type": "int"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
DDL = "id string, user string, amount double, qty int, at timestamp"


def values(n: int) -> pa.Array:
    return pa.array(
        [
            json.dumps(
                {"id": f"order-{i:08d}", "user": f"user-{i % 1000:04d}", "amount": i * 0.25,
                 "qty": i % 7, "at": "2024-01-02T03:04:05.123Z"},
                separators=(",", ":"),
            ).encode()
            for i in range(n)
        ],
        pa.binary(),
    )


def rate(fn, n: int) -> float:
    times = []
    for _ in range(3):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return n / statistics.median(times)


def spark_rates(n: int, runs: int, raw: pa.Array, framed: pa.Array) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from spool.spark.session import local_session
    from tests.helpers.broker_proc import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="spool-bench-formats-"))
    broker = BrokerProcess(work / "data").start()
    spark = None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = {f"formats-{kind}-{os.getpid()}": (kind, arr) for kind, arr in (("json", raw), ("avro", framed))}
        for fut in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
            fut.result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                      "queue.buffering.max.messages": 1_000_000})
        for topic, (_, arr) in topics.items():
            for i, v in enumerate(arr.to_pylist()):
                while True:
                    try:
                        p.produce(topic, value=v, partition=i % 2)
                        break
                    except BufferError:
                        p.poll(0.05)
        assert p.flush(120) == 0
        spark = local_session("bench-formats", local_dir=work / "spark")
        cases = []
        for topic, (kind, _) in topics.items():
            base = (spark.read.format("spool").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic))
            if kind == "json":
                cases.append(("binary value", base.load()))
                typed = base.option("valueFormat", "json").option("valueSchema", DDL)
            else:
                typed = base.option("valueFormat", "avro").option("valueSchema", json.dumps(AVRO))
            cases.append((f"valueFormat={kind}", typed.load()))
        for _, df in cases:  # warm up the Python workers
            df.write.format("noop").mode("overwrite").save()
        for name, df in cases:
            took = []
            for _ in range(runs):
                t0 = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                took.append(time.perf_counter() - t0)
            med = statistics.median(took)
            print(f"spark read, {name:20s} {n / med:>12,.0f} rec/s  "
                  f"(runs {', '.join(f'{x:.2f}' for x in took)} s)", flush=True)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--spark", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    n = a.records
    raw = values(n)
    fmt = parse_column_format({"valueFormat": "json", "valueSchema": DDL}, "value", for_read=True)
    avro = parse_column_format(
        {"valueFormat": "avro", "valueSchema": json.dumps(AVRO), "valueSchemaId": "1"},
        "value",
        for_read=True,
    )
    assert isinstance(fmt, ColumnFormat) and isinstance(avro, ColumnFormat)
    size = sum(len(v) for v in raw.to_pylist()) / n
    structs = fmt.decode(raw)
    framed = avro.encode(structs)
    small = raw.slice(0, min(n, 50_000))
    out = {
        "value bytes (json)": round(size, 1),
        "json decode, vectorized": rate(lambda: fmt.decode(raw), n),
        "json decode, per value": rate(lambda: _slow(small, fmt.spark_type), len(small)),
        "json encode": rate(lambda: fmt.encode(structs), n),
        "avro decode (framed)": rate(lambda: avro.decode(framed), n),
        "avro encode": rate(lambda: avro.encode(structs), n),
    }
    for k, v in out.items():
        print(f"{k:28s} {v:>12,.0f}" + ("" if "bytes" in k else " rec/s"), flush=True)
    if a.spark:
        m = a.spark
        raw_m = values(m)
        spark_rates(m, a.runs, raw_m, avro.encode(fmt.decode(raw_m)))


if __name__ == "__main__":
    main()
