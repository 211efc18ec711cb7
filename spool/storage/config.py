"""Topic (log) configuration with Kafka's names, broker-level defaults, and sources.

One table, ``TOPIC_CONFIGS``, lists every topic-level key Kafka 3.x/4.x
accepts: its type, static default, validator, and its broker-level synonyms
in priority order (``segment.ms`` <- ``log.roll.ms``, then ``log.roll.hours``
x 3600000). Resolution of one key, highest priority first::

    topic override          (ConfigSource.TOPIC_CONFIG)
    dynamic broker value    (DYNAMIC_BROKER_CONFIG; alter_broker_config on broker "<id>")
    dynamic cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG; alter_broker_config on "")
    static broker value     (STATIC_BROKER_CONFIG; the broker's properties)
    static default          (DEFAULT_CONFIG)

and within each broker layer the first synonym present wins. ``LogConfig``
is the typed result the storage engine reads; ``describe_topic_configs``
gives DescribeConfigs every key with its value, source and synonyms.
``BROKER_CONFIGS`` holds the broker-only log keys (``num.partitions``,
``log.dirs``, check intervals...). Bad values or unknown keys raise
``KafkaError(INVALID_CONFIG)``. Values travel as strings, like on the wire.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from spool.protocol.errors import Errors, KafkaError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
LONG_MAX = INT64_MAX
HOURS = 3_600_000
MINUTES = 60_000
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class ConfigSource(IntEnum):
    """DescribeConfigs' ``config_source`` values (Kafka's ``ConfigSource``)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    scale: int = 1  # multiply the broker value by this (hours -> ms)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # int, long, double, boolean, string, list
    default: Any
    synonyms: tuple[Synonym, ...] = ()
    check: Callable[[Any], str | None] | None = None
    doc: str = ""

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


def _at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be at least {n}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _policy(v: tuple[str, ...]) -> str | None:
    bad = [p for p in v if p not in ("delete", "compact")]
    return f"unknown cleanup policies {bad}" if bad or not v else None


