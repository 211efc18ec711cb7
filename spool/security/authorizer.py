"""Kafka's ``StandardAuthorizer``: may this principal, from this host, do this operation
to this resource, given the ACLs of a ``SecurityImage``?

``authorize(image, principal, host, op, resource_type, name)`` decides as Kafka's
``StandardAuthorizerData.authorize`` does, for the LITERAL resource ``name``:

1. A principal listed in ``super.users`` (``User:admin;User:broker``) may do anything.
2. The ACLs that apply to the resource are those of its type whose pattern matches the
   name: LITERAL with the same name, LITERAL ``*`` (every resource of the type), and
   PREFIXED whose name is a prefix of it (the empty prefix included).
3. Of those, an entry matches the request when its principal is the request's or
   ``User:*``, its host is the request's address or ``*``, and its operation is the one
   asked, or ``ALL``, or, for an ALLOW entry only, one that implies it: READ, WRITE,
   DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
4. A matching DENY decides: denied, whatever ALLOWs match (deny beats allow).
   Else a matching ALLOW: allowed. Else, if any ACL applies to the resource (step 2,
   whoever it names): denied. Else ``allow.everyone.if.no.acl.found`` decides (false,
   Kafka's default: denied).

``authorize_by_resource_type(image, principal, host, op, resource_type)`` is Kafka's
``Authorizer.authorizeByResourceType`` (KIP-679: an idempotent producer may write
if it may WRITE some topic): allowed if the principal would be allowed on a resource
named ``hardcode`` (super users, a wildcard ALLOW, allow-everyone), else if some
LITERAL or PREFIXED ALLOW of ``op`` (or ALL) names a resource that no DENY covers (a
LITERAL deny of the same name, a PREFIXED deny of one of its prefixes); a LITERAL ``*``
DENY denies outright. Implied operations play no part there, as in Kafka.

Cost: the image's ACLs are indexed once per ACL set (a ``SecurityImage`` is immutable and
keeps its ``acls`` mapping when a change touches only credentials or quotas, so the
mapping's identity says when to rebuild; finer than ``generation``) into dicts by
(resource type, name) and by (resource type, prefix length); every decision is then
memoised until the ACLs change, so a repeated check (Produce and Fetch ask once per topic
per request) is one dict lookup. The memo is
bounded (``MEMO_LIMIT`` entries, then it starts again). The authorizer is not thread
safe beyond what the GIL gives: a rebuild replaces the whole index at once, so a reader
on another thread sees the old index or the new one.

A denial is logged at INFO on ``spool.authorizer`` in the words of Kafka's audit log
("Principal = User:bob is Denied operation = WRITE from host = 10.0.0.2 on resource =
Topic:LITERAL:orders"), once per decision: a memoised one is not logged again until the
ACLs change. Checks that only filter or describe (``log_denied=False``: Metadata for all
topics, ListGroups, authorized operations, authorize_by_resource_type's probe) log nothing,
as Kafka logs those at TRACE.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from spool.protocol.acl import SUPPORTED_OPERATIONS, AclOperation, ResourceType
from spool.security.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclPermissionType,
    PatternType,
)
from spool.security.principal import KafkaPrincipal

log = logging.getLogger("spool.authorizer")
_RESOURCE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
                   ResourceType.CLUSTER: "Cluster", ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                   ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}

STANDARD_AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SPOOL_AUTHORIZER_CLASS = "spool.security.authorizer.StandardAuthorizer"
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER_CLASS, SPOOL_AUTHORIZER_CLASS)
MEMO_LIMIT = 100_000
HARDCODE = "hardcode"  # Kafka's stand-in resource name in authorizeByResourceType

_O = AclOperation
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER, _O.ALL}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
}
_ALLOW = AclPermissionType.ALLOW
_DENY = AclPermissionType.DENY


class AclSource(Protocol):
    """What the authorizer reads of ``spool.security.image.SecurityImage``."""

    @property
    def acls(self) -> Mapping[Any, AclBinding]: ...


class _Entry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


class _Index:
    """One set of ACLs, by where they apply."""

    __slots__ = ("literal", "prefixed", "prefix_lengths", "by_type")

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        # (type, name) -> entries; LITERAL "*" lives here too, under the name "*"
        self.literal: dict[tuple[int, str], list[_Entry]] = {}
        self.prefixed: dict[tuple[int, str], list[_Entry]] = {}
        self.prefix_lengths: dict[int, list[int]] = {}  # type -> prefix lengths, ascending
        self.by_type: dict[int, list[AclBinding]] = {}
        for b in acls:
            entry = _Entry(b.principal, b.host, b.operation, b.permission_type)
            key = (int(b.resource_type), b.resource_name)
            if b.pattern_type == PatternType.LITERAL:
                self.literal.setdefault(key, []).append(entry)
            elif b.pattern_type == PatternType.PREFIXED:
                self.prefixed.setdefault(key, []).append(entry)
                lengths = self.prefix_lengths.setdefault(key[0], [])
                if len(b.resource_name) not in lengths:
                    lengths.append(len(b.resource_name))
            else:
                continue  # filters' pattern types never name a stored ACL
            self.by_type.setdefault(key[0], []).append(b)
        for lengths in self.prefix_lengths.values():
            lengths.sort()

    def applicable(self, rtype: int, name: str) -> list[list[_Entry]]:
        """The entry lists of every pattern matching the LITERAL resource (step 2)."""
        found = []
        entries = self.literal.get((rtype, name))
        if entries:
            found.append(entries)
        if name != WILDCARD:
            entries = self.literal.get((rtype, WILDCARD))
            if entries:
                found.append(entries)
        for n in self.prefix_lengths.get(rtype, ()):
            if n > len(name):
                break
            entries = self.prefixed.get((rtype, name[:n]))
            if entries:
                found.append(entries)
        return found


def _decide(sections: list[list[_Entry]], principal: str, host: str,
            op: AclOperation, default: bool) -> bool:
    """Steps 3 and 4 over the applicable entries."""
    if not sections:
        return default
    implied = _IMPLIED_BY.get(op)
    allowed = False
    for entries in sections:
        for e in entries:
            if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.host != WILDCARD and e.host != host:
                continue
            if e.permission == _DENY:
                if e.operation == op or e.operation == _O.ALL:
                    return False
            elif e.permission == _ALLOW and not allowed:
                if e.operation == op or e.operation == _O.ALL or (
                        implied is not None and e.operation in implied):
                    allowed = True
    return allowed


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's split, blanks dropped);
    ValueError for one that is not ``Type:name``."""
    users = set()
    for item in (value or "").split(";"):
        item = item.strip()
        if item:
            KafkaPrincipal.parse(item)
            users.add(item)
    return frozenset(users)


