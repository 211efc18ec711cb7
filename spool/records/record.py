"""Records inside one RecordBatch v2: decoding, and transaction-marker control records.

After the 61-byte header come ``recordsCount`` records (as one compressed
block when the batch's codec is not 0). One record::

    length          varint    bytes that follow in this record
    attributes      int8      unused (0)
    timestampDelta  varlong   timestamp = baseTimestamp + delta
    offsetDelta     varint    offset    = baseOffset + delta
    keyLength       varint    -1 = null key
    key             bytes[keyLength]
    valueLength     varint    -1 = null value
    value           bytes[valueLength]
    headersCount    varint
    headers         headersCount x (keyLength varint >= 0, key UTF-8,
                                    valueLength varint (-1 = null), value)

For a LogAppendTime batch every record's timestamp is the batch's
maxTimestamp (the deltas are ignored).

A control batch (attribute bit 5) holds control records. A transaction
marker (types 0 abort, 1 commit)::

    key   = version int16 (0) | type int16
    value = version int16 (0) | coordinatorEpoch int32

Contract: ``iter_records(buf, pos)`` checks the batch at ``pos`` (length,
magic, CRC, codec: ``check_batch``) and inflates it when called -- errors
there raise at once -- then yields ``Record``s in order. Anything malformed -- a bad varint, a length past the record or the
block, a negative header count or key length, fewer or more records than
``recordsCount``, bytes left over, a failed decompression -- raises
``KafkaError(CORRUPT_MESSAGE)``, never another exception. Header keys are
decoded as UTF-8 with ``surrogateescape`` so invalid bytes survive a
decode/encode round trip (``BatchBuilder`` encodes them back the same way).
Keys, values and header values are ``bytes`` copies.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import HEADER_SIZE, BatchHeader, check_batch
from spool.records.compression import DEFAULT_MAX_SIZE, decompress
from spool.records.varint import read_varint, read_varlong

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class Record(NamedTuple):
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    attributes: int = 0


class ControlRecord(NamedTuple):
    """A control record's key and value: a transaction marker for types 0 and 1.

    ``coordinator_epoch`` is -1 for control types that are not transaction
    markers (KRaft's own types 2-6), whose value is not interpreted.
    """

    type: int
    coordinator_epoch: int = -1
    version: int = 0

    @property
    def is_commit(self) -> bool:
        return self.type == CONTROL_COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == CONTROL_ABORT

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> ControlRecord:
        """Parse a control record's key and value; CORRUPT_MESSAGE if malformed."""
        if key is None or len(key) < _CONTROL_KEY.size:
            raise _corrupt("control record key is shorter than 4 bytes")
        version, type_ = _CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise _corrupt(f"control record key version {version}")
        if type_ not in (CONTROL_ABORT, CONTROL_COMMIT):
            return cls(type_, -1, version)
        if value is None or len(value) < _CONTROL_VALUE.size:
            raise _corrupt("transaction marker value is shorter than 6 bytes")
        value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
        if value_version < 0:
            raise _corrupt(f"transaction marker value version {value_version}")
        return cls(type_, coordinator_epoch, version)

    def encode(self) -> tuple[bytes, bytes]:
        """The (key, value) of this marker, both at version 0."""
        return _CONTROL_KEY.pack(0, self.type), _CONTROL_VALUE.pack(0, self.coordinator_epoch)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, message)


def iter_records(
    buf: Buffer, pos: int = 0, *, max_decompressed_size: int = DEFAULT_MAX_SIZE
) -> Iterator[Record]:
    """Check the batch at ``pos`` and yield its records (see the module contract)."""
    h = check_batch(buf, pos)
    if h.records_count < 0:
        raise _corrupt(f"negative record count {h.records_count}")
    block = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    if h.records_count == 0 and not block:
        return iter(())  # an empty batch (compaction keeps them) has no block to inflate
    data = decompress(h.compression, block, max_decompressed_size)
    return decode_records(h, data)


