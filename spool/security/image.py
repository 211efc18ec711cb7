"""``SecurityImage``: ACLs, SCRAM credentials and client quotas as the metadata log leaves them.

An immutable snapshot, replaced (never changed) on every change, so a reader keeps the
one it took and may cache indexes per ``generation``. It is what replaying Kafka's five
security records gives (``spool.protocol._generated``):

    AccessControlEntryRecord         acls[id] = AclBinding(...)
    RemoveAccessControlEntryRecord   del acls[id]
    UserScramCredentialRecord        scram[(name, mechanism)] = ScramCredential(...)
    RemoveUserScramCredentialRecord  del scram[(name, mechanism)]
    ClientQuotaRecord                quotas[entity][key] = value, or (remove) del it;
                                     an entity with no values left is gone

``quotas`` keys an entity as its sorted ((entity_type, name), ...) pairs, a name of
None meaning the type's default (Kafka's ``<default>``): ``(("client-id", None),
("user", "alice"))``. Values are what the records carry (float64).

Kafka's replay rules: removing an ACL id or a credential that is not there is a
corrupt log (``SecurityReplayError``); so is a record with an unknown SCRAM mechanism.
``generation`` counts the changes (``SecurityDelta.apply`` bumps it once when any security
record was replayed since the last apply) and takes no part in equality. ``records()`` writes an image back as records
(snapshots; replayed on an empty image they give an equal image).

Both brokers use the same class: a single node replays the records its JSON metadata
store keeps (``to_json``/``from_json`` give that form), a cluster broker gets the image
inside the cluster's ``MetadataImage``. Pure: no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from uuid import UUID

from spool.protocol._generated.access_control_entry_record import AccessControlEntryRecord
from spool.protocol._generated.client_quota_record import ClientQuotaRecord, EntityData
from spool.protocol._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from spool.protocol._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from spool.protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from spool.protocol.acl import AclOperation, ResourceType
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.scram import ScramCredential, ScramMechanism

QuotaEntity = tuple[tuple[str, str | None], ...]
SECURITY_RECORDS = (AccessControlEntryRecord, RemoveAccessControlEntryRecord,
                    UserScramCredentialRecord, RemoveUserScramCredentialRecord,
                    ClientQuotaRecord)
_EMPTY: Mapping[Any, Any] = MappingProxyType({})


class SecurityReplayError(ValueError):
    """A security record that cannot apply to the image: the log is corrupt."""


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The image's key of an entity: its (type, name) pairs sorted by type (a type named
    twice, which alter_quotas refuses, sorts its ``<default>`` first: no str/None compare)."""
    return tuple(sorted(((t, n) for t, n in pairs),
                        key=lambda p: (p[0], p[1] is not None, p[1] or "")))


@dataclass(frozen=True)
class SecurityImage:
    """ACLs by id, SCRAM credentials by (user, mechanism), quotas by entity (module doc)."""

    acls: Mapping[UUID, AclBinding] = field(default_factory=lambda: _EMPTY)
    scram: Mapping[tuple[str, ScramMechanism], ScramCredential] = field(
        default_factory=lambda: _EMPTY)
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    generation: int = field(default=0, compare=False)

    def replay(self, records: Iterable[Any]) -> SecurityImage:
        """The image after ``records`` (records of other types are skipped)."""
        delta = SecurityDelta(self)
        for rec in records:
            delta.replay(rec)
        return delta.apply()

    def records(self) -> Iterator[Any]:
        """Every record needed to rebuild this image from nothing: credentials by user
        and mechanism, ACLs by id, quotas by entity and key."""
        for (name, mech), c in sorted(self.scram.items()):
            yield UserScramCredentialRecord(name=name, mechanism=int(mech), salt=c.salt,
                                            stored_key=c.stored_key, server_key=c.server_key,
                                            iterations=c.iterations)
        for acl_id, b in sorted(self.acls.items()):
            yield acl_record(acl_id, b)
        for entity, values in sorted(self.quotas.items(), key=lambda kv: _entity_sort(kv[0])):
            for key, value in sorted(values.items()):
                yield ClientQuotaRecord(entity=_entity_data(entity), key=key, value=value,
                                        remove=False)


def acl_record(acl_id: UUID, b: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id, resource_type=int(b.resource_type), resource_name=b.resource_name,
        pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
        operation=int(b.operation), permission_type=int(b.permission_type))


def _entity_sort(entity: QuotaEntity) -> tuple:
    return tuple((t, n is not None, n or "") for t, n in entity)


def _entity_data(entity: QuotaEntity) -> list[EntityData]:
    return [EntityData(entity_type=t, entity_name=n) for t, n in entity]


