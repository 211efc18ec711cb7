"""spool.protocol.primitives: varints, strings, bytes, arrays, tagged fields."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spool.protocol.primitives import (
    ProtocolDecodeError,
    read_array_len,
    read_bytes,
    read_compact_array_len,
    read_compact_nullable_array_len,
    read_compact_nullable_string,
    read_compact_records,
    read_compact_string,
    read_nullable_bytes,
    read_nullable_string,
    read_records,
    read_string,
    read_uuid,
    read_uvarint,
    read_uvarlong,
    read_varint,
    read_varlong,
    skip_tagged_fields,
    write_compact_nullable_string,
    write_compact_string,
    write_nullable_string,
    write_string,
    write_uvarint,
    write_varint,
    write_varlong,
    zigzag_decode,
    zigzag_encode,
)

UVARINTS = [(0, '00'), (1, '01'), (127, '7f'), (128, '8001'), (300, 'ac02'),
            (16383, 'ff7f'), (16384, '808001'), (0xFFFFFFFF, 'ffffffff0f')]
VARINTS = [(0, '00'), (-1, '01'), (1, '02'), (-2, '03'), (63, '7e'), (-64, '7f'),
           (64, '8001'), (2147483647, 'feffffff0f'), (-2147483648, 'ffffffff0f')]
VARLONGS = [(9223372036854775807, 'feffffffffffffffff01'),
            (-9223372036854775808, 'ffffffffffffffffff01')]


@pytest.mark.parametrize(('value', 'hexed'), UVARINTS)
def test_uvarint_vectors(value: int, hexed: str) -> None:
    assert write_uvarint(value).hex() == hexed
    assert read_uvarint(memoryview(bytes.fromhex(hexed)), 0) == (value, len(hexed) // 2)


@pytest.mark.parametrize(('value', 'hexed'), VARINTS)
def test_varint_vectors(value: int, hexed: str) -> None:
    assert write_varint(value).hex() == hexed
    assert read_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)
    assert write_varlong(value).hex() == hexed
    assert read_varlong(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


@pytest.mark.parametrize(('value', 'hexed'), VARLONGS)
def test_varlong_vectors(value: int, hexed: str) -> None:
    assert write_varlong(value).hex() == hexed
    assert read_varlong(bytes.fromhex(hexed), 0) == (value, 10)


@settings(max_examples=50, deadline=None)
@given(st.integers(-(1 << 63), (1 << 63) - 1), st.binary(max_size=3))
def test_varlong_roundtrip(value: int, prefix: bytes) -> None:
    data = prefix + write_varlong(value) + b'\x01'
    assert read_varlong(memoryview(data), len(prefix)) == (value, len(data) - 1)
    assert zigzag_decode(zigzag_encode(value)) == value
    assert read_uvarlong(data, len(prefix))[0] == zigzag_encode(value)


def test_varint_range_checks() -> None:
    with pytest.raises(ValueError):
        write_varint(1 << 31)
    with pytest.raises(ValueError):
        write_varlong(-(1 << 63) - 1)
    with pytest.raises(ValueError):
        write_uvarint(-1)


@pytest.mark.parametrize('hexed', ['', '80', 'ffff', '8080808010', 'ffffffff1f',
                                   '808080808000'])
def test_bad_uvarint(hexed: str) -> None:
    with pytest.raises(ProtocolDecodeError):
        read_uvarint(bytes.fromhex(hexed), 0)


def test_bad_varlong() -> None:
    with pytest.raises(ProtocolDecodeError):
        read_varlong(b'\xff' * 10 + b'\x01', 0)
    with pytest.raises(ProtocolDecodeError):
        read_varlong(b'\xff\xff', 0)


def test_strings() -> None:
    for text in ('', 'abc', 'événement', '\u6f22\u5b57'):
        raw = text.encode()
        assert write_string(text) == struct.pack('>h', len(raw)) + raw
        assert write_compact_string(text) == write_uvarint(len(raw) + 1) + raw
        assert read_string(write_string(text) + b'!', 0) == (text, 2 + len(raw))
        assert read_compact_string(write_compact_string(text), 0)[0] == text
    assert write_nullable_string(None) == b'\xff\xff'
    assert write_compact_nullable_string(None) == b'\x00'
    assert read_nullable_string(b'\xff\xff', 0) == (None, 2)
    assert read_compact_nullable_string(b'\x00', 0) == (None, 1)


@pytest.mark.parametrize(('reader', 'data'), [
    (read_string, b'\xff\xff'),              # null where not nullable
    (read_nullable_string, b'\xff\xfe'),     # -2
    (read_string, b'\x00\x05abc'),           # longer than the buffer
    (read_string, b'\x00\x02\xc3\x28'),      # invalid UTF-8
    (read_compact_string, b'\x00'),          # compact null where not nullable
    (read_compact_nullable_string, b'\x05ab'),
    (read_bytes, b'\xff\xff\xff\xff'),
    (read_nullable_bytes, b'\x80\x00\x00\x00'),
    (read_nullable_bytes, b'\x00\x00\x00\x09abc'),
    (read_records, b'\xff\xff\xff\xfe'),
    (read_records, b'\x00\x00\x01\x00ab'),
    (read_compact_records, b'\x10ab'),
    (read_uuid, b'\x00' * 15),
    (read_array_len, b'\xff\xff\xff\xff'),
    (read_array_len, b'\x7f\xff\xff\xff\x00'),  # absurd count
    (read_compact_array_len, b'\x00'),
    (read_compact_nullable_array_len, b'\xff\xff\xff\xff\x0f'),
    (skip_tagged_fields, b'\x01\x00\x05ab'),
])
def test_malformed_raises_protocol_decode_error(reader, data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        reader(memoryview(data), 0)


def test_records_are_zero_copy() -> None:
    data = bytearray(b'\x00\x00\x00\x03abcXYZ')
    view = memoryview(data)
    records, pos = read_records(view, 0)
    assert (bytes(records), pos) == (b'abc', 7)
    assert records.obj is data  # a slice of the caller's buffer, not a copy
    assert read_compact_records(memoryview(b'\x04abc'), 0)[0] == b'abc'
    assert read_records(b'\xff\xff\xff\xff', 0) == (None, 4)


READERS = [read_uvarint, read_uvarlong, read_varint, read_varlong, read_string,
           read_nullable_string, read_compact_string, read_compact_nullable_string, read_bytes,
           read_nullable_bytes, read_records, read_compact_records, read_uuid, read_array_len,
           read_compact_array_len, read_compact_nullable_array_len, skip_tagged_fields]


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=24), pos=st.integers(0, 30))
def test_readers_raise_only_protocol_decode_error(data: bytes, pos: int) -> None:
    for reader in READERS:
        for buf in (data, memoryview(data)):
            try:
                reader(buf, pos)
            except ProtocolDecodeError:
                pass


def test_skip_tagged_fields() -> None:
    section = b'\x02' + b'\x00\x02hi' + b'\x07\x01!'
    assert skip_tagged_fields(section + b'rest', 0) == len(section)