MIN_RECORD_SIZE = 7  # length varint (1) + attributes, timestamp, offset, key, value, headers


def check_record_count(buf: Buffer, pos: int, h: BatchHeader) -> None:
    """Produce policy for the batch at ``pos``: its records block holds exactly
    ``recordsCount`` records (walking only their length varints), as Kafka's
    record iterator checks; INVALID_RECORD otherwise (a 70-byte batch claiming
    2**31-1 records must not move the log end offset by 2**31).

    An uncompressed batch is always walked: record by record, except that once a record
    repeats the last one's length the records after it with that same length are stepped
    over together (``same_length_run``), so fixed-size records cost ~12 ns each instead of
    ~150 (same answers, same error codes). A compressed one is inflated and
    walked only when it claims more records than it has compressed bytes
    (real batches hold far fewer; Kafka inflates every one): then no batch can
    claim more offsets than its size without being counted. A block that does
    not inflate within ``DEFAULT_MAX_SIZE`` is CORRUPT_MESSAGE.
    """
    end = pos + h.size
    pos += HEADER_SIZE
    count = h.records_count
    if h.compression == 0:
        _walk_records(buf, pos, end, count)
    elif count > end - pos:
        data = decompress(h.compression, memoryview(buf)[pos:end], DEFAULT_MAX_SIZE)
        _walk_records(data, 0, len(data), count)


def _walk_records(buf: Buffer, pos: int, end: int, count: int) -> None:
    if count < 0 or count * MIN_RECORD_SIZE > end - pos:
        raise KafkaError(Errors.INVALID_RECORD,
                         f"recordsCount {count} does not fit in {end - pos} bytes of records")
    try:
        # under ~20 records a jump does not pay: one by one
        pos, walked, n = _step(buf, pos, end, count, count >= 24)
        count -= walked
        while count:
            # The record whose varint ends at pos repeats the last one's length: step over
            # it and jump over all the records after it with that length (and varint).
            pos += n
            count -= 1
            if count < 16:  # too few left for a jump to pay: the rest one by one
                pos, _, _ = _step(buf, pos, end, count, False)
                break
            n2, q = _length(buf, pos)
            run = same_length_run(buf, pos, end, q - pos + n, q - pos, count) if n2 == n else 0
            pos, count = pos + run * (q - pos + n), count - run
            if run < 16 and count:  # lengths that repeat in short runs: walk a while
                k = min(count, 64)
                pos, _, _ = _step(buf, pos, end, k, False)
                count -= k
            pos, walked, n = _step(buf, pos, end, count, True)
            count -= walked
    except IndexError:
        raise KafkaError(Errors.INVALID_RECORD,
                         "Incorrect declared batch size, premature EOF reached") from None
    if pos != end:
        raise KafkaError(Errors.INVALID_RECORD,
                         "Incorrect declared batch size, records still remaining in file")


def _step(buf: Buffer, pos: int, end: int, count: int, watch: bool) -> tuple[int, int, int]:
    """Step over up to ``count`` records one by one: (position, records stepped over, -1).
    With ``watch``, stop at the first record whose length repeats the one before it:
    (the position after its length varint, records before it, its length)."""
    prev = -1
    for walked in range(count):
        b = buf[pos]
        if b < 0x80:  # a record under 64 bytes
            n, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif buf[pos + 1] < 0x80:  # under 8 KiB: two bytes, inline (no call per record)
            u = (b & 0x7F) | (buf[pos + 1] << 7)
            n, pos = (u >> 1) ^ -(u & 1), pos + 2
        else:
            n, pos = read_varint(buf, pos)
        if n < MIN_RECORD_SIZE - 1 or pos + n > end:
            raise KafkaError(Errors.INVALID_RECORD,
                             "Incorrect declared batch size, premature EOF reached")
        if n == prev:
            return pos, walked, n
        if watch:
            prev = n
        pos += n
    return pos, count, -1


