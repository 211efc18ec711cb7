"""Sans-I/O Kafka framing: a size-prefixed frame decoder and encoder.

Every Kafka request and response is ``int32 size`` followed by ``size``
bytes. ``FrameDecoder`` takes bytes as they arrive (``feed``) and hands out
whole frames (``next_frame``) as memoryviews over its own buffer; a frame
stays valid until the next ``feed``. A declared size above ``max_size`` or
below zero raises ``FrameError`` (the connection must then be closed: the
stream can no longer be trusted). No I/O happens here.

Large frames need not be copied twice: ``receive_target(threshold)``, once a
frame larger than ``threshold`` (and within ``max_size``) has its size prefix
buffered, gives that frame its own ``bytearray`` (``frame_buffer``: the bytes
already buffered move in) and returns a view of the part still to come, for the caller to
receive into directly (``received(n)`` then counts what came); while it fills,
``buffered`` and ``pending_size`` read as if the bytes had been fed. ``take_frame``
hands out the next whole frame as a ``bytearray`` of its own: such a frame as is,
any other a copy of its bytes.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterable

_SIZE = struct.Struct(">i")


def _resize_hook():
    try:
        resize = ctypes.pythonapi.PyByteArray_Resize
    except (AttributeError, ValueError):  # not CPython
        return None
    resize.argtypes = [ctypes.py_object, ctypes.c_ssize_t]
    resize.restype = ctypes.c_int
    return resize


_RESIZE = _resize_hook()


def frame_buffer(size: int) -> bytearray:
    """A ``bytearray`` of ``size`` bytes whose contents are undefined, to be overwritten.

    Unlike ``bytearray(size)`` it does not zero the memory first: no pass over it, and
    its pages are committed only as bytes are written (a declared size costs memory as
    the frame arrives, as it did when frames were buffered by ``feed``).
    """
    buf = bytearray()
    if _RESIZE is None or _RESIZE(buf, size) != 0:
        return bytearray(size)
    return buf
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameError(Exception):
    """The byte stream is not valid Kafka framing (too large or negative size)."""


class FrameDecoder:
    """Accumulates bytes and splits them into frames.

    Lifecycle: ``feed(data)`` any number of times; after each feed, call
    ``next_frame()`` until it returns None. Memory is compacted on feed, so
    a returned frame must be consumed (or copied) before the next feed.
    """

    __slots__ = ("_buf", "_pos", "max_size", "_frame", "_view", "_got")

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_size = max_size
        self._frame: bytearray | None = None  # a large frame being received in place
        self._view: memoryview | None = None  # (over _frame)
        self._got = 0  # of _frame's bytes, how many have arrived

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer received bytes (not while a frame is received in place)."""
        assert self._frame is None, "feed while a frame is received in place"
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as frames."""
        if self._frame is not None:
            return 4 + self._got
        return len(self._buf) - self._pos

    def pending_size(self) -> int | None:
        """The declared size of the next frame if its prefix has arrived."""
        if self._frame is not None:
            return len(self._frame)
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

    def take_frame(self) -> bytearray | None:
        """The next whole frame as its own ``bytearray`` (valid past the next ``feed``)."""
        frame = self._frame
        if frame is not None:
            if self._got < len(frame):
                return None
            self._view.release()  # the caller gets a plain, resizable bytearray
            self._frame = self._view = None
            self._got = 0
            return frame
        whole = self.next_frame()
        if whole is None:
            return None
        frame = bytearray(whole)
        whole.release()
        return frame

    def receive_target(self, threshold: int) -> memoryview | None:
        """Where to receive the rest of the next frame directly, if it is larger than
        ``threshold`` bytes, within ``max_size``, and not whole yet; else None.

        The first call for a frame moves its buffered bytes into the frame's own
        buffer (nothing else is buffered then: frames before it have been taken, or
        this is None). Receive into the view, then call ``received(n)``.
        """
        if self._frame is None:
            buf = self._buf
            pos = self._pos
            have = len(buf) - pos - 4
            if have < 0:
                return None
            (size,) = _SIZE.unpack_from(buf, pos)
            if size <= threshold or size > self.max_size or have >= size:
                return None
            frame = frame_buffer(size)
            frame[:have] = memoryview(buf)[pos + 4 :]
            self._buf = bytearray()  # (gives the partial frame's memory back)
            self._pos = 0
            self._frame = frame
            self._view = memoryview(frame)
            self._got = have
        return self._view[self._got :]

    def received(self, n: int) -> None:
        """Count ``n`` bytes received into the view ``receive_target`` returned."""
        self._got += n


def frame_chunks(chunks: Iterable[bytes | bytearray | memoryview]) -> list:
    """Prefix a list of byte chunks with their total size; returns a new list."""
    parts = list(chunks)
    total = sum(len(c) for c in parts)
    return [_SIZE.pack(total), *parts]


def frame(data: bytes | bytearray | memoryview) -> bytes:
    return _SIZE.pack(len(data)) + bytes(data)
