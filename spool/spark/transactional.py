"""The exactly-once streaming sink: one Kafka transaction per (task, micro-batch).

Spark may run micro-batch N more than once (task retries, speculation, a
driver crash after the sink wrote but before ``commits/N``); each re-run has
the same input, so task ``i`` of batch N always holds the same rows. The
sink makes each (sink id, task ``i``, batch N) take effect once:

1. the task's producer uses ``transactional.id = <sinkId>-<i>``;
   ``init_transactions`` aborts whatever an earlier attempt left open and
   fences that attempt (a zombie can no longer commit);
2. it reads the progress record ``<sinkId>-<i> -> last batch id`` from the
   compacted ``progressTopic`` (read_committed, after the LSO has passed
   everything written before step 1);
3. if that batch id is >= N the rows were already committed: skip them;
4. otherwise, in one transaction: the rows, then the progress record
   ``{"batchId": N}``; commit.

Rows and progress become visible together or not at all, so a reader with
``isolation.level=read_committed`` sees every output record exactly once.
``sinkId`` defaults to a digest of the query's ``checkpointLocation``: it
must stay the same across restarts of one query and differ between queries.
Requires a broker with transactions (``capabilities.supports_transactions``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter

from spool.spark.cluster import TIMEOUT, consumer_conf
from spool.spark.options import SpoolOptions
from spool.spark.produce import Sender, producer_conf
from spool.spark.writer import SpoolCommit

PROGRESS_PARTITION = 0


def progress_key(sink_id: str, task: int) -> bytes:
    return f"{sink_id}-{task}".encode()


def last_committed_batch(opts: SpoolOptions, key: bytes, wait: float = TIMEOUT) -> int | None:
    """The batch id of the last committed progress record for ``key``, or None."""
    tp = TopicPartition(opts.progress_topic, PROGRESS_PARTITION)
    plain = Consumer(consumer_conf(opts, **{"isolation.level": "read_uncommitted"}))
    consumer = Consumer(consumer_conf(opts, **{"isolation.level": "read_committed", "enable.partition.eof": True}))
    try:
        _, high = plain.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
        deadline = time.monotonic() + wait
        low, stable = consumer.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
        while stable < high:  # a transaction written before ours is still completing
            if time.monotonic() > deadline:
                raise TimeoutError(f"{opts.progress_topic} stayed unstable for {wait} s")
            time.sleep(0.05)
            low, stable = consumer.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
        if stable <= low:
            return None
        consumer.assign([TopicPartition(opts.progress_topic, PROGRESS_PARTITION, low)])
        last = None
        while True:
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return last
                raise RuntimeError(f"reading {opts.progress_topic}: {m.error()}")
            if m.key() == key and m.value() is not None:
                last = int(json.loads(m.value())["batchId"])
            if m.offset() >= stable - 1:
                return last
    finally:
        consumer.close()
        plain.close()


class SpoolExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SpoolOptions, sink_id: str) -> None:
        self.opts = opts
        self.sink_id = sink_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SpoolCommit:
        ctx = TaskContext.get()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId"))
        task = ctx.partitionId()
        key = progress_key(self.sink_id, task)
        producer = Producer(
            producer_conf(self.opts, **{"transactional.id": key.decode(), "transaction.timeout.ms": 60000})
        )
        producer.init_transactions(TIMEOUT)
        done = last_committed_batch(self.opts, key)
        if done is not None and done >= batch_id:
            for _ in iterator:  # already committed by an earlier attempt
                pass
            return SpoolCommit(0, skipped=True)
        producer.begin_transaction()
        sender = Sender(producer, self.opts)
        try:
            sender.send_batches(iterator)
            producer.produce(
                self.opts.progress_topic,
                key=key,
                value=json.dumps({"batchId": batch_id}).encode(),
                partition=PROGRESS_PARTITION,
            )
            sender.finish()
            producer.commit_transaction(TIMEOUT)
        except BaseException:
            try:
                producer.abort_transaction(TIMEOUT)
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
            raise
        return SpoolCommit(sender.count)

    def commit(self, messages: list, batchId: int) -> None:
        return None

    def abort(self, messages: list, batchId: int) -> None:
        return None
