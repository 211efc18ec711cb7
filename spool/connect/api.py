"""The plugin API: what a connector, converter or transformation implements.

Kafka Connect's Java API in Python, with Kafka's names. A plugin is a class registered
under the entry-point group ``spool.connect.plugins`` (``plugins.py`` discovers them);
its entry-point name is the class name users write in ``connector.class``,
``key.converter`` or ``transforms.<t>.type``: Kafka's and Debezium's fully qualified
names where Spool ships an equivalent (``io.debezium.connector.postgresql.PostgresConnector``),
so existing configurations work unchanged. ``plugins.py`` also accepts the simple class
name and the alias without ``Connector``, as Kafka does.

**Connectors** (``SourceConnector``, ``SinkConnector``) are configured, then split their
work: ``start(props)``, ``task_class()``, ``task_configs(max_tasks)`` (at most
``max_tasks`` dicts, one per task), ``stop()``, ``config_def()`` (what
``/config/validate`` reports), ``validate(props)`` (ConfigDef's validation plus the
connector's own; the REST layer turns it into Kafka's ConfigInfos), ``version()``. A
connector may call ``context.request_task_reconfiguration()`` when its work changes.
Exactly-once sources (KIP-618) may answer ``exactly_once_support(props)`` and
``can_define_transaction_boundaries(props)``.

**Tasks** do the copying, each on a thread of its own:

- ``SourceTask``: ``start(props)``; ``poll()`` returns a list of ``SourceRecord`` (empty
  when there is nothing now; it may block briefly, up to about a second, and must return
  when ``stop()`` is called from another thread); ``commit()`` is called after the
  offsets of what was polled so far are written; ``commit_record(record, metadata)``
  after each record is acknowledged (``metadata`` is None when the record was filtered
  out by a transformation). ``context.offset_storage_reader.offset(partition)`` reads
  the last committed offset of a source partition (a dict) or None.
- ``SinkTask``: ``start(props)``; ``put(records)`` with a list of ``SinkRecord``;
  ``flush(offsets)`` / ``pre_commit(offsets)`` where ``offsets`` maps ``(topic,
  partition)`` to the next offset to consume: ``pre_commit`` returns the offsets that
  are safe to commit (by default it calls ``flush`` and returns ``offsets``); ``open``
  / ``close`` with the partitions assigned or revoked; ``context`` can ``offset()`` (rewind
  to offsets), ``pause``/``resume`` partitions, ``request_commit()``, and ``timeout(ms)``
  after a ``RetriableError`` to have ``put`` called again with the same records.

Raise ``RetriableError`` for a failure worth retrying, ``ConnectError`` for one that
fails the task (its status becomes FAILED with the trace), ``DataError`` (from
``data``) for a record that cannot be converted (``errors.tolerance`` applies).

**Converters** (``Converter``) turn Connect data into bytes and back:
``configure(props, is_key)``, ``from_connect_data(topic, headers, schema, value) ->
bytes | None`` and ``to_connect_data(topic, headers, data) -> (schema, value)``.
``HeaderConverter`` does the same for one header's value.

**Transformations** (single message transforms) ``configure(props)``, then ``apply(record)``
returns a new record or None to drop it; ``config_def()``; ``close()``. A **Predicate**
``configure(props)`` and ``test(record) -> bool``; a transformation's ``predicate`` and
``negate`` keys are applied by the runtime, not by the transformation.

**ConfigDef**: ``ConfigDef().define(name, type, default=REQUIRED, importance, doc,
validator=None, group=None, display_name=None)``; types are Kafka's (``BOOLEAN``,
``STRING``, ``INT``, ``SHORT``, ``LONG``, ``DOUBLE``, ``LIST``, ``CLASS``, ``PASSWORD``).
``parse(props)`` returns the typed values or raises ``ConfigError`` naming every bad key;
``validate(props)`` returns a ``ConfigValue`` per key (name, value, recommended values,
errors) without raising: what ``/config/validate`` reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from spool.connect.data import DataError, Schema

__all__ = ["ConnectError", "RetriableError", "DataError", "ConfigError", "ConfigDef",
           "ConfigKey", "ConfigValue", "REQUIRED", "Header", "ConnectRecord", "SourceRecord",
           "SinkRecord", "RecordMetadata", "Connector", "SourceConnector", "SinkConnector",
           "Task", "SourceTask", "SinkTask", "Converter", "HeaderConverter",
           "Transformation", "Predicate", "ConnectorContext", "SourceTaskContext",
           "SinkTaskContext", "OffsetStorageReader", "ExactlyOnceSupport"]


# ---- errors

class ConnectError(Exception):
    """Kafka Connect's ConnectException: the task or connector fails."""


class RetriableError(ConnectError):
    """Kafka Connect's RetriableException: the same operation may succeed if retried."""


