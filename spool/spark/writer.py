"""``df.write`` and at-least-once ``writeStream`` to Spool.

Each Spark task opens its own producer in ``write()`` (executors), sends its
rows and returns only after every record is acknowledged (``acks=all``);
a failure raises, so Spark retries the task. Retries and driver restarts
can therefore write a row twice: at-least-once, like Spark's Kafka sink.
The exactly-once streaming sink is in ``transactional.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from spool.spark.options import SpoolOptions
from spool.spark.produce import Sender, producer_conf


@dataclass
class SpoolCommit(WriterCommitMessage):
    records: int
    skipped: bool = False


def write_all(opts: SpoolOptions, batches: Iterator[pa.RecordBatch]) -> SpoolCommit:
    sender = Sender(Producer(producer_conf(opts)), opts)
    sender.send_batches(batches)
    return SpoolCommit(sender.finish())


class SpoolBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SpoolOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SpoolCommit:
        return write_all(self.opts, iterator)


class SpoolAtLeastOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SpoolOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SpoolCommit:
        return write_all(self.opts, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        return None

    def abort(self, messages: list, batchId: int) -> None:
        return None
