"""The asyncio shell: listeners, connections, in-order responses, sendfile, limits.

One reader task per connection (and a writer task once it has sent a
request). The reader waits for the socket to be readable, then receives
into one buffer shared by the whole server, so an idle connection holds no
receive buffer; it yields to the event loop after every receive, so a client
that never stops sending cannot starve the others (``bench.stall``); the ``FrameDecoder`` keeps only the bytes of frames not yet
whole, and gives memory back once they are handed out. A frame larger than
``IN_PLACE_FRAME`` is received straight into its own buffer once its size prefix
has arrived (``FrameDecoder.receive_target``), which becomes the request's frame:
its bytes are not copied through the shared buffer and the decoder's. Each whole frame is
checked and decoded by the dispatcher *synchronously, in arrival order*
(``Dispatcher.prepare``): a frame that is malformed, or that the dispatcher
refuses (``CloseConnection``), condemns the connection before any later
frame from it is even looked at, so nothing pipelined behind a bad frame
ever runs. A good frame becomes one handler task, queued in request order.
The writer awaits the queued tasks strictly in order, so responses leave in
request order even when a long-polling fetch finishes after a later
request; responses already finished go out in one send. A response is a
list of chunks: byte strings, ``FileRegion`` objects that go from the
segment file to the socket with ``os.sendfile`` (zero copy), and ``SendHook``s (no
bytes: told when the chunks before them have been sent, for the request metrics).

What one connection may hold (backpressure, the reader stops reading):
``queued.max.requests`` requests in flight (read, not yet written back),
at most ``MAX_QUEUED_RESPONSE_BYTES`` of finished responses its client has
not read yet, and ``MAX_QUEUED_FILE_REGIONS`` segment descriptors pinned by
them (each Fetch still running counts as one: a delayed produce pins none). While it is stopped the
reader still notices the peer hanging up.

Across connections: ``queued.max.request.bytes`` (Kafka's; -1: unbounded)
bounds the request bytes read and not yet answered. A frame is counted at
its declared size as soon as its size prefix has arrived, so a connection
that has started a frame can always finish it, and no connection starts
one while the total is over the limit (it waits; the first frame when
nothing else is in flight always goes, however large).
``max.connections`` (broker-wide: accepting pauses until one closes) and
``max.connections.per.ip`` (a connection over it is closed at accept, as
Kafka does). ``accept()`` failing for lack of descriptors (EMFILE/ENFILE)
backs off and keeps retrying: the broker keeps serving and accepts again
once descriptors are free.

Lifecycle of a connection: when the peer hangs up (EOF, reset, or a send
fails) the connection is torn down at once: parked work ends (a delayed
fetch waits on ``hangup_future()``), finished responses not sent release
their file descriptors, and so do those of requests still running, when
they finish; its request bytes are given back. Requests already read still
run to their end, as in Kafka (a produce sent just before closing is
appended), their answers dropped.
When it is condemned (bad frame) or the server shuts down, the responses
to the requests read before are written first, then it closes. Each closed
connection with a reason logs one line, rate-limited
(``RateLimitedLog``).

Listeners: the server binds one socket per configured listener
(``NAME://host:port``); a listener given a ``ServerTls`` (SSL, SASL_SSL) serves
``spool.broker.tls_connection.TlsConnection``s, the others plain ``Connection``s, whose
path does not change with TLS (one bound ``recv_into`` either way); each connection
knows its ``listener_name`` and
whether it came in on a controller listener (``controller_listener``, a
name in ``controller_names``), so the dispatcher serves each plane its own
APIs. ``bound_listeners`` maps each name to the address it got (port 0
binds an ephemeral port).

Lifecycle of the server: ``Server.bind()`` binds and listens on every
address (the broker does this before touching its data, so a second broker
on the same port fails first); ``Server.start()`` starts accepting;
``Server.close()`` stops accepting, lets each connection finish the
requests it has read (up to a grace period), then closes the sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from spool.protocol.framing import FrameDecoder, FrameError
from spool.security.principal import ANONYMOUS, KafkaPrincipal
from spool.security.quotas import INT32_MAX, BrokerConnectionRate, ConnectionQuotas
from spool.util.inet import java_host_address
from spool.util.listen import ListenError

if TYPE_CHECKING:
    from spool.security.tls import ServerTls

log = logging.getLogger("spool.server")

RECV_SIZE = 256 * 1024  # the server's one receive buffer
IN_PLACE_FRAME = 64 * 1024  # a frame larger than this is received into its own buffer
MAX_QUEUED_RESPONSE_BYTES = 64 * 1024 * 1024  # finished, unsent responses of one connection
MAX_QUEUED_FILE_REGIONS = 256  # segment descriptors pinned by one connection's unsent responses
FETCH_API_KEY = 1  # the requests whose answers may pin segment descriptors
_BYTES = (bytes, bytearray, memoryview)
_NO_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})



HANGUP_POLL_S = 0.5  # how often a stalled connection with unread requests asks TCP for a FIN
_TCP_GONE_STATES = frozenset({7, 8, 9})  # Linux TCP_CLOSE, TCP_CLOSE_WAIT, TCP_LAST_ACK


def peer_host(peer: tuple | None) -> str:
    """The client's address as Kafka prints it (``spool.util.inet``): ACLs, per-IP limits
    and IP quotas all match this one form."""
    return java_host_address(peer[0]) if peer else ""


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the peer closed its end (FIN or RST), even with its last requests unread:
    the connection's TCP state (Linux TCP_INFO's first byte)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
    except OSError:
        return False  # not TCP, or no TCP_INFO: EOF shows once the requests are read
    return info[0] in _TCP_GONE_STATES


class CloseConnection(Exception):
    """Raised by a dispatcher, or by a handler instead of answering (Produce with acks=0
    that failed): the connection is condemned once the responses before it are sent;
    ``str(e)`` says why."""


class RateLimitedLog:
    """At most ``per_second`` lines a second; the next line says how many were dropped."""

    def __init__(self, logger: logging.Logger, per_second: int = 10) -> None:
        self.logger = logger
        self.per_second = per_second
        self._second = 0
        self._count = 0
        self._dropped = 0

    def __call__(self, level: int, msg: str, *args, exc_info=None) -> None:
        if not self.logger.isEnabledFor(level):
            return
        now = int(time.monotonic())
        if now != self._second:
            self._second, self._count = now, 0
        if self._count >= self.per_second:
            self._dropped += 1
            return
        self._count += 1
        if self._dropped:
            msg += " (%d similar lines dropped)"
            args = (*args, self._dropped)
            self._dropped = 0
        self.logger.log(level, msg, *args, exc_info=exc_info)


conn_log = RateLimitedLog(log)


class FileRegion:
    """``length`` bytes of an open file at ``position``, sent with ``sendfile``.

    Owns ``fd`` (a duplicate of the segment's descriptor, so a concurrent
    segment deletion cannot close it under us) and closes it once sent, or
    when the connection that would have sent it closes.
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


