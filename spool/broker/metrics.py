"""The broker's metrics: one prometheus-client registry per broker (issue 18).

Contract:

- ``BrokerMetrics.registry`` is a ``prometheus_client.CollectorRegistry`` of this
  broker alone (never the process-wide default registry: a test process runs many
  brokers). Whatever reports a metric registers a collector on it:
  ``broker.metrics.registry.register(collector)``, where ``collector.collect()``
  yields ``prometheus_client.core`` metric families computed at scrape time.
- The hot path (requests, produce, fetch) never calls prometheus-client: it adds to
  plain counters (``TopicMetrics``, ``ApiMetrics``, ``Histogram``: ints and a bucket
  list) that the collector here turns into families when scraped. ``Histogram`` is a
  plain one for other modules' timings too (``observe(value)``; expose it with
  ``HistogramMetricFamily.add_metric(labels, h.buckets(), h.sum)``). Everything runs on
  the broker's event loop, so the additions need no lock.
- A family of one sample per partition is a ``DeferredGauge``: the collector records
  label values and values on the loop, the samples are made when the scrape's renderer
  reads them, in its own thread (``spool.broker.metrics_http``).
- Names are those the Prometheus JMX exporter's usual Kafka rules give Kafka's MBeans
  (``kafka_server_brokertopicmetrics_messagesin_total{topic=...}``), and kafka-exporter's
  for consumer lag (``kafka_consumergroup_lag{consumergroup,topic,partition}``);
  ``docs/METRICS.md`` lists them, with what each counts.

BrokerTopicMetrics: ``topic(name)`` is the counters of one topic; the all-topics
series (no ``topic`` label) is their sum at scrape time, plus what topics deleted since
counted (``retired``): a deleted topic's series disappears, as in Kafka, and the
all-topics counters never go back.

RequestMetrics (Kafka's ``RequestChannel.updateRequestMetrics``): the dispatcher gives
each request a ``RequestTimer`` naming the ``ApiMetrics`` it counts in (Kafka's request
name; a Fetch counts in ``Fetch`` and in ``FetchConsumer`` or ``FetchFollower``), stamps
it when the frame was read (``start``), when its handler started (``dequeued``) and
finished (``done``), with the time the handler waited in purgatory (``remote_s``: an
acks=all produce waiting for the ISR, a long-polling fetch), and puts it at the end of the
response's chunks; the connection calls ``sent(send_start, send_end)`` once the response
has gone out, which queues the timer in ``BrokerMetrics.pending``; every ``FOLD_AT``
requests, and at each scrape, ``fold`` counts the queued timers into the histograms and
the requests per version, a batch at a time (sorting a column and bisecting once per
bucket bound costs less than bisecting each value). A response never sent (its client
gone) is not counted. Request queue time is from the frame read to its handler starting;
local time the handler's time less remote time; response queue time from the handler's end
to the send (responses leave in request order: one may wait for an earlier one); response
send time the send itself.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from spool.broker.server import SendHook
from spool.protocol.errors import error_name
from spool.protocol.message import Message

TOPIC_COUNTERS = (  # attribute, JMX exporter name, Kafka's MBean name, help
    ("messages_in", "messagesin", "MessagesInPerSec",
     "Records appended by producers (leader appends)."),
    ("bytes_in", "bytesin", "BytesInPerSec",
     "Record batch bytes appended by producers."),
    ("bytes_out", "bytesout", "BytesOutPerSec",
     "Record bytes sent to consumers in Fetch responses (not to followers)."),
    ("bytes_rejected", "bytesrejected", "BytesRejectedPerSec",
     "Bytes of batches refused for their size (MESSAGE_TOO_LARGE)."),
    ("total_produce_requests", "totalproducerequests", "TotalProduceRequestsPerSec",
     "Partitions of Produce requests that reached the log (one per partition)."),
    ("total_fetch_requests", "totalfetchrequests", "TotalFetchRequestsPerSec",
     "Partitions read by Fetch requests (one per partition per request)."),
    ("failed_produce_requests", "failedproducerequests", "FailedProduceRequestsPerSec",
     "Produce partitions that failed for an unexpected reason (not leader, unknown "
     "partition, too large, corrupt and storage errors are not counted, as in Kafka)."),
    ("failed_fetch_requests", "failedfetchrequests", "FailedFetchRequestsPerSec",
     "Fetch partitions that failed for an unexpected reason (as in Kafka)."),
    ("replication_bytes_in", "replicationbytesin", "ReplicationBytesInPerSec",
     "Record batch bytes appended to this broker's follower replicas."),
    ("replication_bytes_out", "replicationbytesout", "ReplicationBytesOutPerSec",
     "Record bytes sent to followers in Fetch responses."),
)


class TopicMetrics:
    """Kafka's BrokerTopicMetrics of one topic: plain counters, added to on the hot path."""

    __slots__ = tuple(attr for attr, *_ in TOPIC_COUNTERS)

    def __init__(self) -> None:
        for attr in self.__slots__:
            setattr(self, attr, 0)

    def add(self, other: TopicMetrics) -> None:
        for attr in self.__slots__:
            setattr(self, attr, getattr(self, attr) + getattr(other, attr))


TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
                   10000, 30000)
BYTES_BUCKETS = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
                 67108864)


class DeferredGauge(Metric):
    """A gauge family whose samples are made when first read, from the label values
    (``keys``: tuples, made ``str``) and ``values`` its collector read: a family of one
    sample per partition costs the loop a list append per partition, and the samples are
    made by the scrape's renderer, in its own thread (``spool.broker.metrics_http``).
    Several families of one collector may share their ``keys``."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str],
                 keys: list[tuple[Any, ...]], values: list[float]) -> None:
        super().__init__(name, documentation, "gauge")
        self._pending: tuple[tuple[str, ...], list, list] | None = (
            tuple(labelnames), keys, values)

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        if self._pending is not None:
            names, keys, values = self._pending
            self._pending = None
            name = self.name
            self._samples = [Sample(name, dict(zip(names, map(str, k), strict=True)), v)
                             for k, v in zip(keys, values, strict=True)]
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value
        self._pending = None


class Histogram:
    """Counts per bucket and a sum, as Prometheus's histogram (``le``: at most)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = TIME_BUCKETS_MS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def observe_all(self, values: Iterable[float]) -> None:
        """Many at once: sorted, then one bisection per bound (cheaper than one each)."""
        ordered = sorted(values)
        counts = self.counts
        below = 0
        for i, bound in enumerate(self.bounds):
            upto = bisect_right(ordered, bound, below)
            counts[i] += upto - below
            below = upto
        counts[-1] += len(ordered) - below
        self.sum += sum(ordered)

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative, as HistogramMetricFamily wants them."""
        out, total = [], 0
        for bound, n in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts,
                            strict=True):
            total += n
            out.append((bound, total))
        return out


# (attribute, JMX exporter name, Kafka's MBean name, what it measures): RequestMetrics
API_HISTOGRAMS = (
    ("total", "totaltimems", "TotalTimeMs",
     "From the request read to its response sent, ms."),
    ("request_queue", "requestqueuetimems", "RequestQueueTimeMs",
     "From the request read to its handler starting, ms."),
    ("local", "localtimems", "LocalTimeMs",
     "The handler's time, less the time it waited in purgatory, ms."),
    ("remote", "remotetimems", "RemoteTimeMs",
     "Time waited in purgatory (acks=all replication, fetch long poll), ms."),
    ("throttle", "throttletimems", "ThrottleTimeMs",
     "The response's throttle_time_ms (client quotas), ms."),
    ("response_queue", "responsequeuetimems", "ResponseQueueTimeMs",
     "From the handler's end to the response's send starting, ms."),
    ("response_send", "responsesendtimems", "ResponseSendTimeMs",
     "Sending the response, ms."),
)


class ApiMetrics:
    """Kafka's RequestMetrics of one request name (``Produce``, ``FetchConsumer``...)."""

    __slots__ = ("name", "requests", "errors", "request_bytes",
                 *(attr for attr, *_ in API_HISTOGRAMS))

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}  # version -> requests answered
        self.errors: dict[int, int] = {}  # error code -> count (0: NONE), as errorCounts
        self.request_bytes = Histogram(BYTES_BUCKETS)
        for attr, *_ in API_HISTOGRAMS:
            setattr(self, attr, Histogram())

    def histograms(self) -> tuple[Histogram, ...]:
        """In ``fold``'s row order: API_HISTOGRAMS', then request bytes."""
        return (self.total, self.request_queue, self.local, self.remote, self.throttle,
                self.response_queue, self.response_send, self.request_bytes)

    def count_errors(self, codes: list[int]) -> None:
        errors = self.errors
        none = codes.count(0)
        errors[0] = errors.get(0, 0) + none
        if none != len(codes):
            for code in codes:
                if code:
                    errors[code] = errors.get(code, 0) + 1


