"""Kafka wire primitives: varints, strings, bytes, uuids and array lengths.

Contract:

* Readers take ``(buf, pos)`` where ``buf`` is a ``memoryview`` or
  ``bytes`` and return ``(value, new_pos)``. On malformed or truncated input
  they raise :class:`ProtocolDecodeError` and nothing else. (The generated
  decoders also unpack fixed-width fields inline; their entry point,
  ``Message.decode``, turns ``struct.error``/``IndexError`` into
  :class:`ProtocolDecodeError`.)
* Writers return ``bytes`` (length prefix and payload joined), except the
  records helpers, which the generated code inlines so that a records value
  stays its own chunk.
* Varints: ``uvarint`` is Kafka's unsigned varint (compact lengths, tag
  numbers, tagged-field sizes; at most 5 bytes, 32 bits). ``varint`` and
  ``varlong`` are zigzag-encoded signed varints (record fields), at most 5
  and 10 bytes. ``varint`` and ``varlong`` share code; the separate names
  only check the range.
* Strings are ``str`` (UTF-8 on the wire). Non-compact strings carry an
  int16 length, bytes an int32 length; compact forms carry ``uvarint(len+1)``
  with 0 meaning null. A negative length other than -1 (null), or -1 where
  null is not allowed, is malformed.
* ``bytes`` fields decode to ``bytes`` (a copy); ``records`` fields decode to
  a zero-copy ``memoryview`` slice of the input.
"""

from __future__ import annotations

import struct
from uuid import UUID

__all__ = [
    'ProtocolDecodeError',
    'UnsupportedVersionError',
    'ZERO_UUID',
    'read_uvarint', 'write_uvarint', 'read_uvarlong', 'write_uvarlong',
    'read_varint', 'write_varint', 'read_varlong', 'write_varlong',
    'zigzag_encode', 'zigzag_decode',
    'read_string', 'read_nullable_string', 'read_compact_string',
    'read_compact_nullable_string',
    'write_string', 'write_nullable_string', 'write_compact_string',
    'write_compact_nullable_string',
    'read_bytes', 'read_nullable_bytes', 'read_compact_bytes', 'read_compact_nullable_bytes',
    'write_bytes', 'write_nullable_bytes', 'write_compact_bytes', 'write_compact_nullable_bytes',
    'read_records', 'read_compact_records',
    'read_uuid', 'write_uuid',
    'read_array_len', 'read_nullable_array_len', 'read_compact_array_len',
    'read_compact_nullable_array_len',
    'write_array_len', 'write_compact_array_len',
    'skip_tagged_fields', 'check_tag_end',
]


class ProtocolDecodeError(Exception):
    """The input is not a valid encoding of the expected message/version."""


class UnsupportedVersionError(ValueError):
    """A message class was asked to encode or decode a version it lacks."""


ZERO_UUID = UUID(int=0)

_I16 = struct.Struct('>h')
_I32 = struct.Struct('>i')
_unpack_i16 = _I16.unpack_from
_unpack_i32 = _I32.unpack_from
_pack_i16 = _I16.pack
_pack_i32 = _I32.pack

# Single-byte uvarints are by far the most common: precompute them.
_UVARINT_1 = tuple(bytes((i,)) for i in range(128))