class ConfigError(ConnectError):
    """A configuration refused: ``errors`` maps each bad key to its messages."""

    def __init__(self, errors: dict[str, list[str]] | str) -> None:
        self.errors = {"": [errors]} if isinstance(errors, str) else errors
        super().__init__("; ".join(f"{k}: {m}" if k else m
                                   for k, ms in self.errors.items() for m in ms))


# ---- configuration definitions

class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")
HIGH, MEDIUM, LOW = "HIGH", "MEDIUM", "LOW"
_INT_BOUNDS = {INT: 1 << 31, SHORT: 1 << 15, LONG: 1 << 63}


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any = REQUIRED
    importance: str = MEDIUM
    doc: str = ""
    validator: Callable[[str, Any], None] | None = None  # raises ConfigError
    group: str | None = None
    order: int = -1
    display_name: str | None = None
    recommended: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass
class ConfigValue:
    """One key's result of validation, as Kafka's ConfigValue (``/config/validate``)."""

    name: str
    value: Any = None
    recommended_values: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """``raw`` (a properties string, or already typed) as ``key``'s type; ConfigError."""
    t = key.type
    try:
        if raw is None:
            return None
        if t == BOOLEAN:
            if isinstance(raw, bool):
                return raw
            s = str(raw).strip().lower()
            if s not in ("true", "false"):
                raise ValueError
            return s == "true"
        if t in (INT, SHORT, LONG):
            if isinstance(raw, bool):
                raise ValueError
            v = int(str(raw).strip()) if not isinstance(raw, int) else raw
            bound = _INT_BOUNDS[t]
            if not -bound <= v < bound:
                raise ValueError
            return v
        if t == DOUBLE:
            return float(str(raw).strip()) if not isinstance(raw, (int, float)) else float(raw)
        if t == LIST:
            if isinstance(raw, (list, tuple)):
                return [str(x) for x in raw]
            s = str(raw).strip()
            return [x.strip() for x in s.split(",")] if s else []
        return str(raw).strip() if t in (CLASS,) else str(raw)
    except ValueError:
        raise ConfigError({key.name: [f"Invalid value {raw} for configuration {key.name}: "
                                      f"Not a number of type {t}" if t in _INT_BOUNDS or t == DOUBLE
                                      else f"Invalid value {raw} for configuration {key.name}: "
                                      f"Expected value to be of type {t}"]}) from None


class ConfigDef:
    """A connector's or transformation's configuration keys (module doc)."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self.keys: dict[str, ConfigKey] = {k.name: k for k in keys}

    def define(self, name: str, type: str, default: Any = REQUIRED, importance: str = MEDIUM,
               doc: str = "", **kw: Any) -> ConfigDef:
        self.keys[name] = ConfigKey(name, type, default, importance, doc, **kw)
        return self

    def merged(self, other: ConfigDef) -> ConfigDef:
        return ConfigDef([*self.keys.values(), *other.keys.values()])

    def validate(self, props: dict[str, Any]) -> dict[str, ConfigValue]:
        out: dict[str, ConfigValue] = {}
        for name, key in self.keys.items():
            cv = ConfigValue(name, recommended_values=list(key.recommended))
            raw = props.get(name)
            if raw is None:
                if key.required:
                    cv.errors.append(f"Missing required configuration \"{name}\" which has "
                                     "no default value.")
                else:
                    cv.value = key.default
            else:
                try:
                    cv.value = parse_value(key, raw)
                    if key.validator is not None:
                        key.validator(name, cv.value)
                except ConfigError as e:
                    cv.errors.extend(m for ms in e.errors.values() for m in ms)
            out[name] = cv
        return out

    def parse(self, props: dict[str, Any]) -> dict[str, Any]:
        values = self.validate(props)
        errors = {n: v.errors for n, v in values.items() if v.errors}
        if errors:
            raise ConfigError(errors)
        return {n: v.value for n, v in values.items()}


def in_values(*allowed: str, case_insensitive: bool = True) -> Callable[[str, Any], None]:
    """A validator: the value is one of ``allowed`` (Kafka's ValidString)."""
    def check(name: str, value: Any) -> None:
        vs = [value] if not isinstance(value, list) else value
        for v in vs:
            ok = (str(v).lower() in (a.lower() for a in allowed)) if case_insensitive \
                else v in allowed
            if not ok:
                raise ConfigError({name: [f"Invalid value {v} for configuration {name}: "
                                          f"String must be one of: {', '.join(allowed)}"]})
    return check


def at_least(low: float) -> Callable[[str, Any], None]:
    """A validator: the number is at least ``low`` (Kafka's Range.atLeast)."""
    def check(name: str, value: Any) -> None:
        if value is not None and value < low:
            raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      f"Value must be at least {low}"]})
    return check


