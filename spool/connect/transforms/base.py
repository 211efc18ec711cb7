"""What the field transforms share: the key/value variants, Kafka's ``Requirements`` and
``SchemaUtil``, and the config helpers.

A ``KeyOrValue`` transformation works on the record's key (``$Key``, ``operates_on =
"key"``) or value (``$Value``); ``operating(record)`` is the ``(schema, value)`` it works
on and ``updated(record, schema, value)`` the new record with them replaced.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from spool.connect import api, data
from spool.connect.data import DataError, Schema, Struct


class KeyOrValue(api.Transformation):
    operates_on: ClassVar[str] = "value"

    def operating(self, record: api.ConnectRecord) -> tuple[Schema | None, Any]:
        if self.operates_on == "key":
            return record.key_schema, record.key
        return record.value_schema, record.value

    def updated(self, record: api.ConnectRecord, schema: Schema | None,
                value: Any) -> api.ConnectRecord:
        if self.operates_on == "key":
            return record.new_record(key_schema=schema, key=value)
        return record.new_record(value_schema=schema, value=value)


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, dict) or isinstance(value, Struct):
        raise DataError(f"Only Map objects supported in absence of schema for [{purpose}], "
                        f"found: {_type_name(value)}")
    return value


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataError(f"Only Struct objects supported for [{purpose}], found: "
                        f"{_type_name(value)}")
    return value


def require_sink_record(record: api.ConnectRecord, purpose: str) -> api.SinkRecord:
    if not isinstance(record, api.SinkRecord):
        raise DataError(f"Only SinkRecord supported for [{purpose}], found: "
                        f"{type(record).__name__}")
    return record


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def struct_like(base: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """A struct schema with ``base``'s name, version, doc, parameters and optionality
    (Kafka's ``SchemaUtil.copySchemaBasics``) and these fields."""
    return dataclasses.replace(base, default=None, fields=tuple(
        data.Field(n, i, s) for i, (n, s) in enumerate(fields)))


class SchemaCache:
    """Updated schemas by original schema (Kafka's ``SynchronizedLRUCache`` of 16)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._d: dict[Any, Schema] = {}

    def get(self, schema: Schema, make: Any) -> Schema:
        try:
            hit = self._d.get(schema)
        except TypeError:  # a schema with an unhashable default
            return make(schema)  # type: ignore[no-any-return]
        if hit is None:
            hit = make(schema)
            if len(self._d) >= self.size:
                self._d.pop(next(iter(self._d)))
            self._d[schema] = hit
        return hit


def non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      "Empty list"]})