def _length(buf: Buffer, pos: int) -> tuple[int, int]:
    """The length varint at ``pos`` read as the walk reads it: (value, position after)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    if buf[pos + 1] < 0x80:
        u = (b & 0x7F) | (buf[pos + 1] << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    return read_varint(buf, pos)


def same_length_run(buf: Buffer, pos: int, end: int, stride: int, prefix: int,
                    count: int) -> int:
    """How many of the next ``count`` records, the first at ``pos``, have its length
    varint (``prefix`` bytes) and so its ``stride``, and end by ``end``: each prefix byte
    is compared down strided slices (C loops, no Python step per record), in windows of
    16, 32, 64... records so a short run costs little (0: the record at ``pos`` does not
    end by ``end``). Fixed-size records (one payload size, no keys or headers of varying
    length) make runs as long as the offset-delta varint keeps its size: 64, then 8,128."""
    view = memoryview(buf)
    head = view[pos:pos + prefix].tobytes()
    total, window = 0, 16
    while True:
        r = min(window, count - total, (end - pos) // stride)
        if r <= 0:
            return total
        got = r
        for i in range(prefix):
            col = view[pos + i:pos + r * stride:stride].tobytes()
            got = min(got, len(col) - len(col.lstrip(head[i:i + 1])))
        total += got
        if got < r:
            return total
        pos += got * stride
        window *= 2


def decode_records(h: BatchHeader, data: bytes) -> Iterator[Record]:
    """Yield the records of an already checked, inflated records block ``data`` (bytes)."""
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    log_append_ts = h.max_timestamp if h.is_log_append_time else None
    new = tuple.__new__  # Record(...) without NamedTuple's keyword-handling __new__
    end = len(data)
    pos = 0
    try:
        for _ in range(h.records_count):
            # Each varint takes an inline one-byte fast path (values -64..63),
            # else the general reader.
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = read_varint(data, pos)
            rec_end = pos + n
            if n < 6 or rec_end > end:
                raise _corrupt(f"record length {n} at {pos} is out of bounds")
            attributes = data[pos]
            b = data[pos + 1]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, pos = read_varlong(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                off_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                off_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = read_varint(data, pos)
            if n >= 0:
                if pos + n > rec_end:
                    raise _corrupt("record key overruns the record")
                key: bytes | None = data[pos : pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise _corrupt(f"record key length {n}")
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = read_varint(data, pos)
            if n >= 0:
                if pos + n > rec_end:
                    raise _corrupt("record value overruns the record")
                value: bytes | None = data[pos : pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise _corrupt(f"record value length {n}")
            if data[pos] == 0:
                headers: list[Header] = []
                pos += 1
            else:
                n, pos = read_varint(data, pos)
                headers, pos = _read_headers(data, pos, n, rec_end)
            if pos != rec_end:
                raise _corrupt(f"record ends at {pos}, its length says {rec_end}")
            yield new(
                Record,
                (
                    base_offset + off_delta,
                    base_ts + ts_delta if log_append_ts is None else log_append_ts,
                    key,
                    value,
                    headers,
                    attributes,
                ),
            )
    except IndexError:
        raise _corrupt("record is truncated") from None
    if pos != end:
        raise _corrupt(f"{end - pos} bytes left after {h.records_count} records")


def _read_headers(data: bytes, pos: int, count: int, rec_end: int) -> tuple[list[Header], int]:
    if count < 0 or count > rec_end - pos:
        raise _corrupt(f"record header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        n, pos = read_varint(data, pos)
        if n < 0 or pos + n > rec_end:
            raise _corrupt(f"record header key length {n}")
        hkey = data[pos : pos + n].decode("utf-8", "surrogateescape")
        pos += n
        n, pos = read_varint(data, pos)
        if n >= 0:
            if pos + n > rec_end:
                raise _corrupt("record header value overruns the record")
            hval: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            hval = None
        else:
            raise _corrupt(f"record header value length {n}")
        headers.append((hkey, hval))
    return headers, pos
