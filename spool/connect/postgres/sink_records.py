"""What a sink record asks of the table: ``describe(record, settings) -> Change | None``.

A record is one of (the Debezium JDBC sink's reading, ``SinkRecordDescriptor``):

- a **Debezium envelope** (``envelope.is_envelope``: what ``spool.connect.postgres.source``
  writes, value schema ``<prefix>.<schema>.<table>.Envelope``), or,
  schemaless, a dict with ``op`` and ``before``/``after``. ``op`` ``c``/``r``/``u`` write
  ``after``; ``d`` deletes (when ``delete.enabled``, else skipped); ``t`` truncates (when
  ``truncate.enabled``); other ops (``m`` messages) are skipped. A column of ``after``
  holding Debezium's ``__debezium_unavailable_value`` (an unchanged TOASTed value under
  REPLICA IDENTITY DEFAULT) is left out of the write, so the row keeps its value.
- a **tombstone** (value None): a delete by the record's key when ``delete.enabled``,
  else skipped. (Debezium's sink skips the tombstone that follows a ``d`` event and deletes
  on a flattened record's null value; deleting again is a no-op, so both work here, and a
  flattened topic's tombstones delete even when the converter dropped the value schema.)
- a **flattened** record (``ExtractNewRecordState``'s output or any struct): its fields
  are the row. Without a schema (JSON with ``schemas.enable=false``) a dict's keys are the
  columns, typed from the values when a table is created (Debezium's sink needs schemas;
  logical types then arrive as their JSON forms: a Decimal as base64 text, a date as an
  int).
- a schema-change event (value schema name containing ``SchemaChangeValue``): DataError.

The row's primary key comes from ``primary.key.mode``: ``none``; ``kafka`` (columns
``__connect_topic``, ``__connect_partition``, ``__connect_offset``); ``record_key`` (the
key struct's fields, ``primary.key.fields`` selecting some; a primitive key needs one name
in ``primary.key.fields``); ``record_value`` (the row's fields named in
``primary.key.fields``, all when empty); ``record_header`` (the headers'). Key columns
come first, then the row's other fields. ``field.include.list`` / ``field.exclude.list``
(``<topic>:<field>`` entries, exact names, as Debezium's) keep or drop fields of both. ``Change.offset`` is the record's original
(before transformations) topic, partition and offset.

The table is ``table.name.format`` with ``${topic}`` replaced by the topic with dots as
underscores, and ``${source.<field>}`` by the envelope's source field (a tombstone cannot
name such a table: skipped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from spool.connect import data
from spool.connect.api import ConnectError, SinkRecord
from spool.connect.data import DataError, Schema
from spool.connect.postgres.envelope import is_envelope
from spool.connect.postgres.sink_sql import TableId

UNAVAILABLE = "__debezium_unavailable_value"  # an unchanged TOASTed value (Debezium's)
UNAVAILABLE_BYTES = UNAVAILABLE.encode()
KAFKA_KEY = (("__connect_topic", data.STRING), ("__connect_partition", data.INT32),
             ("__connect_offset", data.INT64))
_SOURCE_PLACEHOLDER = re.compile(r"\$\{source\.(.*?)}")

Column = tuple[str, Schema | None, Any]  # name, schema (None: schemaless), value


@dataclass(frozen=True)
class Settings:
    table_name_format: str = "${topic}"
    primary_key_mode: str = "none"
    primary_key_fields: tuple[str, ...] = ()
    delete_enabled: bool = False
    truncate_enabled: bool = False
    lower: bool = True  # quote.identifiers=false
    field_list: frozenset[tuple[str, str]] = frozenset()  # (topic, field) entries
    field_list_includes: bool = False  # field.include.list (else field.exclude.list)

    def keeps(self, topic: str, name: str) -> bool:
        """``field.include.list``/``field.exclude.list`` (``<topic>:<field>``, exact names)."""
        if not self.field_list:
            return True
        return ((topic, name) in self.field_list) == self.field_list_includes


@dataclass
class Change:
    table: TableId
    kind: str  # "write" | "delete" | "truncate"
    keys: list[Column] = field(default_factory=list)
    values: list[Column] = field(default_factory=list)
    offset: tuple[str, int, int] = ("", 0, -1)


def original_offset(r: SinkRecord) -> tuple[str, int, int]:
    return (r.original_topic or r.topic,
            r.original_kafka_partition if r.original_kafka_partition is not None
            else (r.kafka_partition or 0),
            r.original_kafka_offset if r.original_kafka_offset is not None else r.kafka_offset)


def _is_envelope(schema: Schema | None, value: Any) -> bool:
    if schema is not None:
        return is_envelope(schema)
    return isinstance(value, dict) and "op" in value and ("after" in value or "before" in value)


def _fields(schema: Schema | None, value: Any, what: str) -> list[Column]:
    """A struct's (or a schemaless dict's) fields as columns."""
    if schema is not None:
        if schema.type != "struct":
            raise ConnectError(f"An unsupported {what} schema type detected: {schema.type}")
        return [(f.name, f.schema, value.get(f.name) if value is not None else None)
                for f in schema.fields]
    if not isinstance(value, dict):
        raise ConnectError(f"The {what} is neither a struct nor a map: {type(value).__name__}")
    return [(k, None, v) for k, v in value.items()]


def table_name(record: SinkRecord, s: Settings, envelope: dict | None) -> str | None:
    name = s.table_name_format.replace("${topic}", record.topic.replace(".", "_"))
    if "${source." in name:
        if envelope is None or not isinstance(envelope.get("source"), dict):
            return None
        source = envelope["source"]
        name = _SOURCE_PLACEHOLDER.sub(lambda m: str(source.get(m.group(1), "")), name)
    return name


def _key_columns(record: SinkRecord, s: Settings, row: list[Column]) -> list[Column]:
    mode, wanted = s.primary_key_mode, s.primary_key_fields
    if mode == "none":
        return []
    if mode == "kafka":
        topic, partition, offset = original_offset(record)
        return [(n, sch, v) for (n, sch), v in zip(KAFKA_KEY, (topic, partition, offset),
                                                    strict=True)]
    if mode == "record_key":
        if record.key is None:
            raise ConnectError("Configured primary key mode 'record_key' cannot have null "
                               f"key (topic {record.topic}, offset {record.kafka_offset})")
        ks = record.key_schema
        if (ks is not None and ks.type != "struct") or (ks is None
                                                         and not isinstance(record.key, dict)):
            if not wanted:
                raise ConnectError("The primary.key.fields configuration must be specified "
                                   "when using a primitive key.")
            return [(wanted[0], ks, record.key)]
        cols = _fields(ks, record.key, "record key")
    elif mode == "record_value":
        cols = row
    elif mode == "record_header":
        if not record.headers:
            raise ConnectError("Configured primary key mode 'record_header' cannot have "
                               "null or empty schema")
        cols = [(h.key, h.schema, h.value) for h in record.headers]
    else:
        raise ConnectError(f"Unexpected primary key mode: {mode}")
    return [c for c in cols if (not wanted or c[0] in wanted) and s.keeps(record.topic, c[0])]


def describe(record: SinkRecord, s: Settings) -> Change | None:
    """What ``record`` asks of its table, or None when it is skipped (module doc)."""
    schema, value = record.value_schema, record.value
    if schema is not None and "SchemaChangeValue" in (schema.name or ""):
        raise DataError("Schema change records are not supported by JDBC connector. Adjust "
                        "`topics` or `topics.regex` to exclude schema change topic.")
    envelope = value if value is not None and _is_envelope(schema, value) else None
    name = table_name(record, s, envelope)
    if name is None:
        return None
    change = Change(TableId.parse(name, s.lower), "write", offset=original_offset(record))
    if value is None or (envelope is not None and envelope.get("op") == "d"):
        if not s.delete_enabled:
            return None
        change.kind = "delete"
        change.keys = _key_columns(record, s, [])
    elif envelope is not None:
        op = envelope.get("op")
        if op == "t":
            if not s.truncate_enabled:
                return None
            change.kind = "truncate"
            return change
        if op not in ("c", "r", "u"):
            return None
        after_schema = schema.field("after").schema if schema is not None \
            and schema.field("after") else None
        row = [c for c in _fields(after_schema, envelope.get("after"), "record value")
               if c[2] != UNAVAILABLE and c[2] != UNAVAILABLE_BYTES]
        change.keys = _key_columns(record, s, row)
        key_names = {c[0] for c in change.keys}
        change.values = [c for c in row if c[0] not in key_names
                         and s.keeps(record.topic, c[0])]
    else:
        row = _fields(schema, value, "record value")
        change.keys = _key_columns(record, s, row)
        key_names = {c[0] for c in change.keys}
        change.values = [c for c in row if c[0] not in key_names
                         and s.keeps(record.topic, c[0])]
    if s.lower:
        change.keys = [(n.lower(), sch, v) for n, sch, v in change.keys]
        change.values = [(n.lower(), sch, v) for n, sch, v in change.values]
    return change
