"""Driver-side questions to the cluster: which partitions, which offsets.

``Cluster`` wraps one confluent-kafka consumer used only for metadata,
watermarks and offsets-for-times (it is never subscribed and commits
nothing). Open it where it is used and close it there: nothing here pickles.

Offsets are plain ``{topic: {partition: offset}}`` dicts; ``to_json`` gives
the stable-ordered form Spark compares as a string.
"""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from spool.spark.options import EARLIEST, LATEST, OffsetSpec, SpoolOptions

Offsets = dict[str, dict[int, int]]
TIMEOUT = 30.0


def consumer_conf(opts: SpoolOptions, **extra: Any) -> dict[str, Any]:
    """A consumer that never joins a group: assign/seek only, no commits."""
    return {
        **opts.base_conf(),
        "group.id": f"spool-spark-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": opts.isolation_level,
        "auto.offset.reset": "error",
        # KIP-714 telemetry: librdkafka logs "Telemetry client instance id changed" per consumer
        "enable.metrics.push": False,
        **extra,
    }


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Stable key order (topics, then partitions numerically): Spark compares JSON text."""
    return {t: {str(p): offsets[t][p] for p in sorted(offsets[t])} for t in sorted(offsets)}


def from_json(data: dict | None) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in (data or {}).items()}


class Cluster:
    """Metadata and offset look-ups for one ``SpoolOptions``."""

    def __init__(self, opts: SpoolOptions) -> None:
        self.opts = opts
        self.consumer = Consumer(consumer_conf(opts))

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) the subscription covers now, sorted."""
        md = self.consumer.list_topics(timeout=TIMEOUT)
        found: list[tuple[str, int]] = []
        for name, topic in md.topics.items():
            if topic.error is not None or not self.opts.matches(name):
                continue
            wanted = self.opts.assign.get(name) if self.opts.assign is not None else None
            for p in topic.partitions:
                if wanted is None or p in wanted:
                    found.append((name, p))
        if self.opts.assign is not None:
            missing = {(t, p) for t, ps in self.opts.assign.items() for p in ps} - set(found)
            if missing:
                raise ValueError(f"assigned partitions do not exist: {sorted(missing)}")
        return sorted(found)

    def watermarks(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, end) per partition; the end is the LSO under read_committed."""
        out = {}
        for t, p in tps:
            out[(t, p)] = self.consumer.get_watermark_offsets(
                TopicPartition(t, p), timeout=TIMEOUT, cached=False
            )
        return out

    def by_timestamp(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """First offset whose timestamp is >= ts per partition, -1 when none is."""
        if not wanted:
            return {}
        query = [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()]
        result = self.consumer.offsets_for_times(query, timeout=TIMEOUT)
        out = {}
        for tp in result:
            if tp.error is not None:
                raise KafkaException(tp.error)
            out[(tp.topic, tp.partition)] = tp.offset
        return out

    def resolve(
        self,
        spec: OffsetSpec,
        tps: list[tuple[str, int]],
        marks: dict[tuple[str, int], tuple[int, int]],
        *,
        starting: bool,
    ) -> Offsets:
        """Concrete offsets for ``spec`` on ``tps`` (within [log start, end])."""
        out: Offsets = {}

        def put(tp: tuple[str, int], off: int) -> None:
            low, high = marks[tp]
            if off == EARLIEST:
                off = low
            elif off == LATEST:
                off = high
            out.setdefault(tp[0], {})[tp[1]] = off

        if spec.kind in ("earliest", "latest"):
            for tp in tps:
                put(tp, EARLIEST if spec.kind == "earliest" else LATEST)
        elif spec.kind == "offsets":
            for tp in tps:
                given = spec.per_partition.get(tp[0], {})
                if tp[0] in spec.per_partition and tp[1] not in given:
                    raise ValueError(f"offsets JSON lacks partition {tp[0]}-{tp[1]}")
                put(tp, given.get(tp[1], EARLIEST if starting else LATEST))
        else:
            if spec.kind == "timestamp":
                wanted = {tp: spec.timestamp for tp in tps}
            else:
                wanted = {
                    tp: spec.per_partition[tp[0]][tp[1]]
                    for tp in tps
                    if tp[1] in spec.per_partition.get(tp[0], {})
                }
            found = self.by_timestamp(wanted)
            for tp in tps:
                off = found.get(tp)
                if off is None:
                    put(tp, EARLIEST if starting else LATEST)
                elif off < 0:
                    if starting and self.opts.timestamp_strategy == "error":
                        raise ValueError(
                            f"no offset with a timestamp >= {wanted[tp]} in {tp[0]}-{tp[1]} "
                            "(set startingOffsetsByTimestampStrategy=latest to start at the end)"
                        )
                    put(tp, LATEST)
                else:
                    put(tp, off)
        return out
