"""What the console reads from (and does to) a cluster, over Kafka's protocol only.

``ClusterReader(client_config)`` holds one confluent-kafka ``AdminClient`` (thread-safe:
every HTTP request thread shares it) and makes a short-lived ``Consumer`` per message
browse (``assign`` at an offset, never a group join, never a commit). Every call waits
at most ``timeout`` seconds (5 by default) for the cluster.

It answers the plain dataclasses of ``spool.console.model`` (``Overview``,
``TopicSummary``, ``TopicDetail``, ``Browse``, ``GroupSummary``, ``GroupDetail``), and
fails with one of (also there):

- ``NotFound``: the topic, partition or group does not exist (the page is a 404);
- ``BadInput``: the request cannot be honoured as asked, e.g. an offset outside
  the partition's ``[log_start_offset, high_watermark]`` or a refused topic name
  (a 400; the broker's own message is kept);
- ``Unavailable``: no broker answered in time (a 503 naming the bootstrap address and
  the client's last error of the past minute: a refused connection, a listener that
  wants SASL or TLS);
- ``confluent_kafka.KafkaException`` for anything else the cluster refused.

The controller is the one DescribeCluster names (Spool: the active controller when it is a
live broker; Kafka's KRaft brokers name a random live broker instead, for forwarding).
End offsets are high watermarks (ListOffsets ``latest``, read_uncommitted, as
``kafka-consumer-groups`` computes lag); lag is ``high_watermark - committed`` and
``None`` for a partition without a committed offset. Partition sizes come from
DescribeLogDirs (``spool.console.log_dirs``), summed over the leader's log dirs.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from spool.console.model import (
    BadInput,
    Browse,
    ConfigEntry,
    GroupDetail,
    GroupSummary,
    LagRow,
    Member,
    Message,
    Node,
    NotFound,
    Overview,
    PartitionInfo,
    TopicDetail,
    TopicSummary,
    Unavailable,
)

_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT}
_MISSING = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
            KafkaError._UNKNOWN_PARTITION, KafkaError.GROUP_ID_NOT_FOUND}


def _enum_name(value: Any) -> str:
    return getattr(value, "name", str(value))


def _source(entry: Any) -> str:
    """A ConfigEntry's source by name (the C layer sometimes hands back an int)."""
    src = entry.source
    return (src if isinstance(src, ConfigSource) else ConfigSource(int(src))).name


