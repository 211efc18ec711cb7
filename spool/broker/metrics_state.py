"""State metrics computed at scrape time: partitions, the controller, the logs, the cleaner.

``register(broker)`` adds these collectors to ``broker.metrics.registry``
(``spool.broker.metrics``); each reads the broker's state when scraped, on the
event loop, and changes nothing. Names are the Prometheus JMX exporter's for
Kafka's MBeans (lowercased, ``-`` as ``_``); ``docs/METRICS.md`` has the table.

``ReplicaManagerCollector`` (a node with the broker role; MBean
``kafka.server:type=ReplicaManager,name=X`` -> ``kafka_server_replicamanager_x``):

    partitioncount               replicas this broker hosts (leader or follower)
    leadercount                  of them, the ones it leads
    underreplicatedpartitions    led, with an ISR smaller than the replica set
    underminisrpartitioncount    led, with an ISR below the topic's min.insync.replicas
    atminisrpartitioncount       led, with an ISR exactly min.insync.replicas
    offlinereplicacount          replicas in failed log dirs (Spool fails no dir: 0)

A single node leads every partition it holds with ISR = replicas = itself.

``ControllerCollector`` (a controller node, or the single node, which is its own
controller; ``kafka.controller:type=KafkaController,name=X``):
``activecontrollercount`` (1 on the active controller, 0 on the others: the sum over
a cluster's controllers is 1), and from the controller's committed image (every
controller has the same): ``globaltopiccount``, ``globalpartitioncount``,
``offlinepartitionscount`` (no leader), ``preferredreplicaimbalancecount`` (a
leader that is not the first replica), ``activebrokercount``, ``fencedbrokercount``.

``FetchSessionCacheCollector`` (a node with the broker role; KIP-227,
``kafka.server:type=FetchSessionCache,name=X`` -> ``kafka_server_fetchsessioncache_x``):
``numincrementalfetchsessions`` (sessions cached, consumers' and followers'),
``numincrementalfetchpartitionscached`` (partitions those sessions hold) and
``incrementalfetchsessionevictions_total`` (sessions evicted to make room for another,
Kafka's IncrementalFetchSessionEvictionsPerSec meter).

``LogCollector`` (every partition log of this node, leader or follower):
``kafka_log_log_{size,logstartoffset,logendoffset,numlogsegments}{topic,partition}``;
``kafka_log_logflushstats_logflushrateandtimems`` (a histogram in ms of the log
manager's background flushes, ``spool.storage.flush_stats``); and while the log
cleaner runs, ``kafka_log_logcleaner_{max_clean_time_secs, cleaner_recopy_percent,
max_buffer_utilization_percent, max_compaction_delay_secs, deadthreadcount}`` (of the
last cleaning; 0 before the first) and ``kafka_log_logcleanermanager_{max_dirty_percent,
uncleanable_partitions_count{logDirectory}}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from spool.broker.metrics import DeferredGauge
from spool.broker.metrics_lag import GroupCollector, TopicCollector

NO_LEADER = -1


class StateMetrics:
    """The collectors ``register`` added; ``close()`` at the broker's shutdown (the lag's
    requests to other brokers, ``spool.broker.metrics_remote``)."""

    def __init__(self, broker: Any) -> None:
        self.groups = GroupCollector(broker)
        self.collectors = (ReplicaManagerCollector(broker), ControllerCollector(broker),
                           FetchSessionCacheCollector(broker), LogCollector(broker),
                           self.groups, TopicCollector(broker))

    async def close(self) -> None:
        await self.groups.remote.close()


def register(broker: Any) -> StateMetrics:
    """Register this module's collectors, and the group and lag ones
    (``spool.broker.metrics_lag``), on ``broker.metrics.registry``."""
    state = StateMetrics(broker)
    for collector in state.collectors:
        broker.metrics.registry.register(collector)
    return state


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class ReplicaManagerCollector:
    """Kafka's ReplicaManager gauges (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def _replicas(self) -> Iterator[tuple[bool, int, int, int]]:
        """(leads it, replica count, ISR size, min.insync.replicas) of every replica here."""
        broker = self.broker
        if broker.cluster.kraft:  # (its view is a single node's until the first image)
            for part in broker.replicas.partitions():
                yield (part.is_leader, len(part.replicas), len(part.isr),
                       part.min_insync_replicas)
            return
        for plog in broker.storage.logs.logs().values():
            yield True, 1, 1, plog.config.min_insync_replicas

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        if broker.storage is None or broker.replicas is None or not broker.cluster.is_broker:
            return
        count = leaders = under = under_min = at_min = 0
        for leads, replicas, isr, min_isr in self._replicas():
            count += 1
            if not leads:
                continue
            leaders += 1
            under += isr < replicas
            under_min += isr < min_isr
            at_min += isr == min_isr
        p = "kafka_server_replicamanager_"
        yield gauge(p + "partitioncount", "Partitions this broker hosts a replica of.", count)
        yield gauge(p + "leadercount", "Partitions this broker leads.", leaders)
        yield gauge(p + "underreplicatedpartitions",
                    "Partitions led here whose ISR is smaller than their replica set.", under)
        yield gauge(p + "underminisrpartitioncount",
                    "Partitions led here whose ISR is below min.insync.replicas.", under_min)
        yield gauge(p + "atminisrpartitioncount",
                    "Partitions led here whose ISR is exactly min.insync.replicas.", at_min)
        yield gauge(p + "offlinereplicacount", "Replicas in failed log dirs.", 0)