def _ratio(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be between 0 and 1"


def _log(name: str, scale: int = 1) -> Synonym:
    return Synonym("log." + name, scale)


_K = ConfigKey
TOPIC_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _K("cleanup.policy", "list", ("delete",), (_log("cleanup.policy"),), _policy),
        _K("compression.type", "string", "producer", (Synonym("compression.type"),),
           _one_of(*COMPRESSION_TYPES)),
        _K("compression.gzip.level", "int", -1, (Synonym("compression.gzip.level"),)),
        _K("compression.lz4.level", "int", 9, (Synonym("compression.lz4.level"),)),
        _K("compression.zstd.level", "int", 3, (Synonym("compression.zstd.level"),)),
        _K("delete.retention.ms", "long", 86_400_000,
           (Synonym("log.cleaner.delete.retention.ms"),), _at_least(0)),
        _K("file.delete.delay.ms", "long", 60_000, (_log("segment.delete.delay.ms"),),
           _at_least(0)),
        _K("flush.messages", "long", LONG_MAX, (_log("flush.interval.messages"),), _at_least(1)),
        _K("flush.ms", "long", LONG_MAX,
           (_log("flush.interval.ms"), _log("flush.scheduler.interval.ms")), _at_least(0)),
        _K("follower.replication.throttled.replicas", "list", ()),
        _K("index.interval.bytes", "int", 4096, (_log("index.interval.bytes"),), _at_least(0)),
        _K("leader.replication.throttled.replicas", "list", ()),
        _K("local.retention.bytes", "long", -2, (_log("local.retention.bytes"),), _at_least(-2)),
        _K("local.retention.ms", "long", -2, (_log("local.retention.ms"),), _at_least(-2)),
        _K("max.compaction.lag.ms", "long", LONG_MAX,
           (Synonym("log.cleaner.max.compaction.lag.ms"),), _at_least(1)),
        _K("max.message.bytes", "int", 1_048_588, (Synonym("message.max.bytes"),),
           _at_least(0)),
        _K("message.timestamp.after.max.ms", "long", LONG_MAX,
           (_log("message.timestamp.after.max.ms"),), _at_least(0)),
        _K("message.timestamp.before.max.ms", "long", LONG_MAX,
           (_log("message.timestamp.before.max.ms"),), _at_least(0)),
        _K("message.timestamp.type", "string", "CreateTime",
           (_log("message.timestamp.type"),), _one_of("CreateTime", "LogAppendTime")),
        _K("min.cleanable.dirty.ratio", "double", 0.5,
           (Synonym("log.cleaner.min.cleanable.ratio"),), _ratio),
        _K("min.compaction.lag.ms", "long", 0, (Synonym("log.cleaner.min.compaction.lag.ms"),),
           _at_least(0)),
        _K("min.insync.replicas", "int", 1, (Synonym("min.insync.replicas"),), _at_least(1)),
        _K("preallocate", "boolean", False, (_log("preallocate"),)),
        _K("remote.storage.enable", "boolean", False),
        _K("retention.bytes", "long", -1, (_log("retention.bytes"),)),
        _K("retention.ms", "long", 604_800_000,
           (_log("retention.ms"), _log("retention.minutes", MINUTES),
            _log("retention.hours", HOURS)), _at_least(-1)),
        # Kafka 4 raised the minimum to 1 MiB; we keep 3.x's 14 so tests can roll small.
        _K("segment.bytes", "int", 1_073_741_824, (_log("segment.bytes"),), _at_least(14)),
        _K("segment.index.bytes", "int", 10_485_760, (_log("index.size.max.bytes"),),
           _at_least(4)),
        _K("segment.jitter.ms", "long", 0,
           (_log("roll.jitter.ms"), _log("roll.jitter.hours", HOURS)), _at_least(0)),
        _K("segment.ms", "long", 604_800_000,
           (_log("roll.ms"), _log("roll.hours", HOURS)), _at_least(1)),
        _K("unclean.leader.election.enable", "boolean", False,
           (Synonym("unclean.leader.election.enable"),)),
    )
}

# topic key -> the broker key with the highest priority (Kafka's TOPIC_CONFIG_SYNONYMS).
TOPIC_TO_BROKER_KEY: dict[str, str] = {
    k.name: k.synonyms[0].name for k in TOPIC_CONFIGS.values() if k.synonyms
}

# Broker-level keys of the storage layer that have no topic-level equivalent.
BROKER_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _K("num.partitions", "int", 1, check=_at_least(1)),
        _K("default.replication.factor", "int", 1, check=_at_least(1)),
        _K("auto.create.topics.enable", "boolean", True),
        _K("delete.topic.enable", "boolean", True),
        _K("log.dirs", "list", ()),
        _K("log.dir", "string", "/tmp/kafka-logs"),
        _K("log.retention.check.interval.ms", "long", 300_000, check=_at_least(1)),
        _K("log.flush.offset.checkpoint.interval.ms", "int", 60_000, check=_at_least(0)),
        _K("log.flush.start.offset.checkpoint.interval.ms", "int", 60_000, check=_at_least(0)),
        _K("num.recovery.threads.per.data.dir", "int", 2, check=_at_least(1)),
        _K("log.cleaner.enable", "boolean", True),
        _K("log.cleaner.backoff.ms", "long", 15_000, check=_at_least(0)),
        _K("log.cleaner.dedupe.buffer.size", "long", 134_217_728, check=_at_least(24)),
        _K("log.cleaner.io.buffer.load.factor", "double", 0.9, check=_ratio),
        _K("log.cleaner.threads", "int", 1, check=_at_least(0)),
    )
}

# Every broker key that feeds a topic key, with how: broker key -> (topic key, scale).
BROKER_SYNONYM_OF: dict[str, tuple[str, int]] = {
    s.name: (k.name, s.scale) for k in TOPIC_CONFIGS.values() for s in k.synonyms
}


