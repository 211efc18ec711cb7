"""Requests from this node to another one over our own codec (Kafka's NetworkChannel).

``PeerChannel(host, port)`` is one TCP connection to a peer's listener,
opened at the first request and again after any failure. Requests are
pipelined: each gets a correlation id, the reader task matches the
answers (which a Kafka server sends in request order) to their futures.
``request(api_key, version, message, timeout_s)`` returns the decoded
response body or raises ``PeerUnavailable`` (cannot connect, connection
lost, or no answer within ``timeout_s``: the connection is then dropped,
since the answers behind a lost one would arrive out of step).

A caller that must not wait behind a long-polling request (a Raft Fetch
parked up to its max wait) uses a second channel to the same peer: answers
on one connection come back in order.

Lifecycle: ``close()`` fails every pending request and closes the socket.
Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct

from spool.protocol._generated import API_BY_KEY
from spool.protocol.framing import FrameDecoder
from spool.protocol.headers import encode_request_header

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_API_VERSIONS = 18


class PeerUnavailable(ConnectionError):
    """The peer did not answer (connect failed, connection lost, timeout)."""


class PeerChannel:
    """Pipelined requests to one peer over one connection (module doc)."""

    def __init__(self, host: str, port: int, *, client_id: str = "spool-raft",
                 connect_timeout_s: float = 2.0) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._connecting: asyncio.Future | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._ids = itertools.count(1)
        self.closed = False

    def __repr__(self) -> str:
        return f"PeerChannel({self.host}:{self.port})"

    async def request(self, api_key: int, version: int, message, timeout_s: float):
        """Send ``message`` and return the decoded answer (``PeerUnavailable`` if none)."""
        if self.closed:
            raise PeerUnavailable(f"{self!r} is closed")
        writer = await self._connect()
        cid = next(self._ids) & 0x7FFFFFFF
        entry = API_BY_KEY[api_key]
        header = encode_request_header(api_key, version, cid, self.client_id,
                                       entry.request.is_flexible(version))
        body: list = [header]
        message.encode(version, body)
        size = sum(len(c) for c in body)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        try:
            writer.writelines([_SIZE.pack(size), *body])
            await writer.drain()
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError as e:
            self._drop(f"no answer within {timeout_s} s")
            raise PeerUnavailable(f"{self!r}: no answer within {timeout_s} s") from e
        except OSError as e:
            self._drop(str(e))
            raise PeerUnavailable(f"{self!r}: {e}") from e
        finally:
            self._pending.pop(cid, None)

    async def _connect(self) -> asyncio.StreamWriter:
        if self._writer is not None:
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        fut = self._connecting
        try:
            return await asyncio.shield(fut)
        finally:
            if fut.done():
                self._connecting = None

    async def _open(self) -> asyncio.StreamWriter:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout_s)
        except (OSError, TimeoutError) as e:
            raise PeerUnavailable(f"{self!r}: cannot connect: {e}") from e
        self._writer = writer
        self._reader_task = asyncio.ensure_future(self._read_loop(reader, writer))
        return writer

    async def _read_loop(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(max_size=1 << 30)
        reason = "connection closed by the peer"
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    self._answer(bytes(frame))
        except (OSError, ValueError) as e:
            reason = f"{type(e).__name__}: {e}"
        finally:
            if self._writer is writer:
                self._drop(reason)

    def _answer(self, frame: bytes) -> None:
        (cid,) = _SIZE.unpack_from(frame, 0)
        pending = self._pending.get(cid)
        if pending is None:
            return  # its requester gave up (timeout)
        fut, api_key, version = pending
        entry = API_BY_KEY[api_key]
        pos = 4
        if entry.response.is_flexible(version) and api_key != _API_VERSIONS:
            pos += 1  # the response header's (empty) tagged fields
        try:
            body = entry.response.from_bytes(frame[pos:], version)
        except Exception as e:  # noqa: BLE001 - a bad answer fails that request only
            _fail(fut, PeerUnavailable(f"{self!r}: undecodable answer: {e}"))
            return
        if not fut.done():
            fut.set_result(body)

    def _drop(self, reason: str) -> None:
        """Close the connection and fail what waits on it; the next request reconnects."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending, self._pending = self._pending, {}
        for fut, _, _ in pending.values():
            _fail(fut, PeerUnavailable(f"{self!r}: {reason}"))

    def close(self) -> None:
        self.closed = True
        self._drop("closed")


def _fail(fut: asyncio.Future, exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)
        fut.exception()  # retrieved: a requester that gave up is not warned about
