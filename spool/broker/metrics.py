"""The broker's metrics: one prometheus-client registry per broker (issue 18).

Contract:

- ``BrokerMetrics.registry`` is a ``prometheus_client.CollectorRegistry`` of this
  broker alone (never the process-wide default registry: a test process runs many
  brokers). Whatever reports a metric registers a collector on it:
  ``broker.metrics.registry.register(collector)``, where ``collector.collect()``
  yields ``prometheus_client.core`` metric families computed at scrape time.
- The hot path (requests, produce, fetch) never calls prometheus-client: it adds to
  plain counters that a collector turns into families when scraped.
- Names are those the Prometheus JMX exporter's usual Kafka rules give Kafka's MBeans
  (``kafka_server_brokertopicmetrics_messagesin_total{topic=...}``), and kafka-exporter's
  for consumer lag (``kafka_consumergroup_lag{consumergroup,topic,partition}``);
  ``docs/METRICS.md`` lists them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry


class BrokerMetrics:
    """One broker's metrics registry (served at ``metrics.listeners``' ``/metrics``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