def _invalid(name: str, value: object, why: str) -> KafkaError:
    return KafkaError(Errors.INVALID_CONFIG, f"invalid value {value!r} for {name}: {why}")


def parse_value(key: ConfigKey, raw: object, name: str | None = None) -> Any:
    """Parse a string (or an already typed value) for ``key``; INVALID_CONFIG if bad."""
    name = name or key.name
    try:
        value = _coerce(key.type, raw)
    except (TypeError, ValueError) as e:
        raise _invalid(name, raw, str(e) or f"not a {key.type}") from None
    if key.check is not None:
        why = key.check(value)
        if why:
            raise _invalid(name, raw, why)
    return value


def _coerce(type_: str, raw: object) -> Any:
    if type_ in ("int", "long"):
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise TypeError(f"not an {type_}")
        v = int(str(raw).strip())
        bound = INT32_MAX if type_ == "int" else INT64_MAX
        if not -bound - 1 <= v <= bound:
            raise ValueError(f"out of range for {type_}")
        return v
    if type_ == "double":
        return float(str(raw).strip())
    if type_ == "boolean":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s not in ("true", "false"):
            raise ValueError("expected true or false")
        return s == "true"
    if type_ == "list":
        if isinstance(raw, list | tuple):
            return tuple(str(p).strip() for p in raw)
        return tuple(p.strip() for p in str(raw).split(",") if p.strip())
    if raw is None:
        raise TypeError("null")
    return str(raw).strip() if type_ == "string" else str(raw)


def format_value(key: ConfigKey, value: Any) -> str:
    """The wire/string form of a typed value (Kafka's formatting)."""
    if key.type == "boolean":
        return "true" if value else "false"
    if key.type == "list":
        return ",".join(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class ConfigValue:
    """One DescribeConfigs entry: the effective value and where it came from."""

    name: str
    value: str
    source: ConfigSource
    synonyms: tuple[tuple[str, str, ConfigSource], ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


def _candidates(
    key: ConfigKey,
    topic: Mapping[str, object],
    dynamic_broker: Mapping[str, object],
    static_broker: Mapping[str, object],
    dynamic_default: Mapping[str, object] | None = None,
) -> list[tuple[str, Any, ConfigSource]]:
    """Every place ``key`` is set, highest priority first, as (name, typed value, source)."""
    out: list[tuple[str, Any, ConfigSource]] = []
    if topic.get(key.name) is not None:
        out.append((key.name, parse_value(key, topic[key.name]), ConfigSource.TOPIC_CONFIG))
    for layer, source in (
        (dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dynamic_default or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static_broker, ConfigSource.STATIC_BROKER_CONFIG),
    ):
        for syn in key.synonyms:
            raw = layer.get(syn.name)
            if raw is not None:
                v = parse_value(key, raw, syn.name)
                if syn.scale != 1 and isinstance(v, int):
                    v = v * syn.scale if v >= 0 else v
                out.append((syn.name, v, source))
    return out


def resolve(
    name: str,
    topic: Mapping[str, object] | None = None,
    dynamic_broker: Mapping[str, object] | None = None,
    static_broker: Mapping[str, object] | None = None,
    dynamic_default: Mapping[str, object] | None = None,
) -> ConfigValue:
    """The effective value of topic key ``name`` and its synonyms (for DescribeConfigs).

    Layers: ``topic`` overrides, ``dynamic_broker`` (this broker's dynamic values,
    DYNAMIC_BROKER_CONFIG), ``dynamic_default`` (the cluster-wide dynamic default,
    DYNAMIC_DEFAULT_BROKER_CONFIG), ``static_broker`` (its properties), then the default.
    """
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise KafkaError(Errors.INVALID_CONFIG, f"unknown topic config {name}")
    cands = _candidates(
        key, topic or {}, dynamic_broker or {}, static_broker or {}, dynamic_default
    )
    syns = tuple((n, format_value(key, v), s) for n, v, s in cands)
    if cands:
        n, v, s = cands[0]
        return ConfigValue(name, format_value(key, v), s, syns)
    return ConfigValue(name, format_value(key, key.default), ConfigSource.DEFAULT_CONFIG, syns)


def describe_topic_configs(
    topic: Mapping[str, object] | None = None,
    dynamic_broker: Mapping[str, object] | None = None,
    static_broker: Mapping[str, object] | None = None,
    dynamic_default: Mapping[str, object] | None = None,
) -> list[ConfigValue]:
    """Every topic key, sorted by name, with its effective value and source."""
    return [
        resolve(n, topic, dynamic_broker, static_broker, dynamic_default)
        for n in sorted(TOPIC_CONFIGS)
    ]


def validate_topic_overrides(overrides: Mapping[str, object | None]) -> dict[str, str | None]:
    """Check topic overrides (None = delete); return them normalized to strings."""
    out: dict[str, str | None] = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise KafkaError(Errors.INVALID_CONFIG, f"unknown topic config {name}")
        out[name] = None if raw is None else format_value(key, parse_value(key, raw))
    return out


def validate_broker_overrides(overrides: Mapping[str, object | None]) -> dict[str, str | None]:
    """Check broker-level keys this layer knows (synonyms and BROKER_CONFIGS)."""
    out: dict[str, str | None] = {}
    for name, raw in overrides.items():
        if name in BROKER_SYNONYM_OF:
            key = TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]]
        elif name in BROKER_CONFIGS:
            key = BROKER_CONFIGS[name]
        else:
            raise KafkaError(Errors.INVALID_CONFIG, f"unknown broker config {name}")
        out[name] = None if raw is None else format_value(key, parse_value(key, raw, name))
    return out


