"""A tiny HTTP/1.0 server on the broker's event loop, for read-only endpoints.

``HttpEndpoint(what, host, port, routes)`` serves ``GET <path>[?query]``: ``routes`` maps a
path to a function of the parsed query (``urllib.parse.parse_qs``) answering
``(status, content type, body bytes)``, or an awaitable of it (a coroutine function);
it runs on the event loop, so it must be quick and must not block (slow work goes to a
thread, as the metrics endpoint renders its text). Anything else is 404 (an unknown path) or 405 (not GET), with a JSON
body ``{"error": ...}``. Request headers are read and ignored; each answer closes the
connection; a client silent for 10 s is dropped. ``start`` binds (port 0 picks a free
one: ``host``/``port`` are then the bound address); the broker prints the address on
stdout, once, beside its Kafka listeners (``spool.broker.main``). Used by the admin endpoint (``spool.broker.admin_http``) and the metrics
endpoint (``spool.broker.metrics_http``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import parse_qs, urlsplit

from spool.util.listen import ListenError

log = logging.getLogger("spool.broker.http")

MAX_REQUEST_LINE = 8192
READ_TIMEOUT_S = 10

Answer = tuple[str, str, bytes]  # status, content type, body
Route = Callable[[dict[str, list[str]]], Answer | Awaitable[Answer]]


def json_answer(status: str, body: object) -> Answer:
    return status, "application/json", json.dumps(body).encode()


class HttpEndpoint:
    """One listening socket and its routes (module doc)."""

    def __init__(self, what: str, host: str, port: int, routes: Mapping[str, Route]) -> None:
        self.what = what
        self.host, self.port = host or "127.0.0.1", port
        self.routes = routes
        self.server: asyncio.base_events.Server | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        try:
            self.server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as e:  # "cannot listen on 127.0.0.1:9404 (metrics endpoint): ..."
            raise ListenError(e.errno, f"cannot listen on {self.host}:{self.port} "
                              f"({self.what}): {os.strerror(e.errno) if e.errno else e}") from e
        self.host, self.port = self.server.sockets[0].getsockname()[:2]
        # the broker prints where it listens once, on stdout (spool.broker.main), whatever
        # the log level; its "started" log line carries the addresses as fields
        log.debug("%s bound to %s:%d", self.what, self.host, self.port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            while (await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)).strip():
                pass  # headers: not needed
            answer = self.answer(line[:MAX_REQUEST_LINE].decode("latin-1").split())
            status, content_type, data = await answer if inspect.isawaitable(answer) else answer
            writer.write(f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                         + data)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    def answer(self, parts: list[str]) -> Answer | Awaitable[Answer]:
        """The answer to a request line split in words (``["GET", "/path?q", ...]``)."""
        if len(parts) < 2:
            return json_answer("400 Bad Request", {"error": "bad request line"})
        if parts[0] != "GET":
            return json_answer("405 Method Not Allowed", {"error": f"{parts[0]} is not allowed"})
        url = urlsplit(parts[1])
        route = self.routes.get(url.path)
        if route is None:
            return json_answer("404 Not Found", {"error": f"no route {url.path}"})
        return route(parse_qs(url.query))
