"""The broker's metrics: one prometheus-client registry per broker (issue 18).

Contract:

- ``BrokerMetrics.registry`` is a ``prometheus_client.CollectorRegistry`` of this
  broker alone (never the process-wide default registry: a test process runs many
  brokers). Whatever reports a metric registers a collector on it:
  ``broker.metrics.registry.register(collector)``, where ``collector.collect()``
  yields ``prometheus_client.core`` metric families computed at scrape time.
- The hot path (requests, produce, fetch) never calls prometheus-client: it adds to
  plain counters (``TopicMetrics``, ``ApiMetrics``, ``Histogram``: ints and a bucket
  list) that the collector here turns into families when scraped. Everything runs on
  the broker's event loop, so the additions need no lock.
- Names are those the Prometheus JMX exporter's usual Kafka rules give Kafka's MBeans
  (``kafka_server_brokertopicmetrics_messagesin_total{topic=...}``), and kafka-exporter's
  for consumer lag (``kafka_consumergroup_lag{consumergroup,topic,partition}``);
  ``docs/METRICS.md`` lists them, with what each counts.

BrokerTopicMetrics: ``topic(name)`` is the counters of one topic; the all-topics
series (no ``topic`` label) is their sum at scrape time, plus what topics deleted since
counted (``retired``): a deleted topic's series disappears, as in Kafka, and the
all-topics counters never go back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.samples import Sample

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


class BrokerMetrics:
    """One broker's metrics registry (served at ``metrics.listeners``' ``/metrics``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.topics: dict[str, TopicMetrics] = {}
        self.retired = TopicMetrics()  # what topics deleted since counted
        # the topics that exist (scrape time): counters of others are retired
        self.topic_exists: Callable[[str], bool] | None = None
        self.registry.register(_Collector(self))

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
