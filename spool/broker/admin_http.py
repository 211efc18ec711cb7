"""The read-only admin endpoint (``spool.admin.http.listener=host:port``; off when unset).

A minimal HTTP/1.0 server on the broker's event loop; one route today::

    GET /telemetry[?client_instance_id=<uuid>]   200, application/json: the pushed client
                                                 metrics the broker keeps
                                                 (``spool.broker.telemetry.Push.as_json``)

Anything else is 404 (an unknown path) or 405 (not GET). Each answer closes the
connection. The broker logs ``admin endpoint listening on host:port`` (port 0 picks
one). A metrics endpoint (issue 18) adds its routes to ``ROUTES``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("spool.broker.admin_http")

MAX_REQUEST_LINE = 8192


def _telemetry(broker: Any, query: dict[str, list[str]]) -> Any:
    wanted = (query.get("client_instance_id") or [None])[0]
    return [p.as_json() for p in broker.client_metrics.store.pushes(wanted)]


ROUTES: dict[str, Callable[[Any, dict[str, list[str]]], Any]] = {"/telemetry": _telemetry}


class AdminHttp:
    """The endpoint of one broker (module doc)."""

    def __init__(self, broker: Any, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.broker = broker
        self.host, self.port = host or "127.0.0.1", int(port)
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port)
        self.host, self.port = self.server.sockets[0].getsockname()[:2]
        log.warning("admin endpoint listening on %s:%d", self.host, self.port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)).strip():
                pass  # headers: not needed
            status, body = self._answer(line[:MAX_REQUEST_LINE].decode("latin-1").split())
            data = json.dumps(body).encode()
            writer.write(f"HTTP/1.0 {status}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                         + data)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    def _answer(self, parts: list[str]) -> tuple[str, Any]:
        if len(parts) < 2:
            return "400 Bad Request", {"error": "bad request line"}
        if parts[0] != "GET":
            return "405 Method Not Allowed", {"error": f"{parts[0]} is not allowed"}
        url = urlsplit(parts[1])
        route = ROUTES.get(url.path)
        if route is None:
            return "404 Not Found", {"error": f"no route {url.path}"}
        return "200 OK", route(self.broker, parse_qs(url.query))
