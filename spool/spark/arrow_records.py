"""Fetched record batches straight into Arrow: one partition's ``records`` -> a RecordBatch.

``RecordsDecoder(topic, partition, include_headers, read_committed)`` is
made once per partition read; ``feed(records, aborted, start, end)`` takes
the ``records`` field of one FetchResponse partition (RecordBatch v2
bytes, possibly ending in a partial batch) and returns ``(batch, next)``:

* ``batch``: every data record with ``start <= offset < end`` in Spark's
  Kafka schema (``spool.spark.schema.arrow_schema(include_headers)``), or
  ``None`` when there is none;
* ``next``: the offset to fetch next, past the last complete batch seen
  (control and aborted batches included); ``start`` if there is none. A
  partial trailing batch is ignored (the next fetch returns it whole).

Per batch: the 61-byte header is read with ``struct``; the records block is
inflated with ``spool.records.compression.decompress``; the CRC is NOT
checked (as librdkafka's default ``check.crcs=false``; the broker checked
it on produce). Control batches never become rows. LogAppendTime batches
give every record the batch's maxTimestamp; ``timestampType`` is Spark's
(0 CreateTime, 1 LogAppendTime). Headers are decoded only when asked.

read_committed follows Kafka's consumer (CompletedFetch): ``aborted`` is
the response's AbortedTransactions as ``(producer_id, first_offset)``;
before each batch with a producer id, every aborted transaction whose
first offset is at most the batch's last offset marks its producer as
aborted; an ABORT marker (a control batch whose first record is an abort)
clears its producer; a transactional data batch of a marked producer is
dropped whole. The marked producers and the transactions not reached yet
carry across ``feed`` calls. With read_uncommitted ``aborted`` is ignored.

Errors: malformed batches or records raise ``KafkaError`` (CORRUPT_MESSAGE;
a magic other than 2 is UNSUPPORTED_FOR_MESSAGE_FORMAT). Not thread-safe:
one decoder per partition read.
"""

from __future__ import annotations

import heapq
import struct

import pyarrow as pa

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import (
    CODEC_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
)
from spool.records.compression import decompress
from spool.records.record import CONTROL_ABORT, decode_records
from spool.spark.schema import HEADER_TYPE, arrow_schema

Buffer = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
_TS_TYPE = pa.timestamp("us", tz="UTC")
_CONTROL_TYPE = struct.Struct(">hh")


class RecordsDecoder:
    """Decodes one partition's fetched records into Arrow (see the module contract)."""

    def __init__(
        self, topic: str, partition: int, include_headers: bool, read_committed: bool
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.read_committed = read_committed
        self.schema = arrow_schema(include_headers)
        self._aborted_producers: set[int] = set()
        self._pending: list[tuple[int, int]] = []  # heap of (first_offset, producer_id)
        self._pending_seen: set[tuple[int, int]] = set()

    def feed(
        self,
        records: Buffer,
        aborted: list[tuple[int, int]] | None,
        start: int,
        end: int,
    ) -> tuple[pa.RecordBatch | None, int]:
        """Decode one FetchResponse partition's ``records``; see the module contract."""
        if self.read_committed and aborted:
            self._add_aborted(aborted)
        buf = memoryview(records).cast("B") if not isinstance(records, bytes) else records
        cols = _Columns()
        next_offset = start
        for pos, h in _iter_whole_batches(buf):
            next_offset = max(next_offset, h.base_offset + h.last_offset_delta + 1)
            if not self._keep(buf, pos, h):
                continue
            if h.attributes & CONTROL_MASK or h.records_count == 0:
                continue
            if h.base_offset + h.last_offset_delta < start or h.base_offset >= end:
                continue
            cols.add(h, _block(buf, pos, h), start, end, self.include_headers)
        if not cols.offsets:
            return None, next_offset
        return cols.batch(self.topic, self.partition, self.schema), next_offset

    def _add_aborted(self, aborted: list[tuple[int, int]]) -> None:
        for producer_id, first_offset in aborted:
            item = (first_offset, producer_id)
            if item not in self._pending_seen:
                self._pending_seen.add(item)
                heapq.heappush(self._pending, item)

    def _keep(self, buf: Buffer, pos: int, h: BatchHeader) -> bool:
        """read_committed's per-batch step (Kafka's CompletedFetch); False drops the batch."""
        if not self.read_committed or h.producer_id < 0:
            return True
        last_offset = h.base_offset + h.last_offset_delta
        pending = self._pending
        while pending and pending[0][0] <= last_offset:
            _, producer_id = heapq.heappop(pending)
            self._aborted_producers.add(producer_id)
        if h.attributes & CONTROL_MASK:
            if _is_abort_marker(buf, pos, h):
                self._aborted_producers.discard(h.producer_id)
            return True
        return not (
            h.attributes & TRANSACTIONAL_MASK and h.producer_id in self._aborted_producers
        )


def _iter_whole_batches(buf: Buffer):
    """(position, header) of each complete batch; stops at a partial tail."""
    pos = 0
    size = len(buf)
    unpack = _HEADER.unpack_from
    while size - pos >= HEADER_SIZE:
        h = BatchHeader._make(unpack(buf, pos))
        if h.magic != 2:
            raise KafkaError(
                Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"record batch magic {h.magic} is not 2"
            )
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or h.records_count < 0:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "record batch header is corrupt")
        batch_end = pos + LOG_OVERHEAD + h.batch_length
        if batch_end > size:
            return
        yield pos, h
        pos = batch_end


def _block(buf: Buffer, pos: int, h: BatchHeader) -> bytes:
    """The batch's records block, inflated."""
    raw = memoryview(buf)[pos + HEADER_SIZE : pos + LOG_OVERHEAD + h.batch_length]
    return decompress(h.attributes & CODEC_MASK, raw)


def _is_abort_marker(buf: Buffer, pos: int, h: BatchHeader) -> bool:
    if h.records_count == 0:
        return False
    records = decode_records(h, _block(buf, pos, h))
    first = next(records, None)
    if first is None or first.key is None or len(first.key) < _CONTROL_TYPE.size:
        return False
    return _CONTROL_TYPE.unpack_from(first.key)[1] == CONTROL_ABORT


class _Columns:
    """Row values gathered batch by batch (the first, plain version)."""

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[dict]] = []

    def add(self, h: BatchHeader, data: bytes, start: int, end: int, headers: bool) -> None:
        ts_type = 1 if h.attributes & TIMESTAMP_TYPE_MASK else 0
        for r in decode_records(h, data):
            if r.offset < start or r.offset >= end:
                continue
            self.keys.append(r.key)
            self.values.append(r.value)
            self.offsets.append(r.offset)
            self.timestamps.append(r.timestamp * 1000)
            self.types.append(ts_type)
            if headers:
                self.headers.append(
                    [
                        {"key": k.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                         "value": v}
                        for k, v in r.headers
                    ]
                )

    def batch(self, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
        n = len(self.offsets)
        cols = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.int64()).cast(_TS_TYPE),
            pa.array(self.types, pa.int32()),
        ]
        if len(schema) > len(cols):
            cols.append(pa.array(self.headers, HEADER_TYPE))
        return pa.RecordBatch.from_arrays(cols, schema=schema)