class FetchSessionCacheCollector:
    """Kafka's FetchSessionCache gauges and eviction meter (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        if not self.broker.cluster.is_broker:
            return
        yield from fetch_session_metrics(self.broker.fetch_sessions)


def fetch_session_metrics(cache: Any) -> Iterator[Metric]:
    """The families of one ``spool.broker.fetch_sessions.FetchSessionCache``."""
    p = "kafka_server_fetchsessioncache_"
    yield gauge(p + "numincrementalfetchsessions", "Incremental fetch sessions cached.",
                len(cache))
    yield gauge(p + "numincrementalfetchpartitionscached",
                "Partitions held by the cached fetch sessions.", cache.num_partitions)
    yield CounterMetricFamily(p + "incrementalfetchsessionevictions",
                              "Fetch sessions evicted to make room for another.",
                              value=cache.evictions)


class ControllerCollector:
    """Kafka's KafkaController gauges (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def _state(self) -> tuple[bool, list[tuple[int, tuple[int, ...]]], int, int, int] | None:
        """(active, [(leader, replicas)] of every partition, topics, live brokers, fenced
        brokers); None on a node that is no controller."""
        broker = self.broker
        quorum = broker.quorum
        if quorum is None:  # the single node: its own controller
            view = broker.view
            if view is None:
                return None
            topics = [t for t in map(view.topic, view.topic_names()) if t is not None]
            parts = [(p.leader, tuple(p.replicas)) for t in topics for p in t.partitions]
            return True, parts, len(topics), 1, 0
        runtime = quorum.controller
        if runtime is None:
            return None
        image = runtime.controller.image
        parts = [(reg.leader, reg.replicas) for t in image.topics_by_id.values()
                 for reg in t.partitions.values()]
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        return (runtime.active, parts, len(image.topics_by_id), len(image.brokers) - fenced,
                fenced)

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        if state is None:
            return
        active, parts, topics, live, fenced = state
        p = "kafka_controller_kafkacontroller_"
        yield gauge(p + "activecontrollercount",
                    "1 on the active controller, 0 on the others.", int(active))
        yield gauge(p + "globaltopiccount", "Topics in the cluster.", topics)
        yield gauge(p + "globalpartitioncount", "Partitions in the cluster.", len(parts))
        yield gauge(p + "offlinepartitionscount", "Partitions without a leader.",
                    sum(1 for leader, _ in parts if leader == NO_LEADER))
        yield gauge(p + "preferredreplicaimbalancecount",
                    "Partitions whose leader is not their first replica.",
                    sum(1 for leader, reps in parts if leader != NO_LEADER and reps
                        and leader != reps[0]))
        yield gauge(p + "activebrokercount", "Registered brokers not fenced.", live)
        yield gauge(p + "fencedbrokercount", "Registered brokers fenced.", fenced)