def regex(name: str, value: Any) -> None:
    """A validator: the value compiles as a regular expression."""
    try:
        re.compile(value)
    except re.error as e:
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: {e}"]}) \
            from None


# ---- records

@dataclass(frozen=True)
class Header:
    key: str
    schema: Schema | None
    value: Any


@dataclass(frozen=True)
class ConnectRecord:
    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None  # ms since the epoch
    headers: tuple[Header, ...] = ()

    def new_record(self, **changes: Any) -> ConnectRecord:
        """A copy with ``changes`` (Kafka's ``newRecord``): what transformations return."""
        return replace(self, **changes)


@dataclass(frozen=True)
class SourceRecord(ConnectRecord):
    source_partition: dict[str, Any] | None = None
    source_offset: dict[str, Any] | None = None


@dataclass(frozen=True)
class SinkRecord(ConnectRecord):
    kafka_offset: int = -1
    timestamp_type: str = "CreateTime"  # NoTimestampType, CreateTime, LogAppendTime
    original_topic: str | None = None  # before transformations (KIP-793)
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int | None = None


# ---- contexts (the runtime implements them)

class OffsetStorageReader:
    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        raise NotImplementedError

    def offsets(self, partitions: Iterable[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
        return {_freeze(p): o for p in partitions if (o := self.offset(p)) is not None}


def _freeze(d: dict[str, Any]) -> tuple:
    return tuple(sorted(d.items()))


class ConnectorContext:
    def request_task_reconfiguration(self) -> None:
        raise NotImplementedError

    def raise_error(self, error: Exception) -> None:
        """Fail the connector (its status FAILED with ``error``'s trace)."""
        raise NotImplementedError


class SourceTaskContext:
    offset_storage_reader: OffsetStorageReader
    configs: dict[str, str]


class SinkTaskContext:
    configs: dict[str, str]

    def offset(self, offsets: dict[tuple[str, int], int]) -> None:
        """Rewind (or skip) the consumer to these next offsets before the next ``put``."""
        raise NotImplementedError

    def timeout(self, ms: int) -> None:
        raise NotImplementedError

    def assignment(self) -> set[tuple[str, int]]:
        raise NotImplementedError

    def pause(self, *partitions: tuple[str, int]) -> None:
        raise NotImplementedError

    def resume(self, *partitions: tuple[str, int]) -> None:
        raise NotImplementedError

    def request_commit(self) -> None:
        raise NotImplementedError


# ---- connectors and tasks

class ExactlyOnceSupport:
    SUPPORTED, UNSUPPORTED = "SUPPORTED", "UNSUPPORTED"


class Connector:
    """Base of both kinds; ``kind`` is ``"source"`` or ``"sink"`` (``/connector-plugins``)."""

    kind: ClassVar[str] = ""
    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def version(self) -> str:
        from spool import __version__
        return __version__

    def start(self, props: dict[str, str]) -> None:
        raise NotImplementedError

    def task_class(self) -> type[Task]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        """Each of ``config_def()``'s keys validated; a connector adds its own checks."""
        return self.config_def().validate(props)


class SourceConnector(Connector):
    kind = "source"

    def exactly_once_support(self, props: dict[str, str]) -> str | None:
        return None  # unknown: the worker refuses it only where exactly.once.support=required

    def can_define_transaction_boundaries(self, props: dict[str, str]) -> bool:
        return False


class SinkConnector(Connector):
    kind = "sink"


class Task:
    def version(self) -> str:
        from spool import __version__
        return __version__

    def start(self, props: dict[str, str]) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    def poll(self) -> list[SourceRecord]:
        raise NotImplementedError

    def commit(self) -> None:
        pass

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        pass


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def put(self, records: list[SinkRecord]) -> None:
        raise NotImplementedError

    def flush(self, offsets: dict[tuple[str, int], int]) -> None:
        pass

    def pre_commit(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        self.flush(offsets)
        return offsets

    def open(self, partitions: list[tuple[str, int]]) -> None:
        pass

    def close(self, partitions: list[tuple[str, int]]) -> None:
        pass


# ---- converters, transformations, predicates

class Converter:
    def configure(self, props: dict[str, Any], is_key: bool) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def from_connect_data(self, topic: str, headers: tuple[Header, ...] | None,
                          schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_data(self, topic: str, headers: tuple[Header, ...] | None,
                        data: bytes | None) -> tuple[Schema | None, Any]:
        raise NotImplementedError


class HeaderConverter:
    def configure(self, props: dict[str, Any]) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_header(self, topic: str, key: str,
                          data: bytes | None) -> tuple[Schema | None, Any]:
        raise NotImplementedError


class Transformation:
    def configure(self, props: dict[str, Any]) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Predicate:
    def configure(self, props: dict[str, Any]) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def test(self, record: ConnectRecord) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        pass
