"""The metrics endpoint (``metrics.listeners=http://127.0.0.1:9404``; off when unset).

``metrics.listeners`` is a Kafka-style listener list, ``http://host:port`` separated by
commas (only ``http``; port 0 picks a free one). On each listener ``GET /metrics``
answers the broker's registry (``spool.broker.metrics``) in Prometheus's text exposition
format (``prometheus_client.exposition.generate_latest``, collectors run at scrape time
on the broker's event loop); the server is ``spool.broker.http_endpoint.HttpEndpoint``.
The broker logs ``metrics endpoint listening on http://host:port`` for each.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from spool.broker.http_endpoint import Answer, HttpEndpoint


def parse_listener(listener: str) -> tuple[str, int]:
    """``http://host:port`` -> (host, port); ValueError naming what is wrong."""
    url = urlsplit(listener.strip())
    if url.scheme != "http":
        raise ValueError(f"{listener!r}: only http:// listeners are served")
    try:
        port = url.port
    except ValueError:
        port = None
    if port is None or not url.hostname or url.path not in ("", "/"):
        raise ValueError(f"{listener!r} is not http://host:port")
    return url.hostname, port


def valid_listeners(listeners: list[str]) -> bool:
    try:
        for one in listeners:
            parse_listener(one)
    except ValueError:
        return False
    return True


class MetricsHttp:
    """The metrics endpoint of one broker: one ``HttpEndpoint`` per listener."""

    def __init__(self, broker: Any, listeners: list[str]) -> None:
        self.registry = broker.metrics.registry
        self.endpoints = [HttpEndpoint("metrics endpoint", host, port,
                                       {"/metrics": self._metrics})
                          for host, port in map(parse_listener, listeners)]

    @property
    def addresses(self) -> list[str]:
        """``http://host:port`` of each listener (bound ports once started)."""
        return [f"http://{e.host}:{e.port}" for e in self.endpoints]

    def _metrics(self, _query: dict[str, list[str]]) -> Answer:
        return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)

    async def start(self) -> None:
        started = []
        try:
            for e in self.endpoints:
                await e.start()
                started.append(e)
        except BaseException:
            for e in started:
                await e.close()
            raise

    async def close(self) -> None:
        for e in self.endpoints:
            await e.close()
