"""Building RecordBatch v2 batches: produce-style batches, compaction output, markers.

``BatchBuilder`` lifecycle: construct with the batch-level fields, ``append``
records in offset order, then ``build()`` once (the builder stays usable:
``build`` is a pure function of what was appended). Not thread-safe.

What ``build`` computes (layout in ``spool.records.batch``)::

    batchLength      from the encoded size
    crc              CRC-32C over [attributes, end)
    attributes       codec | LogAppendTime (bit 3) | transactional (4) | control (5)
                     | delete horizon (6)
    lastOffsetDelta  the last record's offsetDelta, or the explicit
                     ``last_offset_delta`` (compaction keeps the original one)
    baseTimestamp    the first record's timestamp; the LogAppendTime when
                     given; the delete horizon when given; -1 for an empty batch
    maxTimestamp     the largest record timestamp; the LogAppendTime when given
    recordsCount     records appended

Offsets: by default record i gets offsetDelta i (what a producer sends).
``append(..., offset_delta=d)`` sets it explicitly; deltas must strictly
increase, so compaction can rebuild a batch whose records keep their
original offsets with gaps between them (then lastOffsetDelta + 1 may
exceed recordsCount, which ``check_batch`` and ``iter_records`` accept and
``validate_batch``, the produce policy, rejects).

Timestamps come from the caller (records never read a clock). Errors in the
caller's arguments (offset deltas that do not increase, values outside
their wire type) raise ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable

from crc32c import crc32c

from spool.records.batch import (
    _HEADER,
    _UINT32,
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from spool.records.compression import NONE, compress
from spool.records.record import CONTROL_ABORT, CONTROL_COMMIT, ControlRecord, Header, Record
from spool.records.varint import write_varint, write_varlong

_NULL = write_varint(-1)


class BatchBuilder:
    """Accumulates records and encodes one RecordBatch v2 (see the module docstring)."""

    def __init__(
        self,
        base_offset: int = 0,
        *,
        compression: int = NONE,
        compression_level: int | None = None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
        log_append_time: int | None = None,
        delete_horizon_ms: int | None = None,
        last_offset_delta: int | None = None,
    ) -> None:
        if not 0 <= compression <= 4:
            raise ValueError(f"unknown compression codec {compression}")
        if log_append_time is not None and delete_horizon_ms is not None:
            raise ValueError("a batch has either a LogAppendTime or a delete horizon base")
        self.base_offset = base_offset
        self.compression = compression
        self.compression_level = compression_level
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.log_append_time = log_append_time
        self.delete_horizon_ms = delete_horizon_ms
        self.last_offset_delta = last_offset_delta
        self._base_timestamp: int | None = (
            log_append_time if log_append_time is not None else delete_horizon_ms
        )
        self._max_timestamp = NO_TIMESTAMP
        self._last_delta = -1
        self._chunks: list[bytes] = []

    def __len__(self) -> int:
        return len(self._chunks)

    @property
    def attributes(self) -> int:
        attrs = self.compression
        if self.log_append_time is not None:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attrs |= TRANSACTIONAL_MASK
        if self.is_control:
            attrs |= CONTROL_MASK
        if self.delete_horizon_ms is not None:
            attrs |= DELETE_HORIZON_MASK
        return attrs

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int,
        headers: Iterable[Header] = (),
        offset_delta: int | None = None,
        attributes: int = 0,
    ) -> int:
        """Encode one record; returns its offset delta."""
        if offset_delta is None:
            offset_delta = self._last_delta + 1
        elif offset_delta <= self._last_delta:
            raise ValueError(f"offset delta {offset_delta} after {self._last_delta}")
        if self.log_append_time is not None:
            timestamp = self.log_append_time
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        parts = [
            bytes((attributes & 0xFF,)),
            write_varlong(timestamp - self._base_timestamp),
            write_varint(offset_delta),
        ]
        _append_bytes(parts, key)
        _append_bytes(parts, value)
        headers = list(headers)
        parts.append(write_varint(len(headers)))
        for hkey, hval in headers:
            _append_bytes(parts, hkey.encode("utf-8", "surrogateescape"))
            _append_bytes(parts, hval)
        body = b"".join(parts)
        self._chunks.append(write_varint(len(body)) + body)
        self._last_delta = offset_delta
        return offset_delta

    def append_record(self, record: Record) -> int:
        """Append a decoded record keeping its offset (offset - base_offset is the delta)."""
        return self.append(
            record.key,
            record.value,
            timestamp=record.timestamp,
            headers=record.headers,
            offset_delta=record.offset - self.base_offset,
            attributes=record.attributes,
        )

    def build(self) -> bytes:
        """Encode the batch: header, CRC and the (compressed) records block."""
        last_delta = self._last_delta
        if self.last_offset_delta is not None:
            if self.last_offset_delta < last_delta:
                raise ValueError(
                    f"last_offset_delta {self.last_offset_delta} < last record's {last_delta}"
                )
            last_delta = self.last_offset_delta
        if last_delta < 0:
            raise ValueError("an empty batch needs an explicit last_offset_delta")
        block = b"".join(self._chunks)
        if self.compression != NONE and self._chunks:  # an empty batch has no block
            block = compress(self.compression, block, self.compression_level)
        base_ts = NO_TIMESTAMP if self._base_timestamp is None else self._base_timestamp
        max_ts = self._max_timestamp
        if self.log_append_time is not None:
            max_ts = self.log_append_time
        elif not self._chunks:
            max_ts = base_ts
        out = bytearray(HEADER_SIZE + len(block))
        _HEADER.pack_into(
            out,
            0,
            self.base_offset,
            len(out) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            2,
            0,
            self.attributes,
            last_delta,
            base_ts,
            max_ts,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            len(self._chunks),
        )
        out[HEADER_SIZE:] = block
        _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
        return bytes(out)


def _append_bytes(parts: list[bytes], data: bytes | None) -> None:
    if data is None:
        parts.append(_NULL)
    else:
        parts.append(write_varint(len(data)))
        parts.append(bytes(data))


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    base_offset: int,
    timestamp: int,
    *,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One transaction marker (COMMIT or ABORT) as the broker writes it on EndTxn.

    A one-record batch with the control and transactional bits, the
    transaction's producer id and epoch, no sequence, no compression.
    """
    marker = ControlRecord(CONTROL_COMMIT if commit else CONTROL_ABORT, coordinator_epoch)
    key, value = marker.encode()
    b = BatchBuilder(
        base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    b.append(key, value, timestamp=timestamp)
    return b.build()
