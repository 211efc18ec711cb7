"""``SpoolDataSource``: the PySpark data source named ``spool``.

Options and row schema are those of Spark's Kafka connector (``options.py``,
``schema.py``). Each method only parses options and hands out the reader
or writer; clients are opened where they run (executors or the driver's
reader process), never here, because everything here must pickle.

Streaming writes default to ``deliveryGuarantee=exactly-once``
(``transactional.py``, needs a broker with transactions; refused with a
clear error otherwise); ``deliveryGuarantee=at-least-once`` selects the
plain sink. Batch writes are at-least-once (a failed job may leave part of
its rows written), like Spark's Kafka sink.

With ``valueFormat``/``keyFormat`` (``formats.py``) ``schema()`` gives the
typed struct columns; the readers here decode the fetched Arrow batches on
the executors and the writers encode the struct columns before sending, by
subclassing the plain readers and writers (``Formatted*``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import BinaryType, StructField, StructType

from spool.spark.batch_reader import SpoolBatchReader
from spool.spark.capabilities import missing_transaction_apis
from spool.spark.connection import client_security
from spool.spark.ddl import parse_ddl
from spool.spark.formats import (
    decode_batches,
    encode_batches,
    parse_column_format,
    read_schema,
)
from spool.spark.options import SpoolOptions, _bool, _get, parse_options
from spool.spark.produce import check_write_schema
from spool.spark.schema import ddl
from spool.spark.stream_reader import SpoolStreamReader
from spool.spark.transactional import SpoolExactlyOnceStreamWriter
from spool.spark.writer import SpoolAtLeastOnceStreamWriter, SpoolBatchWriter, SpoolCommit


def ensure_progress_topic(bootstrap_conf: dict, topic: str) -> None:
    """Create the exactly-once sink's compacted progress topic unless it exists, replicated
    as Kafka replicates its own transaction log: on min(3, brokers) brokers with
    min.insync.replicas=2 when there are 3 (so losing one broker loses no committed batch
    id), and wait until its partition has a leader (a new topic has none for a moment)."""
    admin = AdminClient(bootstrap_conf)
    md = admin.list_topics(timeout=30)
    if topic not in md.topics:
        replicas = min(3, len(md.brokers))
        config = {"cleanup.policy": "compact"}
        if replicas == 3:
            config["min.insync.replicas"] = "2"
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=replicas, config=config)]
        )
        for fut in futures.values():
            try:
                fut.result(30)
            except Exception as exc:  # noqa: BLE001 - a concurrent creator is fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic, timeout=30).topics.get(topic)
        if t is not None and t.error is None and t.partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the progress topic {topic} has no leader after 30 s")
        time.sleep(0.1)


class FormattedBatchReader(SpoolBatchReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return decode_batches(super().read(partition), list(self.opts.formats))


class FormattedStreamReader(SpoolStreamReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return decode_batches(super().read(partition), list(self.opts.formats))


class _Encoding:
    opts: SpoolOptions

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SpoolCommit:
        return super().write(encode_batches(iterator, list(self.opts.formats)))  # type: ignore[misc]


class FormattedBatchWriter(_Encoding, SpoolBatchWriter):
    pass


class FormattedAtLeastOnceStreamWriter(_Encoding, SpoolAtLeastOnceStreamWriter):
    pass


class FormattedExactlyOnceStreamWriter(_Encoding, SpoolExactlyOnceStreamWriter):
    pass


def _write_formats(options: dict, opts: SpoolOptions, schema: StructType) -> tuple[SpoolOptions, StructType]:
    """Options with the key/value formats for these columns, and the schema the plain sink
    checks (formatted columns as binary, which is what they become)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    formats = []
    for column in ("key", "value"):
        if column in types:  # a format for a column not written is ignored
            fmt = parse_column_format(options, column, for_read=False, column_type=types[column])
            if fmt is not None:
                formats.append(fmt)
    if not formats:
        return opts, schema
    encoded = {f.column for f in formats}
    checked = StructType(
        [
            StructField(f.name, BinaryType(), f.nullable) if f.name.lower() in encoded else f
            for f in schema.fields
        ]
    )
    return dataclasses.replace(opts, formats=tuple(formats)), checked


class SpoolDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "spool"

    def schema(self) -> str | StructType:
        base = ddl(_bool(self.options, "includeHeaders", False))
        formats = [
            f
            for c in ("key", "value")
            if (f := parse_column_format(self.options, c, for_read=True)) is not None
        ]
        if not formats:
            return base
        return read_schema(parse_ddl(base), formats)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_options(self.options, for_read=True)
        return FormattedBatchReader(opts) if opts.formats else SpoolBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_options(self.options, for_read=True, streaming=True)
        return FormattedStreamReader(opts) if opts.formats else SpoolStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts, checked = _write_formats(self.options, parse_options(self.options, for_read=False), schema)
        check_write_schema(checked, opts)
        return FormattedBatchWriter(opts) if opts.formats else SpoolBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_options(self.options, for_read=False, streaming=True)
        opts, checked = _write_formats(self.options, opts, schema)
        check_write_schema(checked, opts)
        if opts.delivery_guarantee == "at-least-once":
            if opts.formats:
                return FormattedAtLeastOnceStreamWriter(opts)
            return SpoolAtLeastOnceStreamWriter(opts)
        missing = missing_transaction_apis(opts.bootstrap, client_security(opts.client_conf))
        if missing:
            raise RuntimeError(
                f"deliveryGuarantee=exactly-once needs Kafka transactions, but the broker at "
                f"{opts.bootstrap} does not support them (no {', '.join(missing)}); "
                "set the option deliveryGuarantee=at-least-once to write without them"
            )
        sink_id = opts.sink_id
        if not sink_id:
            checkpoint = _get(self.options, "checkpointLocation") or _get(self.options, "path")
            if not checkpoint:
                raise ValueError("exactly-once writes need the option sinkId (or a checkpointLocation)")
            sink_id = "spool-sink-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]
        ensure_progress_topic(opts.base_conf(), opts.progress_topic)
        if opts.formats:
            return FormattedExactlyOnceStreamWriter(opts, sink_id)
        return SpoolExactlyOnceStreamWriter(opts, sink_id)
