"""The metrics endpoint (``metrics.listeners=http://127.0.0.1:9404``; off when unset).

``metrics.listeners`` is a Kafka-style listener list, ``http://host:port`` separated by
commas (``spool.util.listen``: only ``http``; port 0 picks a free one). On each listener ``GET /metrics``
answers the broker's registry (``spool.broker.metrics``) in Prometheus's text exposition
format (``prometheus_client.exposition.generate_latest``, collectors run at scrape time
on the broker's event loop); the server is ``spool.broker.http_endpoint.HttpEndpoint``.
The broker prints ``spool broker N listening on http://host:port (metrics)`` for each on
stdout, beside its Kafka listeners (``spool.broker.main``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from spool.broker.http_endpoint import Answer, HttpEndpoint
from spool.util.listen import parse_http_listeners


def valid_listeners(listeners: list[str]) -> bool:
    try:
        parse_http_listeners(listeners)
    except ValueError:
        return False
    return True


class MetricsHttp:
    """The metrics endpoint of one broker: one ``HttpEndpoint`` per listener."""

    def __init__(self, broker: Any, listeners: list[str]) -> None:
        self.registry = broker.metrics.registry
        self.endpoints = [HttpEndpoint("metrics endpoint", host, port,
                                       {"/metrics": self._metrics})
                          for host, port in parse_http_listeners(listeners)]

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
