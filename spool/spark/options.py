"""Option parsing: Spark's Kafka source/sink option names -> one typed ``SpoolOptions``.

Options arrive from Spark as a case-insensitive dict of strings. The names are
those of Spark's own Kafka connector, so code written for ``format("kafka")``
works by changing only the format string:

* ``kafka.bootstrap.servers`` (or ``bootstrap.servers``) — required;
* exactly one of ``subscribe`` (comma list), ``subscribePattern`` (regex,
  full match, internal ``__`` topics excluded) or ``assign`` (JSON
  ``{"topic": [0, 1]}``) for reading;
* ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topic": {"0": 23, "1": -2}}`` (-2 = earliest, -1 = latest);
* ``startingTimestamp`` / ``startingOffsetsByTimestamp`` and
  ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (ms since the epoch),
  ``startingOffsetsByTimestampStrategy`` (``error`` | ``latest``);
* ``maxOffsetsPerTrigger``, ``minPartitions``, ``failOnDataLoss``,
  ``includeHeaders``, ``kafka.isolation.level``;
* admission control (streaming): ``maxBytesPerTrigger`` (bytes, or Spark's
  byte strings ``512k``, ``64m``, ``1g``: binary units), ``minOffsetsPerTrigger``
  (must not exceed ``maxOffsetsPerTrigger``, as Spark checks) and
  ``maxTriggerDelay`` (Spark's time strings ``30s``, ``15m``, ``100ms``; a bare
  number is milliseconds; default ``15m``): semantics in ``stream_reader.py``;
* sink: ``topic`` (overrides the topic column), ``deliveryGuarantee``
  (``exactly-once`` | ``at-least-once``), ``sinkId``, ``progressTopic``;
* ``valueFormat`` (``json`` | ``avro``) with ``valueSchema`` (a Spark DDL
  string for json, Avro schema JSON for avro) and ``valueSchemaId`` (avro
  writes: Confluent framing), and the same for ``key`` (``keyFormat``,
  ``keySchema``, ``keySchemaId``): typed struct columns (``formats.py``);
  ``schema.registry.url`` (with ``valueSubject``/``keySubject``): avro schemas and
  ids from a schema registry instead (``avro_registry.py``).

Every other ``kafka.<name>`` option is handed to librdkafka as ``<name>``,
except the few Spark also forbids (group.id, auto.offset.reset, ...).
Invalid input raises ``ValueError`` naming the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1

_FORBIDDEN = {
    "group.id",
    "auto.offset.reset",
    "enable.auto.commit",
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "interceptor.classes",
}
_OWN = {"bootstrap.servers", "isolation.level"}


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: a keyword, per-partition offsets, or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    per_partition: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class SpoolOptions:
    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: OffsetSpec | None = None
    ending: OffsetSpec | None = None
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    topic: str | None = None
    delivery_guarantee: str = "exactly-once"
    sink_id: str | None = None
    progress_topic: str = "spool-spark-sink-progress"
    client_conf: dict[str, str] = field(default_factory=dict)
    max_bytes_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    # spool.spark.formats.ColumnFormat of key and/or value (keyFormat, valueFormat): set here
    # for reads; for writes the source sets them, knowing the DataFrame's column types.
    formats: tuple[Any, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether the subscription covers ``topic`` (assign: the listed topics)."""
        if self.assign is not None:
            return topic in self.assign
        if self.pattern is not None:
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return topic in self.subscribe

    def base_conf(self) -> dict[str, Any]:
        """librdkafka settings shared by every client this connector opens."""
        # enable.metrics.push off: librdkafka's KIP-714 telemetry otherwise logs
        # "Telemetry client instance id changed" on every short-lived client (every trigger).
        return {"bootstrap.servers": self.bootstrap, "enable.metrics.push": False,
                **self.client_conf}


def _get(opts: Mapping[str, str], name: str) -> str | None:
    lowered = {k.lower(): v for k, v in opts.items()}
    value = lowered.get(name.lower())
    return None if value is None else str(value)


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(opts, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"option {name} must be true or false, got {raw!r}")


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    raw = _get(opts, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"option {name} must be a positive integer, got {raw!r}")
    return value


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                  "h": 3_600_000, "d": 86_400_000}
_BYTE_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def _duration_ms(opts: Mapping[str, str], name: str, default: int) -> int:
    """Spark's ``timeStringAsMs``: ``<n><unit>`` (us, ms, s, m, min, h, d), bare n = ms."""
    raw = _get(opts, name)
    if raw is None:
        return default
    m = re.fullmatch(r"(\d+)\s*([a-z]*)", raw.strip().lower())
    if m is None or m.group(2) not in ("", *_TIME_UNITS_MS):
        raise ValueError(f"option {name} must be a duration like 30s, 15m or 500ms, got {raw!r}")
    return int(int(m.group(1)) * _TIME_UNITS_MS.get(m.group(2), 1))