class SendHook:
    """A zero-length chunk of a response: the connection calls ``sent(start, end)``
    (``time.perf_counter()`` seconds of its send) once the chunks before it have gone out
    (``spool.broker.metrics.RequestTimer``); dropped unsent if the connection closes."""

    __slots__ = ()

    def __len__(self) -> int:
        return 0

    def sent(self, send_start: float, send_end: float) -> None:
        raise NotImplementedError


def _sent(hooks: list[SendHook], send_start: float) -> None:
    send_end = time.perf_counter()
    for hook in hooks:
        hook.sent(send_start, send_end)


Response = list | None  # chunks, or None for "no response" (acks=0)


class Dispatcher(Protocol):
    def prepare(self, conn: Connection, frame: bytearray) -> Awaitable[Response]:
        """Check and decode ``frame`` now; the awaitable runs its handler.

        Raises ``CloseConnection`` for a frame the connection must die for.
        """
        ...


def _weigh(chunks) -> tuple[int, int]:
    """(bytes, file regions) of a response's chunks."""
    if not chunks:
        return 0, 0
    size = regions = 0
    for c in chunks:
        size += len(c)
        if isinstance(c, FileRegion):
            regions += 1
    return size, regions


def _cork(sock: socket.socket, on: int) -> bool:
    """TCP_CORK on or off (off sends what it held); False where it is not available."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, on)
    except (OSError, AttributeError):
        return False
    return True


def _close_regions(chunks) -> None:
    if chunks:
        for c in chunks:
            if isinstance(c, FileRegion):
                c.close()


def _wake_future(fut: asyncio.Future, *_: object) -> None:
    """Complete ``fut``, once (also as a done callback: the finished task is ignored)."""
    if not fut.done():
        fut.set_result(None)


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Wait until ``fd`` is readable (or, for a listener, has a connection to accept)."""
    fut = loop.create_future()
    loop.add_reader(fd, _wake_future, fut)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