class SecurityDelta:
    """Security records replayed on top of an image; ``apply()`` gives the next image
    (the same object when nothing changed since the last ``apply``). Copy on write, per
    mapping; the dicts handed to an image are never written again."""

    def __init__(self, image: SecurityImage) -> None:
        self.image = image
        self._acls: dict[UUID, AclBinding] | None = None
        self._scram: dict[tuple[str, ScramMechanism], ScramCredential] | None = None
        self._quotas: dict[QuotaEntity, Mapping[str, float]] | None = None

    def replay(self, rec: Any) -> bool:
        """Apply ``rec`` if it is a security record; True if it was."""
        handler = _HANDLERS.get(type(rec))
        if handler is None:
            return False
        handler(self, rec)
        return True

    def _acl_map(self) -> dict[UUID, AclBinding]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    def _scram_map(self) -> dict[tuple[str, ScramMechanism], ScramCredential]:
        if self._scram is None:
            self._scram = dict(self.image.scram)
        return self._scram

    def _add_acl(self, rec: AccessControlEntryRecord) -> None:
        self._acl_map()[rec.id] = AclBinding(
            ResourceType(rec.resource_type), rec.resource_name, PatternType(rec.pattern_type),
            rec.principal, rec.host, AclOperation(rec.operation),
            AclPermissionType(rec.permission_type))

    def _remove_acl(self, rec: RemoveAccessControlEntryRecord) -> None:
        if self._acl_map().pop(rec.id, None) is None:
            raise SecurityReplayError(f"Unable to replay {rec}: no acl with that ID found.")

    def _add_credential(self, rec: UserScramCredentialRecord) -> None:
        self._scram_map()[(rec.name, _mechanism(rec))] = ScramCredential(
            bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key), rec.iterations)

    def _remove_credential(self, rec: RemoveUserScramCredentialRecord) -> None:
        if self._scram_map().pop((rec.name, _mechanism(rec)), None) is None:
            raise SecurityReplayError(f"Unable to find credential to delete: {rec}")

    def _quota(self, rec: ClientQuotaRecord) -> None:
        if self._quotas is None:
            self._quotas = dict(self.image.quotas)
        entity = quota_entity((e.entity_type, e.entity_name) for e in rec.entity)
        values = dict(self._quotas.get(entity, _EMPTY))
        if rec.remove:
            values.pop(rec.key, None)
        else:
            values[rec.key] = rec.value
        if values:
            self._quotas[entity] = MappingProxyType(values)
        else:
            self._quotas.pop(entity, None)

    def apply(self) -> SecurityImage:
        img = self.image
        if self._acls is None and self._scram is None and self._quotas is None:
            return img
        self.image = SecurityImage(
            acls=img.acls if self._acls is None else MappingProxyType(self._acls),
            scram=img.scram if self._scram is None else MappingProxyType(self._scram),
            quotas=img.quotas if self._quotas is None else MappingProxyType(self._quotas),
            generation=img.generation + 1,
        )
        self._acls = self._scram = self._quotas = None  # the next change copies again
        return self.image


def _mechanism(rec: Any) -> ScramMechanism:
    try:
        return ScramMechanism(rec.mechanism)
    except ValueError:
        raise SecurityReplayError(f"{rec}: unknown SCRAM mechanism {rec.mechanism}") from None


_HANDLERS = {
    AccessControlEntryRecord: SecurityDelta._add_acl,
    RemoveAccessControlEntryRecord: SecurityDelta._remove_acl,
    UserScramCredentialRecord: SecurityDelta._add_credential,
    RemoveUserScramCredentialRecord: SecurityDelta._remove_credential,
    ClientQuotaRecord: SecurityDelta._quota,
}


# -- the single node's JSON form --------------------------------------------------------

def _b64(b: bytes) -> str:
    return base64.b64encode(bytes(b)).decode()


def to_json(rec: Any) -> dict[str, Any]:
    """A security record as the single node's metadata store keeps it (JSON-safe: ids as
    strings, bytes in base64, an entity as [[type, name], ...])."""
    out: dict[str, Any] = {"type": rec.NAME}
    if isinstance(rec, (AccessControlEntryRecord, RemoveAccessControlEntryRecord)):
        out["id"] = str(rec.id)
        if isinstance(rec, AccessControlEntryRecord):
            out.update(resource_type=rec.resource_type, resource_name=rec.resource_name,
                       pattern_type=rec.pattern_type, principal=rec.principal, host=rec.host,
                       operation=rec.operation, permission_type=rec.permission_type)
    elif isinstance(rec, (UserScramCredentialRecord, RemoveUserScramCredentialRecord)):
        out.update(name=rec.name, mechanism=rec.mechanism)
        if isinstance(rec, UserScramCredentialRecord):
            out.update(salt=_b64(rec.salt), stored_key=_b64(rec.stored_key),
                       server_key=_b64(rec.server_key), iterations=rec.iterations)
    elif isinstance(rec, ClientQuotaRecord):
        out.update(entity=[[e.entity_type, e.entity_name] for e in rec.entity], key=rec.key,
                   value=rec.value, remove=rec.remove)
    else:
        raise TypeError(f"not a security record: {rec!r}")
    return out


def from_json(d: Mapping[str, Any]) -> Any:
    """The record ``to_json`` gave ``d`` for."""
    kind = d["type"]
    if kind == "AccessControlEntryRecord":
        return AccessControlEntryRecord(
            id=UUID(d["id"]), resource_type=d["resource_type"], resource_name=d["resource_name"],
            pattern_type=d["pattern_type"], principal=d["principal"], host=d["host"],
            operation=d["operation"], permission_type=d["permission_type"])
    if kind == "RemoveAccessControlEntryRecord":
        return RemoveAccessControlEntryRecord(id=UUID(d["id"]))
    if kind == "UserScramCredentialRecord":
        return UserScramCredentialRecord(
            name=d["name"], mechanism=d["mechanism"], salt=base64.b64decode(d["salt"]),
            stored_key=base64.b64decode(d["stored_key"]),
            server_key=base64.b64decode(d["server_key"]), iterations=d["iterations"])
    if kind == "RemoveUserScramCredentialRecord":
        return RemoveUserScramCredentialRecord(name=d["name"], mechanism=d["mechanism"])
    if kind == "ClientQuotaRecord":
        return ClientQuotaRecord(entity=[EntityData(entity_type=t, entity_name=n)
                                         for t, n in d["entity"]],
                                 key=d["key"], value=d["value"], remove=d["remove"])
    raise ValueError(f"not a security record type: {kind!r}")
