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

How (per response): batches are chosen in Python from their headers; the
records blocks (the response itself when nothing is compressed, else the
inflated blocks joined, 8 MiB at a time) are walked for record starts
(``spool.spark.record_walk``: the only per-record Python, skipped for runs
of equal-size records); every field is then decoded with numpy, 8192
records at a time while their bytes are in the CPU cache; keys and values
are copied by Arrow (``take`` over one binary array whose elements are the
spans and the gaps between them), with no Python object per record.

Errors: malformed batches or records raise ``KafkaError`` (CORRUPT_MESSAGE;
a magic other than 2 is UNSUPPORTED_FOR_MESSAGE_FORMAT). Not thread-safe:
one decoder per partition read.
"""

from __future__ import annotations

import heapq
import struct

import numpy as np
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
from spool.records.varint import read_varint
from spool.spark.record_walk import u16_view, varints, walk
from spool.spark.schema import HEADER_TYPE, arrow_schema

Buffer = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
_TS_TYPE = pa.timestamp("us", tz="UTC")
CHUNK = 8192  # records decoded together: their bytes stay in the CPU cache
GROUP_BYTES = 8 << 20  # decompressed bytes decoded together (one joined buffer)
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
        records: Buffer | None,
        aborted: list[tuple[int, int]] | None,
        start: int,
        end: int,
    ) -> tuple[pa.RecordBatch | None, int]:
        """Decode one FetchResponse partition's ``records``; see the module contract."""
        if self.read_committed and aborted:
            self._add_aborted(aborted)
        if records is None:  # a partition with an error has no records
            return None, start
        buf = records if isinstance(records, bytes) else memoryview(records).cast("B")
        blocks: list[tuple[bytes | None, int, int, BatchHeader]] = []
        groups: list[tuple] = []
        inflated = 0  # bytes of decompressed blocks waiting in ``blocks``
        next_offset = start
        for pos, h in _iter_whole_batches(buf):
            next_offset = max(next_offset, h.base_offset + h.last_offset_delta + 1)
            if not self._keep(buf, pos, h):
                continue
            if h.attributes & CONTROL_MASK or h.records_count == 0:
                continue
            if h.base_offset + h.last_offset_delta < start or h.base_offset >= end:
                continue
            lo, hi = pos + HEADER_SIZE, pos + LOG_OVERHEAD + h.batch_length
            if h.attributes & CODEC_MASK:
                block = decompress(h.attributes & CODEC_MASK, memoryview(buf)[lo:hi])
                blocks.append((block, 0, len(block), h))
                inflated += len(block)
                if inflated >= GROUP_BYTES:  # bound the memory (and stay in the cache)
                    groups.append(_decode(buf, blocks, start, end, self.include_headers))
                    blocks, inflated = [], 0
            else:
                blocks.append((None, lo, hi, h))
        if blocks:
            groups.append(_decode(buf, blocks, start, end, self.include_headers))
        groups = [g for g in groups if g is not None]
        if not groups:
            return None, next_offset
        cols = groups[0] if len(groups) == 1 else [
            np.concatenate(col) if isinstance(col[0], np.ndarray) else pa.concat_arrays(col)
            for col in zip(*groups, strict=True)
        ]
        key, value, offsets, timestamps, types, *headers = cols
        n = len(offsets)
        arrays = [
            key,
            value,
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(offsets),
            pa.array(timestamps, _TS_TYPE),
            pa.array(types),
            *headers,
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema), next_offset

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


# Columns. ``data`` holds the records blocks of the batches to decode (the response
# itself when none is compressed, else the blocks joined); every column is computed
# with numpy over all records at once, from the positions the walk found.


def _decode(
    buf: Buffer,
    blocks: list[tuple[bytes | None, int, int, BatchHeader]],
    start: int,
    end: int,
    include_headers: bool,
) -> tuple[pa.Array, ...] | None:
    if all(src is None for src, _, _, _ in blocks):
        data = buf
        spans = [(lo, hi, h) for _, lo, hi, h in blocks]
    else:
        mv = memoryview(buf)
        pieces: list[Buffer] = []
        spans = []
        at = 0
        for src, lo, hi, h in blocks:
            piece = mv[lo:hi] if src is None else src
            pieces.append(piece)
            spans.append((at, at + len(piece), h))
            at += len(piece)
        data = b"".join(pieces)
    u8 = np.frombuffer(data, np.uint8)
    u16 = u16_view(u8)
    # Walk and decode ~CHUNK records at a time: the field passes then find their bytes
    # in the CPU cache the walk just filled (2-3x fewer cycles than whole responses).
    parts: list[tuple[np.ndarray, ...]] = []
    runs: list[np.ndarray] = []
    ends: list[tuple[int, int]] = []  # (records so far, block end) per batch
    walked = 0
    for i, (lo, hi, h) in enumerate(spans):
        walk(data, u8, u16, lo, hi, h.records_count, runs)
        walked += h.records_count
        ends.append((walked, hi))
        if walked >= CHUNK or i == len(spans) - 1:
            rec_start = np.concatenate(runs) if len(runs) > 1 else runs[0]
            rec_end = np.empty(walked, np.int64)
            rec_end[:-1] = rec_start[1:]
            rec_end[[k - 1 for k, _ in ends]] = [e for _, e in ends]
            for at in range(0, walked, CHUNK):
                parts.append(
                    _fields(u8, u16, rec_start[at : at + CHUNK], rec_end[at : at + CHUNK])
                )
            runs, ends, walked = [], [], 0
    ts_delta, offset_delta, key_pos, key_len, value_pos, value_len, p, header_count, rec_end = (
        np.concatenate(col) if len(parts) > 1 else col[0] for col in zip(*parts, strict=True)
    )
    counts = np.array([h.records_count for _, _, h in spans], np.int64)
    last = np.cumsum(counts) - 1

    offsets = np.repeat(np.array([h.base_offset for _, _, h in spans], np.int64), counts)
    offsets += offset_delta
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        if not keep.any():
            return None
        offsets, ts_delta, key_pos, key_len, value_pos, value_len, p, header_count, rec_end = (
            a[keep] for a in (offsets, ts_delta, key_pos, key_len, value_pos, value_len,
                              p, header_count, rec_end)
        )
        counts = np.add.reduceat(keep.astype(np.int64), np.concatenate(([0], last[:-1] + 1)))
    timestamps = _timestamps([h for _, _, h in spans], counts, ts_delta)
    types = np.repeat(
        np.array([1 if h.attributes & TIMESTAMP_TYPE_MASK else 0 for _, _, h in spans],
                 np.int32),
        counts,
    )
    data_buf = pa.py_buffer(data)
    cols = [
        _binary(data_buf, key_pos, key_len),
        _binary(data_buf, value_pos, value_len),
        offsets,
        timestamps,
        types,
    ]
    if include_headers:
        cols.append(_headers(data, data_buf, p, header_count, rec_end))
    return tuple(cols)


