"""``Core``: Confluent's schema registry semantics over a ``Store``; no I/O of its own.

``Core(store, append)`` implements every ``model.Registry`` method. Reads answer from
``store``; writes build ``_schemas`` records (``store``'s writers) and hand them to
``append(records)``, which writes them to the log and returns once ``store`` has applied
them (the backend's writes to Kafka; a test's list that applies them straight away).
Writes run one at a time (an ``asyncio.Lock``): an id or version is chosen from the store
as it stands after the previous write.

The rules, Confluent's:
  ids          global: a schema (same type, canonical form and references) registered
               under any subject keeps its id everywhere; a new one is ``max_id + 1``.
  register     the subject's live version with this schema: its id, nothing written;
               else, mode permitting (READONLY: 42205), a compatibility check (409) and a
               new version, one more than the subject's highest (soft-deleted included).
  compatibility the subject's level, else the global one, else BACKWARD; checked
               against the live versions the level names (``compatibility``); a
               previous version of another schema type is incompatible (but under NONE).
  modes        the subject's, else the global one, else READWRITE. READONLY refuses
               registrations and deletes (42205); IMPORT accepts an explicit id and
               version and checks no compatibility; setting IMPORT where schemas were ever
               registered (soft-deleted ones count) needs ``force`` (42205). Outside IMPORT an id may not be chosen (42205).
  deletes      soft first (DELETE_SUBJECT, or the version re-written ``deleted``), then
               permanent (tombstones; 40405 / 40407 when not soft-deleted first). A
               version a live version references cannot be deleted (42206). The
               permanent delete of a subject also drops its level and mode (Confluent's
               since schema-registry#3810; the soft one keeps them).
  references   resolved through the store to (subject, version) texts, transitively,
               and given to the format's ``parse`` by name; a missing one is 42201.
Stored schemas are parsed on demand and cached by (type, text, references); one that no
longer parses (written by another tool) is logged and left out of matches and checks.
Before a registration, lookup or check compares against stored schemas not parsed yet
(every one of the type, the first time after a start: ~40 ms each for PROTOBUF's protoc),
they are parsed on a worker thread, so the event loop keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from spool.registry import compatibility, model
from spool.registry import store as records
from spool.registry.formats import Format
from spool.registry.model import (
    COMPATIBILITY_LEVELS,
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    MODES,
    Compatibility,
    InvalidSchema,
    Reference,
    SchemaVersion,
)
from spool.registry.store import Record, Store

log = logging.getLogger(__name__)

Append = Callable[[list[Record]], Awaitable[None]]
MAX_VERSION = 2**31 - 1
LATEST = -1
_Key = tuple[str, str, tuple[Reference, ...]]  # type, text, references


class Core:
    """``model.Registry`` over ``store``; writes through ``append`` (module docstring).
    ``formats`` maps schemaType to its ``Format`` (default: ``formats.formats()``)."""

    def __init__(self, store: Store, append: Append,
                 formats: Mapping[str, Format] | None = None) -> None:
        self.store = store
        self._append = append
        self._formats = formats
        self._lock = asyncio.Lock()
        self._parsed: dict[_Key, tuple[Any, str] | None] = {}

    # -- formats and parsing --------------------------------------------------------

    def _format(self, schema_type: str) -> Format:
        if self._formats is None:
            from spool.registry.formats import formats

            self._formats = formats()
        fmt = self._formats.get(schema_type)
        if fmt is None:
            raise model.invalid_schema(f"unknown schema type {schema_type!r}; valid types "
                                       f"are {', '.join(sorted(self._formats))}")
        return fmt

    def _resolve(self, references: tuple[Reference, ...]) -> dict[str, str]:
        """name -> text of every schema ``references`` names, transitively."""
        texts: dict[str, str] = {}
        pending = list(references)
        seen: set[tuple[str, int]] = set()
        while pending:
            ref = pending.pop()
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            target = self._reference_target(ref)
            texts.setdefault(ref.name, target.schema)
            pending.extend(target.references)
        return texts

    def _reference_target(self, ref: Reference) -> SchemaVersion:
        if ref.version == LATEST:
            live = self.store.versions(ref.subject)
            if live:
                return live[-1]
        else:
            target = self.store.get(ref.subject, ref.version)
            if target is not None:
                return target
        raise model.invalid_schema(f"the reference {ref.name!r} to subject "
                                   f"'{ref.subject}' version {ref.version} is not found")

    def _parse_new(self, schema: str, schema_type: str,
                   references: list[Reference]) -> tuple[Any, str, tuple[Reference, ...]]:
        """(parsed, canonical, references) of a schema a client sent; 42201 when invalid."""
        fmt = self._format(schema_type)
        refs = tuple(self._pin(r) for r in references)
        try:
            parsed = fmt.parse(schema, self._resolve(refs))
            return parsed, fmt.canonical(parsed), refs
        except InvalidSchema as e:
            raise model.invalid_schema(str(e)) from e

    def _pin(self, ref: Reference) -> Reference:
        """A reference to ``latest`` (-1) made the version it names now."""
        if ref.version == LATEST:
            return Reference(ref.name, ref.subject, self._reference_target(ref).version)
        return ref

    def _parse_stored(self, sv: SchemaVersion) -> tuple[Any, str] | None:
        """(parsed, canonical) of a stored version; None when it no longer parses."""
        key = (sv.schema_type, sv.schema, sv.references)
        if key not in self._parsed:
            try:
                fmt = self._format(sv.schema_type)
                parsed = fmt.parse(sv.schema, self._resolve(sv.references))
                self._parsed[key] = parsed, fmt.canonical(parsed)
            except (InvalidSchema, model.RegistryError) as e:
                log.warning("subject %r version %d (id %d) does not parse: %s",
                            sv.subject, sv.version, sv.id, getattr(e, "message", e))
                self._parsed[key] = None
        return self._parsed[key]

    async def _warm(self, svs: list[SchemaVersion]) -> None:
        """Parse, on a worker thread, those of ``svs`` not parsed yet (module doc); their
        references are resolved here, on the loop's thread, which owns the store."""
        todo: dict[_Key, tuple[SchemaVersion, dict[str, str]]] = {}
        for sv in svs:
            key = (sv.schema_type, sv.schema, sv.references)
            if key in self._parsed or key in todo:
                continue
            try:
                todo[key] = sv, self._resolve(sv.references)
            except model.RegistryError:
                continue  # _parse_stored logs it when it is used
        if not todo:
            return
        fmts: dict[str, Format] = {}
        for schema_type in {key[0] for key in todo}:
            try:
                fmts[schema_type] = self._format(schema_type)
            except model.RegistryError:
                continue

        def parse_all() -> dict[_Key, tuple[Any, str] | None]:
            done: dict[_Key, tuple[Any, str] | None] = {}
            for key, (sv, refs) in todo.items():
                fmt = fmts.get(key[0])
                if fmt is None:
                    continue
                try:
                    parsed = fmt.parse(sv.schema, refs)
                    done[key] = parsed, fmt.canonical(parsed)
                except InvalidSchema:
                    continue  # _parse_stored logs it when it is used
            return done

        for key, value in (await asyncio.to_thread(parse_all)).items():
            self._parsed.setdefault(key, value)

    def _candidates(self, schema_type: str, refs: tuple[Reference, ...]) -> list[SchemaVersion]:
        """The first user of every id that ``_existing_id`` may compare with."""
        out = []
        for schema_id in self.store.ids():
            sv = self.store.users_of_id(schema_id)[0]
            if sv.schema_type == schema_type and sv.references == refs:
                out.append(sv)
        return out

    def _same(self, sv: SchemaVersion, schema_type: str, canonical: str,
              refs: tuple[Reference, ...]) -> bool:
        if sv.schema_type != schema_type or sv.references != refs:
            return False
        parsed = self._parse_stored(sv)
        return parsed is not None and parsed[1] == canonical

    def _existing_id(self, schema_type: str, canonical: str,
                     refs: tuple[Reference, ...]) -> int | None:
        for schema_id in self.store.ids():
            if self._same(self.store.users_of_id(schema_id)[0], schema_type, canonical, refs):
                return schema_id
        return None

    # -- versions, levels, modes ----------------------------------------------------

    @staticmethod
    def _version_number(version: int | str) -> int:
        """An int version, or ``LATEST``; 42202 for anything else."""
        if isinstance(version, str):
            if version.strip().lower() == "latest":
                return LATEST
            try:
                number = int(version.strip())
            except ValueError:
                raise model.invalid_version(version) from None
        elif isinstance(version, int) and not isinstance(version, bool):
            number = version
        else:
            raise model.invalid_version(version)
        if number != LATEST and not 1 <= number <= MAX_VERSION:
            raise model.invalid_version(version)
        return number

    def _find(self, subject: str, version: int | str, deleted: bool) -> SchemaVersion:
        """The subject's version (``latest``: its highest), 40401 / 40402 when absent."""
        number = self._version_number(version)
        versions = self.store.versions(subject, deleted=deleted)
        if not versions:
            raise model.subject_not_found(subject)
        if number == LATEST:
            return versions[-1]
        for sv in versions:
            if sv.version == number:
                return sv
        raise model.version_not_found(version)

    def _level(self, subject: str | None) -> str:
        return ((self.store.config(subject) if subject is not None else None)
                or self.store.config(None) or DEFAULT_COMPATIBILITY)

    def _mode(self, subject: str | None) -> str:
        return ((self.store.mode(subject) if subject is not None else None)
                or self.store.mode(None) or DEFAULT_MODE)

    def _writable(self, subject: str) -> None:
        if self._mode(subject) == "READONLY":
            raise model.operation_not_permitted(f"Subject {subject} is in read-only mode")

    # -- reads ----------------------------------------------------------------------

    async def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.store.subjects(deleted=deleted) if s.startswith(prefix)]

    async def versions(self, subject: str, deleted: bool = False) -> list[int]:
        found = [sv.version for sv in self.store.versions(subject, deleted=deleted)]
        if not found:
            raise model.subject_not_found(subject)
        return found

    async def version(self, subject: str, version: int | str,
                      deleted: bool = False) -> SchemaVersion:
        return self._find(subject, version, deleted)

    def _users(self, schema_id: int) -> list[SchemaVersion]:
        users = self.store.users_of_id(schema_id)
        if not users:
            raise model.schema_not_found(f"Schema {schema_id} not found")
        return users

    async def by_id(self, schema_id: int) -> SchemaVersion:
        users = self._users(schema_id)
        return next((sv for sv in users if not sv.deleted), users[0])

    async def subject_versions_of_id(self, schema_id: int,
                                     deleted: bool = False) -> list[tuple[str, int]]:
        return [(sv.subject, sv.version) for sv in self._users(schema_id)
                if deleted or not sv.deleted]

    def _live_referrer_ids(self, sv: SchemaVersion) -> list[int]:
        return sorted({r.id for r in self.store.referrers(sv.subject, sv.version)
                       if not r.deleted})

    async def referenced_by(self, subject: str, version: int | str) -> list[int]:
        return self._live_referrer_ids(self._find(subject, version, deleted=False))

    async def lookup(self, subject: str, schema: str, schema_type: str,
                     references: list[Reference], deleted: bool = False) -> SchemaVersion:
        _, canonical, refs = self._parse_new(schema, schema_type, references)
        await self._warm(self.store.versions(subject, deleted=deleted))
        versions = self.store.versions(subject, deleted=deleted)
        if not versions:
            raise model.subject_not_found(subject)
        matches = [sv for sv in versions if self._same(sv, schema_type, canonical, refs)]
        if not matches:
            raise model.schema_not_found()
        live = [sv for sv in matches if not sv.deleted]
        return (live or matches)[-1]

    # -- compatibility --------------------------------------------------------------

    def _incompatibilities(self, level: str, new: Any, schema_type: str,
                           olds: list[SchemaVersion]) -> list[str]:
        fmt = self._format(schema_type)
        messages: list[str] = []
        for old in olds:
            if old.schema_type != schema_type:
                found = [f"Incompatible because of different schema type: {old.schema_type} "
                         f"to {schema_type}"]
            else:
                parsed = self._parse_stored(old)
                if parsed is None:
                    continue
                found = compatibility.check_pair(level, new, parsed[0], fmt)
            if found:
                messages += found + [f"{{oldSchemaVersion: {old.version}}}",
                                     f"{{oldSchema: '{old.schema}'}}"]
        if messages:
            messages.append(f"{{compatibility: '{level}'}}")
        return messages

    async def check(self, subject: str, version: int | str | None, schema: str,
                    schema_type: str, references: list[Reference]) -> Compatibility:
        if version is not None:
            self._version_number(version)  # 42202 before anything else
        new, _, _ = self._parse_new(schema, schema_type, references)
        await self._warm(self.store.versions(subject))
        level = self._level(subject)
        if version is None:
            olds = compatibility.against(level, self.store.versions(subject))
        else:
            olds = [self._find(subject, version, deleted=False)]
            if level == "NONE":
                olds = []
        messages = self._incompatibilities(level, new, schema_type, olds)
        return Compatibility(not messages, messages)

    # -- register -------------------------------------------------------------------

    async def register(self, subject: str, schema: str, schema_type: str,
                       references: list[Reference], schema_id: int | None = None,
                       version: int | None = None) -> int:
        if schema_id is not None and schema_id < 0:
            schema_id = None  # clients send -1 (or 0 for the version) for "not given"
        if version == 0:
            version = None
        async with self._lock:
            mode = self._mode(subject)
            self._writable(subject)
            importing = mode == "IMPORT"
            if schema_id is not None and not importing:
                raise model.operation_not_permitted(
                    "Schema id can only be specified in IMPORT mode")
            if version is not None:
                version = self._version_number(version)
            new, canonical, refs = self._parse_new(schema, schema_type, references)
            await self._warm(self.store.versions(subject)
                             + self._candidates(schema_type, refs))
            every = self.store.versions(subject, deleted=True)
            live = [sv for sv in every if not sv.deleted]
            for sv in reversed(live):
                if self._same(sv, schema_type, canonical, refs) and (
                        version in (None, LATEST, sv.version)
                        and schema_id in (None, sv.id)):
                    return sv.id
            next_version = (every[-1].version + 1) if every else 1
            if importing:
                new_id = self._import_id(schema_id, schema_type, canonical, refs)
                new_version = self._import_version(subject, version, next_version)
            else:
                if version not in (None, LATEST, next_version):
                    raise model.invalid_schema(
                        f"version {version} is not one more than the previous version "
                        f"{next_version - 1}")
                level = self._level(subject)
                messages = self._incompatibilities(
                    level, new, schema_type, compatibility.against(level, live))
                if messages:
                    raise model.incompatible(messages)
                new_id = self._existing_id(schema_type, canonical, refs)
                if new_id is None:
                    new_id = self.store.max_id + 1
                new_version = next_version
            sv = SchemaVersion(subject, new_version, new_id, schema, schema_type, refs)
            await self._append([records.schema_record(sv)])
            return new_id

    def _import_id(self, schema_id: int | None, schema_type: str, canonical: str,
                   refs: tuple[Reference, ...]) -> int:
        existing = self._existing_id(schema_type, canonical, refs)
        if schema_id is None:
            return existing if existing is not None else self.store.max_id + 1
        if schema_id < 1 or schema_id > MAX_VERSION:
            raise model.invalid_schema(f"invalid schema id {schema_id}")
        users = self.store.users_of_id(schema_id)
        if users and not self._same(users[0], schema_type, canonical, refs):
            raise model.operation_not_permitted(
                f"Overwrite new schema with id {schema_id} is not permitted.")
        return schema_id

    def _import_version(self, subject: str, version: int | None, next_version: int) -> int:
        if version is None or version == LATEST:
            return next_version
        if self.store.get(subject, version) is not None:
            raise model.operation_not_permitted(
                f"Overwrite new schema in subject {subject} with version {version} "
                "is not permitted.")
        return version

    # -- deletes --------------------------------------------------------------------

    def _unreferenced(self, sv: SchemaVersion) -> None:
        if self._live_referrer_ids(sv):
            raise model.reference_exists(
                "One or more references exist to the schema "
                f"{{magic=1,keytype=SCHEMA,subject={sv.subject},version={sv.version}}}.")

    def _drop_config_and_mode(self, subject: str) -> list[Record]:
        dropped = []
        if self.store.config(subject) is not None:
            dropped.append(records.config_record(subject, None))
        if self.store.mode(subject) is not None:
            dropped.append(records.mode_record(subject, None))
        return dropped

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        async with self._lock:
            self._writable(subject)
            every = self.store.versions(subject, deleted=True)
            if not every:
                raise model.subject_not_found(subject)
            live = [sv for sv in every if not sv.deleted]
            if permanent and live:
                raise model.subject_not_soft_deleted(subject)
            if not permanent and not live:
                raise model.subject_soft_deleted(subject)
            for sv in every:
                self._unreferenced(sv)
            if permanent:
                writes = [records.schema_tombstone(subject, sv.version) for sv in every]
                writes += self._drop_config_and_mode(subject)
            else:
                writes = [records.delete_subject_record(subject, every[-1].version)]
            await self._append(writes)
            return [sv.version for sv in (every if permanent else live)]

    async def delete_version(self, subject: str, version: int | str,
                             permanent: bool = False) -> int:
        async with self._lock:
            self._writable(subject)
            number = self._version_number(version)
            if not self.store.versions(subject, deleted=True):
                raise model.subject_not_found(subject)
            if permanent:
                sv = self._find(subject, version, deleted=True)
                if not sv.deleted:
                    raise model.version_not_soft_deleted(subject, sv.version)
                self._unreferenced(sv)
                await self._append([records.schema_tombstone(subject, sv.version)])
                return sv.version
            if number != LATEST:
                target = self.store.get(subject, number)
                if target is not None and target.deleted:
                    raise model.version_soft_deleted(subject, number)
            sv = self._find(subject, version, deleted=False)
            self._unreferenced(sv)
            deleted = SchemaVersion(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type,
                                    sv.references, deleted=True)
            await self._append([records.schema_record(deleted)])
            return sv.version

    # -- config and mode ------------------------------------------------------------

    def _known(self, subject: str) -> bool:
        return bool(self.store.versions(subject, deleted=True)) or (
            self.store.config(subject) is not None or self.store.mode(subject) is not None)

    async def get_config(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is None:
            return self._level(None)
        level = self.store.config(subject)
        if level is None:
            if not default_to_global:
                raise model.subject_compatibility_not_configured(subject)
            return self._level(None)
        return level

    async def set_config(self, subject: str | None, level: str) -> str:
        upper = level.upper() if isinstance(level, str) else level
        if upper not in COMPATIBILITY_LEVELS:
            raise model.invalid_compatibility_level(level)
        async with self._lock:
            await self._append([records.config_record(subject, upper)])
        return upper

    async def delete_config(self, subject: str | None) -> str:
        async with self._lock:
            if subject is not None and not self._known(subject):
                raise model.subject_not_found(subject)
            previous = self._level(subject)
            if self.store.config(subject) is not None:
                await self._append([records.config_record(subject, None)])
            return previous

    async def get_mode(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is None:
            return self._mode(None)
        mode = self.store.mode(subject)
        if mode is None:
            if not default_to_global:
                raise model.subject_mode_not_configured(subject)
            return self._mode(None)
        return mode

    async def set_mode(self, subject: str | None, mode: str, force: bool = False) -> str:
        upper = mode.upper() if isinstance(mode, str) else mode
        if upper not in MODES:
            raise model.invalid_mode(mode)
        async with self._lock:
            if upper == "IMPORT" and not force:
                existing = (self.store.subjects(deleted=True) if subject is None
                            else self.store.versions(subject, deleted=True))
                if existing:
                    raise model.operation_not_permitted(
                        "Cannot import since found existing subjects")
            await self._append([records.mode_record(subject, upper)])
        return upper

    async def delete_mode(self, subject: str | None) -> str:
        async with self._lock:
            if subject is not None and not self._known(subject):
                raise model.subject_not_found(subject)
            previous = self._mode(subject)
            if self.store.mode(subject) is not None:
                await self._append([records.mode_record(subject, None)])
            return previous