def _truncated(what: str, pos: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(f'truncated {what} at offset {pos}')


def _i16_at(buf, pos: int) -> int:
    try:
        return _unpack_i16(buf, pos)[0]
    except struct.error:
        raise _truncated('int16 length', pos) from None


def _i32_at(buf, pos: int) -> int:
    try:
        return _unpack_i32(buf, pos)[0]
    except struct.error:
        raise _truncated('int32 length', pos) from None


# ---------------------------------------------------------------- varints


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint of at most 5 bytes (32 bits)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        # unrolled: lengths of 16 KiB records take 3 bytes
        value = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            return value | b << 7, pos + 2
        value |= (b & 0x7F) << 7
        b = buf[pos + 2]
        if b < 0x80:
            return value | b << 14, pos + 3
        value |= (b & 0x7F) << 14
        b = buf[pos + 3]
        if b < 0x80:
            return value | b << 21, pos + 4
        value |= (b & 0x7F) << 21
        b = buf[pos + 4]
        if b > 0x0F:
            raise ProtocolDecodeError(f'uvarint longer than 32 bits at offset {pos}')
        return value | b << 28, pos + 5
    except IndexError:
        raise _truncated('uvarint', pos) from None


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint of at most 10 bytes (64 bits)."""
    start = pos
    value = 0
    shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                if value > 0xFFFFFFFFFFFFFFFF:
                    raise ProtocolDecodeError(f'uvarlong overflow at offset {start}')
                return value, pos
            shift += 7
            if shift > 63:
                raise ProtocolDecodeError(f'uvarlong longer than 10 bytes at offset {start}')
    except IndexError:
        raise _truncated('uvarlong', pos) from None


def write_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if 0 <= value < 0x80:
        return _UVARINT_1[value]
    if value < 0:
        raise ValueError(f'uvarint must be non-negative: {value}')
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, (value >> 7 & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


write_uvarlong = write_uvarint


def zigzag_encode(value: int) -> int:
    """Map a signed int to unsigned: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ..."""
    return (value << 1) ^ (value >> 63) if value < 0 else value << 1


def zigzag_decode(value: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (value >> 1) ^ -(value & 1)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a zigzag signed varint (int32 range, at most 5 bytes)."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Decode a zigzag signed varlong (int64 range, at most 10 bytes)."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(value: int) -> bytes:
    """Encode a signed int (int32 range) as a zigzag varint."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f'varint out of int32 range: {value}')
    return write_uvarint((value << 1) ^ (value >> 31))


def write_varlong(value: int) -> bytes:
    """Encode a signed int (int64 range) as a zigzag varlong."""
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f'varlong out of int64 range: {value}')
    return write_uvarint((value << 1) ^ (value >> 63))


# ---------------------------------------------------------------- strings


def _utf8(buf, start: int, end: int) -> str:
    if end > len(buf):
        raise _truncated('string', start)
    try:
        return str(buf[start:end], 'utf-8')
    except UnicodeDecodeError:
        raise ProtocolDecodeError(f'invalid UTF-8 string at offset {start}') from None


def read_string(buf, pos: int) -> tuple[str, int]:
    """int16 length (>= 0) then UTF-8 bytes."""
    n = _i16_at(buf, pos)
    if n < 0:
        raise ProtocolDecodeError(f'negative string length {n} at offset {pos}')
    pos += 2
    return _utf8(buf, pos, pos + n), pos + n


