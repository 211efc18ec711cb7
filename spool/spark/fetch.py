"""Executor side: read one exact offset range of one partition as Arrow record batches.

``read_range(opts, topic, partition, start, end)`` yields
``pyarrow.RecordBatch``es (Spark's Kafka schema) of every record with
``start <= offset < end``. It stops at ``end`` or when the partition has
nothing more (end of log, or the LSO under read_committed, where aborted and
control records use offsets no record shows). ``start == EARLIEST`` means the
log start offset.

If ``start`` is below the log start offset (retention removed records),
``failOnDataLoss=true`` raises ``DataLossError``; otherwise the read starts
at the log start offset. An offset out of range above the log end (the log
was truncated under the reader, e.g. an unclean leader election) is data loss
too; without failOnDataLoss the read ends there. The same (start, end) over
an untouched log always yields the same records: the replay a streaming
query's recovery needs.

How (Spool's own protocol code, no per-message objects):

- Metadata v12 (any bootstrap broker, then any known broker) names the
  partition's leader and leader epoch; Fetch v12 (topic names, isolation
  level; Spool and Kafka 4.x both serve it) goes to the leader, one partition
  per request, ``fetch.max.bytes`` / ``max.partition.fetch.bytes`` (options
  ``kafka.fetch.max.bytes``, ``kafka.max.partition.fetch.bytes``; defaults
  64 MiB / 16 MiB), ``isolation_level`` 1 under read_committed.
- Connections are blocking ``spool.spark.connection.Connection``s (a response
  read into one buffer; ``records`` a memoryview of it), one per broker. The
  next Fetch (its offset read from the last complete batch header) is sent
  before the current response is decoded and yielded, so the broker answers
  it meanwhile: one request ahead. Fetching and decoding run on a thread of
  their own per read (``_overlapped``), up to ``QUEUE_DEPTH`` decoded batches
  ahead of the task's thread, which hands them to Spark (Arrow IPC to the
  JVM): socket reads, numpy and Arrow release the GIL, so the two overlap. A
  fetch error is raised in the task; a read closed early stops the thread,
  which closes its connections.
- Decoding is ``spool.spark.arrow_records.RecordsDecoder`` (column-wise into
  Arrow; aborted transactions dropped under read_committed).
- NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE,
  UNKNOWN_TOPIC_OR_PARTITION, REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, a
  lost connection or a timeout: refresh the metadata and retry from the same
  offset, backing off 50 ms doubling to 1 s, until ``RETRY_SECONDS`` pass
  without an answer; then the last error is raised (Spark retries the task).
  A new leader whose high watermark is still below the reader's offset (it
  learns the old leader's high watermark only from its followers) is waited
  for the same way, never taken as the end of the log.
- Security: ``kafka.security.protocol``, ``kafka.sasl.*`` and ``kafka.ssl.*``
  in Kafka's Java names (``sasl.jaas.config``, ``ssl.truststore.*``, ...) or
  librdkafka's (``sasl.username``/``sasl.password``, ``sasl.mechanisms``,
  ``ssl.ca.location``, ``ssl.certificate.location``/``ssl.key.location``,
  ``ssl.endpoint.identification.algorithm=none``) become one
  ``spool.security.client_config.ClientSecurity`` (``connection.client_security``).
"""

from __future__ import annotations

import gc
import queue
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from spool.protocol._generated import (
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
)
from spool.protocol.errors import error_name
from spool.spark.arrow_records import RecordsDecoder
from spool.spark.connection import Connection, ConnectionLost, client_security
from spool.spark.options import EARLIEST, SpoolOptions

FETCH_VERSION = 12
METADATA_VERSION = 12
LIST_OFFSETS_VERSION = 7
RETRY_SECONDS = 30.0
REQUEST_TIMEOUT_MS = 30000
MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 64 << 20
PARTITION_MAX_BYTES = 16 << 20
QUEUE_DEPTH = 2  # decoded batches the fetch thread may hold ahead of Spark

