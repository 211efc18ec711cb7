"""``Store``: the registry's state, built only by applying ``_schemas`` records in order.

The records are Confluent's (``model``'s docstring). Keys and values are compact JSON;
the key bytes of one logical key must be the same whoever writes them, or compaction
and tombstones miss: ``*_key`` below write them in Confluent's field order
(``keytype``, ``subject``, ``version``, ``magic``) with no spaces, as Jackson does.

State: subjects -> versions -> ``SchemaVersion`` (soft-deleted ones flagged), the
global and per-subject compatibility level and mode, ids -> the (subject, version)s
registered with them, who references whom, and ``max_id``, the highest id ever
applied (ids are never reused while their records are on the topic).

Rules of ``apply(key, value)``:
  SCHEMA value    sets that version (``deleted`` true: the soft delete of it);
  SCHEMA null     removes that version (the permanent delete);
  CONFIG / MODE   sets, or with a null value removes, the subject's (``subject`` null:
                  the global) level / mode;
  DELETE_SUBJECT  flags every version up to ``version`` deleted;
  NOOP, others    nothing.
A record that is not JSON, misses a field or has one of the wrong type is skipped with
a warning: another tool may write to the topic, and a bad record never stops the rest.

Lifecycle and concurrency: one ``Store`` per copy of the topic, applied to by its one
reader in offset order and read by the same event loop; no locks, no I/O.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from spool.registry.model import (
    COMPATIBILITY_LEVELS,
    MODES,
    SCHEMA_TYPES,
    Reference,
    SchemaVersion,
)

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "MODE", "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dumps({"keytype": "NOOP", "magic": 0})


def schema_record(sv: SchemaVersion) -> Record:
    """The SCHEMA record that sets ``sv`` (``deleted`` included)."""
    value: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id}
    if sv.schema_type != "AVRO":
        value["schemaType"] = sv.schema_type
    if sv.references:
        value["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                               for r in sv.references]
    value["schema"] = sv.schema
    value["deleted"] = sv.deleted
    return schema_key(sv.subject, sv.version), _dumps(value)


def schema_tombstone(subject: str, version: int) -> Record:
    return schema_key(subject, version), None


def config_record(subject: str | None, level: str | None) -> Record:
    return config_key(subject), None if level is None else _dumps({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    return mode_key(subject), None if mode is None else _dumps({"mode": mode})


def delete_subject_record(subject: str, version: int) -> Record:
    return delete_subject_key(subject), _dumps({"subject": subject, "version": version})


def noop_record() -> Record:
    return noop_key(), None


class BadRecord(ValueError):
    """A record this store cannot apply (skipped with a warning)."""


def _field(obj: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise BadRecord(f"{name!r} is {value!r}")
    return value


def _subject_or_none(key: dict[str, Any]) -> str | None:
    subject = key.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise BadRecord(f"'subject' is {subject!r}")
    return subject


def _schema_version(value: dict[str, Any]) -> SchemaVersion:
    refs = value.get("references") or []
    if not isinstance(refs, list):
        raise BadRecord(f"'references' is {refs!r}")
    schema_type = value.get("schemaType") or "AVRO"
    if schema_type not in SCHEMA_TYPES:
        raise BadRecord(f"'schemaType' is {schema_type!r}")
    return SchemaVersion(
        subject=_field(value, "subject", str),
        version=_field(value, "version", int),
        id=_field(value, "id", int),
        schema=_field(value, "schema", str),
        schema_type=schema_type,
        references=tuple(
            Reference(_field(r, "name", str), _field(r, "subject", str), _field(r, "version", int))
            if isinstance(r, dict) else _bad(f"reference {r!r}")
            for r in refs
        ),
        deleted=bool(value.get("deleted", False)),
    )


def _bad(detail: str) -> Any:
    raise BadRecord(detail)


class Store:
    """The state of ``_schemas`` up to the last record applied (module docstring)."""

    def __init__(self) -> None:
        self._subjects: dict[str, dict[int, SchemaVersion]] = {}
        self._configs: dict[str | None, str] = {}
        self._modes: dict[str | None, str] = {}
        self._by_id: dict[int, set[tuple[str, int]]] = {}
        self._referrers: dict[tuple[str, int], set[tuple[str, int]]] = {}
        self.max_id = 0
        self.applied = 0  # records applied, bad ones included (they were read)

    # -- applying -------------------------------------------------------------------

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Apply one record; a record it cannot read is logged and skipped."""
        self.applied += 1
        try:
            k = json.loads(key)
            v = None if value is None else json.loads(value)
            if not isinstance(k, dict) or (v is not None and not isinstance(v, dict)):
                raise BadRecord("key or value is not a JSON object")
            self._apply(k, v)
        except (ValueError, TypeError, AttributeError) as e:  # JSON, BadRecord, shapes
            log.warning("_schemas: skipping the record %r: %s", key[:200], e)

    def _apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        keytype = key.get("keytype")
        if keytype == "SCHEMA":
            if value is None:
                self._remove(_field(key, "subject", str), _field(key, "version", int))
            else:
                self._set(_schema_version(value))
        elif keytype == "CONFIG":
            subject = _subject_or_none(key)
            if value is None:
                self._configs.pop(subject, None)
            else:
                level = value.get("compatibilityLevel", value.get("compatibility"))
                if level not in COMPATIBILITY_LEVELS:
                    raise BadRecord(f"compatibility level {level!r}")
                self._configs[subject] = level
        elif keytype == "MODE":
            subject = _subject_or_none(key)
            if value is None:
                self._modes.pop(subject, None)
            else:
                mode = value.get("mode")
                if mode not in MODES:
                    raise BadRecord(f"mode {mode!r}")
                self._modes[subject] = mode
        elif keytype == "DELETE_SUBJECT":
            if value is not None:
                self._delete_subject(_field(value, "subject", str), _field(value, "version", int))
        elif keytype != "NOOP":
            log.info("_schemas: ignoring a record of keytype %r", keytype)

    def _set(self, sv: SchemaVersion) -> None:
        self._remove(sv.subject, sv.version)
        self._subjects.setdefault(sv.subject, {})[sv.version] = sv
        self._by_id.setdefault(sv.id, set()).add((sv.subject, sv.version))
        for ref in sv.references:
            self._referrers.setdefault((ref.subject, ref.version), set()).add(
                (sv.subject, sv.version))
        self.max_id = max(self.max_id, sv.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self._subjects.get(subject)
        old = versions.pop(version, None) if versions is not None else None
        if old is None:
            return
        if not versions:
            del self._subjects[subject]
        users = self._by_id[old.id]
        users.discard((subject, version))
        if not users:
            del self._by_id[old.id]
        for ref in old.references:
            referrers = self._referrers.get((ref.subject, ref.version), set())
            referrers.discard((subject, version))
            if not referrers:
                self._referrers.pop((ref.subject, ref.version), None)

    def _delete_subject(self, subject: str, up_to: int) -> None:
        versions = self._subjects.get(subject, {})
        for v, sv in list(versions.items()):
            if v <= up_to and not sv.deleted:
                versions[v] = replace(sv, deleted=True)

    # -- reading --------------------------------------------------------------------

    def subjects(self, deleted: bool = False) -> list[str]:
        """Subjects with a live version (with ``deleted``: with any version), sorted."""
        return sorted(s for s, vs in self._subjects.items()
                      if deleted or any(not sv.deleted for sv in vs.values()))

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first; soft-deleted ones only with ``deleted``."""
        vs = self._subjects.get(subject, {})
        return [vs[v] for v in sorted(vs) if deleted or not vs[v].deleted]

    def get(self, subject: str, version: int) -> SchemaVersion | None:
        """That version, soft-deleted or not."""
        return self._subjects.get(subject, {}).get(version)

    def users_of_id(self, schema_id: int) -> list[SchemaVersion]:
        """Every version registered with ``schema_id``, soft-deleted ones too, by subject
        and version."""
        return [self._subjects[s][v] for s, v in sorted(self._by_id.get(schema_id, ()))]

    def ids(self) -> list[int]:
        return sorted(self._by_id)

    def referrers(self, subject: str, version: int) -> list[SchemaVersion]:
        """The versions whose references name (subject, version), soft-deleted ones too."""
        return [self._subjects[s][v]
                for s, v in sorted(self._referrers.get((subject, version), ()))]

    def config(self, subject: str | None) -> str | None:
        """The level set for ``subject`` (None: the global one), or None when unset."""
        return self._configs.get(subject)

    def mode(self, subject: str | None) -> str | None:
        """The mode set for ``subject`` (None: the global one), or None when unset."""
        return self._modes.get(subject)
