"""Size-prefixed frames read straight from a plain TCP socket into their own buffers.

``open_frame_connection(host, port)`` -> ``(FrameReader, asyncio.StreamWriter)``, for
``spool.net.client.NodeClient`` on connections without TLS. ``await reader.read_frame()``
returns the next frame (the bytes after its 4-byte size) as a ``bytearray`` of exactly its
size. Unlike ``asyncio.StreamReader.readexactly`` nothing goes through a stream buffer:
small frames are cut out of one reused staging buffer; the rest of a frame longer than
what the staging buffer holds is received straight into the frame's own buffer
(``asyncio.BufferedProtocol``), so a 1 MiB Fetch response is copied once, by the
kernel, instead of three times into freshly allocated memory.

Errors, as ``StreamReader.readexactly`` raises them: the peer's EOF ->
``asyncio.IncompleteReadError`` (after the frames read before it); a connection error ->
that ``OSError``; a size outside ``[4, max_frame_bytes]`` -> ``ProtocolDecodeError``.
Reading pauses while more than ``limit`` bytes of whole frames wait to be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import deque

from spool.protocol.framing import frame_buffer
from spool.protocol.primitives import ProtocolDecodeError

_SIZE = struct.Struct(">i")
STAGING = 1 << 16  # bytes received at once between large frames
LOWAT_MAX = 1 << 20  # SO_RCVLOWAT while a large frame comes in: at most its remaining bytes
PAUSE_AT = 16 << 20  # whole frames waiting to be read before reading pauses


class FrameReader:
    """The frames of one connection, in order (module doc)."""

    def __init__(self, max_frame_bytes: int, limit: int = PAUSE_AT) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._limit = limit
        self._frames: deque[bytearray] = deque()
        self._queued = 0
        self._error: BaseException | None = None
        self._waiter: asyncio.Future | None = None
        self._transport: asyncio.Transport | None = None
        self._paused = False

    async def read_frame(self) -> bytearray:
        while not self._frames:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        self._queued -= len(frame)
        if self._paused and self._queued <= self._limit and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return frame

    # -- from the protocol

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _frame(self, frame: bytearray) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if not self._paused and self._queued > self._limit and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake()


class _FrameProtocol(asyncio.BufferedProtocol):
    """Cuts the byte stream into frames for a ``FrameReader``; ``StreamWriter``'s
    protocol (drain, wait_closed) as well. (A BufferedProtocol only: uvloop gives a
    class that is also a ``Protocol`` ``data_received`` calls.)"""

    def __init__(self, reader: FrameReader, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._reader = reader
        self._write_paused = False
        self._drain_waiters: deque[asyncio.Future] = deque()
        self._lost: BaseException | None = None
        self._is_lost = False
        self._staging = bytearray(STAGING)
        self._view = memoryview(self._staging)
        self._filled = 0  # bytes of the staging buffer holding data not yet cut
        self._frame: bytearray | None = None  # a large frame being received into itself
        self._frame_view: memoryview | None = None
        self._pos = 0
        self._closed = loop.create_future()
        self._sock = None  # for SO_RCVLOWAT (TCP only; None: not set)
        self._lowat = 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._reader._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            self._sock = sock

    def _set_lowat(self, n: int) -> None:
        """Wake the loop only once ``n`` bytes can be read (SO_RCVLOWAT): a large frame
        then comes in a few reads instead of one per TCP segment (each a wakeup of this
        process and of the loop). ``n`` never exceeds what the frame still lacks, so the
        bytes it waits for are on their way; EOF and errors wake it regardless, and the
        kernel wakes it before the receive window closes."""
        sock = self._sock
        if sock is None or n == self._lowat:
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, n)
        except OSError:  # never again on this connection; back to the default if it can
            self._sock = None
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
            return
        self._lowat = n

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame_view is not None:
            return self._frame_view[self._pos:]
        return self._view[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._reader
        if self._frame is not None:
            self._pos += nbytes
            left = len(self._frame) - self._pos
            if left == 0:
                frame, self._frame, self._frame_view = self._frame, None, None
                self._set_lowat(1)
                reader._frame(frame)
            elif left < self._lowat:
                self._set_lowat(left)
            return
        self._filled += nbytes
        staging, filled, pos = self._staging, self._filled, 0
        while filled - pos >= 4:
            (size,) = _SIZE.unpack_from(staging, pos)
            if not 4 <= size <= reader.max_frame_bytes:
                reader._fail(ProtocolDecodeError(f"response frame of {size} bytes"))
                if reader._transport is not None:
                    reader._transport.close()
                self._filled = 0
                return
            start = pos + 4
            have = filled - start
            if have >= size:
                reader._frame(staging[start:start + size])
                pos = start + size
                continue
            if size > STAGING - 4:  # the rest goes straight into the frame's own buffer
                frame = frame_buffer(size)  # (not zeroed first: every byte is received)
                frame[:have] = self._view[start:filled]
                self._frame, self._frame_view, self._pos = frame, memoryview(frame), have
                self._set_lowat(min(size - have, LOWAT_MAX))
                pos = filled
            break
        if pos:
            left = filled - pos
            if left:
                staging[:left] = self._view[pos:filled]
            self._filled = left

    def eof_received(self) -> bool:
        partial = (bytes(self._frame[:self._pos]) if self._frame is not None
                   else bytes(self._staging[:self._filled]))
        self._reader._fail(asyncio.IncompleteReadError(partial, None))
        return False  # the transport closes itself

    def connection_lost(self, exc: BaseException | None) -> None:
        self._reader._fail(exc if exc is not None else asyncio.IncompleteReadError(b"", None))
        if not self._closed.done():
            self._closed.set_result(None)
        self._is_lost, self._lost = True, exc
        self._write_paused = False
        self._wake_drains()

    # -- write flow control (asyncio.streams.FlowControlMixin's, for StreamWriter.drain)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drains()

    def _wake_drains(self) -> None:
        for w in self._drain_waiters:
            if not w.done():
                if self._lost is not None:
                    w.set_exception(self._lost)
                else:
                    w.set_result(None)

    async def _drain_helper(self) -> None:
        if self._is_lost:
            raise ConnectionResetError("Connection lost")
        if not self._write_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            self._drain_waiters.remove(waiter)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future:
        return self._closed


async def open_frame_connection(host: str, port: int, max_frame_bytes: int
                                ) -> tuple[FrameReader, asyncio.StreamWriter]:
    """A plain TCP connection read as frames (module doc), written with a StreamWriter."""
    loop = asyncio.get_running_loop()
    reader = FrameReader(max_frame_bytes)
    transport, protocol = await loop.create_connection(
        lambda: _FrameProtocol(reader, loop), host, port)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)
