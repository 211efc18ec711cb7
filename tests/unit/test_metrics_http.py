"""The metrics endpoint renders a scrape's text off the event loop (spool.broker.metrics_http):
the text is byte for byte what prometheus-client renders from the registry itself, and a
produce request is answered while a scrape of a large registry is being rendered."""

from __future__ import annotations

import asyncio
import gc
import threading
import urllib.request
from collections.abc import Iterator

from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
    SummaryMetricFamily,
    UnknownMetricFamily,
)
from prometheus_client.exposition import generate_latest

from spool.broker.metrics import BrokerMetrics, DeferredGauge, _Collector
from spool.broker.metrics_http import Collected, collect, cyclic_gc_paused, render
from spool.protocol._generated import ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from tests.helpers.raw_client import RawClient
from tests.helpers.storage_batches import make_batch

WAIT_S = 30


class EveryKind:
    """One family of each kind prometheus-client renders, with labels needing escapes."""

    def collect(self) -> Iterator[Metric]:
        c = CounterMetricFamily("c", 'a "counter"\\ with\na newline', labels=["topic"])
        c.add_metric(['or"d\\ers\n'], 3, timestamp=1.5)
        c.add_metric(["é"], 1e21)
        yield c
        g = GaugeMetricFamily("g", "gauge", labels=["a", "b"])
        g.add_metric(["2", "1"], float("nan"))
        g.add_metric(["1", "2"], float("-inf"))
        yield g
        h = HistogramMetricFamily("h", "histogram", labels=["request"])
        h.add_metric(["Produce"], [("0.5", 1), ("+Inf", 3)], 7.25)
        yield h
        yield GaugeHistogramMetricFamily("gh", "gauge histogram", [("1", 2), ("+Inf", 4)], 9)
        yield SummaryMetricFamily("s", "summary", count_value=4, sum_value=0.1)
        yield InfoMetricFamily("i", "info", value={"version": "1"})
        yield StateSetMetricFamily("ss", "state set", value={"on": True, "off": False})
        yield UnknownMetricFamily("u", "untyped", value=-0.0)


def test_the_text_rendered_from_collected_families_is_the_registrys() -> None:
    metrics = BrokerMetrics()
    metrics.topic("orders").messages_in = 1000
    produce = metrics.api("Produce")
    produce.requests[9] = 12
    produce.count_errors([0, 0, 6])
    for ms in (0.2, 3, 40_000):
        produce.total.observe(ms)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(metrics))
    registry.register(EveryKind())
    text = render(asyncio.run(collect(registry)))
    assert text == generate_latest(registry)
    assert b'c_total{topic="or\\"d\\\\ers\\n"} 3.0 1500\n' in text
    assert b'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 1000.0\n' in text


def test_a_deferred_gauge_renders_as_the_gauge_family_it_replaces() -> None:
    keys = [("orders", 0), ("orders", 10), ('we"ird', 2)]
    values = [5, 0.5, -1]
    family = GaugeMetricFamily("kafka_log_log_size", "Bytes.", labels=["topic", "partition"])
    for (topic, partition), v in zip(keys, values, strict=True):
        family.add_metric([topic, str(partition)], v)
    deferred = DeferredGauge("kafka_log_log_size", "Bytes.", ["topic", "partition"], keys,
                             values)
    assert generate_latest(Collected([deferred])) == generate_latest(Collected([family]))
    assert deferred == family  # parsed and compared as prometheus-client's own


class HeldRendering(Metric):
    """A large gauge family whose samples, once the renderer reads them, wait for ``release``
    (so a test can act while a scrape is being rendered): ``rendering`` is set then."""

    def __init__(self, samples: int) -> None:
        family = GaugeMetricFamily("held", "Held while rendered.", labels=["partition"])
        for p in range(samples):
            family.add_metric([str(p)], p)
        super().__init__("held", "Held while rendered.", "gauge")
        self._held = family.samples
        self.rendering = threading.Event()
        self.release = threading.Event()

    __hash__ = object.__hash__  # a registry keys its collectors by identity

    def collect(self) -> Iterator[Metric]:  # its own collector
        yield self

    @property  # type: ignore[override]
    def samples(self):
        self.rendering.set()
        self.release.wait(2 * WAIT_S)
        return self._held

    @samples.setter
    def samples(self, value) -> None:
        pass


class BrokerThread:
    """A Broker on an event loop in a thread, as ``spool.testing`` runs one, with its object."""

    def __init__(self, tmp_path) -> None:
        from spool.broker.config import BrokerConfig

        self.config = BrokerConfig.load(None, [f"log.dirs={tmp_path / 'data'}",
                                               "listeners=PLAINTEXT://127.0.0.1:0",
                                               "metrics.listeners=http://127.0.0.1:0"])
        self.ready = threading.Event()
        self.broker = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        import spool.broker.handlers  # noqa: F401  (registers every handler)
        from spool.broker.broker import Broker

        self.broker = Broker(self.config)
        await self.broker.start()
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        host, port = self.broker.server.bound_listeners[self.config.cluster.listeners[0].name]
        self.bootstrap = f"{host}:{port}"
        endpoint = self.broker.metrics_http.endpoints[0]
        self.metrics_url = f"http://{endpoint.host}:{endpoint.port}/metrics"
        self.ready.set()
        try:
            await self.stop.wait()
        finally:
            await self.broker.shutdown()

    def __enter__(self) -> BrokerThread:
        self.thread.start()
        assert self.ready.wait(WAIT_S)
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(WAIT_S)


def test_a_produce_is_answered_while_a_scrape_is_rendered(tmp_path) -> None:
    with BrokerThread(tmp_path) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(WAIT_S)
        held = HeldRendering(20_000)
        b.broker.metrics.registry.register(held)
        scraped: list[bytes] = []

        def scrape() -> None:
            with urllib.request.urlopen(b.metrics_url, timeout=2 * WAIT_S) as r:
                scraped.append(r.read())

        scraper = threading.Thread(target=scrape)
        scraper.start()
        try:
            assert held.rendering.wait(WAIT_S)
            with RawClient(b.bootstrap, timeout=WAIT_S) as client:
                answer = client.request(0, 9, ProduceRequest(
                    transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                        TopicProduceData(name="orders", partition_data=[PartitionProduceData(
                            index=0, records=make_batch(1))])]))
            # answered while the scrape is held in its rendering (rendered on the loop, the
            # scrape would hold the loop and this request would time out)
            assert answer.responses[0].partition_responses[0].error_code == 0
        finally:
            held.release.set()
            scraper.join(2 * WAIT_S)
        assert b'held{partition="19999"} 19999.0\n' in scraped[0]


def test_a_scrape_pauses_the_cyclic_garbage_collector_and_restores_it() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with cyclic_gc_paused():
            with cyclic_gc_paused():  # a second broker's scrape meanwhile
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()  # disabled by its user: a scrape leaves it so
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