class LogCollector:
    """Per-partition log gauges, the flush histogram and the cleaner's figures (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        storage = self.broker.storage
        if storage is None:
            return
        manager = storage.logs
        labels = ["topic", "partition"]
        keys: list[tuple[str, int]] = []
        size: list[float] = []
        start: list[float] = []
        end: list[float] = []
        segments: list[float] = []
        for key, plog in sorted(manager.logs().items()):
            if plog.closed:
                continue
            keys.append(key)
            segs = plog.segments
            size.append(sum(s.size for s in segs))
            start.append(plog.log_start_offset)
            end.append(plog.log_end_offset)
            segments.append(len(segs))
        # the samples are made by the renderer, off the loop (DeferredGauge)
        yield DeferredGauge("kafka_log_log_size", "Bytes of the partition's segments.",
                            labels, keys, size)
        yield DeferredGauge("kafka_log_log_logstartoffset", "The partition's log start offset.",
                            labels, keys, start)
        yield DeferredGauge("kafka_log_log_logendoffset", "The partition's log end offset.",
                            labels, keys, end)
        yield DeferredGauge("kafka_log_log_numlogsegments", "Segments of the partition's log.",
                            labels, keys, segments)
        yield flush_histogram(manager.flush_stats.snapshot())
        if manager.cleaner is not None:
            yield from cleaner_gauges(manager.cleaner, manager)


def flush_histogram(snap: Any) -> HistogramMetricFamily:
    buckets = [(_bound(b), c) for b, c in zip(snap.bounds, snap.cumulative, strict=False)]
    buckets.append(("+Inf", snap.cumulative[-1]))
    return HistogramMetricFamily(
        "kafka_log_logflushstats_logflushrateandtimems",
        "Time of the log flushes of the background flusher, in milliseconds.",
        buckets=buckets, sum_value=snap.sum_ms)


def _bound(b: float) -> str:
    return repr(float(b))


def cleaner_gauges(cleaner: Any, manager: Any) -> Iterator[Metric]:
    last = cleaner.last_result
    stats = None if last is None else last.stats
    p = "kafka_log_logcleaner_"
    yield gauge(p + "max_clean_time_secs", "Seconds the last cleaning took.",
                0.0 if stats is None else stats.elapsed_s)
    yield gauge(p + "cleaner_recopy_percent",
                "Bytes written as a percentage of bytes read by the last cleaning.",
                0 if stats is None else int(100 * stats.bytes_written / max(stats.bytes_read, 1)))
    yield gauge(p + "max_buffer_utilization_percent",
                "How full the last cleaning's offset map was, in percent.",
                0.0 if stats is None else 100.0 * stats.buffer_utilization)
    yield gauge(p + "max_compaction_delay_secs",
                "How far the most overdue log is past max.compaction.lag.ms, in seconds.",
                cleaner.max_compaction_delay_ms / 1000.0)
    yield gauge(p + "deadthreadcount", "Cleaner threads that died.", cleaner.dead_thread_count)
    m = "kafka_log_logcleanermanager_"
    yield gauge(m + "max_dirty_percent",
                "The highest dirty ratio of the compacted logs, in percent.",
                int(100 * cleaner.max_dirty_ratio))
    uncleanable = GaugeMetricFamily(
        m + "uncleanable_partitions_count",
        "Partitions whose cleaning failed (not cleaned until restart), per log dir.",
        labels=["logDirectory"])
    logs = manager.logs()
    failed = set(cleaner.uncleanable)  # a copy: the cleaner thread adds to it
    for d in manager.log_dirs:
        uncleanable.add_metric([str(d)], sum(1 for tp in failed
                                             if tp in logs and logs[tp].dir.parent == d))
    yield uncleanable
