"""Group counts, consumer lag and kafka-exporter's topic figures, computed at scrape time.

Registered by ``spool.broker.metrics_state.register``; read on the event loop (the
group coordinator's thread), nothing changed.

``GroupCollector``: the groups **this broker coordinates** (the ``__consumer_offsets``
partitions it leads), so that scraping every broker of a cluster counts each group
once. Kafka 4's ``group-coordinator-metrics`` (MBean
``kafka.server:type=group-coordinator-metrics``) as the JMX exporter names them::

    kafka_server_group_coordinator_metrics_group_count{protocol}  classic, consumer, share
    ..._classic_group_count{state}   Empty PreparingRebalance CompletingRebalance Stable Dead
    ..._consumer_group_count{state}  Empty Assigning Reconciling Stable Dead
    ..._share_group_count{state}     Empty Stable Dead
    ..._offset_count                 committed offsets

A group that only stores offsets (no member ever joined: a consumer that assigns its
partitions and commits) counts as a classic group in state Empty, as in Kafka.
Consumer lag under kafka-exporter's names (``consumergroup``, ``topic``,
``partition`` labels)::

    kafka_consumergroup_current_offset    the committed offset
    kafka_consumergroup_lag               end offset - committed offset (0 at least)
    kafka_consumergroup_current_offset_sum, kafka_consumergroup_lag_sum  per group and topic
    kafka_consumergroup_members{consumergroup}  members of classic and consumer groups

The end offset is the partition's high watermark (what ListOffsets LATEST answers a
read_uncommitted consumer: kafka-consumer-groups' LOG-END-OFFSET) as this broker's
replica has it: exact on the leader, at most one replica fetch behind on a follower.
A partition this broker has no replica of gets its leader's answer to the ListOffsets
the previous scrape sent (``spool.broker.metrics_remote``): one scrape interval old, and
absent from the first scrape.

``TopicCollector``: kafka-exporter's per-partition figures for the partitions this
broker leads (each partition once over a cluster):
``kafka_topic_partition_{current_offset (HW), oldest_offset (log start), leader,
replicas, in_sync_replica, under_replicated_partition, leader_is_preferred}
{topic,partition}``; and on the active controller (once per cluster) ``kafka_brokers``
and ``kafka_topic_partitions{topic}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from spool.broker.metrics import DeferredGauge
from spool.broker.metrics_remote import RemoteHighWatermarks
from spool.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from spool.coordinator.group import ClassicGroup, GroupState
from spool.coordinator.share_group import ShareGroup

GCM = "kafka_server_group_coordinator_metrics_"
CLASSIC_STATES = [s.value for s in GroupState]
CONSUMER_STATES = [s.value for s in ConsumerGroupState]
SHARE_STATES = ["Empty", "Stable", "Dead"]


def group_counts(coord: Any) -> dict[str, dict[str, int]]:
    """protocol -> state -> groups, every state of each protocol present (0 when none)."""
    counts = {"classic": dict.fromkeys(CLASSIC_STATES, 0),
              "consumer": dict.fromkeys(CONSUMER_STATES, 0),
              "share": dict.fromkeys(SHARE_STATES, 0)}
    for group in coord.groups.values():
        if isinstance(group, ClassicGroup):
            counts["classic"][group.state.value] += 1
        elif isinstance(group, ConsumerGroup):
            counts["consumer"][group.state.value] += 1
        elif isinstance(group, ShareGroup):
            counts["share"][group.state] += 1
    offsets_only = set(coord.offsets.groups()) - set(coord.groups)
    counts["classic"]["Empty"] += len(offsets_only)
    return counts


class GroupCollector:
    """Group counts and consumer lag (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.remote = RemoteHighWatermarks(broker)

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        runtime = broker.groups
        if runtime is None or broker.storage is None or not broker.cluster.is_broker:
            return
        coord = runtime.coordinator
        counts = group_counts(coord)
        total = GaugeMetricFamily(GCM + "group_count", "Groups by rebalance protocol.",
                                  labels=["protocol"])
        for protocol, states in counts.items():
            total.add_metric([protocol], sum(v for s, v in states.items() if s != "Dead"))
        yield total
        for protocol, states in counts.items():
            fam = GaugeMetricFamily(GCM + f"{protocol}_group_count",
                                    f"{protocol.capitalize()} groups by state.", labels=["state"])
            for state, n in states.items():
                fam.add_metric([state], n)
            yield fam
        yield from self._lag(coord)

    def _lag(self, coord: Any) -> Iterator[Metric]:
        logs = self.broker.storage.logs
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "The group's committed offset of the partition.",
                                    labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "Records between the committed offset and the high watermark.",
                                labels=labels)
        current_sum = GaugeMetricFamily("kafka_consumergroup_current_offset_sum",
                                        "Committed offsets of the group, summed per topic.",
                                        labels=["consumergroup", "topic"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                    "Lag of the group, summed per topic.",
                                    labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group.",
                                    labels=["consumergroup"])
        n_offsets = 0
        missing: set[tuple[str, int]] = set()
        for group_id in sorted(coord.offsets.groups()):
            sums: dict[str, list[int]] = {}
            for (topic, partition), committed in sorted(coord.offsets.get(group_id).items()):
                n_offsets += 1
                plog = logs.get(topic, partition)
                if plog is not None and not plog.closed:
                    hw = plog.high_watermark
                else:
                    missing.add((topic, partition))
                    hw = self.remote.get(topic, partition)
                    if hw is None:
                        continue
                behind = max(0, hw - committed.offset)
                key = [group_id, topic, str(partition)]
                current.add_metric(key, committed.offset)
                lag.add_metric(key, behind)
                acc = sums.setdefault(topic, [0, 0])
                acc[0] += committed.offset
                acc[1] += behind
            for topic, (offset_sum, behind_sum) in sorted(sums.items()):
                current_sum.add_metric([group_id, topic], offset_sum)
                lag_sum.add_metric([group_id, topic], behind_sum)
        for group_id, group in sorted(coord.groups.items()):
            if isinstance(group, (ClassicGroup, ConsumerGroup)):
                members.add_metric([group_id], len(group.members))
        if self.broker.cluster.kraft:
            self.remote.refresh(missing)
        yield GaugeMetricFamily(GCM + "offset_count", "Committed offsets.", value=n_offsets)
        yield from (current, lag, current_sum, lag_sum, members)


class TopicCollector:
    """kafka-exporter's topic and broker figures (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def _led(self) -> Iterator[tuple[str, int, Any, int, tuple[int, ...], tuple[int, ...]]]:
        """(topic, partition, log, leader, replicas, isr) of every partition led here."""
        broker = self.broker
        if broker.cluster.kraft:
            for part in broker.replicas.partitions():
                if part.is_leader:
                    yield (part.topic, part.partition, part.log, part.leader_id,
                           tuple(part.replicas), tuple(part.isr))
            return
        me = (broker.node_id,)
        for (topic, partition), plog in broker.storage.logs.logs().items():
            yield topic, partition, plog, broker.node_id, me, me

    def collect(self) -> Iterator[Metric]:
        yield from self._cluster()
        broker = self.broker
        if broker.storage is None or broker.view is None or not broker.cluster.is_broker:
            return
        labels = ["topic", "partition"]
        names = {
            "current_offset": "The partition's high watermark.",
            "oldest_offset": "The partition's log start offset.",
            "leader": "The partition's leader.",
            "replicas": "The partition's replica count.",
            "in_sync_replica": "The partition's ISR size.",
            "under_replicated_partition": "1 when the ISR is smaller than the replica set.",
            "leader_is_preferred": "1 when the leader is the first replica.",
        }
        keys: list[tuple[str, int]] = []
        columns: dict[str, list[float]] = {k: [] for k in names}
        hw, oldest, leaders, n_replicas, n_isr, under, preferred = columns.values()
        for topic, partition, plog, leader, replicas, isr in sorted(self._led(),
                                                                    key=lambda r: r[:2]):
            if plog.closed:
                continue
            keys.append((topic, partition))
            hw.append(plog.high_watermark)
            oldest.append(plog.log_start_offset)
            leaders.append(leader)
            n_replicas.append(len(replicas))
            n_isr.append(len(isr))
            under.append(int(len(isr) < len(replicas)))
            preferred.append(int(bool(replicas) and replicas[0] == leader))
        # the samples are made by the renderer, off the loop (DeferredGauge)
        yield from (DeferredGauge(f"kafka_topic_partition_{k}", doc, labels, keys, columns[k])
                    for k, doc in names.items())

    def _cluster(self) -> Iterator[Metric]:
        """Once per cluster, by the active controller (the single node is one)."""
        broker = self.broker
        quorum = broker.quorum
        if quorum is None:
            if broker.view is None:
                return
            brokers = 1
            topics = {n: broker.view.partition_count(n) for n in broker.view.topic_names()}
        else:
            runtime = quorum.controller
            if runtime is None or not runtime.active:
                return
            image = runtime.controller.image
            brokers = sum(1 for b in image.brokers.values() if not b.fenced)
            topics = {t.name: len(t.partitions) for t in image.topics_by_id.values()}
        yield GaugeMetricFamily("kafka_brokers", "Brokers in the cluster (not fenced).",
                                value=brokers)
        partitions = GaugeMetricFamily("kafka_topic_partitions", "Partitions of the topic.",
                                       labels=["topic"])
        for name, n in sorted(topics.items()):
            partitions.add_metric([name], n)
        yield partitions
