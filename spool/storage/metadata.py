"""Cluster metadata as a log (Kafka's ``__cluster_metadata`` idea, JSON-encoded).

``__cluster_metadata-0`` is an ordinary ``PartitionLog``. Each change is ONE
RecordBatch v2 (so it applies atomically: a torn batch is cut by recovery and
the change never happened), appended and fsynced before the call returns.
Every record has key = the record type (ASCII) and value = a JSON object::

    {"type": "TopicRecord",       "v": 0, "name": "orders", "topic_id": "<uuid>"}
    {"type": "PartitionRecord",   "v": 0, "topic_id": "<uuid>", "partition": 0,
                                  "replicas": [0], "isr": [0], "leader": 0,
                                  "leader_epoch": 0}
    {"type": "ConfigRecord",      "v": 0, "resource_type": 2 (topic) | 4 (broker),
                                  "resource_name": "orders" | "" (cluster default) | "0",
                                  "name": "retention.ms", "value": "1000" | null (delete)}
    {"type": "RemoveTopicRecord", "v": 0, "topic_id": "<uuid>"}
    {"type": "ProducerIdsRecord", "v": 0, "broker_id": 0, "next_producer_id": 2000}
                                  (a block of producer ids [previous next, next) was
                                  handed to the broker: ids stay unique across restarts)

``MetadataImage`` is the state the log replays to; ``MetadataImage.apply`` is
its only mutator (replay = load), so a replicated controller can later ship
the same records. Unknown record types are skipped (forward compatibility).

Lifecycle: ``MetadataStore(log, clock)`` replays the whole log, then each
mutator validates, appends one batch, fsyncs, and applies it to the image.
Concurrency: one lock serialises mutators; readers get copies.
Durability: always fsynced: a change that returned survives power loss.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spool.protocol.errors import Errors, KafkaError
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from spool.storage.config import validate_broker_overrides, validate_topic_overrides
from spool.storage.log import PartitionLog
from spool.storage.manager import validate_topic_name
from spool.util.clock import Clock, as_clock

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
VERSION = 0


@dataclass
class TopicImage:
    name: str
    topic_id: str
    partitions: int = 0
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class MetadataImage:
    """The replayed state: topics by name (and id), broker config overrides."""

    topics: dict[str, TopicImage] = field(default_factory=dict)
    names_by_id: dict[str, str] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    last_offset: int = -1
    next_producer_id: int = 0

    def apply(self, rec: Mapping[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "TopicRecord":
            t = TopicImage(rec["name"], rec["topic_id"])
            self.topics[t.name] = t
            self.names_by_id[t.topic_id] = t.name
        elif kind == "PartitionRecord":
            t = self._topic(rec["topic_id"])
            if t is not None:
                t.partitions = max(t.partitions, rec["partition"] + 1)
        elif kind == "ConfigRecord":
            self._apply_config(rec)
        elif kind == "ProducerIdsRecord":
            self.next_producer_id = max(self.next_producer_id, rec["next_producer_id"])
        elif kind == "RemoveTopicRecord":
            name = self.names_by_id.pop(rec["topic_id"], None)
            if name is not None:
                self.topics.pop(name, None)

    def _topic(self, topic_id: str) -> TopicImage | None:
        name = self.names_by_id.get(topic_id)
        return None if name is None else self.topics.get(name)

    def _apply_config(self, rec: Mapping[str, Any]) -> None:
        if rec["resource_type"] == TOPIC_RESOURCE:
            t = self.topics.get(rec["resource_name"])
            if t is None:
                return
            target = t.configs
        elif rec["resource_type"] == BROKER_RESOURCE:
            target = self.broker_configs.setdefault(rec["resource_name"], {})
        else:
            return
        if rec["value"] is None:
            target.pop(rec["name"], None)
        else:
            target[rec["name"]] = rec["value"]


class MetadataStore:
    """Topics, partition counts, topic ids and config overrides, persisted as a log."""

    def __init__(
        self,
        log: PartitionLog,
        clock: Clock | Callable[[], int] | None = None,
        *,
        node_id: int = 0,
    ) -> None:
        self.log = log
        self.clock = as_clock(clock)
        self.node_id = node_id
        self._lock = threading.Lock()
        self.image = MetadataImage()
        self.replay()

    def replay(self) -> None:
        """Rebuild the image from the whole log (what startup does)."""
        image = MetadataImage()
        for batch in self.log.iter_batches():
            for rec in iter_records(batch):
                if rec.value is not None:
                    image.apply(json.loads(rec.value))
                image.last_offset = rec.offset
        self.image = image

    def _commit(self, records: list[dict[str, Any]]) -> None:
        now = self.clock.now_ms()
        b = BatchBuilder(0)
        for rec in records:
            value = json.dumps({**rec, "v": VERSION}, sort_keys=True).encode()
            b.append(rec["type"].encode(), value, timestamp=now)
        info = self.log.append(bytearray(b.build()))
        self.log.flush()
        for rec in records:
            self.image.apply(rec)
        self.image.last_offset = info.last_offset

    # -- reads ---------------------------------------------------------------------

    def topics(self) -> dict[str, TopicImage]:
        return copy.deepcopy(self.image.topics)

    def topic(self, name: str) -> TopicImage | None:
        t = self.image.topics.get(name)
        return None if t is None else copy.deepcopy(t)

    def topic_name(self, topic_id: str) -> str | None:
        return self.image.names_by_id.get(topic_id)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        return {n: dict(t.configs) for n, t in self.image.topics.items()}

    def broker_config_layers(self, broker: str) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's own dynamic values, the cluster-wide dynamic default)."""
        own = dict(self.image.broker_configs.get(broker, {})) if broker else {}
        return own, dict(self.image.broker_configs.get("", {}))

    def broker_config(self, broker: str = "") -> dict[str, str]:
        """Dynamic broker overrides: cluster default ("") then this broker's own."""
        merged = dict(self.image.broker_configs.get("", {}))
        if broker:
            merged.update(self.image.broker_configs.get(broker, {}))
        return merged

    # -- changes -------------------------------------------------------------------

    def _partition_record(self, topic_id: str, p: int) -> dict[str, Any]:
        return {"type": "PartitionRecord", "topic_id": topic_id, "partition": p,
                "replicas": [self.node_id], "isr": [self.node_id], "leader": self.node_id,
                "leader_epoch": 0}

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: str | None = None,
    ) -> str:
        """Record a new topic; returns its id. TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
        INVALID_CONFIG, INVALID_TOPIC as Kafka answers CreateTopics."""
        validate_topic_name(name)
        if partitions < 1:
            raise KafkaError(Errors.INVALID_PARTITIONS, f"{partitions} partitions")
        cfg = validate_topic_overrides(configs or {})
        with self._lock:
            if name in self.image.topics:
                raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"topic {name} exists")
            tid = topic_id or str(uuid.uuid4())
            recs: list[dict[str, Any]] = [{"type": "TopicRecord", "name": name, "topic_id": tid}]
            recs += [self._partition_record(tid, p) for p in range(partitions)]
            recs += [_config_record(TOPIC_RESOURCE, name, k, v) for k, v in cfg.items()]
            self._commit(recs)
            return tid

    def create_partitions(self, name: str, new_total: int) -> None:
        with self._lock:
            t = self.image.topics.get(name)
            if t is None:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}")
            if new_total <= t.partitions:
                raise KafkaError(
                    Errors.INVALID_PARTITIONS,
                    f"topic {name} has {t.partitions} partitions; {new_total} is not more",
                )
            self._commit(
                [self._partition_record(t.topic_id, p) for p in range(t.partitions, new_total)]
            )

    def delete_topic(self, name: str) -> str:
        with self._lock:
            t = self.image.topics.get(name)
            if t is None:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}")
            self._commit([{"type": "RemoveTopicRecord", "topic_id": t.topic_id}])
            return t.topic_id

    def alter_topic_config(self, name: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Set (or with None delete) topic overrides; returns the topic's new overrides."""
        cfg = validate_topic_overrides(changes)
        with self._lock:
            t = self.image.topics.get(name)
            if t is None:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}")
            if cfg:
                self._commit([_config_record(TOPIC_RESOURCE, name, k, v) for k, v in cfg.items()])
            return dict(t.configs)

    def alter_broker_config(
        self, changes: Mapping[str, str | None], broker: str = ""
    ) -> dict[str, str]:
        """Set (None: delete) dynamic broker-level values; "" = the cluster-wide default."""
        cfg = validate_broker_overrides(changes)
        with self._lock:
            if cfg:
                self._commit(
                    [_config_record(BROKER_RESOURCE, broker, k, v) for k, v in cfg.items()]
                )
            return dict(self.image.broker_configs.get(broker, {}))


    def allocate_producer_ids(self, block_size: int = 1000) -> tuple[int, int]:
        """Reserve the next ``block_size`` producer ids; returns [first, end)."""
        with self._lock:
            first = self.image.next_producer_id
            self._commit([{"type": "ProducerIdsRecord", "broker_id": self.node_id,
                           "next_producer_id": first + block_size}])
            return first, first + block_size


def _config_record(rtype: int, rname: str, key: str, value: str | None) -> dict[str, Any]:
    return {"type": "ConfigRecord", "resource_type": rtype, "resource_name": rname,
            "name": key, "value": value}
