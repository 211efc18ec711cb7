"""Sans-I/O Kafka framing: a size-prefixed frame decoder and encoder.

Every Kafka request and response is ``int32 size`` followed by ``size``
bytes. ``FrameDecoder`` takes bytes as they arrive (``feed``) and hands out
whole frames (``next_frame``) as memoryviews over its own buffer; a frame
stays valid until the next ``feed``. A declared size above ``max_size`` or
below zero raises ``FrameError`` (the connection must then be closed: the
stream can no longer be trusted). No I/O happens here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameError(Exception):
    """The byte stream is not valid Kafka framing (too large or negative size)."""


class FrameDecoder:
    """Accumulates bytes and splits them into frames.

    Lifecycle: ``feed(data)`` any number of times; after each feed, call
    ``next_frame()`` until it returns None. Memory is compacted on feed, so
    a returned frame must be consumed (or copied) before the next feed.
    """

    __slots__ = ("_buf", "_pos", "max_size")

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_size = max_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as frames."""
        return len(self._buf) - self._pos

    def pending_size(self) -> int | None:
        """The declared size of the next frame if its prefix has arrived."""
        if len(self._buf) - self._pos < 4:
            return None
        return _SIZE.unpack_from(self._buf, self._pos)[0]

    def next_frame(self) -> memoryview | None:
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self.max_size:
            raise FrameError(f"frame of {size} bytes exceeds the limit of {self.max_size}")
        end = pos + 4 + size
        if len(buf) < end:
            return None
        self._pos = end
        return memoryview(buf)[pos + 4 : end]


def frame_chunks(chunks: Iterable[bytes | bytearray | memoryview]) -> list:
    """Prefix a list of byte chunks with their total size; returns a new list."""
    parts = list(chunks)
    total = sum(len(c) for c in parts)
    return [_SIZE.pack(total), *parts]


def frame(data: bytes | bytearray | memoryview) -> bytes:
    return _SIZE.pack(len(data)) + bytes(data)
