"""The asyncio shell: listeners, connections, in-order responses, sendfile.

One reader task and one writer task per connection. The reader splits the
byte stream into frames (``FrameDecoder``, bounded by
``socket.request.max.bytes``), starts one handler task per request in
arrival order and queues it; the queue is bounded (``queued.max.requests``)
so a client that pipelines faster than we answer stops being read
(backpressure). The writer awaits the queued tasks strictly in order, so
responses leave in request order even when a long-polling fetch finishes
after a later request. A response is a list of chunks: byte strings, and
``FileRegion`` objects that go from the segment file to the socket with
``os.sendfile`` (zero copy), the socket being ours, not a transport's.

Lifecycle: ``Server.bind()`` binds and listens on every address (the broker
does this before touching its data, so a second broker on the same port
fails first); ``Server.start()`` starts accepting; ``Server.close()``
stops accepting, lets each connection finish the requests it has read (up
to a grace period), then closes the sockets. The dispatcher decides what a
frame means; ``CloseConnection`` from it ends the connection after the
responses already queued are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from spool.protocol.framing import FrameDecoder, FrameError

log = logging.getLogger("spool.server")

RECV_SIZE = 256 * 1024
_BYTES = (bytes, bytearray, memoryview)


class CloseConnection(Exception):
    """Raised by a dispatcher: close the connection after pending responses."""


class FileRegion:
    """``length`` bytes of an open file at ``position``, sent with ``sendfile``.

    Owns ``fd`` (a duplicate of the segment's descriptor, so a concurrent
    segment deletion cannot close it under us) and closes it once sent.
    """

    __slots__ = ("fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd = fd
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


Response = list | None  # chunks, or None for "no response" (acks=0)


class Dispatcher(Protocol):
    def dispatch(self, conn: Connection, frame: bytearray) -> Awaitable[Response]: ...


class Connection:
    """One client socket: reads frames, runs handlers, writes responses in order."""

    def __init__(self, server: Server, sock: socket.socket, peer: tuple) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.host = peer[0] if peer else ""
        self.last_active = time.monotonic()
        self.closed = False
        # Handler tasks in request order; None marks the end of the requests.
        self._pending: deque[asyncio.Future | None] = deque()
        self._queued = asyncio.Event()
        self._room = asyncio.Semaphore(server.max_queued)
        self._loop = asyncio.get_running_loop()

    async def run(self) -> None:
        writer = self._loop.create_task(self._write_loop())
        try:
            await self._read_loop()
        finally:
            self._enqueue(None)
            with contextlib.suppress(Exception):
                await writer
            self._close_socket()

    async def _read_loop(self) -> None:
        decoder = FrameDecoder(self.server.max_request_size)
        buf = bytearray(RECV_SIZE)
        view = memoryview(buf)
        loop = self._loop
        sock = self.sock
        dispatch = self.server.dispatcher.dispatch
        while not self.closed:
            try:
                n = await loop.sock_recv_into(sock, buf)
            except (ConnectionError, OSError):
                return
            if n == 0:
                return
            self.last_active = time.monotonic()
            decoder.feed(view[:n])
            while True:
                try:
                    frame = decoder.next_frame()
                except FrameError as e:
                    log.info("closing %s: %s", self.peer, e)
                    return
                if frame is None:
                    break
                await self._room.acquire()  # backpressure: too many requests in flight
                self._enqueue(loop.create_task(dispatch(self, bytearray(frame))))
                if self.closed:
                    return

    def _enqueue(self, task: asyncio.Future | None) -> None:
        self._pending.append(task)
        self._queued.set()

    @property
    def idle(self) -> bool:
        return not self._pending

    async def _next(self) -> asyncio.Future | None:
        while not self._pending:
            self._queued.clear()
            await self._queued.wait()
        task = self._pending.popleft()
        if task is not None:
            self._room.release()
        return task

    async def _write_loop(self) -> None:
        """Await responses in request order; those already finished go out in one send."""
        pending = self._pending
        while True:
            task = await self._next()
            out: list = []
            while task is not None:
                try:
                    chunks = await task
                except CloseConnection:
                    chunks, task = None, None
                    self.closed = True
                except Exception:
                    log.exception("handler failed for %s; closing the connection", self.peer)
                    chunks, task = None, None
                    self.closed = True
                if chunks:
                    out.extend(chunks)
                if task is None or not pending or pending[0] is None or not pending[0].done():
                    break
                task = await self._next()
            if out:
                try:
                    await self._send(out)
                except (ConnectionError, OSError):
                    self.close()
                    return
                self.last_active = time.monotonic()
            if task is None:
                if self.closed:
                    self.close()
                return

    async def _send(self, chunks: list) -> None:
        loop = self._loop
        sock = self.sock
        pending = bytearray()
        try:
            for i, c in enumerate(chunks):
                if isinstance(c, _BYTES):
                    pending += c
                    continue
                if pending:
                    await loop.sock_sendall(sock, pending)
                    pending = bytearray()
                await self._sendfile(c)
                chunks[i] = b""
            if pending:
                await loop.sock_sendall(sock, pending)
        finally:
            for c in chunks:
                if isinstance(c, FileRegion):
                    c.close()

    async def _sendfile(self, region: FileRegion) -> None:
        fd = self.sock.fileno()
        offset, remaining = region.position, region.length
        while remaining > 0:
            try:
                n = os.sendfile(fd, region.fd, offset, remaining)
            except BlockingIOError:
                await self._writable(fd)
                continue
            if n == 0:  # the file shrank under us: the frame can't be completed
                raise ConnectionError("segment file truncated during sendfile")
            offset += n
            remaining -= n
        region.close()

    async def _writable(self, fd: int) -> None:
        fut = self._loop.create_future()
        self._loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self._loop.remove_writer(fd)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def _close_socket(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()


class Server:
    """Accepts connections on the configured listeners and serves them."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        addresses: list[tuple[str, int]],
        *,
        max_request_size: int,
        max_queued: int,
        idle_timeout_ms: int,
    ) -> None:
        self.dispatcher = dispatcher
        self.addresses = addresses
        self.max_request_size = max_request_size
        self.max_queued = max(1, max_queued)
        self.idle_timeout_s = idle_timeout_ms / 1000.0
        self.connections: set[Connection] = set()
        self._listeners: list[socket.socket] = []
        self._tasks: set[asyncio.Task] = set()
        self.bound: list[tuple[str, int]] = []
        self.on_connection: Callable[[Connection], None] | None = None

    def bind(self) -> None:
        """Bind and listen on every address (the port is ours; connections wait in the
        backlog until ``start``). On failure, the sockets bound so far are closed."""
        if self._listeners:
            return
        try:
            for host, port in self.addresses:
                ls = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
                self._listeners.append(ls)
                ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                ls.bind((host, port))
                ls.listen(1024)
                ls.setblocking(False)
                self.bound.append(ls.getsockname()[:2])
        except BaseException:
            for ls in self._listeners:
                ls.close()
            self._listeners, self.bound = [], []
            raise

    async def start(self) -> None:
        """Bind (unless ``bind`` already did) and start accepting."""
        self.bind()
        for ls in self._listeners:
            self._spawn(self._accept_loop(ls))
        self._spawn(self._reap_idle())

    def _spawn(self, coro) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    async def _accept_loop(self, ls: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(ls)
            except asyncio.CancelledError:
                raise
            except OSError as e:
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.05)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock, peer)
            self.connections.add(conn)
            t = self._spawn(conn.run())
            t.add_done_callback(lambda _t, c=conn: self.connections.discard(c))

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(min(10.0, max(0.5, self.idle_timeout_s / 4)))
            deadline = time.monotonic() - self.idle_timeout_s
            for conn in list(self.connections):
                if conn.last_active < deadline and conn.idle:
                    log.info("closing idle connection %s", conn.peer)
                    conn.close()

    async def close(self, grace_s: float = 5.0) -> None:
        for ls in self._listeners:
            ls.close()
        for t in list(self._tasks):
            if t.get_coro().__name__ in ("_accept_loop", "_reap_idle"):  # type: ignore[union-attr]
                t.cancel()
        for conn in list(self.connections):
            conn.closed = True  # stop reading new requests; queued ones still finish
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RD)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)
        for conn in list(self.connections):
            conn.close()
            conn._close_socket()
        for t in list(self._tasks):
            t.cancel()