OFFSET_OUT_OF_RANGE = 1
# Errors after which the leader is looked up again and the request retried.
RETRY_ERRORS = frozenset({3, 5, 6, 9, 56, 74, 76, 78})
_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, at 23
_HEADER_SIZE = 61


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, deleted topic)."""


class FetchError(RuntimeError):
    """The broker refused a request for a reason retrying cannot fix (the error's name)."""


class _Retry(Exception):
    """A leader change, a lost connection: look the leader up again and retry."""


def data_loss(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer available in "
            "Spool; set the option failOnDataLoss=false to continue without it."
        )


# ---- the connection side: blocking connections, one per broker


class _Link:
    """Metadata, ListOffsets and Fetch for one partition, with retries (module docstring)."""

    def __init__(self, opts: SpoolOptions, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.read_committed = opts.isolation_level == "read_committed"
        conf = opts.client_conf
        self.max_bytes = int(conf.get("fetch.max.bytes", FETCH_MAX_BYTES))
        self.partition_max_bytes = int(conf.get("max.partition.fetch.bytes", PARTITION_MAX_BYTES))
        self.security = client_security(conf)
        self.bootstrap = []
        for server in opts.bootstrap.split(","):
            host, _, port = server.strip().rpartition(":")
            self.bootstrap.append((host.strip("[]"), int(port)))
        self.brokers: dict[int, tuple[str, int]] = {}
        self.conns: dict[tuple[str, int], Connection] = {}
        self.leader: tuple[str, int] | None = None
        self.leader_epoch = -1
        self.want: tuple[int, int] = (0, 0)  # the Fetch started: (offset, partition max bytes)
        self.sent = False

    def close(self) -> None:
        for c in self.conns.values():
            c.close()

    def _conn(self, addr: tuple[str, int]) -> Connection:
        c = self.conns.get(addr)
        if c is None:
            c = self.conns[addr] = Connection(addr[0], addr[1], self.security,
                                              timeout=REQUEST_TIMEOUT_MS / 1000)
        return c

    def refresh(self) -> None:
        """Find the leader (Metadata v12 from the known brokers, then the bootstrap ones)."""
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)],
                              allow_auto_topic_creation=False)
        last = "no broker answered"
        addrs = list(dict.fromkeys([*self.brokers.values(), *self.bootstrap]))
        if self.leader in addrs:  # ask the others first: the leader may be the one that is gone
            addrs.remove(self.leader)
            addrs.append(self.leader)
        self.leader = None
        for addr in addrs:
            try:
                md = self._conn(addr).request(req, METADATA_VERSION)
            except ConnectionLost as e:
                last = str(e)
                continue
            self.brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
            for t in md.topics:
                if t.name != self.topic:
                    continue
                if t.error_code:
                    last = f"Metadata {self.topic}: {error_name(t.error_code)}"
                    if t.error_code in RETRY_ERRORS:
                        break
                    raise FetchError(last)
                for p in t.partitions:
                    if p.partition_index != self.partition:
                        continue
                    if p.error_code or p.leader_id < 0 or p.leader_id not in self.brokers:
                        last = (f"{self.topic}-{self.partition} has no leader "
                                f"({error_name(p.error_code)})")
                        break
                    self.leader = self.brokers[p.leader_id]
                    self.leader_epoch = p.leader_epoch
                    return
                else:
                    last = f"{self.topic}-{self.partition} does not exist"
        raise _Retry(last)

    def _leader_conn(self) -> Connection:
        if self.leader is None:
            self.refresh()
        assert self.leader is not None
        return self._conn(self.leader)

    def _lost(self, e: ConnectionLost) -> _Retry:
        self.leader = None
        return _Retry(str(e))

    def _send_fetch(self, offset: int, partition_max_bytes: int) -> None:
        req = FetchRequest(
            max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=self.max_bytes,
            isolation_level=1 if self.read_committed else 0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=self.topic, partitions=[
                FetchRequest.FetchPartition(
                    partition=self.partition, current_leader_epoch=self.leader_epoch,
                    fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=partition_max_bytes)])])
        conn = self._leader_conn()
        try:
            conn.send(req, FETCH_VERSION)
        except ConnectionLost as e:
            raise self._lost(e) from None

    def _receive_fetch(self) -> Any:
        """The PartitionData of the Fetch sent (error NONE or OFFSET_OUT_OF_RANGE); _Retry."""
        assert self.leader is not None
        try:
            resp = self._conn(self.leader).receive()
        except ConnectionLost as e:
            raise self._lost(e) from None
        if resp.error_code:
            self._failed(resp.error_code, "Fetch")
        pd = resp.responses[0].partitions[0]
        if pd.error_code not in (0, OFFSET_OUT_OF_RANGE):
            self._failed(pd.error_code, "Fetch")
        return pd

    def start_fetch(self, offset: int, partition_max_bytes: int) -> None:
        """Put a Fetch on the wire now, if the leader is reachable (``finish_fetch`` reads it)."""
        self.want = (offset, partition_max_bytes)
        try:
            self._send_fetch(offset, partition_max_bytes)
            self.sent = True
        except _Retry:
            self.sent = False

    def finish_fetch(self) -> Any:
        """The response to the Fetch started, retried (``call``) if it failed."""
        if self.sent:
            self.sent = False
            try:
                return self._receive_fetch()
            except _Retry:
                pass

        def again() -> Any:
            self._send_fetch(*self.want)
            return self._receive_fetch()

        return self.call(again)

    def list_offset(self, timestamp: int) -> int:
        """ListOffsets at the leader: -2 the log start, -1 the end (the LSO under read_committed)."""
        req = ListOffsetsRequest(
            replica_id=-1, isolation_level=1 if self.read_committed else 0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=self.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=self.partition, current_leader_epoch=self.leader_epoch,
                    timestamp=timestamp)])])
        try:
            resp = self._leader_conn().request(req, LIST_OFFSETS_VERSION)
        except ConnectionLost as e:
            raise self._lost(e) from None
        p = resp.topics[0].partitions[0]
        if p.error_code:
            self._failed(p.error_code, "ListOffsets")
        return p.offset

    def _failed(self, code: int, what: str) -> None:
        message = f"{what} {self.topic}-{self.partition}: {error_name(code)}"
        if code in RETRY_ERRORS:
            self.leader = None
            raise _Retry(message)
        raise FetchError(message)

    def call(self, fn: Any) -> Any:
        """``fn()`` until it answers, the leader looked up again after each _Retry, backing off
        50 ms doubling to 1 s, for at most RETRY_SECONDS; then FetchError."""
        deadline = time.monotonic() + RETRY_SECONDS
        backoff = 0.05
        while True:
            try:
                return fn()
            except _Retry as e:
                if time.monotonic() + backoff > deadline:
                    raise FetchError(f"{self.topic}-{self.partition}: gave up after "
                                     f"{RETRY_SECONDS:.0f} s: {e}") from None
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)