class ClusterReader:
    """Reads the cluster for the pages (module doc). Safe to share across threads."""

    def __init__(self, client_config: dict[str, Any], timeout: float = 5.0,
                 log_dirs: Any = None) -> None:
        self.config = dict(client_config)
        self.config["error_cb"] = self._on_error
        self.bootstrap = str(self.config.get("bootstrap.servers", ""))
        self.timeout = timeout
        self._last_error: tuple[float, str] | None = None  # librdkafka's, for 503 pages
        self.admin = AdminClient(self.config)
        self.log_dirs = log_dirs  # spool.console.log_dirs.LogDirs, or None: no sizes

    # ---- calls

    def _wait(self, future: Future, subject: str | None = None) -> Any:
        try:
            return future.result(timeout=self.timeout * 2)
        except TimeoutError:
            raise Unavailable(self._unreachable()) from None
        except KafkaException as e:
            raise self._translate(e, subject) from None

    def _on_error(self, err: KafkaError) -> None:
        if err.code() != KafkaError._ALL_BROKERS_DOWN:  # says less than the one before it
            self._last_error = (time.monotonic(), _clean(err.str()))

    def _unreachable(self) -> str:
        text = f"no broker answered at {self.bootstrap} within {self.timeout:g} s"
        self.admin.poll(0)  # serves the error callback
        last = self._last_error
        if last is not None and time.monotonic() - last[0] < 60:
            text += f" (the client's last error: {last[1]})"
        return text

    def _translate(self, e: KafkaException, subject: str | None) -> Exception:
        err = e.args[0] if e.args else None
        if not isinstance(err, KafkaError):
            return e
        if err.code() in _UNREACHABLE:
            return Unavailable(self._unreachable())
        if err.code() in _MISSING and subject is not None:
            return NotFound(f"{subject} does not exist")
        return e

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self.admin.list_topics(topic, timeout=self.timeout)
        except KafkaException as e:
            raise self._translate(e, None) from None

    def _end_offsets(self, tps: list[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
        if not tps:
            return {}
        futures = self.admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in tps}, request_timeout=self.timeout)
        out = {}
        for tp, f in futures.items():
            try:
                out[(tp.topic, tp.partition)] = self._wait(f, "partition").offset
            except NotFound:
                pass  # deleted since it was listed (or a group's offsets outlived it)
        return out

    def high_watermarks(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """High watermarks of ``tps``; partitions that no longer exist are left out."""
        return self._end_offsets(tps, OffsetSpec.latest())

    def all_partitions(self, internal: bool = False) -> dict[str, int]:
        """Topic name -> partition count (internal topics only when asked)."""
        md = self._metadata()
        return {name: len(t.partitions) for name, t in md.topics.items()
                if internal or not name.startswith("__")}

    # ---- overview

    def overview(self) -> Overview:
        cluster = self._wait(self.admin.describe_cluster(request_timeout=self.timeout))
        md = self._metadata()
        nodes = {n.id: Node(n.id, n.host, n.port, n.rack) for n in cluster.nodes}
        partitions = 0
        for t in md.topics.values():
            for p in t.partitions.values():
                partitions += 1
                if p.leader in nodes:
                    nodes[p.leader].leaders += 1
                for r in p.replicas:
                    if r in nodes:
                        nodes[r].replicas += 1
        groups = self._wait(self.admin.list_consumer_groups(request_timeout=self.timeout))
        controller = cluster.controller.id if cluster.controller is not None else None
        return Overview(cluster.cluster_id or "", controller,
                        sorted(nodes.values(), key=lambda n: n.id),
                        len(md.topics), partitions, len(groups.valid))

    # ---- topics

    def topics(self) -> list[TopicSummary]:
        md = self._metadata()
        tps = [(name, p) for name, t in md.topics.items() for p in t.partitions]
        high = self.high_watermarks(tps)
        low = self._end_offsets(tps, OffsetSpec.earliest())
        out = []
        for name, t in sorted(md.topics.items()):
            parts = t.partitions.values()
            rf = max((len(p.replicas) for p in parts), default=0)
            records = sum(high.get((name, p), 0) - low.get((name, p), 0)
                          for p in t.partitions)
            out.append(TopicSummary(name, name.startswith("__"), len(t.partitions), rf, records))
        return out

    def topic(self, name: str) -> TopicDetail:
        subject = f"topic '{name}'"
        desc = self._wait(self.admin.describe_topics(
            TopicCollection([name]), request_timeout=self.timeout)[name], subject)
        tps = [(name, p.id) for p in desc.partitions]
        high = self.high_watermarks(tps)
        low = self._end_offsets(tps, OffsetSpec.earliest())
        if any((name, p.id) not in high for p in desc.partitions):
            raise NotFound(f"topic '{name}' does not exist")  # deleted meanwhile
        sizes: dict[int, int] = {}
        if self.log_dirs is not None:
            nodes = {b.id: (b.host, b.port) for b in self._metadata(name).brokers.values()}
            leaders = {p.id: p.leader.id if p.leader is not None else None
                       for p in desc.partitions}
            sizes = self.log_dirs.sizes(name, leaders, nodes)
        parts = [PartitionInfo(p.id, p.leader.id if p.leader is not None else None,
                               [r.id for r in p.replicas], [r.id for r in p.isr],
                               low.get((name, p.id), 0), high[(name, p.id)], sizes.get(p.id))
                 for p in sorted(desc.partitions, key=lambda p: p.id)]
        res = ConfigResource(ResourceType.TOPIC, name)
        entries = self._wait(self.admin.describe_configs(
            [res], request_timeout=self.timeout)[res], subject)
        configs = [ConfigEntry(e.name, e.value, _source(e), e.is_default,
                               e.is_sensitive)
                   for e in sorted(entries.values(), key=lambda e: e.name)]
        return TopicDetail(desc.name, desc.is_internal, parts, configs)

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        futures = self.admin.create_topics(
            [NewTopic(name, partitions, replication_factor)], request_timeout=self.timeout)
        try:
            futures[name].result(timeout=self.timeout * 2)
        except TimeoutError:
            raise Unavailable(self._unreachable()) from None
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() not in _UNREACHABLE:
                raise BadInput(f"the cluster refused to create topic '{name}': "
                               f"{_clean(err.str())} ({err.name()})") from None
            raise self._translate(e, None) from None

    def delete_topic(self, name: str) -> None:
        futures = self.admin.delete_topics([name], request_timeout=self.timeout)
        self._wait(futures[name], f"topic '{name}'")

    # ---- messages

    def browse(self, topic: str, partition: int, offset: int | None = None,
               timestamp_ms: int | None = None, limit: int = 20) -> Browse:
        """Up to ``limit`` messages of ``topic``/``partition`` from ``offset`` (or the first
        at or after ``timestamp_ms``; neither: the last ``limit`` messages)."""
        md = self._metadata()
        if topic not in md.topics or md.topics[topic].error is not None:
            raise NotFound(f"topic '{topic}' does not exist")
        count = len(md.topics[topic].partitions)
        if partition not in md.topics[topic].partitions:
            raise NotFound(f"topic '{topic}' has no partition {partition} "
                           f"(its partitions are 0 to {count - 1})")
        consumer = Consumer({**self.config, "group.id": "spool-console",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "client.id": "spool-console"})
        try:
            return self._browse(consumer, topic, partition, count, offset, timestamp_ms, limit)
        except KafkaException as e:
            raise self._translate(e, f"topic '{topic}'") from None
        finally:
            consumer.close()

    def _browse(self, consumer: Consumer, topic: str, partition: int, count: int,
                offset: int | None, timestamp_ms: int | None, limit: int) -> Browse:
        tp = TopicPartition(topic, partition)
        low, high = consumer.get_watermark_offsets(tp, timeout=self.timeout)
        if timestamp_ms is not None:
            found = consumer.offsets_for_times(
                [TopicPartition(topic, partition, timestamp_ms)], timeout=self.timeout)[0]
            start = found.offset if found.offset >= 0 else high
        elif offset is None:
            start = max(low, high - limit)
        else:
            if not low <= offset <= high:
                raise BadInput(f"offset {offset} is out of range: partition {partition} of "
                               f"'{topic}' holds offsets {low} to {high - 1} "
                               f"(log start offset {low}, high watermark {high})")
            start = offset
        messages: list[Message] = []
        if start < high:
            consumer.assign([TopicPartition(topic, partition, start)])
            deadline = time.monotonic() + self.timeout
            while len(messages) < limit and time.monotonic() < deadline:
                m = consumer.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaException(m.error())
                messages.append(_message(m))
                if m.offset() >= high - 1:
                    break
        return Browse(topic, partition, count, low, high, start, messages)

    # ---- groups

    def group_ids(self) -> list[str]:
        """Every consumer group's id (ListGroups only: no DescribeGroups)."""
        listed = self._wait(self.admin.list_consumer_groups(request_timeout=self.timeout))
        return sorted(g.group_id for g in listed.valid)

    def groups(self) -> list[GroupSummary]:
        listed = self._wait(self.admin.list_consumer_groups(request_timeout=self.timeout))
        out = {g.group_id: GroupSummary(g.group_id, _enum_name(g.state), _enum_name(g.type))
               for g in listed.valid}
        if out:
            futures = self.admin.describe_consumer_groups(list(out),
                                                          request_timeout=self.timeout)
            for gid, f in futures.items():
                try:
                    out[gid].members = len(self._wait(f).members)
                except KafkaException:
                    pass  # listed but not describable (a race with its deletion): 0 shown
        return sorted(out.values(), key=lambda g: g.group_id)

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (partitions without one left out)."""
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout)
        result = self._wait(futures[group_id], f"group '{group_id}'")
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                if tp.offset >= 0}

    def group(self, group_id: str) -> GroupDetail:
        listed = self._wait(self.admin.list_consumer_groups(request_timeout=self.timeout))
        if group_id not in {g.group_id for g in listed.valid}:
            raise NotFound(f"group '{group_id}' does not exist")
        futures = self.admin.describe_consumer_groups([group_id], request_timeout=self.timeout)
        desc = self._wait(futures[group_id], f"group '{group_id}'")
        members = [Member(m.member_id, m.client_id, m.host, m.group_instance_id,
                          sorted((tp.topic, tp.partition)
                                 for tp in (m.assignment.topic_partitions
                                            if m.assignment else [])))
                   for m in desc.members]
        owner = {tp: m.member_id for m in members for tp in m.assignment}
        committed = self.committed(group_id)
        tps = sorted(set(committed) | set(owner))
        high = self.high_watermarks(tps)
        rows = [LagRow(t, p, committed.get((t, p)), high.get((t, p)),
                       high[(t, p)] - committed[(t, p)]
                       if (t, p) in committed and (t, p) in high else None,
                       owner.get((t, p)))
                for t, p in tps]
        coordinator = desc.coordinator.id if desc.coordinator is not None else None
        return GroupDetail(desc.group_id, _enum_name(desc.state), _enum_name(desc.type),
                           desc.partition_assignor or "", coordinator, members, rows)

    def close(self) -> None:
        if self.log_dirs is not None:
            self.log_dirs.close()


def _clean(text: str) -> str:
    for prefix in ("Broker: ", "Local: "):
        text = text.replace(prefix, "")
    return " ".join(text.split()).rstrip(".")


_TS_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


def _message(m: Any) -> Message:
    ts_type, ts = m.timestamp()
    return Message(m.partition(), m.offset(), ts if ts_type in _TS_TYPES else None,
                   _TS_TYPES.get(ts_type, ""), m.key(), m.value(),
                   [(k, v) for k, v in (m.headers() or [])])