def _produce_errors(response: Any) -> list[int]:
    return [p.error_code for t in response.responses for p in t.partition_responses]


def _fetch_errors(response: Any) -> list[int]:
    codes = [response.error_code]
    for t in response.responses:
        codes.extend(p.error_code for p in t.partitions)
    return codes


def _walk_errors(message: Message, codes: list[int]) -> None:
    for name in message.__slots__:
        value = getattr(message, name, None)
        if name == "error_code":
            codes.append(value)
        elif isinstance(value, list):
            if value and isinstance(value[0], Message):
                for item in value:
                    _walk_errors(item, codes)
        elif isinstance(value, Message):
            _walk_errors(value, codes)


_ERRORS_OF = {0: _produce_errors, 1: _fetch_errors}


def error_codes(api_key: int, response: Message) -> list[int]:
    """Every error code of a response, NONE (0) included: its own and its topics' and
    partitions' (Kafka's ``AbstractResponse.errorCounts``)."""
    fast = _ERRORS_OF.get(api_key)
    if fast is not None:
        return fast(response)
    codes: list[int] = []
    _walk_errors(response, codes)
    return codes


FOLD_AT = 256  # requests sent before their timers are folded into the histograms


class RequestTimer(SendHook):
    """One request's timestamps (``time.perf_counter()`` seconds), module doc. Once sent
    it joins ``pending``; every ``FOLD_AT`` requests, and at each scrape, ``fold`` turns
    the pending timers into counts (sorting a batch costs less than bisecting each)."""

    __slots__ = ("apis", "version", "size", "start", "dequeued", "done", "remote_s",
                 "throttle_ms", "pending", "send_start", "send_end")

    def __init__(self, apis: tuple[ApiMetrics, ...], version: int, size: int,
                 start: float, pending: list[RequestTimer]) -> None:
        self.apis = apis
        self.version = version
        self.size = size
        self.start = self.dequeued = self.done = start
        self.remote_s = 0.0
        self.throttle_ms = 0
        self.pending = pending

    def sent(self, send_start: float, send_end: float) -> None:
        self.send_start = send_start
        self.send_end = send_end
        pending = self.pending
        pending.append(self)
        if len(pending) >= FOLD_AT:
            fold(pending)


def fold(pending: list[RequestTimer]) -> None:
    """Count the sent requests of ``pending`` (and empty it)."""
    rows: dict[ApiMetrics, list[tuple[float, ...]]] = {}
    for t in pending:
        start, dequeued, done, send_start = t.start, t.dequeued, t.done, t.send_start
        remote = t.remote_s * 1000
        row = ((t.send_end - start) * 1000, (dequeued - start) * 1000,
               max((done - dequeued) * 1000 - remote, 0.0), remote, t.throttle_ms,
               max((send_start - done) * 1000, 0.0), (t.send_end - send_start) * 1000, t.size)
        version = t.version
        for m in t.apis:
            m.requests[version] = m.requests.get(version, 0) + 1
            found = rows.get(m)
            if found is None:
                rows[m] = [row]
            else:
                found.append(row)
    pending.clear()
    for m, api_rows in rows.items():
        for h, column in zip(m.histograms(), zip(*api_rows, strict=True), strict=True):
            h.observe_all(column)