# ---- the read


def next_offset(records: Any, offset: int) -> int:
    """The offset after the last complete batch of ``records`` (``offset`` if none)."""
    if not records:
        return offset
    n = len(records)
    pos = 0
    nxt = offset
    while n - pos >= _HEADER_SIZE:
        base, length = _HEAD.unpack_from(records, pos)
        size = 12 + length
        if pos + size > n:
            break
        (delta,) = _LAST_DELTA.unpack_from(records, pos + 23)
        nxt = max(nxt, base + delta + 1)
        pos += size
    return nxt


def read_range(
    opts: SpoolOptions, topic: str, partition: int, start: int, end: int
) -> Iterator[pa.RecordBatch]:
    if start != EARLIEST and start >= end:
        return
    _freeze_once()
    yield from _overlapped(lambda: _fetched(opts, topic, partition, start, end))


def _fetched(opts: SpoolOptions, topic: str, partition: int, start: int,
             end: int) -> Iterator[pa.RecordBatch]:
    link = _Link(opts, topic, partition)
    try:
        yield from _read(link, opts, topic, partition, start, end)
    finally:
        link.close()


_frozen = False


def _freeze_once() -> None:
    """``gc.freeze()`` once per Python worker: pyspark's daemon runs ``gc.collect()`` after
    every task, and the worker's imports (pyspark, pyarrow, numpy, pandas) are most of what
    it walks; frozen, they are no longer traversed (~45 ms of CPU per task with
    pyspark, pyarrow, pandas and spool imported; ~0 frozen).

    Only inside a Spark task (a read driven directly leaves its process's gc alone)."""
    global _frozen
    if not _frozen:
        from pyspark import TaskContext

        if TaskContext.get() is not None:
            _frozen = True
            gc.freeze()


