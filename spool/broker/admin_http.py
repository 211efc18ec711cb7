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
connection. The broker prints ``spool broker N listening on http://host:port (admin)``
on stdout (port 0 picks one; ``spool.broker.main``). The server is
``spool.broker.http_endpoint.HttpEndpoint``, shared with the metrics endpoint
(``spool.broker.metrics_http``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from spool.broker.http_endpoint import HttpEndpoint, json_answer


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
        self.http = HttpEndpoint("admin endpoint", host, int(port), {
            path: self._route(fn) for path, fn in ROUTES.items()})

    @property
    def host(self) -> str:
        return self.http.host

    @property
    def port(self) -> int:
        return self.http.port

    def _route(self, fn: Callable[[Any, dict[str, list[str]]], Any]):
        return lambda query: json_answer("200 OK", fn(self.broker, query))

    async def start(self) -> None:
        await self.http.start()

    async def close(self) -> None:
        await self.http.close()

    def _answer(self, parts: list[str]) -> tuple[str, Any]:
        """(status, JSON body) of a request line split in words."""
        status, _, body = self.http.answer(parts)
        return status, json.loads(body)