def _fields(
    u8: np.ndarray, u16: np.ndarray, rec_start: np.ndarray, rec_end: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Every field of the records at ``rec_start`` (each ending at ``rec_end``)."""
    p = rec_start + varints(u8, u16, rec_start, 5)[1] + 1  # length, attributes
    ts_delta, size = varints(u8, u16, p, 10)
    p += size
    offset_delta, size = varints(u8, u16, p, 5)
    p += size
    key_len, size = varints(u8, u16, p, 5)
    key_pos = p + size
    p = key_pos + np.maximum(key_len, 0)
    value_len, size = varints(u8, u16, p, 5)
    value_pos = p + size
    p = value_pos + np.maximum(value_len, 0)
    header_count, size = varints(u8, u16, p, 5)
    p += size
    if (
        min(key_len.min(), value_len.min()) < -1
        or header_count.min() < 0
        or (p > rec_end).any()
        or ((header_count == 0) & (p != rec_end)).any()
    ):
        raise _corrupt("a record's fields do not match its length")
    return ts_delta, offset_delta, key_pos, key_len, value_pos, value_len, p, header_count, rec_end


def _corrupt(message: str) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, message)


def _timestamps(headers: list[BatchHeader], counts: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Milliseconds -> microseconds; LogAppendTime batches: maxTimestamp for every record."""
    base = np.array(
        [h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else h.base_timestamp
         for h in headers],
        np.int64,
    )
    ts = np.repeat(base, counts)
    append_time = np.array([bool(h.attributes & TIMESTAMP_TYPE_MASK) for h in headers])
    if append_time.all():
        pass
    elif append_time.any():
        ts += np.where(np.repeat(append_time, counts), 0, delta)
    else:
        ts += delta
    ts *= 1000
    return ts


def _binary(data: pa.Buffer, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    """A binary array of ``data[pos:pos+length]`` (null where length is -1), one copy in C++.

    The spans, in increasing order, and the gaps between them are the elements of
    one binary array over ``data``; taking every other element copies the spans.
    """
    n = len(pos)
    if n == 0:
        return pa.array([], pa.binary())
    nulls = length < 0
    any_null = bool(nulls.any())
    if any_null and nulls.all():
        return pa.nulls(n, pa.binary())
    if data.size >= 1 << 31:
        raise _corrupt("records of 2 GiB or more in one response")
    bounds = np.empty(2 * n + 1, np.int32)
    bounds[0:-1:2] = pos
    bounds[1::2] = pos + np.maximum(length, 0)
    bounds[-1] = bounds[-2]
    spans = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(bounds), data])
    index = np.arange(0, 2 * n, 2, dtype=np.int32)
    return spans.take(pa.array(index, mask=nulls) if any_null else pa.array(index))


# Headers, only when asked: positions found in Python per header, arrays built as above.


def _headers(data: Buffer, data_buf: pa.Buffer, pos: np.ndarray, count: np.ndarray,
             rec_end: np.ndarray) -> pa.Array:
    key_pos: list[int] = []
    key_len: list[int] = []
    value_pos: list[int] = []
    value_len: list[int] = []
    try:
        for i in np.flatnonzero(count).tolist():
            at = int(pos[i])
            limit = int(rec_end[i])
            for _ in range(int(count[i])):
                n, at = read_varint(data, at)
                if n < 0 or at + n > limit:
                    raise _corrupt(f"record header key length {n}")
                key_pos.append(at)
                key_len.append(n)
                at += n
                n, at = read_varint(data, at)
                if n < -1 or at + max(n, 0) > limit:
                    raise _corrupt(f"record header value length {n}")
                value_pos.append(at)
                value_len.append(n)
                at += max(n, 0)
            if at != limit:
                raise _corrupt("record headers do not end with the record")
    except IndexError:
        raise _corrupt("record headers are truncated") from None
    keys = _binary(data_buf, np.array(key_pos, np.int64), np.array(key_len, np.int64))
    try:
        keys = keys.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: replaced, as Java's String(bytes, UTF_8) does
        keys = pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())
    values = _binary(data_buf, np.array(value_pos, np.int64), np.array(value_len, np.int64))
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE.value_type))
    list_offsets = np.zeros(len(count) + 1, np.int32)
    np.cumsum(count, out=list_offsets[1:])
    return pa.ListArray.from_arrays(pa.array(list_offsets), entries, type=HEADER_TYPE)
