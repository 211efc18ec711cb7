"""CreateAcls, DeleteAcls and DescribeAcls computed from a ``SecurityImage`` (sans I/O).

The rules are Kafka's (``AclApis`` on the broker, ``AclControlManager`` on the
controller, ``ResourcePatternFilter``/``AccessControlEntryFilter`` for matching):

- A new ACL is refused (INVALID_REQUEST, that ACL only) with a resource type UNKNOWN or
  ANY, a pattern type other than LITERAL or PREFIXED, an operation UNKNOWN or ANY, a
  permission type other than ALLOW or DENY, an empty resource name ("Invalid empty
  resource name"), or a CLUSTER resource not named ``kafka-cluster``. A wire code Kafka
  does not know reads as UNKNOWN. An ACL equal to one that exists (or to one earlier
  in the request) succeeds and writes nothing; each new one gets a fresh random id and
  one AccessControlEntryRecord.
- A filter with an UNKNOWN part is refused (INVALID_REQUEST "Unknown patternFilter." /
  "Unknown entryFilter."); else it deletes every ACL it matches (one
  RemoveAccessControlEntryRecord per ACL, however many filters match it) and lists them.
- Matching: resource type ANY matches every type; pattern type ANY matches every
  pattern type with the exact name, MATCH matches the ACLs that apply to the named
  resource (the LITERAL ACL of that name, the LITERAL ``*`` one, the PREFIXED ones
  whose name is a prefix of it); a null name, principal or host matches any; operation
  and permission type ANY match any.
- More than ``MAX_RECORDS_PER_USER_OP`` records in one request: POLICY_VIOLATION for
  the whole request, nothing written (Kafka's bounded record list).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from enum import IntEnum
from typing import Any, NamedTuple, TypeVar
from uuid import UUID

from spool.protocol._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError
from spool.security.acls import WILDCARD, AclBinding, AclPermissionType, PatternType
from spool.security.image import SecurityImage, acl_record

CLUSTER_NAME = "kafka-cluster"
MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP
EXCESSIVE = "Unable to perform excessively large batch operation"

E = TypeVar("E", bound=IntEnum)


def code(enum: type[E], value: int) -> E:
    """``value`` as ``enum``; a code Kafka does not know is UNKNOWN (its ``fromCode``)."""
    try:
        return enum(value)
    except ValueError:
        return enum(0)


class AclFilter(NamedTuple):
    """Kafka's ``AclBindingFilter``: None for the name, principal or host matches any."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, b: AclBinding) -> bool:
        return (self._pattern_matches(b)
                and (self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (AclOperation.ANY, b.operation)
                and self.permission_type in (AclPermissionType.ANY, b.permission_type))

    def _pattern_matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return name == b.resource_name
        if b.pattern_type == PatternType.LITERAL:  # MATCH
            return name == b.resource_name or b.resource_name == WILDCARD
        return name.startswith(b.resource_name)

    def unknown(self) -> str | None:
        """Kafka's message for a filter with an UNKNOWN part, None if it has none."""
        if self.pattern_type == PatternType.UNKNOWN or self.resource_type == ResourceType.UNKNOWN:
            return "Unknown patternFilter."
        if (self.operation == AclOperation.UNKNOWN
                or self.permission_type == AclPermissionType.UNKNOWN):
            return "Unknown entryFilter."
        return None


def binding_of(resource_type: int, resource_name: str, pattern_type: int, principal: str,
               host: str, operation: int, permission_type: int) -> AclBinding:
    """A binding from wire codes (unknown codes as UNKNOWN)."""
    return AclBinding(code(ResourceType, resource_type), resource_name,
                      code(PatternType, pattern_type), principal, host,
                      code(AclOperation, operation), code(AclPermissionType, permission_type))


def filter_of(resource_type: int, resource_name: str | None, pattern_type: int,
              principal: str | None, host: str | None, operation: int,
              permission_type: int) -> AclFilter:
    """A filter from wire codes (unknown codes as UNKNOWN)."""
    return AclFilter(code(ResourceType, resource_type), resource_name,
                     code(PatternType, pattern_type), principal, host,
                     code(AclOperation, operation), code(AclPermissionType, permission_type))


def validate_new_acl(b: AclBinding) -> KafkaError | None:
    """Why Kafka refuses to create ``b`` (module doc), None if it may."""
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not b.resource_name:
        return _invalid("Invalid empty resource name")
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resourceType {b.resource_type.name}")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid(f"Invalid patternType {b.pattern_type.name}")
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid(f"Invalid operation {b.operation.name}")
    if b.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return _invalid(f"Invalid permissionType {b.permission_type.name}")
    return None


def _invalid(message: str) -> KafkaError:
    return KafkaError(Errors.INVALID_REQUEST, message)


def create_acls(image: SecurityImage, bindings: Sequence[AclBinding],
                new_id: Callable[[], UUID] = uuid.uuid4
                ) -> tuple[list[Any], list[KafkaError | None]]:
    """(AccessControlEntryRecords, one result per binding: None or its error)."""
    existing = set(image.acls.values())
    taken = set(image.acls)
    records: list[Any] = []
    results: list[KafkaError | None] = []
    for b in bindings:
        error = validate_new_acl(b)
        if error is None and b not in existing:
            existing.add(b)
            acl_id = new_id()
            while acl_id in taken:
                acl_id = new_id()
            taken.add(acl_id)
            records.append(acl_record(acl_id, b))
        results.append(error)
    _check_size(len(records))
    return records, results


def delete_acls(image: SecurityImage, filters: Sequence[AclFilter]
                ) -> tuple[list[Any], list[KafkaError | list[AclBinding]]]:
    """(RemoveAccessControlEntryRecords, per filter: its error or the ACLs it deletes)."""
    removed: dict[UUID, None] = {}
    results: list[KafkaError | list[AclBinding]] = []
    for f in filters:
        message = f.unknown()
        if message is not None:
            results.append(_invalid(message))
            continue
        matched = matching(image, f)
        for acl_id, _ in matched:
            removed[acl_id] = None
        results.append([b for _, b in matched])
    _check_size(len(removed))
    return [RemoveAccessControlEntryRecord(id=i) for i in removed], results


def matching(image: SecurityImage, f: AclFilter) -> list[tuple[UUID, AclBinding]]:
    """The ACLs ``f`` matches, by id (ordered by resource, then the rest of the binding)."""
    return sorted(((i, b) for i, b in image.acls.items() if f.matches(b)),
                  key=lambda ib: (ib[1], ib[0]))


def group_by_resource(bindings: Iterable[AclBinding]
                      ) -> list[tuple[tuple[ResourceType, str, PatternType], list[AclBinding]]]:
    """Bindings grouped by resource pattern (DescribeAcls' answer), in first-seen order."""
    out: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in bindings:
        out.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    return list(out.items())


def _check_size(n: int) -> None:
    if n > MAX_RECORDS_PER_USER_OP:
        raise KafkaError(Errors.POLICY_VIOLATION,
                         f"{EXCESSIVE}: {n} metadata records, at most "
                         f"{MAX_RECORDS_PER_USER_OP} per request")
