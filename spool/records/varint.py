"""Zigzag varints as RecordBatch v2 records use them (protobuf-style, little-endian groups).

Encoding: an unsigned value is written 7 bits at a time, least significant
group first; every byte but the last has its high bit set. Signed values
are zigzag-mapped first so small magnitudes stay short::

    signed   ... -2  -1   0   1   2 ...
    zigzag   ...  3   1   0   2   4 ...      z = (n << 1) ^ (n >> 63)

    300 -> zigzag 600 = 0b100_1011000 -> bytes D8 04

Widths (Kafka's limits, enforced on decode):
``varint``  int32, at most 5 bytes;  ``varlong`` int64, at most 10 bytes;
``uvarint`` uint32 (unsigned, no zigzag), at most 5 bytes.

Contract: ``read_*(buf, pos) -> (value, next_pos)`` accept ``bytes``,
``bytearray`` or a byte ``memoryview``; a truncated, over-long or
out-of-range varint raises ``KafkaError(CORRUPT_MESSAGE)`` and nothing
else. ``write_*(value) -> bytes`` raise ``ValueError`` for a value outside
the type's range (a programming error, not a wire error).
"""

from __future__ import annotations

from spool.protocol.errors import Errors, KafkaError

Buffer = bytes | bytearray | memoryview

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# One-byte encodings, indexed by the (already zigzagged) unsigned value.
_SMALL = tuple(bytes((i,)) for i in range(0x80))


def _truncated() -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, "varint is truncated")


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint of at most 5 bytes (uint32)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        while True:
            pos += 1
            b = buf[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "varint is longer than 5 bytes")
    except IndexError:
        raise _truncated() from None
    if result > 0xFFFFFFFF:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "varint overflows 32 bits")
    return result, pos + 1


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint of at most 5 bytes (int32)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        while True:
            pos += 1
            b = buf[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "varint is longer than 5 bytes")
    except IndexError:
        raise _truncated() from None
    if result > 0xFFFFFFFF:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "varint overflows 32 bits")
    return (result >> 1) ^ -(result & 1), pos + 1


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong of at most 10 bytes (int64)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        while True:
            pos += 1
            b = buf[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 63:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "varlong is longer than 10 bytes")
    except IndexError:
        raise _truncated() from None
    if result > 0xFFFFFFFFFFFFFFFF:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "varlong overflows 64 bits")
    return (result >> 1) ^ -(result & 1), pos + 1


def write_uvarint(value: int) -> bytes:
    """Encode an unsigned varint (0 <= value < 2**32)."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"uvarint {value} is negative")
        return _SMALL[value]
    if value > 0xFFFFFFFF:
        raise ValueError(f"uvarint {value} overflows 32 bits")
    return _encode(value)


def write_varint(value: int) -> bytes:
    """Encode a zigzag varint (int32)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint {value} is outside int32")
    z = value << 1 if value >= 0 else (-value << 1) - 1
    return _SMALL[z] if z < 0x80 else _encode(z)


def write_varlong(value: int) -> bytes:
    """Encode a zigzag varlong (int64)."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong {value} is outside int64")
    z = value << 1 if value >= 0 else (-value << 1) - 1
    return _SMALL[z] if z < 0x80 else _encode(z)


def varint_size(value: int) -> int:
    """Bytes ``write_varint``/``write_varlong`` would produce for ``value``."""
    z = value << 1 if value >= 0 else (-value << 1) - 1
    return max(1, (z.bit_length() + 6) // 7)


def _encode(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)
