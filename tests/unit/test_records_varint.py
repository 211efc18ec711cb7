"""Zigzag varints: known encodings, limits, and malformed input."""

from __future__ import annotations

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    read_uvarint,
    read_varint,
    read_varlong,
    varint_size,
    write_uvarint,
    write_varint,
    write_varlong,
)

# (value, zigzag varint bytes): the protobuf / Kafka encoding.
KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (-300, "d704"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN)
def test_known_varints(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert write_varint(value) == raw
    assert write_varlong(value) == raw
    assert read_varint(raw, 0) == (value, len(raw))
    assert read_varlong(raw, 0) == (value, len(raw))
    assert varint_size(value) == len(raw)


def test_varlong_limits() -> None:
    for v in (INT64_MAX, INT64_MIN, 1 << 40, -(1 << 40)):
        raw = write_varlong(v)
        assert len(raw) == varint_size(v) <= 10
        assert read_varlong(b"xx" + raw + b"yy", 2) == (v, 2 + len(raw))
    assert write_varlong(INT64_MIN) == bytes.fromhex("ffffffffffffffffff01")


def test_uvarint() -> None:
    for v in (0, 1, 127, 128, 16383, 16384, 0xFFFFFFFF):
        raw = write_uvarint(v)
        assert read_uvarint(raw, 0) == (v, len(raw))
    assert write_uvarint(128) == b"\x80\x01"


def test_reads_from_memoryview_and_bytearray() -> None:
    raw = write_varint(-12345)
    assert read_varint(memoryview(raw), 0)[0] == -12345
    assert read_varint(bytearray(raw), 0)[0] == -12345


@pytest.mark.parametrize("reader", [read_varint, read_varlong, read_uvarint])
@pytest.mark.parametrize("raw", [b"", b"\x80", b"\xff\xff", b"\x81\x81\x81"])
def test_truncated(reader, raw: bytes) -> None:
    with pytest.raises(KafkaError) as e:
        reader(raw, 0)
    assert e.value.code == Errors.CORRUPT_MESSAGE


def test_too_long_and_overflow() -> None:
    for reader in (read_varint, read_uvarint):
        with pytest.raises(KafkaError):
            reader(b"\x80\x80\x80\x80\x80\x01", 0)  # 6 bytes
        with pytest.raises(KafkaError):
            reader(b"\xff\xff\xff\xff\x1f", 0)  # 35 bits
    with pytest.raises(KafkaError):
        read_varlong(b"\x80" * 10 + b"\x01", 0)  # 11 bytes
    with pytest.raises(KafkaError):
        read_varlong(b"\xff" * 9 + b"\x7f", 0)  # 70 bits


def test_write_rejects_out_of_range() -> None:
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(ValueError):
            write_varint(bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError):
            write_varlong(bad)
    for bad in (-1, 1 << 32):
        with pytest.raises(ValueError):
            write_uvarint(bad)
