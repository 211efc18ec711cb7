"""The metrics endpoint (``metrics.listeners=http://127.0.0.1:9404``; off when unset).

``metrics.listeners`` is a Kafka-style listener list, ``http://host:port`` separated by
commas (``spool.util.listen``: only ``http``; port 0 picks a free one). On each listener ``GET /metrics``
answers the broker's registry (``spool.broker.metrics``) in Prometheus's text exposition
format; the server is ``spool.broker.http_endpoint.HttpEndpoint``. The broker prints
``spool broker N listening on http://host:port (metrics)`` for each on stdout, beside its
Kafka listeners (``spool.broker.main``).

A scrape runs in two steps. The collectors run on the broker's event loop (they read
live broker state, which only the loop may touch) and return fresh metric families: plain
values, owned by this scrape alone. The text is then rendered from those families
(``prometheus_client.exposition.generate_latest``, the same bytes as rendering the
registry directly) in the endpoint's own thread, one scrape at a time, so that the
rendering (most of a scrape's cost: about 0.5 s for 2,000 partitions) neither blocks the
loop nor takes the broker's I/O threads from file work. docs/METRICS.md gives the
figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

from spool.broker.http_endpoint import Answer, HttpEndpoint
from spool.util.listen import parse_http_listeners


def valid_listeners(listeners: list[str]) -> bool:
    try:
        parse_http_listeners(listeners)
    except ValueError:
        return False
    return True


class Collected:
    """Metric families already collected, in the shape ``generate_latest`` renders."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def collect(registry: CollectorRegistry) -> Collected:
    """Run every collector of ``registry`` now (on the loop: they read live state)."""
    return Collected(registry.collect())


def render(collected: Collected) -> bytes:
    """The text exposition of ``collected`` (any thread: it reads only the families)."""
    return generate_latest(collected)  # type: ignore[arg-type]


class MetricsHttp:
    """The metrics endpoint of one broker: one ``HttpEndpoint`` per listener."""

    def __init__(self, broker: Any, listeners: list[str]) -> None:
        self.registry = broker.metrics.registry
        self.endpoints = [HttpEndpoint("metrics endpoint", host, port,
                                       {"/metrics": self._metrics})
                          for host, port in parse_http_listeners(listeners)]
        # the renderer's thread (module doc), started at the first scrape
        self.renderer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool-metrics")

    async def _metrics(self, _query: dict[str, list[str]]) -> Answer:
        collected = collect(self.registry)
        body = await asyncio.get_running_loop().run_in_executor(self.renderer, render, collected)
        return "200 OK", CONTENT_TYPE_LATEST, body

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
        self.renderer.shutdown(wait=False, cancel_futures=True)
