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
(the decompression-bomb guard: gzip, lz4 and zstd frames without a
content size stop inflating at ``max_size + 1`` bytes; snappy blocks and
zstd frames with one have their declared size checked first). ``compress(codec, data, level=None)`` returns
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
    # lz4 allocates max_length up front: ask for modest steps, not the whole budget.
    parts: list[bytes] = []
    total = 0
    rest = bytes(data)
    step = max(1 << 16, 4 * len(rest))
    while rest:
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = d.decompress(rest, max_length=min(step, max_size + 1 - total))
        while True:
            total += len(chunk)
            parts.append(chunk)
            if total > max_size:
                raise _too_big(max_size)
            if d.eof or d.needs_input:
                break
            step *= 2
            chunk = d.decompress(b"", max_length=min(step, max_size + 1 - total))
        if not d.eof:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "lz4 frame is truncated")
        rest = d.unused_data
    if not parts:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "lz4 block is empty")
    return b"".join(parts)


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    # The one-shot API drops frames after a first one without a content size,
    # and a streaming reader hides truncation (it just stops); so the frames'
    # structure is walked first (RFC 8878). A frame declaring its content size
    # then inflates in one call; one without is read in bounded steps.
    mv = memoryview(data)
    if len(mv) == 0:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd block is empty")
    d = zstandard.ZstdDecompressor()
    parts: list[bytes] = []
    total = 0
    for start, end, content_size in _zstd_frames(mv):
        frame = mv[start:end]
        if content_size >= 0:
            if content_size > max_size - total:
                raise _too_big(max_size)
            out = d.decompress(frame, allow_extra_data=False)
            if len(out) != content_size:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd frame content size mismatch")
            total += len(out)
            parts.append(out)
            continue
        reader = d.stream_reader(frame)
        while chunk := reader.read(min(_ZSTD_READ, max_size + 1 - total)):
            total += len(chunk)
            parts.append(chunk)
            if total > max_size:
                raise _too_big(max_size)
    return b"".join(parts)


_ZSTD_READ = 1 << 20
_ZSTD_MAGIC = 0xFD2FB528
_FCS_SIZE = (0, 2, 4, 8)
_DID_SIZE = (0, 1, 2, 4)


def _zstd_frames(mv: memoryview) -> list[tuple[int, int, int]]:
    """``(start, end, content size or -1)`` of each zstd frame in ``mv`` (skippable ones
    left out); CORRUPT_MESSAGE unless ``mv`` is whole frames. Walks block headers only."""
    frames = []
    pos, end = 0, len(mv)
    try:
        while pos < end:
            start = pos
            magic = int.from_bytes(mv[pos : pos + 4], "little")
            if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
                pos += 8 + int.from_bytes(mv[pos + 4 : pos + 8], "little")
                continue
            if magic != _ZSTD_MAGIC:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd frame magic is missing")
            fhd = mv[pos + 4]
            single_segment = fhd & 0x20
            fcs_size = _FCS_SIZE[fhd >> 6] or (1 if single_segment else 0)
            pos += 5 + (0 if single_segment else 1) + _DID_SIZE[fhd & 3]
            content_size = -1
            if fcs_size:
                if pos + fcs_size > end:
                    raise IndexError
                content_size = int.from_bytes(mv[pos : pos + fcs_size], "little")
                content_size += 256 if fcs_size == 2 else 0
                pos += fcs_size
            while True:
                if pos + 3 > end:
                    raise IndexError
                header = int.from_bytes(mv[pos : pos + 3], "little")
                pos += 3
                kind = (header >> 1) & 3
                if kind == 3:
                    raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd reserved block type")
                pos += 1 if kind == 1 else header >> 3
                if header & 1:
                    break
            pos += 4 if fhd & 4 else 0
            if pos > end:
                raise IndexError
            frames.append((start, pos, content_size))
    except IndexError:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "zstd frame is truncated") from None
    return frames
