"""Decode/encode rates of valueFormat=json|avro (spool.spark.formats), in records/s.

``python -m bench.spark_formats [--records N]``: one ~100-byte record shape, decoded
from an Arrow binary column as the source does on the executors (json: the
vectorized path, and the per-value path it falls back to; avro: fastavro per
value, with Confluent framing), and encoded from the struct column as the sink
does. Median of 3 runs of CPU time (process_time: the machine is shared), one core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    n = ap.parse_args().records
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
        print(f"{k:28s} {v:>12,.0f}" + ("" if "bytes" in k else " rec/s"))


if __name__ == "__main__":
    main()