class RequestBytes:
    """``queued.max.request.bytes``: request bytes read and not yet answered, all connections."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: set[Connection] = set()

    @property
    def full(self) -> bool:
        return 0 <= self.limit <= self.used and self.used > 0

    def add(self, n: int) -> None:
        self.used += n
        if n < 0 and self.waiting and not self.full:
            waiting, self.waiting = self.waiting, set()
            for conn in waiting:
                conn.wake()


class Connection:
    """One client socket: reads frames, runs handlers, writes responses in order."""

    def __init__(self, server: Server, sock: socket.socket, peer: tuple,
                 listener_name: str = "PLAINTEXT") -> None:
        self.server = server
        self.listener_name = listener_name
        self.controller_listener = listener_name in server.controller_names
        self.sock = sock
        self.fd = sock.fileno()
        self._recv_into = sock.recv_into  # TlsConnection's decrypts
        self.peer = peer
        self.host = peer_host(peer)  # as Kafka prints it (ACL hosts, group client hosts)
        self.principal: KafkaPrincipal = ANONYMOUS  # set by mTLS or SASL (spool.security)
        self.sasl = None  # its SaslAuthenticator on a SASL listener (spool.broker.dispatch)
        self.decoder: FrameDecoder | None = None  # (its limit rises once SASL authenticates)
        self.last_active = time.monotonic()
        self.closed = False  # no more requests are read
        self.torn_down = False
        self.gone = False  # the peer hung up: nothing more is sent
        self._hangup: asyncio.Future | None = None
        self.reason: str | None = None  # why it closed, logged once
        # Handler tasks in request order; None marks the end of the requests.
        self._pending: deque[asyncio.Task | None] = deque()
        self._loop = asyncio.get_running_loop()
        self._writer: asyncio.Task | None = None
        self._writer_wake: asyncio.Future | None = None
        self._reader_wake: asyncio.Future | None = None
        self._buffered = 0  # request bytes this connection counts in server.request_bytes
        self._unsent_bytes = 0
        self._unsent_regions = 0
        self._running = 0  # handler tasks not finished yet
        self._running_fetches = 0  # of which Fetch requests (they may pin a descriptor)
        # what _done counted per finished task, until the writer has sent it
        self._weights: dict[asyncio.Task, tuple[int, int]] = {}
        self._taken: set[asyncio.Task] = set()
        self.muted_until = 0.0  # loop time until which no request is read (``throttle``)

    # ---- lifecycle

    async def run(self) -> None:
        peer_gone = True
        try:
            peer_gone = await self._read_loop()
        finally:
            self.closed = True
            if peer_gone and not self.server.closing:
                self._hang_up()
            self._enqueue(None)
            if self._writer is not None:
                if self.gone:  # nobody reads the answers: stop writing now
                    self._writer.cancel()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self._writer
            self._teardown()

    def _hang_up(self) -> None:
        """The peer went away: parked work (a delayed fetch) ends now.

        Requests already read still run to the end, as in Kafka (a produce
        the client sent before closing is appended); only their answers go.
        """
        self.gone = True
        if self._hangup is not None:
            _wake_future(self._hangup)

    def hangup_future(self) -> asyncio.Future:
        """A future done when the peer hangs up, for work that parks (fetch's long poll)."""
        if self._hangup is None:
            self._hangup = self._loop.create_future()
            if self.gone:
                self._hangup.set_result(None)
        return self._hangup

    def close(self, reason: str | None = None) -> None:
        """Stop this connection: the reader sees EOF and tears it down."""
        if reason and self.reason is None:
            self.reason = reason
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.wake()

    def _condemn(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.closed = True

    def wake(self) -> None:
        """Make a stalled reader look again (room, request bytes, or closing)."""
        if self._reader_wake is not None:
            _wake_future(self._reader_wake)

    def _teardown(self) -> None:
        if self.torn_down:
            return
        self.torn_down = True
        self.closed = True
        self._hang_up()
        for task in self._pending:
            if task is None:
                continue
            if not task.done():
                if self.server.closing:
                    task.cancel()  # (shutdown, past its grace period)
                # else it runs to its end; _done drops its answer
            elif not task.cancelled() and task.exception() is None:
                _close_regions(task.result())
        self._pending.clear()
        self._unsent_bytes = self._unsent_regions = 0
        self._weights.clear()
        self._taken.clear()
        self.server.request_bytes.add(-self._buffered)
        self._buffered = 0
        self.server.request_bytes.waiting.discard(self)
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.reason:
            conn_log(logging.INFO, "closing %s: %s", self.peer, self.reason)

    @property
    def idle(self) -> bool:
        return not self._pending

    # ---- reading

    def _has_room(self) -> bool:
        return (
            len(self._pending) < self.server.max_queued
            and self._unsent_bytes < MAX_QUEUED_RESPONSE_BYTES
            # a running fetch may still pin a descriptor: count it too (not other requests:
            # delayed produces waiting for replication would cap a connection's throughput)
            and self._unsent_regions + self._running_fetches < MAX_QUEUED_FILE_REGIONS
        )

    def _count_buffered(self, decoder: FrameDecoder) -> None:
        """Count the bytes of frames not yet whole, at their declared size."""
        n = decoder.buffered
        declared = decoder.pending_size()
        if declared is not None and 0 <= declared <= self.server.max_request_size:
            n = max(n, declared + 4)
        if n != self._buffered:
            self.server.request_bytes.add(n - self._buffered)
            self._buffered = n

    async def _read_loop(self) -> bool:
        """Read and dispatch until the connection ends; True if the peer went away."""
        server = self.server
        decoder = self.decoder = FrameDecoder(
            server.frame_limits.get(self.listener_name, server.max_request_size))
        buf, view = server.recv_buf, server.recv_view
        recv_into = self._recv_into
        prepare = server.dispatcher.prepare
        loop = self._loop
        pool = server.request_bytes
        take_frame = decoder.take_frame
        receive_target = decoder.receive_target
        while not self.closed:
            if self.muted_until:
                if await self._muted():
                    return True
                continue
            dispatched = False
            while self._has_room():
                try:
                    frame = take_frame()
                except FrameError as e:
                    self._condemn(str(e))
                    return False
                if frame is None:
                    break
                try:
                    work = prepare(self, frame)
                except CloseConnection as e:
                    self._condemn(str(e) or "request refused")
                    return False
                size = len(frame) + 4
                self._buffered -= size  # now counted by the task until it finishes
                task = loop.create_task(work)
                self._running += 1
                fetch = frame[0] == 0 and frame[1] == FETCH_API_KEY  # the header's api_key
                self._running_fetches += fetch
                task.add_done_callback(functools.partial(self._done, size, fetch))
                self._enqueue(task)
                dispatched = True
            if dispatched:
                self._count_buffered(decoder)
            if self.closed:
                break
            mid_frame = decoder.buffered > 0
            if not self._has_room() or (pool.full and not mid_frame):
                if await self._stalled(pool.full and not mid_frame):
                    return True
                continue
            # a large frame is received straight into its own buffer (no copies)
            target = receive_target(IN_PLACE_FRAME) if mid_frame else None
            try:
                n = recv_into(buf if target is None else target)
            except (BlockingIOError, InterruptedError):
                await _readable(self._loop, self.fd)
                continue
            except OSError:
                return True
            if n == 0:
                return True
            self.last_active = time.monotonic()
            if target is None:
                decoder.feed(view[:n])
                self._count_buffered(decoder)
            else:
                target.release()
                decoder.received(n)  # (counted at its declared size already)
            # yield after every receive: a client that keeps sending must not keep the
            # loop (and every other connection, and its own queued tasks) waiting
            await asyncio.sleep(0)
        return False

    def throttle(self, ms: int) -> None:
        """Mute the channel for ``ms`` (client quotas, ``spool.broker.throttling``): no
        request is read until then (those read before wait for it there). Responses of
        the requests before still go out. A longer throttle extends the mute; a shorter
        one changes nothing."""
        if ms <= 0 or self.closed:
            return
        until = self._loop.time() + ms / 1000.0
        if until > self.muted_until:
            self.muted_until = until

    async def _muted(self) -> bool:
        """Wait out the mute (``wake``, on close, cuts it short); True if the peer hung up
        meanwhile (a byte-rate throttle has no cap: its socket must not linger)."""
        loop = self._loop
        while not self.closed and loop.time() < self.muted_until:
            timer = loop.call_at(self.muted_until, self.wake)
            try:
                if await self._stalled(False):
                    return True
            finally:
                timer.cancel()
        self.muted_until = 0.0
        return False

    async def _stalled(self, for_bytes: bool) -> bool:
        """Wait for room (or request bytes); True if the peer hung up meanwhile."""
        loop = self._loop
        fut = loop.create_future()
        self._reader_wake = fut
        if for_bytes:
            self.server.request_bytes.waiting.add(self)
        gone = False
        watching = True

        def peek() -> None:  # EOF shows even while we read no requests
            nonlocal gone, watching
            try:
                data = self.sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                gone = True
                _wake_future(fut)
            else:  # requests wait unread before any EOF: ask TCP for the peer's FIN instead
                timer[0] = loop.call_later(HANGUP_POLL_S, poll_state)
            loop.remove_reader(self.fd)
            watching = False

        def poll_state() -> None:
            nonlocal gone
            if fut.done():
                return
            if _peer_closed(self.sock):
                gone = True
                _wake_future(fut)
            else:
                timer[0] = loop.call_later(HANGUP_POLL_S, poll_state)

        timer: list[asyncio.TimerHandle | None] = [None]
        loop.add_reader(self.fd, peek)
        try:
            await fut
        finally:
            self._reader_wake = None
            if watching:
                loop.remove_reader(self.fd)
            if timer[0] is not None:
                timer[0].cancel()
            self.server.request_bytes.waiting.discard(self)
        return gone

    def _done(self, size: int, fetch: bool, task: asyncio.Task) -> None:
        self.server.request_bytes.add(-size)
        self._running -= 1
        self._running_fetches -= fetch
        if task.cancelled():
            return
        exc = task.exception()  # (retrieved here: the writer reports it if it gets there)
        if exc is not None:
            if self.torn_down:
                conn_log(logging.ERROR, "handler failed for %s (closed)", self.peer,
                         exc_info=exc)
            return
        chunks = task.result()
        if self.torn_down:
            _close_regions(chunks)
            return
        if task in self._taken:  # the writer took it before this callback ran
            self._taken.discard(task)
            return
        n, regions = self._weights[task] = _weigh(chunks)
        self._unsent_bytes += n
        self._unsent_regions += regions

    def _enqueue(self, task: asyncio.Task | None) -> None:
        self._pending.append(task)
        if self._writer is None:
            if task is None:
                return
            self._writer = self._loop.create_task(self._write_loop())
        elif self._writer_wake is not None:
            _wake_future(self._writer_wake)

    # ---- writing

    async def _head(self) -> asyncio.Task | None:
        while not self._pending:
            self._writer_wake = self._loop.create_future()
            try:
                await self._writer_wake
            finally:
                self._writer_wake = None
        return self._pending[0]

    async def _write_loop(self) -> None:
        """Await responses in request order; those already finished go out in one send."""
        pending = self._pending
        while True:
            task = await self._head()
            out: list = []
            stop = False
            out_bytes = out_regions = 0
            while task is not None:
                if not task.done():
                    # not ``await task``: cancelling the writer must not cancel the handler
                    ready = self._loop.create_future()
                    task.add_done_callback(functools.partial(_wake_future, ready))
                    await ready
                try:
                    chunks = task.result()
                except asyncio.CancelledError:
                    chunks, stop = None, True
                except CloseConnection as e:  # a handler's answer: close, as Kafka does
                    conn_log(logging.INFO, "closing %s: %s", self.peer, e)
                    chunks, stop = None, True
                    self.reason = self.reason or str(e)
                except Exception:
                    conn_log(logging.ERROR, "closing %s: handler failed", self.peer,
                             exc_info=True)
                    chunks, stop = None, True
                    self.reason = self.reason or "handler failed"
                if pending and pending[0] is task:
                    pending.popleft()
                if chunks:
                    weight = self._weights.pop(task, None)
                    if weight is None:
                        self._taken.add(task)  # done, but _done has not counted it yet
                    else:
                        out_bytes += weight[0]
                        out_regions += weight[1]
                    out.extend(chunks)
                self.wake()
                if stop or not pending or pending[0] is None or not pending[0].done():
                    break
                task = pending[0]
            if out:
                try:
                    await self._send(out)
                except (ConnectionError, OSError):
                    self.close()
                    return
                self.last_active = time.monotonic()
                self._unsent_bytes -= out_bytes  # (held until sent: they pin until then)
                self._unsent_regions -= out_regions
                self.wake()
            if stop:
                self.close()
                return
            if task is None:
                if self.closed:
                    self.close()
                return

    async def _send(self, chunks: list) -> None:
        """The chunks in order. Around file regions the socket is corked (TCP_CORK): the
        bytes before each region (the partition's header) and the region leave in full
        segments instead of a small packet each, and the bytes between regions are written
        at once when the socket takes them (no await per partition)."""
        sock = self.sock
        pending = bytearray()
        hooks: list[SendHook] = []
        send_start = time.perf_counter()
        corked = False
        try:
            for i, c in enumerate(chunks):
                if isinstance(c, _BYTES):
                    pending += c
                    continue
                if isinstance(c, SendHook):
                    hooks.append(c)
                    continue
                if not corked:
                    corked = _cork(sock, 1)
                if pending:
                    await self._send_bytes(pending)
                    pending = bytearray()
                await self._sendfile(c)
                chunks[i] = b""
            if pending:
                await self._send_bytes(pending)
        finally:
            if corked:
                _cork(sock, 0)  # (flushes what the cork held)
            _close_regions(chunks)
        if hooks:
            _sent(hooks, send_start)

    async def _send_bytes(self, data: bytearray) -> None:
        try:
            n = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        if n < len(data):
            await self._loop.sock_sendall(self.sock, memoryview(data)[n:])

    async def _sendfile(self, region: FileRegion) -> None:
        fd = self.fd
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
        self._loop.add_writer(fd, _wake_future, fut)
        try:
            await fut
        finally:
            self._loop.remove_writer(fd)


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
        max_connections: int = 2**31 - 1,
        max_connections_per_ip: int = 2**31 - 1,
        queued_max_request_bytes: int = -1,
        names: list[str] | None = None,
        controller_names: frozenset[str] | set[str] = frozenset(),
        tls: Mapping[str, ServerTls] | None = None,
        tls_handshake_timeout_ms: int = 10000,
    ) -> None:
        """``addresses[i]`` is listener ``names[i]`` (default: all ``PLAINTEXT``); connections
        on a listener in ``controller_names`` are the controller plane's; on a listener in
        ``tls`` they speak TLS (``spool.broker.tls_connection``)."""
        self.dispatcher = dispatcher
        # listener -> largest frame read before authentication (sasl.server.max.receive.size)
        self.frame_limits: dict[str, int] = dict(getattr(dispatcher, "frame_limits", {}))
        self.addresses = addresses
        self.names = list(names) if names is not None else ["PLAINTEXT"] * len(addresses)
        if len(self.names) != len(addresses):
            raise ValueError("one listener name per address")
        self.controller_names = frozenset(controller_names)
        self.max_request_size = max_request_size
        self.max_queued = max(1, max_queued)
        self.idle_timeout_s = idle_timeout_ms / 1000.0
        self.max_connections = max(1, max_connections)
        self.max_connections_per_ip = max(0, max_connections_per_ip)
        self.request_bytes = RequestBytes(queued_max_request_bytes)
        self.recv_buf = bytearray(RECV_SIZE)
        self.recv_view = memoryview(self.recv_buf)
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        # ip connection_creation_rate (spool.security.quotas); None: no such quota
        self.connection_quotas: ConnectionQuotas | None = None
        self._throttled: set[socket.socket] = set()  # refused by it, closed when throttled
        self.connection_rate: BrokerConnectionRate | None = None  # max.connection.creation.rate
        self.closing = False
        self._listeners: list[socket.socket] = []
        self._tasks: set[asyncio.Task] = set()
        self._service: list[asyncio.Task] = []
        self._slot_freed = asyncio.Event()
        self.bound: list[tuple[str, int]] = []
        self.bound_listeners: dict[str, tuple[str, int]] = {}  # name -> (host, port) bound
        self.on_connection: Callable[[Connection], None] | None = None
        # listener -> connections accepted, closed (socket-server-metrics: spool.broker.metrics)
        self.connections_created: dict[str, int] = dict.fromkeys(self.names, 0)
        self.connections_closed: dict[str, int] = dict.fromkeys(self.names, 0)
        self.tls = dict(tls or {})
        self.tls_handshake_timeout_s = tls_handshake_timeout_ms / 1000.0
        if self.tls:
            from spool.broker.tls_connection import TlsConnection  # (it imports this module)

            self.tls_recv_view = memoryview(bytearray(RECV_SIZE))  # encrypted bytes
            self._tls_connection = TlsConnection

    def bind(self) -> None:
        """Bind and listen on every address (the port is ours; connections wait in the
        backlog until ``start``). On failure, the sockets bound so far are closed."""
        if self._listeners:
            return
        try:
            for name, (host, port) in zip(self.names, self.addresses, strict=True):
                ls = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
                self._listeners.append(ls)
                ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    ls.bind((host, port))
                except OSError as e:
                    raise ListenError(e.errno, f"cannot listen on {host}:{port} (listener "
                                      f"{name}): {e.strerror}") from e
                ls.listen(1024)
                ls.setblocking(False)
                self.bound.append(ls.getsockname()[:2])
                self.bound_listeners[name] = self.bound[-1]
        except BaseException:
            for ls in self._listeners:
                ls.close()
            self._listeners, self.bound, self.bound_listeners = [], [], {}
            raise

    async def start(self) -> None:
        """Bind (unless ``bind`` already did) and start accepting."""
        self.bind()
        for name, ls in zip(self.names, self._listeners, strict=True):
            self._service.append(self._spawn(self._accept_loop(ls, name)))
        self._service.append(self._spawn(self._reap_idle()))

    def _spawn(self, coro) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    def connection_counts(self) -> dict[str, tuple[int, int, int]]:
        """listener -> (open, accepted, closed) connections."""
        open_ = dict.fromkeys(self.connections_created, 0)
        for conn in self.connections:
            open_[conn.listener_name] = open_.get(conn.listener_name, 0) + 1
        return {name: (n, self.connections_created.get(name, 0),
                       self.connections_closed.get(name, 0)) for name, n in open_.items()}

    def set_connection_limits(self, max_connections: int, max_connections_per_ip: int) -> None:
        """``max.connections`` and ``max.connections.per.ip`` changed while running (dynamic
        broker configs): new connections obey them; open ones stay, as in Kafka."""
        self.max_connections = max(1, max_connections)
        self.max_connections_per_ip = max(0, max_connections_per_ip)
        self._slot_freed.set()  # an accept loop waiting on the old limit looks again

    def set_connection_creation_rate(self, rate: int, samples: int = 11,
                                     window_s: int = 1) -> None:
        """``max.connection.creation.rate`` (at start, and when changed while running);
        its default (2147483647) means none: one attribute test per accept."""
        if rate >= INT32_MAX:
            self.connection_rate = None
        elif self.connection_rate is not None:
            self.connection_rate.limit = rate  # (the rate so far is kept, as Kafka's sensor)
        else:
            self.connection_rate = BrokerConnectionRate(rate, samples, window_s)

    async def _accept_loop(self, ls: socket.socket, name: str) -> None:
        loop = asyncio.get_running_loop()
        fd = ls.fileno()
        backoff = 0.0
        while True:
            while len(self.connections) >= self.max_connections:  # max.connections: wait
                self._slot_freed.clear()
                await self._slot_freed.wait()
            try:
                sock, peer = ls.accept()
            except (BlockingIOError, InterruptedError):
                await _readable(loop, fd)
                continue
            except OSError as e:
                # out of descriptors (or another transient failure): back off, keep serving
                backoff = min(1.0, max(0.01, backoff * 2))
                conn_log(logging.WARNING, "accept failed: %s; retrying in %.2f s", e, backoff)
                await asyncio.sleep(backoff if e.errno in _NO_DESCRIPTORS else 0.01)
                continue
            backoff = 0.0
            rate = self.connection_rate
            if rate is not None and name not in self.controller_names:
                wait_ms = rate.record(int(time.monotonic() * 1000))
                if wait_ms:  # Kafka's waitForConnectionSlot: this listener accepts nothing
                    conn_log(logging.INFO, "max.connection.creation.rate=%d reached: %s "
                             "waits %d ms", rate.limit, name, wait_ms)
                    await asyncio.sleep(wait_ms / 1000)
            self._admit(sock, peer, name)

    def _admit(self, sock: socket.socket, peer: tuple, name: str = "PLAINTEXT") -> None:
        host = peer_host(peer)
        if self.connection_quotas is not None and self._rate_refused(sock, host, name):
            return
        if self.per_ip.get(host, 0) >= self.max_connections_per_ip:
            conn_log(logging.INFO, "refusing %s: max.connections.per.ip=%d reached",
                     peer, self.max_connections_per_ip)
            sock.close()
            return
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            sock.close()
            return
        self.per_ip[host] = self.per_ip.get(host, 0) + 1
        tls = self.tls.get(name) if self.tls else None
        if tls is None:
            conn = Connection(self, sock, peer, name)
        else:
            conn = self._tls_connection(self, sock, peer, name, tls)
        self.connections.add(conn)
        created = self.connections_created
        created[name] = created.get(name, 0) + 1
        t = self._spawn(conn.run())
        t.add_done_callback(functools.partial(self._gone, conn))
        if self.on_connection is not None:
            self.on_connection(conn)

    def _rate_refused(self, sock: socket.socket, host: str, name: str) -> bool:
        """Kafka's ConnectionQuotas: a connection over its IP's ``connection_creation_rate``
        is not served; its socket is held for the throttle time, then closed."""
        assert self.connection_quotas is not None
        if name in self.controller_names:
            return False  # (Kafka's protected listener: the controller's own)
        throttle_ms = self.connection_quotas.record(host, int(time.monotonic() * 1000))
        if not throttle_ms:
            return False
        if self.connection_rate is not None:  # not accepted: not counted broker-wide either
            self.connection_rate.unrecord(int(time.monotonic() * 1000))
        conn_log(logging.INFO, "refusing %s on %s: connection_creation_rate of ip %s "
                 "exceeded; closing in %d ms", host, name, host, throttle_ms)
        self._throttled.add(sock)

        def close() -> None:
            self._throttled.discard(sock)
            sock.close()

        asyncio.get_running_loop().call_later(throttle_ms / 1000, close)
        return True

    def _gone(self, conn: Connection, _task: asyncio.Task) -> None:
        conn._teardown()  # (if run() itself was cancelled)
        self.connections.discard(conn)
        closed = self.connections_closed
        closed[conn.listener_name] = closed.get(conn.listener_name, 0) + 1
        n = self.per_ip.get(conn.host, 0) - 1
        if n > 0:
            self.per_ip[conn.host] = n
        else:
            self.per_ip.pop(conn.host, None)
        self._slot_freed.set()

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(min(10.0, max(0.5, self.idle_timeout_s / 4)))
            deadline = time.monotonic() - self.idle_timeout_s
            for conn in list(self.connections):
                if conn.last_active < deadline and conn.idle:
                    conn.close("idle for connections.max.idle.ms")

    async def close(self, grace_s: float = 5.0) -> None:
        self.closing = True
        for t in self._service:
            t.cancel()
        if self._service:
            await asyncio.wait(self._service)
        for ls in self._listeners:
            ls.close()
        for sock in self._throttled:
            sock.close()
        self._throttled.clear()
        for conn in list(self.connections):
            conn.closed = True  # stop reading new requests; queued ones still finish
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RD)
            conn.wake()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)
        for conn in list(self.connections):
            conn.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
