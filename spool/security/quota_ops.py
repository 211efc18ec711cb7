"""AlterClientQuotas and DescribeClientQuotas from a ``SecurityImage`` (sans I/O).

Kafka's rules (``ClientQuotaControlManager``, ``ClientQuotasImage.describe``,
``QuotaConfig``):

- An entity is a set of (type, name) pairs; types ``user``, ``client-id``, ``ip``; a
  name of None is the type's default. Refused with INVALID_REQUEST: no pairs ("Invalid
  empty client quota entity"), a type twice, another type ("Unhandled client quota
  entity type: <t>"), an empty name ("Empty <t> not supported"), ``ip`` with ``user``
  or ``client-id``, an ``ip`` that is not an IP address.
- Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (whole numbers),
  ``request_percentage``, ``controller_mutation_rate`` for user/client-id entities;
  ``connection_creation_rate`` (a whole number) for ip. Another key: "Invalid
  configuration key <k>"; a value <= 0: "Quota <k> must be greater than 0"; a fraction
  for an integral key: "<k> cannot be a fractional value." One failing op fails the
  whole entity; a key twice in one entity, or an entity twice in the request, is
  "Ignoring duplicate entity ..." (as Kafka words it).
- Only changes are written: a ClientQuotaRecord per value that differs, a removal
  (remove=true) only for a key the entity has.
- Describe filters by components (entity type, match type 0 exact name, 1 the default,
  2 any name): an empty type, a type twice, an exact match without a name, a default or
  "any" match with one: INVALID_REQUEST; a type other than user/client-id/ip:
  UNSUPPORTED_VERSION; ip with user or client-id: INVALID_REQUEST. ``strict``: the
  entity has exactly the filtered types; else at least them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from spool.protocol._generated.client_quota_record import ClientQuotaRecord, EntityData
from spool.protocol.errors import Errors, KafkaError
from spool.security.image import QuotaEntity, SecurityImage, quota_entity

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
LONG, DOUBLE, INT = "long", "double", "int"
USER_CLIENT_KEYS = {"producer_byte_rate": LONG, "consumer_byte_rate": LONG,
                    "request_percentage": DOUBLE, "controller_mutation_rate": DOUBLE}
IP_KEYS = {"connection_creation_rate": INT}
_MAX = {LONG: float(2**63 - 1), INT: float(2**31 - 1)}


class QuotaOp(NamedTuple):
    key: str
    value: float
    remove: bool


class Alteration(NamedTuple):
    entity: Sequence[tuple[str, str | None]]  # as the request lists it
    ops: Sequence[QuotaOp]


def _invalid(message: str) -> KafkaError:
    return KafkaError(Errors.INVALID_REQUEST, message)


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString``."""
    inner = ", ".join(f"{t}={n if n is not None else 'null'}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _entity_keys(entity: Sequence[tuple[str, str | None]]) -> Mapping[str, str] | KafkaError:
    if not entity:
        return _invalid("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for t, n in entity:
        if t in seen:
            return _invalid(f"Invalid client quota entity, duplicate entity entry {t}")
        if t not in (USER, CLIENT_ID, IP):
            return _invalid(f"Unhandled client quota entity type: {t}")
        if n is not None and not n:
            return _invalid(f"Empty {t} not supported")
        seen[t] = n
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            return _invalid("Invalid quota entity combination, IP entity should"
                            "not be combined with User or ClientId")
        if seen[IP] is not None and not _is_ip(seen[IP]):
            return _invalid(f"{seen[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _check_value(keys: Mapping[str, str], key: str, value: float) -> KafkaError | None:
    kind = keys.get(key)
    if kind is None:
        return _invalid(f"Invalid configuration key {key}")
    if value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if kind == DOUBLE:
        return None
    if value > _MAX[kind]:
        article = "a" if kind == LONG else "an"
        return _invalid(f"Proposed value for {key} is too large for {article} {kind.upper()}.")
    if abs(value % 1.0) > 1e-6:
        return _invalid(f"{key} cannot be a fractional value.")
    return None


def alter_quotas(image: SecurityImage, alterations: Sequence[Alteration]
                 ) -> tuple[list[Any], list[tuple[QuotaEntity, KafkaError | None]]]:
    """(ClientQuotaRecords, one (entity, None or its error) per distinct entity, in
    first-seen order)."""
    records: list[Any] = []
    results: dict[QuotaEntity, KafkaError | None] = {}
    for alt in alterations:
        key = quota_entity(alt.entity)
        changes: dict[str, float | None] = {}
        duplicate_key = False
        for op in alt.ops:
            if op.key in changes:
                duplicate_key = True
            else:
                changes[op.key] = None if op.remove else op.value
        if duplicate_key or key in results:
            results[key] = _invalid(f"Ignoring duplicate entity {entity_text(alt.entity)}")
            continue
        results[key] = _alter_entity(image, alt.entity, key, changes, records)
    return records, list(results.items())


def _alter_entity(image: SecurityImage, entity: Sequence[tuple[str, str | None]],
                  key: QuotaEntity, changes: Mapping[str, float | None],
                  records: list[Any]) -> KafkaError | None:
    keys = _entity_keys(entity)
    if isinstance(keys, KafkaError):
        return keys
    current = image.quotas.get(key, {})
    new: list[Any] = []
    for name, value in changes.items():
        if value is None:
            if name in current:
                new.append(ClientQuotaRecord(entity=_entity_data(key), key=name, remove=True))
            continue
        error = _check_value(keys, name, value)
        if error is not None:
            return error
        if current.get(name) != value:
            new.append(ClientQuotaRecord(entity=_entity_data(key), key=name, value=value,
                                         remove=False))
    records += new
    return None


def _entity_data(entity: QuotaEntity) -> list[EntityData]:
    return [EntityData(entity_type=t, entity_name=n) for t, n in entity]


class Component(NamedTuple):
    entity_type: str
    match_type: int
    match: str | None


def describe_quotas(image: SecurityImage, components: Sequence[Component], strict: bool
                    ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities the filter matches with their values (module doc); raises KafkaError
    for a bad filter."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        t = c.entity_type
        if not t:
            raise _invalid("Invalid empty entity type.")
        if t in exact or t in typed:
            raise _invalid(f"Entity type {t} cannot appear more than once in the filter.")
        if t not in (IP, USER, CLIENT_ID):
            raise KafkaError(Errors.UNSUPPORTED_VERSION, f"Unsupported entity type {t}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string "
                               "to null.")
            exact[t] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise _invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a "
                               "match string.")
            exact[t] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise _invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a "
                               "match string.")
            typed.add(t)
        else:
            raise _invalid(f"Unknown match type {c.match_type}")
    named = set(exact) | typed
    if IP in named and (USER in named or CLIENT_ID in named):
        raise _invalid("Invalid entity filter component combination. IP filter component "
                       "should not be used with user or clientId filter component.")
    out = []
    for entity, values in image.quotas.items():
        d = dict(entity)
        if strict and len(d) != len(named):
            continue
        if all(t in d and d[t] == n for t, n in exact.items()) and typed <= d.keys():
            out.append((entity, values))
    return out
