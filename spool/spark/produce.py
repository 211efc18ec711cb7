"""Turning Spark rows (as Arrow batches) into Kafka records, as Spark's Kafka sink does.

Accepted input columns (Spark's Kafka sink names): ``value`` (binary or
string, required), ``key`` (binary or string), ``topic`` (string; the
``topic`` option overrides it), ``partition`` (int; null lets the
partitioner choose) and ``headers`` (``array<struct<key: string, value:
binary>>``). Keys are placed with murmur2 like the Java client
(librdkafka ``partitioner=murmur2_random``); null keys go to a random
partition.

``Sender`` wraps one confluent-kafka producer: ``send_batches`` produces,
``finish`` flushes and raises the first delivery error, if any.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from spool.spark.options import SpoolOptions

FLUSH_TIMEOUT = 120.0


def check_write_schema(schema: StructType, opts: SpoolOptions) -> None:
    """Reject what Spark's Kafka sink rejects, before any task runs."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("the value column is required to write to Spool")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], BinaryType | StringType):
            raise ValueError(f"the {name} column must be binary or string, not {fields[name].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ValueError("the topic column must be a string")
    if "topic" not in fields and not opts.topic:
        raise ValueError("a topic column or the topic option is required to write to Spool")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError("the partition column must be an int")
    if "headers" in fields:
        t = fields["headers"]
        ok = isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
        if not ok or [f.name for f in t.elementType.fields] != ["key", "value"]:
            raise ValueError("the headers column must be array<struct<key: string, value: binary>>")


def producer_conf(opts: SpoolOptions, **extra: Any) -> dict[str, Any]:
    return {
        **opts.base_conf(),
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        **extra,
    }


def _as_bytes(values: list) -> list:
    return [v.encode() if isinstance(v, str) else v for v in values]


class Sender:
    def __init__(self, producer: Producer, opts: SpoolOptions) -> None:
        self.producer = producer
        self.opts = opts
        self.errors: list[Exception] = []
        self.count = 0

    def _on_delivery(self, err, msg) -> None:
        if err is not None and not self.errors:
            self.errors.append(KafkaException(err))

    def send_batches(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:
            self.send_batch(batch)

    def send_batch(self, batch: pa.RecordBatch) -> None:
        cols = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        n = batch.num_rows
        values = _as_bytes(cols["value"].to_pylist())
        keys = _as_bytes(cols["key"].to_pylist()) if "key" in cols else [None] * n
        topics = [self.opts.topic] * n if self.opts.topic else cols["topic"].to_pylist()
        parts = cols["partition"].to_pylist() if "partition" in cols else [None] * n
        headers = cols["headers"].to_pylist() if "headers" in cols else [None] * n
        produce = self.producer.produce
        for value, key, topic, part, hdrs in zip(values, keys, topics, parts, headers, strict=True):
            if topic is None:
                raise ValueError("null topic in a row and no topic option")
            kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": self._on_delivery}
            if part is not None:
                kwargs["partition"] = part
            if hdrs:
                kwargs["headers"] = [(h["key"], h["value"]) for h in hdrs]
            while True:
                try:
                    produce(topic, **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.count += 1
        self.producer.poll(0)
        self.raise_errors()

    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors[0]

    def finish(self) -> int:
        left = self.producer.flush(FLUSH_TIMEOUT)
        self.raise_errors()
        if left:
            raise KafkaException(f"{left} records not delivered within {FLUSH_TIMEOUT} s")
        return self.count
