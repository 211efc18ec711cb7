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
``KafkaError(INVALID_CONFIG)`` whose message names the key, the value and what
is allowed (``segment.bytes=14: expected an integer >= 1048576``), never
Python's own wording; an unknown key gets a "did you mean" hint when one is
close. Constraints are Kafka 4's ``ConfigDef`` validators (``segment.bytes``
>= 1 MiB...) and ``LogConfig`` refuses values outside them even when built
directly. ``internal.segment.bytes`` (Kafka 4's internal key, test-only)
overrides ``segment.bytes`` below that minimum; DescribeConfigs never lists it
(and the broker accepts it from clients only when ``internal.segment.bytes.enable``).
Values travel as strings, like on the wire.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping
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
class Check:
    """A constraint on a parsed value, and how to say what it allows.

    ``allowed`` completes "expected an integer ..." (``>= 1``) or, when
    ``replaces_type`` (a set of choices), is the whole phrase (``one of a, b``).
    """

    allowed: str
    ok: Callable[[Any], bool]
    replaces_type: bool = False


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One configuration key: type, default, constraint, broker synonyms, documentation.

    ``internal`` keys (Kafka's ``defineInternal``) are accepted but never listed by
    DescribeConfigs: ``internal.segment.bytes`` is a test-only seam.

    ``dynamic`` is a broker key's update mode in Kafka 4.2 (its ``DynamicBrokerConfig``):
    "" (read-only: a restart is needed), ``per-broker`` (AlterConfigs on a broker id
    only) or ``cluster-wide`` (also on the cluster default, the empty name).
    ``applied``: Spool acts on a dynamic change while it runs (else it stores and
    reports the value, and says in its log that it does not act on it).
    """

    name: str
    type: str  # int, short, long, double, boolean, string, list
    default: Any
    synonyms: tuple[Synonym, ...] = ()
    check: Check | None = None
    doc: str = ""
    internal: bool = False
    dynamic: str = ""
    applied: bool = False

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")

    def expected(self) -> str:
        """What a valid value looks like, e.g. ``an integer >= 1``."""
        if self.check is not None and self.check.replaces_type:
            return self.check.allowed
        phrase = _TYPE_PHRASES.get(self.type, "a string")
        return f"{phrase} {self.check.allowed}" if self.check is not None else phrase


_TYPE_PHRASES = {
    "int": "an integer", "short": "an integer", "long": "an integer", "double": "a number",
    "boolean": "true or false", "list": "a comma-separated list", "string": "a string",
}
_INT_BOUNDS = {"short": 2**15 - 1, "int": INT32_MAX, "long": INT64_MAX}


def at_least(n: int | float) -> Check:
    return Check(f">= {n}", lambda v: v >= n)


def between(lo: int | float, hi: int | float) -> Check:
    return Check(f"between {lo} and {hi}", lambda v: lo <= v <= hi)


def one_of(*choices: str) -> Check:
    return Check(f"one of {', '.join(choices)}", lambda v: v in choices, replaces_type=True)


def list_of(*choices: str) -> Check:
    """A list whose items are all in ``choices``; empty is allowed (Kafka's
    ``ValidList.in``)."""
    return Check(f"a comma-separated list of {', '.join(choices)}",
                 lambda v: all(p in choices for p in v), replaces_type=True)


def _gzip_level() -> Check:  # Kafka's GzipCompression level validator
    return Check("-1 or between 1 and 9", lambda v: v == -1 or 1 <= v <= 9)


def _log(name: str, scale: int = 1) -> Synonym:
    return Synonym("log." + name, scale)


MIB = 1024 * 1024
_K = ConfigKey
PER_BROKER, CLUSTER_WIDE = "per-broker", "cluster-wide"  # ConfigKey.dynamic
TOPIC_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        # Empty (Kafka 4.2, KIP-1161): neither delete nor compact, records are kept forever.
        _K("cleanup.policy", "list", ("delete",), (_log("cleanup.policy"),),
           list_of("compact", "delete")),
        # Kafka recompresses batches to a topic's codec; Spool keeps each batch as its
        # producer compressed it, so "producer" is the one value it can honour.
        _K("compression.type", "string", "producer", (Synonym("compression.type"),),
           Check("producer (Spool keeps each batch as its producer compressed it; it does "
                 "not recompress)", lambda v: v == "producer", True)),
        _K("compression.gzip.level", "int", -1, (Synonym("compression.gzip.level"),), _gzip_level()),
        _K("compression.lz4.level", "int", 9, (Synonym("compression.lz4.level"),),
           between(1, 17)),
        _K("compression.zstd.level", "int", 3, (Synonym("compression.zstd.level"),),
           between(-131072, 22)),
        _K("delete.retention.ms", "long", 86_400_000,
           (Synonym("log.cleaner.delete.retention.ms"),), at_least(0)),
        _K("file.delete.delay.ms", "long", 60_000, (_log("segment.delete.delay.ms"),),
           at_least(0)),
        _K("flush.messages", "long", LONG_MAX, (_log("flush.interval.messages"),), at_least(1)),
        _K("flush.ms", "long", LONG_MAX,
           (_log("flush.interval.ms"), _log("flush.scheduler.interval.ms")), at_least(0)),
        _K("follower.replication.throttled.replicas", "list", ()),
        _K("index.interval.bytes", "int", 4096, (_log("index.interval.bytes"),), at_least(0)),
        _K("leader.replication.throttled.replicas", "list", ()),
        _K("local.retention.bytes", "long", -2, (_log("local.retention.bytes"),), at_least(-2)),
        _K("local.retention.ms", "long", -2, (_log("local.retention.ms"),), at_least(-2)),
        _K("max.compaction.lag.ms", "long", LONG_MAX,
           (Synonym("log.cleaner.max.compaction.lag.ms"),), at_least(1)),
        _K("max.message.bytes", "int", 1_048_588, (Synonym("message.max.bytes"),),
           at_least(0)),
        _K("message.timestamp.after.max.ms", "long", LONG_MAX,
           (_log("message.timestamp.after.max.ms"),), at_least(0)),
        _K("message.timestamp.before.max.ms", "long", LONG_MAX,
           (_log("message.timestamp.before.max.ms"),), at_least(0)),
        _K("message.timestamp.type", "string", "CreateTime",
           (_log("message.timestamp.type"),), one_of("CreateTime", "LogAppendTime")),
        _K("min.cleanable.dirty.ratio", "double", 0.5,
           (Synonym("log.cleaner.min.cleanable.ratio"),), between(0, 1)),
        _K("min.compaction.lag.ms", "long", 0, (Synonym("log.cleaner.min.compaction.lag.ms"),),
           at_least(0)),
        _K("min.insync.replicas", "int", 1, (Synonym("min.insync.replicas"),), at_least(1)),
        _K("preallocate", "boolean", False, (_log("preallocate"),)),
        # Kafka refuses it when the broker has no remote log storage: neither has Spool.
        _K("remote.storage.enable", "boolean", False, (),
           Check("false (Spool has no tiered storage)", lambda v: v is False, True)),
        _K("retention.bytes", "long", -1, (_log("retention.bytes"),)),
        _K("retention.ms", "long", 604_800_000,
           (_log("retention.ms"), _log("retention.minutes", MINUTES),
            _log("retention.hours", HOURS)), at_least(-1)),
        # Kafka 4's minimum; tests that need tiny segments use internal.segment.bytes.
        _K("segment.bytes", "int", 1_073_741_824, (_log("segment.bytes"),), at_least(MIB)),
        _K("segment.index.bytes", "int", 10_485_760, (_log("index.size.max.bytes"),),
           at_least(4)),
        _K("segment.jitter.ms", "long", 0,
           (_log("roll.jitter.ms"), _log("roll.jitter.hours", HOURS)), at_least(0)),
        _K("segment.ms", "long", 604_800_000,
           (_log("roll.ms"), _log("roll.hours", HOURS)), at_least(1)),
        _K("unclean.leader.election.enable", "boolean", False,
           (Synonym("unclean.leader.election.enable"),)),
        # Kafka 4's LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG: overrides segment.bytes below
        # its 1 MiB minimum. For tests only; never listed by DescribeConfigs.
        _K("internal.segment.bytes", "int", None, (), at_least(14),
           "The maximum size of a single log file. This should be used for testing only.",
           internal=True),
    )
}

# The keys DescribeConfigs lists (and "did you mean" suggests): all but internal ones.
PUBLIC_TOPIC_CONFIGS: dict[str, ConfigKey] = {
    n: k for n, k in TOPIC_CONFIGS.items() if not k.internal
}

# topic key -> the broker key with the highest priority (Kafka's TOPIC_CONFIG_SYNONYMS).
TOPIC_TO_BROKER_KEY: dict[str, str] = {
    k.name: k.synonyms[0].name for k in TOPIC_CONFIGS.values() if k.synonyms
}

# Broker-level keys of the storage layer that have no topic-level equivalent.
BROKER_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _K("num.partitions", "int", 1, check=at_least(1)),
        _K("default.replication.factor", "int", 1, check=at_least(1)),
        _K("auto.create.topics.enable", "boolean", True),
        _K("delete.topic.enable", "boolean", True),
        _K("log.dirs", "list", ()),
        _K("log.dir", "string", "/tmp/kafka-logs"),
        _K("log.retention.check.interval.ms", "long", 300_000, check=at_least(1)),
        _K("log.flush.offset.checkpoint.interval.ms", "int", 60_000, check=at_least(0)),
        _K("log.flush.start.offset.checkpoint.interval.ms", "int", 60_000, check=at_least(0)),
        _K("replica.high.watermark.checkpoint.interval.ms", "long", 5_000, check=at_least(1)),
        # dynamic: read when a log directory is loaded or shut down
        _K("num.recovery.threads.per.data.dir", "int", 2, check=at_least(1),
           dynamic=CLUSTER_WIDE, applied=True),
        _K("log.cleaner.enable", "boolean", True),
        _K("log.cleaner.backoff.ms", "long", 15_000, check=at_least(0),
           dynamic=CLUSTER_WIDE, applied=True),
        _K("log.cleaner.dedupe.buffer.size", "long", 134_217_728, check=at_least(24),
           dynamic=CLUSTER_WIDE, applied=True),
        _K("log.cleaner.io.buffer.load.factor", "double", 0.9, check=between(0, 1),
           dynamic=CLUSTER_WIDE, applied=True),
        _K("log.cleaner.io.buffer.size", "int", 524_288, check=at_least(0),
           dynamic=CLUSTER_WIDE),
        _K("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308,
           dynamic=CLUSTER_WIDE),
        # the cleaner thread starts at start-up when this is >= 1; a change waits for a restart
        _K("log.cleaner.threads", "int", 1, check=at_least(0), dynamic=CLUSTER_WIDE),
    )
}

# Kafka's DynamicLogConfig: the first synonym of each topic key is a cluster-wide dynamic
# broker key (log.retention.ms, not log.retention.hours), applied to every log at once.
DYNAMIC_TOPIC_DEFAULTS: frozenset[str] = frozenset(TOPIC_TO_BROKER_KEY.values())

# Every broker key that feeds a topic key, with how: broker key -> (topic key, scale).
BROKER_SYNONYM_OF: dict[str, tuple[str, int]] = {
    s.name: (k.name, s.scale) for k in TOPIC_CONFIGS.values() for s in k.synonyms
}


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _shown(raw: object) -> str:
    text = "null" if raw is None else str(raw)
    return text if len(text) <= 100 else text[:100] + "..."


def invalid_value(key: ConfigKey, raw: object, name: str | None = None) -> KafkaError:
    """INVALID_CONFIG naming the key, the value and what is allowed:
    ``num.partitions=abc: expected an integer >= 1``."""
    expected = key.expected()
    bound = _INT_BOUNDS.get(key.type)
    text = str(raw).strip() if isinstance(raw, int | str) and not isinstance(raw, bool) else ""
    if bound is not None and _INT_TEXT.fullmatch(text) and not -bound - 1 <= int(text) <= bound:
        expected += f" and at most {bound}"
    return KafkaError(
        Errors.INVALID_CONFIG, f"{name or key.name}={_shown(raw)}: expected {expected}"
    )


def unknown_config(name: str, known: Iterable[str], what: str = "topic config") -> KafkaError:
    """INVALID_CONFIG for a key nobody defines, with a "did you mean" hint when one is close."""
    hint = did_you_mean(name, known)
    return KafkaError(
        Errors.INVALID_CONFIG,
        f"unknown {what} {_shown(name)}" + (f" (did you mean {hint}?)" if hint else ""),
    )


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known keys closest to a misspelt ``name`` (at most 2 edits away, or a quarter
    of its length when longer), as ``'a'`` or ``'a' or 'b'``; None if none is that close."""
    limit = max(2, len(name) // 4)
    scored = [(d, k) for k in known if (d := _edits(name, k, limit)) <= limit]
    if not scored:
        return None
    best = min(d for d, _ in scored)
    return " or ".join(f"'{k}'" for d, k in sorted(scored) if d == best)


def _edits(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (a swap of neighbours is one edit), capped."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def parse_value(key: ConfigKey, raw: object, name: str | None = None) -> Any:
    """Parse a string (or an already typed value) for ``key``; INVALID_CONFIG if bad.

    The message never carries Python's own wording, only the key, the value and
    what the key allows (``invalid_value``).
    """
    value = _coerce(key.type, raw)
    if value is _BAD or (key.check is not None and not key.check.ok(value)):
        raise invalid_value(key, raw, name)
    return value


_BAD = object()


def _coerce(type_: str, raw: object) -> Any:
    """The typed value of ``raw``, or ``_BAD``."""
    if raw is None:
        return _BAD
    if type_ in _INT_BOUNDS:
        if isinstance(raw, bool):
            return _BAD
        if isinstance(raw, int):
            v = raw
        elif isinstance(raw, str) and _INT_TEXT.fullmatch(raw.strip()):
            v = int(raw.strip())
        else:
            return _BAD
        bound = _INT_BOUNDS[type_]
        return v if -bound - 1 <= v <= bound else _BAD
    if type_ == "double":
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            v = float(raw)
        elif isinstance(raw, str) and _DOUBLE_TEXT.fullmatch(raw.strip()):
            v = float(raw.strip())
        else:
            return _BAD
        return v if math.isfinite(v) else _BAD
    if type_ == "boolean":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        return s == "true" if s in ("true", "false") else _BAD
    if type_ == "list":
        if isinstance(raw, list | tuple):
            return tuple(str(p).strip() for p in raw)
        return tuple(p.strip() for p in str(raw).split(",") if p.strip())
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
        raise unknown_config(name, PUBLIC_TOPIC_CONFIGS)
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
    """Every public topic key, sorted by name, with its effective value and source.
    Stored values this version refuses are skipped, as storage skips them."""
    topic, dynamic_broker = _valid_only(topic, "topic"), _valid_only(dynamic_broker, "broker")
    return [
        resolve(n, topic, dynamic_broker, static_broker, dynamic_default)
        for n in sorted(PUBLIC_TOPIC_CONFIGS)
    ]


def _valid_only(
    layer: Mapping[str, object] | None, what: str, problems: list[str] | None = None
) -> dict[str, object]:
    """The values of a stored ``topic`` or dynamic ``broker`` layer this version accepts;
    the message of each one dropped is appended to ``problems``."""
    out: dict[str, object] = {}
    for name, raw in (layer or {}).items():
        if what == "topic":
            key = TOPIC_CONFIGS.get(name)
        elif name in BROKER_SYNONYM_OF:
            key = TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]]
        else:
            key = BROKER_CONFIGS.get(name)
        try:
            if key is None:
                raise unknown_config(name, (), f"{what} config")
            if raw is not None:
                parse_value(key, raw, name)
        except KafkaError as e:
            if problems is not None:
                problems.append(e.message)
            continue
        out[name] = raw
    return out


def validate_topic_overrides(overrides: Mapping[str, object | None]) -> dict[str, str | None]:
    """Check topic overrides (None = delete); return them normalized to strings."""
    out: dict[str, str | None] = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise unknown_config(name, PUBLIC_TOPIC_CONFIGS)
        out[name] = None if raw is None else format_value(key, parse_value(key, raw))
    lo, hi = out.get("min.compaction.lag.ms"), out.get("max.compaction.lag.ms")
    if lo is not None and hi is not None and int(lo) > int(hi):
        raise KafkaError(
            Errors.INVALID_CONFIG, "min.compaction.lag.ms exceeds max.compaction.lag.ms"
        )
    return out


def validate_broker_overrides(overrides: Mapping[str, object | None],
                              others_checked: bool = False) -> dict[str, str | None]:
    """Check broker-level keys this layer knows (synonyms and BROKER_CONFIGS). Any other
    key is INVALID_CONFIG, unless ``others_checked`` (the broker checked them against its
    own table: they are kept as given)."""
    out: dict[str, str | None] = {}
    for name, raw in overrides.items():
        if name in BROKER_SYNONYM_OF:
            key = TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]]
        elif name in BROKER_CONFIGS:
            key = BROKER_CONFIGS[name]
        elif others_checked:
            out[name] = None if raw is None else str(raw)
            continue
        else:
            raise unknown_config(name, [*BROKER_SYNONYM_OF, *BROKER_CONFIGS], "broker config")
        out[name] = None if raw is None else format_value(key, parse_value(key, raw, name))
    return out


