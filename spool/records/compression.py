"""Record-batch compression codecs: the records block after the 61-byte header.

=====  ======  =====================================================================
id     name    wire format of the compressed block
=====  ======  =====================================================================
0      none    the records as they are
1      gzip    RFC 1952 gzip member(s) (Java's GZIPOutputStream); zlib also accepted
2      snappy  written in xerial framing (what the Java client's SnappyOutputStream
               writes); raw snappy (what librdkafka writes) also accepted on decode
3      lz4     LZ4 frame format; written as Kafka does: independent 64 KiB blocks,
               no block checksum, no content size, no content checksum
4      zstd    zstd frame(s); frames without a content size are fine
=====  ======  =====================================================================

xerial framing::

    82 'S' 'N' 'A' 'P' 'P' 'Y' 00 | version int32 (1) | compatible int32 (1)
    then repeated: block length int32 | raw snappy block (each <= 32 KiB input)

Contract: ``decompress(codec, data, max_size=...)`` returns ``bytes`` and
raises only ``KafkaError(CORRUPT_MESSAGE)`` -- for an unknown codec, bad or
truncated input, trailing garbage, and for output beyond ``max_size``
(the decompression-bomb guard: output is materialised at most to about
``max_size`` -- gzip and lz4 stop at ``max_size + 1``, zstd within 2 MiB
past it, snappy checks each block's declared size before inflating it). ``compress(codec, data, level=None)`` returns
``bytes`` any conforming reader (Java, librdkafka, kafka-python, aiokafka)
can decode; an unknown codec raises ``ValueError``.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from spool.protocol.errors import Errors, KafkaError

Buffer = bytes | bytearray | memoryview

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

DEFAULT_MAX_SIZE = 64 * 1024 * 1024  # bytes a decompressed records block may reach

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a records block with ``codec`` at ``level`` (codec default if None)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Inflate a records block; see the module contract for errors."""
    try:
        if codec == NONE:
            out = bytes(data)
        elif codec == GZIP:
            out = _gzip_decompress(data, max_size)
        elif codec == SNAPPY:
            out = _snappy_decompress(data, max_size)
        elif codec == LZ4:
            out = _lz4_decompress(data, max_size)
        elif codec == ZSTD:
            out = _zstd_decompress(data, max_size)
        else:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    except KafkaError:
        raise
    except Exception as e:  # any library failure is a corrupt batch
        name = CODEC_NAMES.get(codec, str(codec))
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"{name} decompression failed: {e}") from e
    if len(out) > max_size:
        raise _too_big(max_size)
    return out


def _too_big(max_size: int) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, f"decompressed records exceed {max_size} bytes")


def _gzip_decompress(data: Buffer, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(47)  # gzip or zlib header, detected
        chunk = d.decompress(rest, max_size + 1 - total)
        total += len(chunk)
        parts.append(chunk)
        if total > max_size or d.unconsumed_tail:
            raise _too_big(max_size)
        if not d.eof:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "gzip stream is truncated")
        rest = d.unused_data
        if not rest:
            return b"".join(parts)


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    mv = memoryview(data)
    if mv[:8] != XERIAL_MAGIC:
        return _snappy_raw(mv, max_size)
    if len(mv) < 16:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "xerial snappy header is truncated")
    parts: list[bytes] = []
    total = 0
    pos = 16
    end = len(mv)
    while pos < end:
        if end - pos < 4:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "xerial snappy block length truncated")
        (n,) = _INT32.unpack_from(mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"xerial snappy block of {n} bytes")
        block = _snappy_raw(mv[pos : pos + n], max_size - total)
        total += len(block)
        parts.append(block)
        pos += n
    return b"".join(parts)


def _snappy_raw(block: memoryview, max_size: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(block) > max_size:
        raise _too_big(max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _xerial_compress(data: Buffer) -> bytes:
    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_decompress(data: Buffer, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest = bytes(data)
    while rest:
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = d.decompress(rest, max_length=max_size + 1 - total)
        total += len(chunk)
        parts.append(chunk)
        if total > max_size:
            raise _too_big(max_size)
        if not d.eof:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "lz4 frame is truncated")
        rest = d.unused_data
    if not parts:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "lz4 block is empty")
    return b"".join(parts)


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    # Input is fed in slices small enough that one slice cannot inflate past the
    # remaining budget (a zstd byte yields at most 32 KiB: an RLE block), so the
    # output stays bounded; each frame must reach its end (truncation is caught).
    mv = memoryview(data)
    end = len(mv)
    if end == 0:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd block is empty")
    parts: list[bytes] = []
    total = 0
    pos = 0
    while pos < end:
        d = zstandard.ZstdDecompressor().decompressobj()
        while not d.eof:
            if pos >= end:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd frame is truncated")
            piece = mv[pos : pos + max(64, (max_size - total) >> 15)]
            pos += len(piece)
            chunk = d.decompress(piece)
            if chunk:
                total += len(chunk)
                parts.append(chunk)
                if total > max_size:
                    raise _too_big(max_size)
        pos -= len(d.unused_data)
    return b"".join(parts)