_DONE = object()


def _overlapped(make: Any) -> Iterator[pa.RecordBatch]:
    """The batches of ``make()`` produced on a thread of their own, ``QUEUE_DEPTH`` ahead.

    Fetching and decoding (socket reads, numpy and Arrow kernels: the GIL is released) run
    while the caller writes the previous batch to the JVM. An exception of the producer is
    raised here; closing this generator early (Spark stops reading) stops the producer at
    its next batch, which closes its connections, and waits for it."""
    q: queue.Queue = queue.Queue(QUEUE_DEPTH)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            gen = make()
            try:
                for batch in gen:
                    if not put(batch):
                        return
            finally:
                gen.close()
            put(_DONE)
        except BaseException as e:  # noqa: BLE001 (handed to the consumer)
            put(e)

    thread = threading.Thread(target=produce, name="spool-fetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def _read(link: _Link, opts: SpoolOptions, topic: str, partition: int, start: int,
          end: int) -> Iterator[pa.RecordBatch]:
    if start == EARLIEST:
        start = link.call(lambda: link.list_offset(-2))
        if start >= end:
            return
    decoder = _decoder(topic, partition, opts)
    max_bytes = link.partition_max_bytes
    offset = start
    link.start_fetch(offset, max_bytes)
    moved = time.monotonic()  # the last time the offset advanced
    while True:
        pd = link.finish_fetch()
        if time.monotonic() - moved > RETRY_SECONDS:
            raise FetchError(f"{topic}-{partition}: no progress at offset {offset} for "
                             f"{RETRY_SECONDS:.0f} s (high watermark {pd.high_watermark})")
        if pd.error_code == OFFSET_OUT_OF_RANGE:
            low = link.call(lambda: link.list_offset(-2))
            if offset < low:
                data_loss(f"offsets {offset}..{low - 1} of {topic}-{partition} were removed",
                          opts.fail_on_data_loss)
                offset = low
                if offset >= end:
                    return
            else:
                high = link.call(lambda: link.list_offset(-1))
                if offset > high:
                    data_loss(f"offset {offset} of {topic}-{partition} is beyond the end of "
                              f"the log ({high}): it was truncated", opts.fail_on_data_loss)
                    return
                time.sleep(0.05)  # the log moved meanwhile: ask again
            link.start_fetch(offset, max_bytes)
            continue
        limit = pd.last_stable_offset if link.read_committed else pd.high_watermark
        records = pd.records
        nxt = next_offset(records, offset)
        more = True
        if nxt < end and nxt < limit:
            if nxt == offset:  # only part of a batch fit: ask for more at once
                max_bytes *= 2
            link.start_fetch(nxt, max_bytes)  # pipelined: on the wire while this one decodes
        elif nxt == offset and offset > limit:
            # a new leader that does not know the high watermark we read up to yet: wait
            time.sleep(0.05)
            link.start_fetch(offset, max_bytes)
        else:
            more = False
        if nxt > offset:
            moved = time.monotonic()
            aborted = pd.aborted_transactions
            batch, _ = decoder.feed(
                records, aborted and [(a.producer_id, a.first_offset) for a in aborted],
                offset, end)
            if batch is not None and batch.num_rows:
                yield batch
        offset = nxt
        if not more:
            return


def _decoder(topic: str, partition: int, opts: SpoolOptions) -> RecordsDecoder:
    return RecordsDecoder(topic, partition, opts.include_headers,
                          opts.isolation_level == "read_committed")
