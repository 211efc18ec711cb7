"""Cluster metadata as a log (Kafka's ``__cluster_metadata`` idea, JSON-encoded).

``__cluster_metadata-0`` is an ordinary ``PartitionLog``. Each change is ONE
RecordBatch v2 (so it applies atomically: a torn batch is cut by recovery and
the change never happened), appended and fsynced before the call returns.
A change is bounded as Kafka's controller bounds a user operation: at most
``MAX_RECORDS_PER_USER_OP`` (10,000) records and ``MAX_BATCH_BYTES`` bytes,
else POLICY_VIOLATION ("Unable to perform excessively large batch
operation") and nothing is written. Replay reads any batch the broker
itself wrote, bounded or not (older versions wrote one batch of any size).
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
    {"type": "FeatureLevelRecord", "v": 0, "name": "transaction.version", "feature_level": 2}
                                  (a finalized feature level; 0 removes the feature:
                                  ``spool.cluster.features`` says which levels mean what)
    {"type": "AccessControlEntryRecord", "v": 0, "id": "<uuid>", "resource_type": 2, ...}
    {"type": "RemoveAccessControlEntryRecord", "v": 0, "id": "<uuid>"}
    {"type": "UserScramCredentialRecord", "v": 0, "name": "alice", "mechanism": 1,
                                  "salt": "<base64>", "stored_key": ..., "server_key": ...,
                                  "iterations": 4096}
    {"type": "RemoveUserScramCredentialRecord", "v": 0, "name": "alice", "mechanism": 1}
    {"type": "ClientQuotaRecord", "v": 0, "entity": [["user", "alice"], ["client-id", null]],
                                  "key": "producer_byte_rate", "value": 1048576.0,
                                  "remove": false}
                                  (the security records: Kafka's, field for field, in the
                                  form ``spool.security.image.to_json`` gives; the store keeps
                                  the ones still in force, in order, for the broker to replay
                                  into its ``SecurityImage``: ``security_records()``)

``MetadataImage`` is the state the log replays to; ``MetadataImage.apply`` is
its only mutator (replay = load), so a replicated controller can later ship
the same records. Unknown record types are skipped (forward compatibility).

Partition limit: ``create_topic`` and ``create_partitions`` take an
optional ``PartitionLimit`` (the broker's ``max.broker.partitions``, with room
kept for internal topics not created yet), checked under the mutator lock so
concurrent creations cannot overshoot it together; POLICY_VIOLATION names it.

Lifecycle: ``MetadataStore(log, clock)`` replays the whole log, then each
mutator validates, appends one batch, fsyncs, and applies it to the image.
Concurrency: one lock serialises mutators (held across the append and fsync);
a second, short lock guards the image, so readers (the event loop) never wait
for a mutator's disk work and never see a change half applied. Readers get
copies.
Durability: always fsynced: a change that returned survives power loss.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spool.protocol.errors import Errors, KafkaError
from spool.records.builder import BatchBuilder
from spool.records.compression import DEFAULT_MAX_SIZE
from spool.records.record import iter_records
from spool.storage.config import validate_broker_overrides, validate_topic_overrides
from spool.storage.log import PartitionLog
from spool.storage.manager import validate_topic_name
from spool.util.clock import Clock, as_clock

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
VERSION = 0
MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP
SECURITY_RECORDS = frozenset({
    "AccessControlEntryRecord", "RemoveAccessControlEntryRecord", "UserScramCredentialRecord",
    "RemoveUserScramCredentialRecord", "ClientQuotaRecord"})
MAX_BATCH_BYTES = 16 << 20  # a generous bound: 10,000 records of a new topic take ~2 MiB
EXCESSIVE = "Unable to perform excessively large batch operation"  # Kafka's message


def check_op_size(records: int, what: str) -> None:
    """POLICY_VIOLATION unless ``records`` metadata records fit one user operation."""
    if records > MAX_RECORDS_PER_USER_OP:
        raise KafkaError(
            Errors.POLICY_VIOLATION,
            f"{EXCESSIVE}: {what} needs {records} metadata records, "
            f"at most {MAX_RECORDS_PER_USER_OP} per request",
        )


@dataclass(frozen=True)
class PartitionLimit:
    """At most ``max_partitions`` partitions on this broker (``why`` says where the
    number comes from, for messages), keeping room for the ``reserved`` topics
    (name -> partitions) while they do not exist: internal topics a coordinator
    creates on first use."""

    max_partitions: int
    reserved: Mapping[str, int] = field(default_factory=dict)
    why: str = ""

    def check(self, image: MetadataImage, topic: str, adding: int) -> None:
        """POLICY_VIOLATION unless ``adding`` partitions to ``topic`` fit."""
        kept = sum(n for t, n in self.reserved.items() if t != topic and t not in image.topics)
        if image.total_partitions + adding + kept <= self.max_partitions:
            return
        room = max(0, self.max_partitions - image.total_partitions - kept)
        raise KafkaError(
            Errors.POLICY_VIOLATION,
            f"adding {adding} partitions to topic {topic!r} would exceed the broker's limit "
            f"of {self.why or self.max_partitions}: it holds {image.total_partitions}"
            + (f" and keeps {kept} for internal topics" if kept else "")
            + f"; at most {room} more can be created",
        )


@dataclass
class TopicImage:
    name: str
    topic_id: str
    partitions: int = 0
    configs: dict[str, str] = field(default_factory=dict)

    def copy(self) -> TopicImage:
        """A copy sharing nothing mutable (what ``copy.deepcopy`` gave, without its cost:
        a Metadata request for 10,000 topics takes 10,000)."""
        return TopicImage(self.name, self.topic_id, self.partitions, dict(self.configs))


@dataclass
class MetadataImage:
    """The replayed state: topics by name (and id), broker config overrides."""

    topics: dict[str, TopicImage] = field(default_factory=dict)
    names_by_id: dict[str, str] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    last_offset: int = -1
    next_producer_id: int = 0
    total_partitions: int = 0
    features: dict[str, int] = field(default_factory=dict)
    # configs of the other resource types (CLIENT_METRICS...): (type, name) -> values
    resource_configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    # the security records in force (ACLs, SCRAM credentials, quota values), by what they
    # set, in the order they were first set: replaying them gives the security state
    security: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply(self, rec: Mapping[str, Any]) -> None:
        kind = rec.get("type")
        if kind in SECURITY_RECORDS:
            self._apply_security(kind, rec)
        elif kind == "TopicRecord":
            t = TopicImage(rec["name"], rec["topic_id"])
            self.topics[t.name] = t
            self.names_by_id[t.topic_id] = t.name
        elif kind == "PartitionRecord":
            t = self._topic(rec["topic_id"])
            if t is not None and rec["partition"] >= t.partitions:
                self.total_partitions += rec["partition"] + 1 - t.partitions
                t.partitions = rec["partition"] + 1
        elif kind == "ConfigRecord":
            self._apply_config(rec)
        elif kind == "FeatureLevelRecord":
            if rec["feature_level"] == 0:
                self.features.pop(rec["name"], None)
            else:
                self.features[rec["name"]] = rec["feature_level"]
        elif kind == "ProducerIdsRecord":
            self.next_producer_id = max(self.next_producer_id, rec["next_producer_id"])
        elif kind == "RemoveTopicRecord":
            name = self.names_by_id.pop(rec["topic_id"], None)
            if name is not None:
                t = self.topics.pop(name, None)
                if t is not None:
                    self.total_partitions -= t.partitions

    def _apply_security(self, kind: str, rec: Mapping[str, Any]) -> None:
        if kind.endswith("AccessControlEntryRecord"):
            key = f"acl {rec['id']}"
        elif kind.endswith("UserScramCredentialRecord"):
            key = "scram " + json.dumps([rec["name"], rec["mechanism"]])
        else:
            key = "quota " + json.dumps([sorted(rec["entity"], key=lambda e: e[0]), rec["key"]])
        if kind.startswith("Remove") or rec.get("remove"):
            self.security.pop(key, None)
        else:
            self.security[key] = {k: v for k, v in rec.items() if k != "v"}

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
        else:  # CLIENT_METRICS (16), ...: a resource lives while it has values
            key = (rec["resource_type"], rec["resource_name"])
            target = self.resource_configs.setdefault(key, {})
            if rec["value"] is None:
                target.pop(rec["name"], None)
            else:
                target[rec["name"]] = rec["value"]
            if not target:
                del self.resource_configs[key]
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
        self._lock = threading.Lock()  # serialises mutators, across their disk work
        self._image_lock = threading.Lock()  # guards the image: short, never across I/O
        self.image = MetadataImage()
        self.replay()

    def replay(self) -> None:
        """Rebuild the image from the whole log (what startup does). A batch is read
        whatever its size: the metadata log is only ever written by this broker, and
        its uncompressed batches inflate to no more than their own length."""
        image = MetadataImage()
        for batch in self.log.iter_batches():
            limit = max(DEFAULT_MAX_SIZE, len(batch))
            for rec in iter_records(batch, max_decompressed_size=limit):
                if rec.value is not None:
                    image.apply(json.loads(rec.value))
                image.last_offset = rec.offset
        with self._image_lock:
            self.image = image

    def _commit(self, records: list[dict[str, Any]]) -> None:
        check_op_size(len(records), "this change")
        now = self.clock.now_ms()
        b = BatchBuilder(0)
        for rec in records:
            value = json.dumps({**rec, "v": VERSION}, sort_keys=True).encode()
            b.append(rec["type"].encode(), value, timestamp=now)
        batch = b.build()
        if len(batch) > MAX_BATCH_BYTES:
            raise KafkaError(
                Errors.POLICY_VIOLATION,
                f"{EXCESSIVE}: {len(batch)} bytes of metadata, at most {MAX_BATCH_BYTES}",
            )
        info = self.log.append(bytearray(batch))
        self.log.flush()
        with self._image_lock:
            for rec in records:
                self.image.apply(rec)
            self.image.last_offset = info.last_offset

    # -- reads ---------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        """Changes whenever the image does (a new image, or a record applied): what a
        reader caching something built from the image compares (read it first)."""
        image = self.image
        return id(image), image.last_offset

    def topics(self) -> dict[str, TopicImage]:
        with self._image_lock:
            return {n: t.copy() for n, t in self.image.topics.items()}

    def topic_names(self) -> list[str]:
        with self._image_lock:
            return list(self.image.topics)

    def topic(self, name: str) -> TopicImage | None:
        with self._image_lock:
            t = self.image.topics.get(name)
            return None if t is None else t.copy()

    def topic_name(self, topic_id: str) -> str | None:
        with self._image_lock:
            return self.image.names_by_id.get(topic_id)

    def check_limit(self, limit: PartitionLimit, topic: str, adding: int) -> None:
        """``limit.check`` against the current image (for validate-only requests)."""
        with self._image_lock:
            limit.check(self.image, topic, adding)

    def total_partitions(self) -> int:
        with self._image_lock:
            return self.image.total_partitions

    def topic_configs(self) -> dict[str, dict[str, str]]:
        with self._image_lock:
            return {n: dict(t.configs) for n, t in self.image.topics.items()}

    def broker_config_layers(self, broker: str) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's own dynamic values, the cluster-wide dynamic default)."""
        with self._image_lock:
            own = dict(self.image.broker_configs.get(broker, {})) if broker else {}
            return own, dict(self.image.broker_configs.get("", {}))

    def broker_config(self, broker: str = "") -> dict[str, str]:
        """Dynamic broker overrides: cluster default ("") then this broker's own."""
        with self._image_lock:
            merged = dict(self.image.broker_configs.get("", {}))
            if broker:
                merged.update(self.image.broker_configs.get(broker, {}))
            return merged

    def resource_configs(self, resource_type: int) -> dict[str, dict[str, str]]:
        """Every resource of a type other than topic and broker: name -> its values."""
        with self._image_lock:
            return {n: dict(v) for (t, n), v in self.image.resource_configs.items()
                    if t == resource_type}

    def resource_config(self, resource_type: int, name: str) -> dict[str, str]:
        """One resource of a type other than topic and broker: its values ({} if none)."""
        with self._image_lock:
            return dict(self.image.resource_configs.get((resource_type, name), {}))

    def security_records(self) -> list[dict[str, Any]]:
        """The security records in force, in order (``MetadataImage.security``)."""
        with self._image_lock:
            return [dict(r) for r in self.image.security.values()]

    def finalized_features(self) -> tuple[dict[str, int], int]:
        """(finalized feature levels, the offset of the last record: their epoch)."""
        with self._image_lock:
            return dict(self.image.features), self.image.last_offset

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
        limit: PartitionLimit | None = None,
    ) -> str:
        """Record a new topic; returns its id. TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
        INVALID_CONFIG, INVALID_TOPIC as Kafka answers CreateTopics; POLICY_VIOLATION
        beyond one operation's records or ``limit``."""
        validate_topic_name(name)
        if partitions < 1:
            raise KafkaError(Errors.INVALID_PARTITIONS, f"{partitions} partitions")
        cfg = validate_topic_overrides(configs or {})
        check_op_size(1 + partitions + len(cfg), f"topic {name!r} with {partitions} partitions")
        with self._lock:
            if name in self.image.topics:
                raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"topic {name} exists")
            if limit is not None:
                limit.check(self.image, name, partitions)
            tid = topic_id or str(uuid.uuid4())
            recs: list[dict[str, Any]] = [{"type": "TopicRecord", "name": name, "topic_id": tid}]
            recs += [self._partition_record(tid, p) for p in range(partitions)]
            recs += [_config_record(TOPIC_RESOURCE, name, k, v) for k, v in cfg.items()]
            self._commit(recs)
            return tid

    def create_partitions(
        self, name: str, new_total: int, *, limit: PartitionLimit | None = None
    ) -> None:
        """Grow ``name`` to ``new_total`` partitions. UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PARTITIONS (not more), POLICY_VIOLATION (too many records, ``limit``)."""
        with self._lock:
            t = self.image.topics.get(name)
            if t is None:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}")
            if new_total <= t.partitions:
                raise KafkaError(
                    Errors.INVALID_PARTITIONS,
                    f"topic {name} has {t.partitions} partitions; {new_total} is not more",
                )
            check_op_size(new_total - t.partitions, f"{new_total - t.partitions} new partitions")
            if limit is not None:
                limit.check(self.image, name, new_total - t.partitions)
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
            with self._image_lock:
                return dict(t.configs)

    def alter_broker_config(
        self, changes: Mapping[str, str | None], broker: str = ""
    ) -> dict[str, str]:
        """Set (None: delete) dynamic broker-level values; "" = the cluster-wide default.
        Keys of other layers (SSL, quotas...) were checked by the broker and are kept."""
        cfg = validate_broker_overrides(changes, others_checked=True)
        with self._lock:
            if cfg:
                self._commit(
                    [_config_record(BROKER_RESOURCE, broker, k, v) for k, v in cfg.items()]
                )
            with self._image_lock:
                return dict(self.image.broker_configs.get(broker, {}))


    def alter_resource_config(
        self, resource_type: int, name: str, changes: Mapping[str, str | None],
        check: Callable[[dict[str, str]], None], *, validate_only: bool = False,
    ) -> dict[str, str]:
        """Set (None: delete) values of a resource of another type (CLIENT_METRICS...);
        ``check(new values)`` raises to refuse them (nothing written). Returns the new set."""
        with self._lock:
            with self._image_lock:
                current = dict(self.image.resource_configs.get((resource_type, name), {}))
            merged = {**current, **changes}
            new = {k: v for k, v in merged.items() if v is not None}
            check(new)
            records = [_config_record(resource_type, name, k, v) for k, v in changes.items()
                       if current.get(k) != v]
            if records and not validate_only:
                self._commit(records)
            return new

    def update_features(
        self, plan: Callable[[dict[str, int]], list[tuple[str, int]]], *,
        validate_only: bool = False,
    ) -> None:
        """Finalize the (feature, level) pairs ``plan(current levels)`` returns, atomically
        with the check it makes (KafkaError from ``plan``: nothing written). ``validate_only``:
        check and write nothing."""
        with self._lock:
            with self._image_lock:
                current = dict(self.image.features)
            records = plan(current)
            if records and not validate_only:
                self._commit([{"type": "FeatureLevelRecord", "name": n, "feature_level": lvl}
                              for n, lvl in records])

    def append_security(self, records: list[dict[str, Any]]) -> None:
        """Commit security records (the JSON form, each with its "type"), all in one batch.
        The caller checked them against the state they change (the broker serialises its
        security changes); POLICY_VIOLATION beyond one operation's records."""
        if not records:
            return
        unknown = {r.get("type") for r in records} - SECURITY_RECORDS
        if unknown:
            raise ValueError(f"not security records: {sorted(map(str, unknown))}")
        with self._lock:
            self._commit(list(records))

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