def storage_keys(props: Mapping[str, str]) -> dict[str, str]:
    """The broker-level values this layer reads (topic defaults and BROKER_CONFIGS) out of
    a dynamic broker config that holds others too (SSL, SASL, quotas...)."""
    return {k: v for k, v in props.items() if k in BROKER_SYNONYM_OF or k in BROKER_CONFIGS}


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
    internal_segment_bytes: int | None = None  # test-only: overrides segment_bytes

    def __post_init__(self) -> None:
        for key in TOPIC_CONFIGS.values():
            value = getattr(self, key.attr)
            if key.check is not None and value is not None and not key.check.ok(value):
                raise invalid_value(key, format_value(key, value))

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
        for name in topic:
            if name not in TOPIC_CONFIGS:
                raise unknown_config(name, PUBLIC_TOPIC_CONFIGS)
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

    @classmethod
    def from_stored(
        cls,
        topic: Mapping[str, object] | None = None,
        broker: Mapping[str, object] | None = None,
        dynamic_broker: Mapping[str, object] | None = None,
    ) -> tuple[LogConfig, list[str]]:
        """``from_props`` for values read back from the metadata log, which an older Spool
        may have accepted (``segment.bytes=14``): a stored topic or dynamic broker value
        this version refuses is dropped, not fatal. Returns the config and one message
        per dropped value."""
        problems: list[str] = []
        kept_topic = _valid_only(topic, "topic", problems)
        kept_dynamic = _valid_only(dynamic_broker, "broker", problems)
        try:
            cfg = cls.from_props(kept_topic, broker, kept_dynamic)
        except KafkaError as e:  # a cross-key check: fall back to the broker's values
            problems.append(e.message)
            cfg = cls.from_props({}, broker, kept_dynamic)
        return cfg, problems

    def with_overrides(self, **changes: Any) -> LogConfig:
        """A copy with some fields changed (attribute names), e.g. in tests."""
        return dataclasses.replace(self, **changes)

    def to_props(self) -> dict[str, str]:
        """Every key with its value as a string (Kafka's names)."""
        return {
            k.name: format_value(k, getattr(self, k.attr))
            for k in TOPIC_CONFIGS.values()
            if getattr(self, k.attr) is not None
        }

    @property
    def segment_size(self) -> int:
        """Where the active segment rolls: ``internal.segment.bytes`` if set (tests only),
        else ``segment.bytes`` (Kafka's ``LogConfig.segmentSize()``)."""
        if self.internal_segment_bytes is not None:
            return self.internal_segment_bytes
        return self.segment_bytes

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
