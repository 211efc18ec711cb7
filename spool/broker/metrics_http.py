"""The metrics endpoint (``metrics.listeners=http://127.0.0.1:9404``; off when unset).

``metrics.listeners`` is a Kafka-style listener list, ``http://host:port`` separated by
commas (``spool.util.listen``: only ``http``; port 0 picks a free one). On each listener ``GET /metrics``
answers the broker's registry (``spool.broker.metrics``) in Prometheus's text exposition
format; the server is ``spool.broker.http_endpoint.HttpEndpoint``. The broker prints
``spool broker N listening on http://host:port (metrics)`` for each on stdout, beside its
Kafka listeners (``spool.broker.main``).

A scrape runs in two steps, so that it holds the broker's event loop (every client's
requests) as little as it can. The collectors run on the loop (they read live broker
state, which only the loop may touch), one at a time with the loop free to run between
two, and return fresh metric families: plain values, owned by this scrape alone (the
per-partition ones only record the values there: their samples are made when the
renderer reads them, ``spool.broker.metrics.DeferredGauge``). The
text is then rendered from those families (``prometheus_client.exposition.generate_latest``,
the same bytes as rendering the registry directly) in the endpoint's own thread, one
scrape at a time: the rendering is most of a scrape's cost (0.1 to 0.4 s for 2,000
partitions) and so neither blocks the loop nor takes the broker's I/O threads from file
work. Python's cyclic garbage collector is paused from the collection until the text is
rendered: the families (about 25 objects a partition) are acyclic and freed by
reference counting once rendered, whereas with the collector running they would be
promoted through its generations and start a full collection of the broker's whole heap
every other scrape (0.3 s with the loop held, at 2,000 partitions). docs/METRICS.md gives
the figures (``python -m bench.scrape_stall``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
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


async def collect(registry: CollectorRegistry) -> Collected:
    """Run every collector of ``registry`` (on the loop: they read live state), in the
    registry's order, letting the loop run between two collectors (one collector's families
    are read at one instant; prometheus-client 0.26's registry keeps its collectors in
    ``_collector_to_names`` and its target info in ``_target_info``, as its own
    ``collect`` does)."""
    with registry._lock:
        collectors = list(registry._collector_to_names)
        families = [registry._target_info_metric()] if registry._target_info else []
    for collector in collectors:
        families.extend(collector.collect())
        await asyncio.sleep(0)
    return Collected(families)


_gc_lock = threading.Lock()
_gc_paused = 0  # scrapes in progress in this process
_gc_was_enabled = False


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a scrape is in progress (module doc);
    nested and concurrent scrapes (several brokers in a process) pause it once."""
    global _gc_paused, _gc_was_enabled
    with _gc_lock:
        if _gc_paused == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_paused += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_paused -= 1
            if _gc_paused == 0 and _gc_was_enabled:
                gc.enable()


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
        with cyclic_gc_paused():
            collected = await collect(self.registry)
            body = await asyncio.get_running_loop().run_in_executor(
                self.renderer, render, collected)
            del collected  # freed by reference counting, before the collector resumes
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