def read_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    """int16 length (-1 = null) then UTF-8 bytes."""
    n = _i16_at(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 2
        raise ProtocolDecodeError(f'negative string length {n} at offset {pos}')
    pos += 2
    return _utf8(buf, pos, pos + n), pos + n


def read_compact_string(buf, pos: int) -> tuple[str, int]:
    """uvarint(len + 1) (0 is invalid here) then UTF-8 bytes."""
    n, p = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolDecodeError(f'null compact string at offset {pos}')
    end = p + n - 1
    return _utf8(buf, p, end), end


def read_compact_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    """uvarint(len + 1), 0 = null, then UTF-8 bytes."""
    n, p = read_uvarint(buf, pos)
    if n == 0:
        return None, p
    end = p + n - 1
    return _utf8(buf, p, end), end


def write_string(value: str) -> bytes:
    data = value.encode()
    return _pack_i16(len(data)) + data


def write_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b'\xff\xff'
    data = value.encode()
    return _pack_i16(len(data)) + data


def write_compact_string(value: str) -> bytes:
    data = value.encode()
    return write_uvarint(len(data) + 1) + data


def write_compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b'\x00'
    data = value.encode()
    return write_uvarint(len(data) + 1) + data


# ---------------------------------------------------------------- bytes


def _slice(buf, start: int, n: int) -> memoryview:
    end = start + n
    if end > len(buf):
        raise _truncated('bytes', start)
    return buf[start:end]


def read_bytes(buf, pos: int) -> tuple[bytes, int]:
    """int32 length (>= 0) then raw bytes (copied)."""
    n = _i32_at(buf, pos)
    if n < 0:
        raise ProtocolDecodeError(f'negative bytes length {n} at offset {pos}')
    pos += 4
    return bytes(_slice(buf, pos, n)), pos + n


def read_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    """int32 length (-1 = null) then raw bytes (copied)."""
    n = _i32_at(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 4
        raise ProtocolDecodeError(f'negative bytes length {n} at offset {pos}')
    pos += 4
    return bytes(_slice(buf, pos, n)), pos + n


def read_compact_bytes(buf, pos: int) -> tuple[bytes, int]:
    n, p = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolDecodeError(f'null compact bytes at offset {pos}')
    return bytes(_slice(buf, p, n - 1)), p + n - 1


def read_compact_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, p = read_uvarint(buf, pos)
    if n == 0:
        return None, p
    return bytes(_slice(buf, p, n - 1)), p + n - 1


def read_records(buf, pos: int) -> tuple[memoryview | None, int]:
    """int32 length (-1 = null) then a zero-copy slice of ``buf``."""
    n = _i32_at(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 4
        raise ProtocolDecodeError(f'negative records length {n} at offset {pos}')
    pos += 4
    return _slice(buf, pos, n), pos + n


def read_compact_records(buf, pos: int) -> tuple[memoryview | None, int]:
    """uvarint(len + 1) (0 = null) then a zero-copy slice of ``buf``."""
    n, p = read_uvarint(buf, pos)
    if n == 0:
        return None, p
    return _slice(buf, p, n - 1), p + n - 1


def write_bytes(value) -> bytes:
    return _pack_i32(len(value)) + bytes(value)


def write_nullable_bytes(value) -> bytes:
    if value is None:
        return b'\xff\xff\xff\xff'
    return _pack_i32(len(value)) + bytes(value)


def write_compact_bytes(value) -> bytes:
    return write_uvarint(len(value) + 1) + bytes(value)


def write_compact_nullable_bytes(value) -> bytes:
    if value is None:
        return b'\x00'
    return write_uvarint(len(value) + 1) + bytes(value)


# ---------------------------------------------------------------- uuid


def read_uuid(buf, pos: int) -> tuple[UUID, int]:
    """16 raw bytes, returned as :class:`uuid.UUID`."""
    end = pos + 16
    if end > len(buf):
        raise _truncated('uuid', pos)
    return UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(value: UUID) -> bytes:
    return value.bytes


# ---------------------------------------------------------------- arrays


def _check_count(buf, pos: int, n: int) -> None:
    # Every element takes at least one byte: a larger count is a lie, and
    # rejecting it keeps a hostile length from allocating a huge list.
    if n > len(buf) - pos:
        raise ProtocolDecodeError(f'array count {n} exceeds remaining bytes at offset {pos}')


def read_array_len(buf, pos: int) -> tuple[int, int]:
    """int32 count (>= 0)."""
    n = _i32_at(buf, pos)
    if n < 0:
        raise ProtocolDecodeError(f'negative array length {n} at offset {pos}')
    pos += 4
    _check_count(buf, pos, n)
    return n, pos


def read_nullable_array_len(buf, pos: int) -> tuple[int, int]:
    """int32 count, -1 = null (returned as -1)."""
    n = _i32_at(buf, pos)
    if n < 0:
        if n == -1:
            return -1, pos + 4
        raise ProtocolDecodeError(f'negative array length {n} at offset {pos}')
    pos += 4
    _check_count(buf, pos, n)
    return n, pos


def read_compact_array_len(buf, pos: int) -> tuple[int, int]:
    """uvarint(count + 1); 0 (null) is invalid here."""
    n, p = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolDecodeError(f'null compact array at offset {pos}')
    _check_count(buf, p, n - 1)
    return n - 1, p


def read_compact_nullable_array_len(buf, pos: int) -> tuple[int, int]:
    """uvarint(count + 1), 0 = null (returned as -1)."""
    n, p = read_uvarint(buf, pos)
    _check_count(buf, p, n - 1)
    return n - 1, p


def write_array_len(value: list | None) -> bytes:
    return b'\xff\xff\xff\xff' if value is None else _pack_i32(len(value))


def write_compact_array_len(value: list | None) -> bytes:
    return b'\x00' if value is None else write_uvarint(len(value) + 1)


# ---------------------------------------------------------------- tagged fields


def skip_tagged_fields(buf, pos: int) -> int:
    """Skip a tagged-field section (all tags unknown to the reader)."""
    n, pos = read_uvarint(buf, pos)
    if not n:
        return pos
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise _truncated('tagged field', pos - size)
    return pos


def check_tag_end(pos: int, end: int) -> None:
    """A known tagged field's value must not run past its declared size."""
    if pos > end:
        raise ProtocolDecodeError(f'tagged field overruns its size by {pos - end} bytes')