def broker_setting(name: str, props: Mapping[str, object] | None = None) -> Any:
    """A typed broker-only setting (``num.partitions``...) from ``props`` or its default."""
    key = BROKER_CONFIGS[name]
    raw = (props or {}).get(name)
    return key.default if raw is None else parse_value(key, raw)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one partition log (immutable; swap to change)."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False

    @classmethod
    def from_props(
        cls,
        topic: Mapping[str, object] | None = None,
        broker: Mapping[str, object] | None = None,
        dynamic_broker: Mapping[str, object] | None = None,
        dynamic_default: Mapping[str, object] | None = None,
    ) -> LogConfig:
        """Resolve every key: topic overrides, then broker values (dynamic per-broker,
        dynamic cluster default, static), then defaults."""
        topic = topic or {}
        unknown = set(topic) - TOPIC_CONFIGS.keys()
        if unknown:
            raise KafkaError(Errors.INVALID_CONFIG, f"unknown topic configs {sorted(unknown)}")
        values = {}
        for key in TOPIC_CONFIGS.values():
            cands = _candidates(key, topic, dynamic_broker or {}, broker or {}, dynamic_default)
            values[key.attr] = cands[0][1] if cands else key.default
        cfg = cls(**values)
        if cfg.min_compaction_lag_ms > cfg.max_compaction_lag_ms:
            raise KafkaError(
                Errors.INVALID_CONFIG, "min.compaction.lag.ms exceeds max.compaction.lag.ms"
            )
        return cfg

    def with_overrides(self, **changes: Any) -> LogConfig:
        """A copy with some fields changed (attribute names), e.g. in tests."""
        return dataclasses.replace(self, **changes)

    def to_props(self) -> dict[str, str]:
        """Every key with its value as a string (Kafka's names)."""
        return {
            k.name: format_value(k, getattr(self, k.attr)) for k in TOPIC_CONFIGS.values()
        }

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How long a segment may stay active: segment.ms, or max.compaction.lag.ms when
        smaller on a compacted log (so the cleaner gets its records in time; KIP-354)."""
        if self.compact_enabled and self.max_compaction_lag_ms < self.segment_ms:
            return self.max_compaction_lag_ms
        return self.segment_ms

    @property
    def uses_log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
