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
"""

from __future__ import annotations

import hashlib

from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spool.spark.batch_reader import SpoolBatchReader
from spool.spark.capabilities import missing_transaction_apis
from spool.spark.options import _bool, _get, parse_options
from spool.spark.produce import check_write_schema
from spool.spark.schema import ddl
from spool.spark.stream_reader import SpoolStreamReader
from spool.spark.transactional import SpoolExactlyOnceStreamWriter
from spool.spark.writer import SpoolAtLeastOnceStreamWriter, SpoolBatchWriter


def ensure_progress_topic(bootstrap_conf: dict, topic: str) -> None:
    admin = AdminClient(bootstrap_conf)
    if topic in admin.list_topics(timeout=30).topics:
        return
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})]
    )
    for fut in futures.values():
        try:
            fut.result(30)
        except Exception as exc:  # noqa: BLE001 - a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


class SpoolDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "spool"

    def schema(self) -> str:
        return ddl(_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return SpoolBatchReader(parse_options(self.options, for_read=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SpoolStreamReader(parse_options(self.options, for_read=True, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = parse_options(self.options, for_read=False)
        check_write_schema(schema, opts)
        return SpoolBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_options(self.options, for_read=False, streaming=True)
        check_write_schema(schema, opts)
        if opts.delivery_guarantee == "at-least-once":
            return SpoolAtLeastOnceStreamWriter(opts)
        missing = missing_transaction_apis(opts.bootstrap)
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
        return SpoolExactlyOnceStreamWriter(opts, sink_id)