class StandardAuthorizer:
    """Kafka's StandardAuthorizer over a ``SecurityImage`` (see the module docstring)."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: object = None
        self._index = _Index(())
        self._memo: dict[tuple, bool] = {}

    def _current(self, image: AclSource) -> _Index:
        acls = image.acls
        if acls is not self._acls:
            index = _Index(acls.values())
            self._memo = {}
            self._index = index
            self._acls = acls
        return self._index

    def authorize(self, image: AclSource, principal: str, host: str, op: AclOperation,
                  resource_type: ResourceType, name: str, log_denied: bool = True) -> bool:
        """Whether ``principal`` (``User:alice``) from ``host`` may ``op`` the LITERAL
        resource ``resource_type``/``name``."""
        if principal in self.super_users:
            return True
        index = self._current(image)
        key = (principal, host, op, resource_type, name)
        memo = self._memo
        result = memo.get(key)
        if result is None:
            result = _decide(index.applicable(resource_type, name), principal, host, op,
                             self.allow_everyone_if_no_acl_found)
            if not result and log_denied and log.isEnabledFor(logging.INFO):
                log.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                         "%s:LITERAL:%s", principal, AclOperation(op).name, host,
                         _RESOURCE_NAMES.get(resource_type, str(resource_type)), name)
            if len(memo) >= MEMO_LIMIT:
                memo.clear()
            memo[key] = result
        return result

    def authorize_by_resource_type(self, image: AclSource, principal: str, host: str,
                                   op: AclOperation, resource_type: ResourceType) -> bool:
        """Whether ``principal`` may ``op`` at least one resource of the type (KIP-679)."""
        if self.authorize(image, principal, host, op, resource_type, HARDCODE, False):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for b in self._current(image).by_type.get(int(resource_type), ()):
            if b.host != host and b.host != WILDCARD:
                continue
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.operation != op and b.operation != _O.ALL:
                continue
            if b.permission_type == _DENY:
                if b.pattern_type == PatternType.LITERAL:
                    if b.resource_name == WILDCARD:
                        return False
                    deny_literal.add(b.resource_name)
                else:
                    deny_prefixed.add(b.resource_name)
            elif b.permission_type == _ALLOW:
                if b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD:
                    return True
                allow.append((b.pattern_type, b.resource_name))
        for pattern, name in allow:
            if pattern == PatternType.LITERAL and name in deny_literal:
                continue
            if any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                continue
            return True
        return False

    def authorized_operations(self, image: AclSource, principal: str, host: str,
                              resource_type: ResourceType, name: str) -> frozenset[AclOperation]:
        """The operations the resource type supports that ``principal`` may perform on
        ``name`` (Kafka's ``AuthHelper.authorizedOperations``)."""
        return frozenset(op for op in SUPPORTED_OPERATIONS[resource_type]
                         if self.authorize(image, principal, host, op, resource_type, name,
                                           False))


class _Config(Protocol):
    def get(self, key: str) -> str | None: ...


def configured(values: _Config | Mapping[str, str]) -> StandardAuthorizer | None:
    """The authorizer a broker's config asks for: None when ``authorizer.class.name`` is
    empty; ``super.users`` and ``allow.everyone.if.no.acl.found`` as Kafka reads them.
    ValueError for a class Spool does not have."""
    cls = (values.get("authorizer.class.name") or "").strip()
    if not cls:
        return None
    if cls not in AUTHORIZER_CLASSES:
        raise ValueError(f"authorizer.class.name={cls}: Spool's authorizer is "
                         f"{STANDARD_AUTHORIZER_CLASS} (or {SPOOL_AUTHORIZER_CLASS})")
    allow = (values.get("allow.everyone.if.no.acl.found") or "false").strip().lower() == "true"
    return StandardAuthorizer(parse_super_users(values.get("super.users")), allow)
