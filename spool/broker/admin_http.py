"""The read-only admin endpoint (``spool.admin.http.listener=host:port``; off when unset).

A minimal HTTP/1.0 server on the broker's event loop; its routes::

    GET /telemetry[?client_instance_id=<uuid>]   200, application/json: the pushed client
                                                 metrics the broker keeps
                                                 (``spool.broker.telemetry.Push.as_json``)
    GET /share-partitions?group=<group id>       200, application/json: the share-partitions
                                                 of that share group this broker leads and
                                                 has loaded (KIP-932 in-flight records;
                                                 ``spool groups describe --admin-endpoint``):
        [{"topic", "partition", "start_offset", "end_offset",
          "in_flight": [{"first_offset", "last_offset", "state", "delivery_count",
                         "member_id", "lock_deadline_ms"}]}]
      state: AVAILABLE, ACQUIRED, ACKNOWLEDGED or ARCHIVED; member_id and lock_deadline_ms
      (epoch ms) only for ACQUIRED; [] when the broker holds none (or serves no share
      groups). Read from ``broker.share_manager.describe(group)`` ((topic, partition) ->
      ``spool.share.partition.SharePartitionSummary``).

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


_STATES = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED", 4: "ARCHIVED"}


def _share_partitions(broker: Any, query: dict[str, list[str]]) -> Any:
    group = (query.get("group") or [""])[0]
    manager = getattr(broker, "share_manager", None)
    described = {} if manager is None else manager.describe(group)
    out = []
    for (topic, partition), summary in sorted(described.items()):
        out.append({"topic": topic, "partition": partition,
                    "start_offset": summary.start_offset, "end_offset": summary.end_offset,
                    "in_flight": [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                   "state": _STATES.get(r.state, str(r.state)),
                                   "delivery_count": r.delivery_count, "member_id": r.member_id,
                                   "lock_deadline_ms": r.deadline_ms}
                                  for r in summary.in_flight]})
    return out


ROUTES: dict[str, Callable[[Any, dict[str, list[str]]], Any]] = {
    "/telemetry": _telemetry, "/share-partitions": _share_partitions}


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
