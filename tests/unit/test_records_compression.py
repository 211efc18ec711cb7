"""Codecs 0-4: round trips, both snappy framings, bombs and bad input."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from spool.protocol.errors import Errors, KafkaError
from spool.records.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    decompress,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
DATA = os.urandom(3000) * 40 + bytes(70_000) + b"tail"


def _corrupt(fn, *args, **kwargs) -> None:
    with pytest.raises(KafkaError) as e:
        fn(*args, **kwargs)
    assert e.value.code == Errors.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", DATA])
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, data))) == data


def test_snappy_writes_xerial_and_reads_raw() -> None:
    framed = compress(SNAPPY, DATA)
    assert framed.startswith(XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(SNAPPY, raw) == DATA
    assert decompress(SNAPPY, XERIAL_MAGIC + bytes(8)) == b""


def test_lz4_frame_is_kafka_shaped() -> None:
    info = lz4.frame.get_frame_info(compress(LZ4, DATA))
    assert info["block_linked"] is False
    assert info["content_checksum"] is False
    assert info["content_size"] == 0
    assert info["block_size"] == 64 * 1024


def test_foreign_encodings_decode() -> None:
    assert decompress(GZIP, gzip.compress(DATA)) == DATA
    assert decompress(GZIP, zlib.compress(DATA)) == DATA
    assert decompress(GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    assert decompress(LZ4, lz4.frame.compress(DATA, store_size=True)) == DATA
    assert decompress(LZ4, lz4.frame.compress(b"ab") + lz4.frame.compress(b"cd")) == b"abcd"
    no_size = zstandard.ZstdCompressor(write_content_size=False)
    assert decompress(ZSTD, no_size.compress(DATA)) == DATA
    assert decompress(ZSTD, no_size.compress(b"ab") + no_size.compress(b"cd")) == b"abcd"
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    assert decompress(ZSTD, skippable + compress(ZSTD, b"ab") + skippable) == b"ab"
    checked = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False)
    assert decompress(ZSTD, checked.compress(DATA)) == DATA


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_bad_input_is_corrupt_message(codec: int) -> None:
    blob = compress(codec, DATA)
    _corrupt(decompress, codec, b"")
    _corrupt(decompress, codec, blob[: len(blob) // 2])
    _corrupt(decompress, codec, blob[:-1])
    _corrupt(decompress, codec, b"not compressed at all")
    if codec != SNAPPY:  # a raw snappy block may legally be followed by nothing else
        _corrupt(decompress, codec, blob + b"junk")


def test_unknown_codec() -> None:
    _corrupt(decompress, 5, b"abc")
    with pytest.raises(ValueError):
        compress(7, b"abc")


@pytest.mark.parametrize("codec", CODECS)
def test_bomb_guard(codec: int) -> None:
    blob = compress(codec, bytes(1 << 20))
    assert len(decompress(codec, blob, max_size=1 << 20)) == 1 << 20
    _corrupt(decompress, codec, blob, max_size=(1 << 20) - 1)


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_bomb_stays_bounded(content_size: bool) -> None:
    blob = zstandard.ZstdCompressor(write_content_size=content_size).compress(bytes(32 << 20))
    _corrupt(decompress, ZSTD, blob, max_size=1 << 20)


def test_zstd_reserved_block_type_and_lying_content_size() -> None:
    frame = bytearray(zstandard.ZstdCompressor().compress(b"hello"))
    assert frame[4] == 0x20  # single segment, 1-byte content size
    frame[5] = 4  # claims 4 bytes, holds 5
    _corrupt(decompress, ZSTD, bytes(frame))
    frame[6] |= 0x06  # block type 3 (reserved)
    _corrupt(decompress, ZSTD, bytes(frame))


def test_xerial_bad_blocks() -> None:
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    _corrupt(decompress, SNAPPY, header[:12])
    _corrupt(decompress, SNAPPY, header + b"\x00\x00")
    _corrupt(decompress, SNAPPY, header + struct.pack(">i", -1))
    _corrupt(decompress, SNAPPY, header + struct.pack(">i", 100) + b"short")
