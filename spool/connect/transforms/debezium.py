"""Debezium's ExtractNewRecordState (``io.debezium.transforms.ExtractNewRecordState``):
a change-event envelope becomes the row it describes.

For a record whose value is a Debezium envelope (a struct named ``*.Envelope`` with
``op`` and ``after``, or a map with those keys when schemaless):

- ``c``/``u``/``r``: the value becomes ``after`` (schema: the ``after`` field's struct);
- ``d``, by ``delete.tombstone.handling.mode`` (Debezium 2.5's key): ``tombstone`` (the
  default) the value becomes None; ``drop`` the record is dropped; ``rewrite``
  the value becomes ``before`` with ``__deleted`` = ``"true"`` (every other event gets
  ``"false"``); ``rewrite-with-tombstone`` the same, and tombstones are kept;
- tombstones (value None): kept for ``tombstone`` and ``rewrite-with-tombstone``,
  dropped otherwise.

The older keys are honoured when the new one is absent: ``drop.tombstones`` (true) and
``delete.handling.mode`` (``drop`` | ``rewrite`` | ``none``: the delete kept as a
None value).

``add.fields`` (``op,table,lsn,source.ts_ms,...``): each named envelope field (``op``,
``ts_ms``, ...) or ``source`` field (``table``, ``lsn``, ``txId``..., or written
``source.<f>``) is appended to the row as ``<add.fields.prefix><f>`` (prefix ``__``; a
``source.x`` field is named ``<prefix>source_x``), optional, of the field's type.
``add.headers`` does the same as headers (prefix ``add.headers.prefix``, ``__``).
Records that are not envelopes pass through unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spool.connect import api, data
from spool.connect.data import DataError, Schema, Struct
from spool.connect.transforms.base import SchemaCache, struct_like

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone")


class ExtractNewRecordState(api.Transformation):
    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("delete.tombstone.handling.mode", api.STRING, None, api.MEDIUM,
                        "How delete events and tombstones are handled: drop, tombstone, "
                        "rewrite, rewrite-with-tombstone.", validator=_mode)
                .define("drop.tombstones", api.BOOLEAN, True, api.LOW,
                        "Deprecated: drop tombstones.")
                .define("delete.handling.mode", api.STRING, "drop", api.LOW,
                        "Deprecated: drop, rewrite or none.",
                        validator=api.in_values("drop", "rewrite", "none"))
                .define("add.fields", api.LIST, [], api.LOW,
                        "Fields from the change event to add to the row.")
                .define("add.fields.prefix", api.STRING, "__", api.LOW,
                        "The prefix of the added fields.")
                .define("add.headers", api.LIST, [], api.LOW,
                        "Fields from the change event to add as headers.")
                .define("add.headers.prefix", api.STRING, "__", api.LOW,
                        "The prefix of the added headers."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        mode = cfg["delete.tombstone.handling.mode"]
        if mode is not None:
            self.mode = mode.lower()
            self.keep_tombstones = self.mode in ("tombstone", "rewrite-with-tombstone")
        elif "drop.tombstones" in props or "delete.handling.mode" in props:
            self.mode = {"drop": "drop", "none": "tombstone",
                         "rewrite": "rewrite"}[cfg["delete.handling.mode"].lower()]
            self.keep_tombstones = not cfg["drop.tombstones"]
        else:
            self.mode, self.keep_tombstones = "tombstone", True
        self.add_fields = [_field_ref(f) for f in cfg["add.fields"]]
        self.fields_prefix = cfg["add.fields.prefix"]
        self.add_headers = [_field_ref(f) for f in cfg["add.headers"]]
        self.headers_prefix = cfg["add.headers.prefix"]
        self.rewrite = self.mode in ("rewrite", "rewrite-with-tombstone")
        self.cache = SchemaCache()

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        value = record.value
        if value is None:
            return record if self.keep_tombstones else None
        schema = record.value_schema
        if not _is_envelope(schema, value):
            return record
        op = value.get("op")
        if op == "d":
            if self.mode == "drop":
                return None
            if self.mode == "tombstone":
                return record.new_record(value_schema=None, value=None,
                                         headers=self._headers(record, value, schema))
            row, row_schema = value.get("before"), _field_schema(schema, "before")
        else:
            row, row_schema = value.get("after"), _field_schema(schema, "after")
        headers = self._headers(record, value, schema)
        if row_schema is None:  # schemaless
            out = dict(row or {})
            for name, ref in self._added(self.add_fields, self.fields_prefix):
                out[name] = _lookup(value, ref)
            if self.rewrite:
                out[f"{self.fields_prefix}deleted"] = "true" if op == "d" else "false"
            return record.new_record(value_schema=None, value=out, headers=headers)
        new_schema = self.cache.get(schema, lambda s: self._row_schema(s, row_schema))
        vals = dict(row or {})
        for name, ref in self._added(self.add_fields, self.fields_prefix):
            vals[name] = _lookup(value, ref)
        if self.rewrite:
            vals[f"{self.fields_prefix}deleted"] = "true" if op == "d" else "false"
        return record.new_record(value_schema=new_schema, value=Struct(new_schema, vals),
                                 headers=headers)

    def _added(self, refs: list[tuple[str, ...]], prefix: str) -> list[tuple[str, tuple]]:
        return [(prefix + "_".join(ref), ref) for ref in refs]

    def _row_schema(self, envelope: Schema, row: Schema) -> Schema:
        fields = [(f.name, f.schema) for f in row.fields]
        for name, ref in self._added(self.add_fields, self.fields_prefix):
            fields.append((name, data.optional(_ref_schema(envelope, ref))))
        if self.rewrite:
            fields.append((f"{self.fields_prefix}deleted", data.OPTIONAL_STRING))
        return dataclasses.replace(struct_like(row, fields), optional=False)

    def _headers(self, record: api.ConnectRecord, value: Any,
                 schema: Schema | None) -> tuple[api.Header, ...]:
        if not self.add_headers:
            return record.headers
        extra = tuple(api.Header(name, None if schema is None else
                                 data.optional(_ref_schema(schema, ref)), _lookup(value, ref))
                      for name, ref in self._added(self.add_headers, self.headers_prefix))
        return (*record.headers, *extra)


def _mode(name: str, value: Any) -> None:
    if value is not None and str(value).lower() not in MODES:
        raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      f"Value must be one of {', '.join(MODES)}"]})


def _field_ref(spec: str) -> tuple[str, ...]:
    """``op`` -> ("op",); ``source.ts_ms`` -> ("source", "ts_ms"); a bare source field
    (``table``, ``lsn``) is looked up in ``source`` when the envelope has no such field."""
    return tuple(p for p in spec.strip().split(".") if p)


def _is_envelope(schema: Schema | None, value: Any) -> bool:
    if schema is not None:
        return (schema.type == "struct" and (schema.name or "").endswith(".Envelope")
                and schema.field("op") is not None and schema.field("after") is not None)
    return isinstance(value, dict) and "op" in value and "after" in value


def _field_schema(schema: Schema | None, name: str) -> Schema | None:
    if schema is None:
        return None
    f = schema.field(name)
    return f.schema if f is not None else None


def _lookup(value: Any, ref: tuple[str, ...]) -> Any:
    if len(ref) == 1 and ref[0] not in value:
        ref = ("source", ref[0])
    v = value
    for part in ref:
        v = v.get(part) if isinstance(v, dict) else None
    return v


def _ref_schema(envelope: Schema, ref: tuple[str, ...]) -> Schema:
    if len(ref) == 1 and envelope.field(ref[0]) is None:
        ref = ("source", ref[0])
    s: Schema | None = envelope
    for part in ref:
        f = s.field(part) if s is not None else None
        if f is None:
            raise DataError(f"Unexpected field name: {'.'.join(ref)}")
        s = f.schema
    assert s is not None
    return s
