"""RecordBatch v2 header: a zero-copy view, CRC-32C, validation, patching.

The 61-byte header (all big-endian)::

    off  size field
     0    8   baseOffset            broker assigns; outside the CRC
     8    4   batchLength           bytes after this field (total = 12 + batchLength)
    12    4   partitionLeaderEpoch  broker sets; outside the CRC
    16    1   magic                 must be 2
    17    4   crc                   CRC-32C (Castagnoli) of bytes [21, end)
    21    2   attributes            bits 0-2 codec, 3 LogAppendTime, 4 transactional,
                                    5 control, 6 delete horizon set
    23    4   lastOffsetDelta
    27    8   baseTimestamp
    35    8   maxTimestamp
    43    8   producerId            -1 when not idempotent
    51    2   producerEpoch
    53    4   baseSequence
    57    4   recordsCount          then the records (one compressed block if codec != 0)

Contract: nothing here copies the batch. ``BatchHeader.parse`` reads the header
from a buffer at a position; ``check_batch`` checks one batch's integrity
(length, magic, CRC, codec) as a reader must; ``validate_batch`` adds the
produce policy the broker applies; both raise ``KafkaError`` with Kafka's
code. ``patch_*`` write into a writable buffer (bytearray) in place. Records
stay opaque bytes here; ``spool.records.record`` decodes them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from spool.protocol.errors import Errors, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

# Kafka's MESSAGE_TOO_LARGE (10); spool.protocol.errors spells it MESSAGE_SIZE_TOO_LARGE.
MESSAGE_TOO_LARGE = 10

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_LENGTH_MAGIC = struct.Struct(">qiib")  # baseOffset, batchLength, leaderEpoch, magic


class BatchHeader(NamedTuple):
    """The decoded 61-byte header of one batch (a plain tuple: cheap to make)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Read a header at ``pos``; raises CORRUPT_MESSAGE if fewer than 61 bytes."""
        if len(buf) - pos < HEADER_SIZE:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "record batch header is truncated")
        return cls._make(_HEADER.unpack_from(buf, pos))

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire and on disk."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at 2**31 like Kafka's)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over ``[pos + 21, pos + size)``, the span the batch CRC covers."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def crc_is_valid(buf: bytes | bytearray | memoryview, pos: int = 0) -> bool:
    h = BatchHeader.parse(buf, pos)
    if len(buf) - pos < h.size:
        return False
    return compute_crc(buf, pos, h.size) == h.crc


def check_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, max_size: int | None = None
) -> BatchHeader:
    """Check the integrity of the batch at ``pos`` as stored or fetched; return its header.

    The read-side check (recovery, decoding): enough bytes for the header and
    for ``batchLength``; magic 2 (else UNSUPPORTED_FOR_MESSAGE_FORMAT); size
    limit (MESSAGE_TOO_LARGE, Kafka's code 10); CRC-32C (CORRUPT_MESSAGE); a
    known codec (CORRUPT_MESSAGE). No produce policy: a compacted batch whose
    ``lastOffsetDelta + 1 != recordsCount``, or a control batch, passes.
    """
    avail = len(buf) - pos
    if avail >= HEADER_SIZE:  # the common case: one unpack for every check (same order)
        h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        batch_length, magic = h.batch_length, h.magic
        size = LOG_OVERHEAD + batch_length
        if (magic != 2 or batch_length < HEADER_SIZE - LOG_OVERHEAD or size > avail
                or (max_size is not None and size > max_size)):
            _check_length_magic(batch_length, magic, avail, max_size)
        if crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")
        if h.attributes & CODEC_MASK > 4:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"unknown compression codec {h.compression}")
        return h
    if avail < LOG_OVERHEAD + 5:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "record batch is truncated")
    _, batch_length, _, magic = _LENGTH_MAGIC.unpack_from(buf, pos)
    _check_length_magic(batch_length, magic, avail, max_size)
    raise AssertionError("a batch of fewer than 61 bytes passed its length check")


def _check_length_magic(batch_length: int, magic: int, avail: int, max_size: int | None) -> None:
    """``check_batch``'s checks of the first 17 bytes, in Kafka's order (raises)."""
    if magic != 2:
        raise KafkaError(
            Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"record batch magic {magic} is not 2"
        )
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"record batch length {batch_length} too small")
    size = LOG_OVERHEAD + batch_length
    if max_size is not None and size > max_size:
        raise KafkaError(MESSAGE_TOO_LARGE, f"record batch of {size} bytes exceeds {max_size}")
    if avail < size:
        raise KafkaError(
            Errors.CORRUPT_MESSAGE, f"record batch needs {size} bytes, {avail} present"
        )


def validate_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_size: int | None = None,
    allow_control: bool = False,
) -> BatchHeader:
    """Validate the batch at ``pos`` as a produce request's batch; return its header.

    Checks: everything ``check_batch`` checks, then the produce policy:
    ``lastOffsetDelta + 1 == recordsCount`` and a non-negative count
    (INVALID_RECORD); control batches only when ``allow_control``
    (INVALID_RECORD); a transactional batch must carry a producer id
    (INVALID_RECORD).
    """
    h = check_batch(buf, pos, max_size=max_size)
    count, delta, attrs = h.records_count, h.last_offset_delta, h.attributes
    if count < 0 or delta < 0:
        raise KafkaError(Errors.INVALID_RECORD, "negative record count or offset delta")
    control = attrs & CONTROL_MASK
    if delta + 1 != count and not control:
        raise KafkaError(
            Errors.INVALID_RECORD,
            f"lastOffsetDelta {delta} does not match recordsCount {count}",
        )
    if control and not allow_control:
        raise KafkaError(Errors.INVALID_RECORD, "clients may not produce control batches")
    if attrs & TRANSACTIONAL_MASK and h.producer_id < 0:
        raise KafkaError(Errors.INVALID_RECORD, "transactional batch without a producer id")
    return h


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each whole batch in ``buf``; stops at a partial tail.

    Does not check CRCs; a batch whose declared length is impossible raises
    CORRUPT_MESSAGE.
    """
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "record batch length too small")
        if pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC: nothing else changes)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def patch_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Set the LogAppendTime attribute and maxTimestamp, then recompute the CRC."""
    h = BatchHeader.parse(buf, pos)
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, h.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, h.size))