class BrokerMetrics:
    """One broker's metrics registry (served at ``metrics.listeners``' ``/metrics``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.topics: dict[str, TopicMetrics] = {}
        self.retired = TopicMetrics()  # what topics deleted since counted
        # the topics that exist (scrape time): counters of others are retired
        self.topic_exists: Callable[[str], bool] | None = None
        self.apis: dict[str, ApiMetrics] = {}
        self.pending: list[RequestTimer] = []  # sent, not yet folded (RequestTimer)
        self.request_queue_size = 0  # requests read whose handler has not started
        # listener -> open connections; set by the broker with its server
        self.connection_counts: Callable[[], dict[str, tuple[int, int, int]]] | None = None
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)

    def api(self, name: str) -> ApiMetrics:
        """The RequestMetrics of request name ``name`` (created at its first use)."""
        m = self.apis.get(name)
        if m is None:
            m = self.apis[name] = ApiMetrics(name)
        return m

    def topic(self, name: str) -> TopicMetrics:
        """The counters of topic ``name`` (created at its first use)."""
        m = self.topics.get(name)
        if m is None:
            m = self.topics[name] = TopicMetrics()
        return m

    def retire_deleted_topics(self) -> None:
        exists = self.topic_exists
        if exists is None:
            return
        for name in [n for n in self.topics if not exists(n)]:
            self.retired.add(self.topics.pop(name))


class _Collector:
    """Turns the plain counters into metric families at scrape time."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        m.retire_deleted_topics()
        topics = sorted(m.topics.items())
        total = TopicMetrics()
        total.add(m.retired)
        for _, t in topics:
            total.add(t)
        for attr, name, mbean, doc in TOPIC_COUNTERS:
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                         f"{doc} (kafka.server:type=BrokerTopicMetrics,"
                                         f"name={mbean})")
            sample = family.name + "_total"
            family.samples.append(Sample(sample, {}, getattr(total, attr)))
            family.samples.extend(Sample(sample, {"topic": topic}, getattr(t, attr))
                                  for topic, t in topics)
            yield family
        yield from self._requests()
        yield from self._connections()

    def _requests(self) -> Iterator[Metric]:
        m = self.metrics
        fold(m.pending)
        apis = sorted(m.apis.items())
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered, by request name and "
            "version (kafka.network:type=RequestMetrics,name=RequestsPerSec)",
            labels=["request", "version"])
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors", "Error codes in responses, NONE included, "
            "by request name (kafka.network:type=RequestMetrics,name=ErrorsPerSec)",
            labels=["request", "error"])
        for name, api in apis:
            for version, n in sorted(api.requests.items()):
                requests.add_metric([name, str(version)], n)
            for code, n in sorted(api.errors.items()):
                errors.add_metric([name, error_name(code)], n)
        yield requests
        yield errors
        for attr, metric, mbean, doc in (*API_HISTOGRAMS, (
                "request_bytes", "requestbytes", "RequestBytes", "Request sizes, bytes.")):
            family = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{metric}",
                f"{doc} (kafka.network:type=RequestMetrics,name={mbean})", labels=["request"])
            for name, api in apis:
                h = getattr(api, attr)
                family.add_metric([name], h.buckets(), h.sum)
            yield family
        yield GaugeMetricFamily(
            "kafka_network_requestchannel_requestqueuesize", "Requests read whose handler has "
            "not started (kafka.network:type=RequestChannel,name=RequestQueueSize)",
            value=m.request_queue_size)

    def _connections(self) -> Iterator[Metric]:
        counts = self.metrics.connection_counts
        if counts is None:
            return
        doc = " (kafka.server:type=socket-server-metrics,listener=...)"
        open_ = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                  "Open connections" + doc, labels=["listener"])
        created = CounterMetricFamily("kafka_server_socket_server_metrics_connection_creation",
                                      "Connections accepted" + doc, labels=["listener"])
        closed = CounterMetricFamily("kafka_server_socket_server_metrics_connection_close",
                                     "Connections closed" + doc, labels=["listener"])
        for listener, (n_open, n_created, n_closed) in sorted(counts().items()):
            open_.add_metric([listener], n_open)
            created.add_metric([listener], n_created)
            closed.add_metric([listener], n_closed)
        yield open_
        yield created
        yield closed