def _byte_size(opts: Mapping[str, str], name: str) -> int | None:
    """A positive byte count: ``<n>`` or Spark's ``byteStringAsBytes`` (k, m, g, t: binary)."""
    raw = _get(opts, name)
    if raw is None:
        return None
    m = re.fullmatch(r"(\d+)\s*([a-z]*)", raw.strip().lower())
    if m is None or m.group(2) not in ("", *_BYTE_UNITS) or int(m.group(1)) <= 0:
        raise ValueError(f"option {name} must be a positive size like 1048576, 512k or 64m, "
                         f"got {raw!r}")
    return int(m.group(1)) * _BYTE_UNITS.get(m.group(2), 1)


def _json_offsets(name: str, raw: str) -> dict[str, dict[int, int]]:
    try:
        parsed = json.loads(raw)
        return {
            str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()
        }
    except (ValueError, AttributeError, TypeError):
        raise ValueError(
            f'option {name} must be earliest, latest or JSON like {{"topic": {{"0": 23}}}}, got {raw!r}'
        ) from None


def parse_offset_spec(opts: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """``which`` is "starting" or "ending"; timestamp options win over offset options."""
    by_ts = _get(opts, f"{which}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", _json_offsets(f"{which}OffsetsByTimestamp", by_ts))
    ts = _get(opts, f"{which}Timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise ValueError(f"option {which}Timestamp must be milliseconds, got {ts!r}") from None
    raw = _get(opts, f"{which}Offsets") or default
    if raw.strip().lower() in ("earliest", "latest"):
        return OffsetSpec(raw.strip().lower())
    return OffsetSpec("offsets", _json_offsets(f"{which}Offsets", raw))


def parse_options(opts: Mapping[str, str], *, for_read: bool, streaming: bool = False) -> SpoolOptions:
    bootstrap = _get(opts, "kafka.bootstrap.servers") or _get(opts, "bootstrap.servers")
    if not bootstrap:
        raise ValueError("option kafka.bootstrap.servers is required")
    client_conf: dict[str, str] = {}
    for key, value in opts.items():
        if key.lower().startswith("kafka."):
            name = key[len("kafka.") :].lower()
            if name in _FORBIDDEN:
                raise ValueError(f"option kafka.{name} is not supported: the connector manages it")
            if name not in _OWN:
                client_conf[name] = str(value)
    isolation = (_get(opts, "kafka.isolation.level") or "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ValueError(f"option kafka.isolation.level must be read_uncommitted or read_committed, got {isolation!r}")
    guarantee = (_get(opts, "deliveryGuarantee") or "exactly-once").lower()
    if guarantee not in ("exactly-once", "at-least-once"):
        raise ValueError(f"option deliveryGuarantee must be exactly-once or at-least-once, got {guarantee!r}")
    strategy = (_get(opts, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")

    subscribe: tuple[str, ...] = ()
    pattern = assign = None
    if for_read:
        given = [n for n in ("subscribe", "subscribePattern", "assign") if _get(opts, n)]
        if len(given) != 1:
            raise ValueError("exactly one of the options subscribe, subscribePattern, assign is required")
        if given[0] == "subscribe":
            subscribe = tuple(t.strip() for t in _get(opts, "subscribe").split(",") if t.strip())
        elif given[0] == "subscribePattern":
            pattern = _get(opts, "subscribePattern")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"option subscribePattern is not a valid regex: {exc}") from None
        else:
            try:
                parsed = json.loads(_get(opts, "assign"))
                assign = {str(t): tuple(int(p) for p in ps) for t, ps in parsed.items()}
            except (ValueError, AttributeError, TypeError):
                raise ValueError('option assign must be JSON like {"topic": [0, 1]}') from None

    starting = parse_offset_spec(opts, "starting", "latest" if streaming else "earliest")
    ending = parse_offset_spec(opts, "ending", "latest")
    if streaming and _get(opts, "endingOffsets") is not None:
        raise ValueError("option endingOffsets is not valid for streaming queries")
    if not streaming and starting.kind == "latest":
        raise ValueError("option startingOffsets=latest is not valid for batch queries")
    if not streaming and ending.kind == "earliest":
        raise ValueError("option endingOffsets=earliest is not valid for batch queries")
    max_offsets = _positive_int(opts, "maxOffsetsPerTrigger")
    min_offsets = _positive_int(opts, "minOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise ValueError(f"option minOffsetsPerTrigger ({min_offsets}) is higher than "
                         f"maxOffsetsPerTrigger ({max_offsets})")

    formats: tuple[Any, ...] = ()
    if for_read:
        from spool.spark.formats import parse_column_format

        formats = tuple(
            f for c in ("key", "value") if (f := parse_column_format(opts, c, for_read=True))
        )

    return SpoolOptions(
        bootstrap=bootstrap,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_offsets,
        min_partitions=_positive_int(opts, "minPartitions"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        isolation_level=isolation,
        topic=_get(opts, "topic"),
        delivery_guarantee=guarantee,
        sink_id=_get(opts, "sinkId"),
        progress_topic=_get(opts, "progressTopic") or "spool-spark-sink-progress",
        client_conf=client_conf,
        max_bytes_per_trigger=_byte_size(opts, "maxBytesPerTrigger"),
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60 * 1000),
        formats=formats,
    )
