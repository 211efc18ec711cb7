"""Kafka 4.2's API message specs, rebuilt from kio's per-version classes.

kio (PyPI ``kio``, pinned in ``KIO_VERSION``) is generated from Apache
Kafka's message JSON: one frozen dataclass per message *version*
(``kio.schema.<api>.v<N>.request``/``response``), with the fields present at
that version in wire order, ``field.metadata['kafka_type']`` (and ``tag``
for tagged fields), the field's default, ``| None`` where the field is
nullable at that version, and ``__flexible__``. ``api_specs()`` folds those
per-version classes back into one dict per message in Kafka's JSON spec
format (``validVersions``, ``flexibleVersions``, every field's
``versions``/``nullableVersions``/``taggedVersions``/``tag``/``default``,
struct types as ``commonStructs``), which ``tools.codegen.schema.build_spec``
reads like any other spec. What the fold needs:

* **Field order**: one order per struct that every version's order is a
  subsequence of (a field first seen at version N goes right after the field
  before it at N); a version whose order disagrees is an error.
* **Ranges**: a field's versions (and nullable and tagged versions) must be
  one contiguous range, its type, tag and default the same at every version;
  otherwise an error (Kafka's spec format could not express it either).
* **Types**: kio's ``error_code`` is Kafka's int16; ``timedelta_i32``/
  ``timedelta_i64`` are int32/int64 milliseconds; ``datetime_i64`` is an
  int64 millisecond timestamp. kio types a ``uuid`` and a ``datetime_i64``
  ``| None`` for the zero UUID and -1: these are not nullable in Kafka, so
  ``| None`` means nullable only on string, bytes, records, arrays and
  structs.
* **Names**: kio's attribute is the snake_case Kafka name, minus the ``Ms``
  suffix of the time types (``ThrottleTimeMs`` -> ``throttle_time``). The
  Kafka name is rebuilt as CamelCase plus ``Ms`` for those types, then
  ``KAFKA_NAMES`` fixes the few that kio spells differently from our
  snake_case rule (``tools.codegen.naming``), which keeps the attribute names
  the handlers use. ``tests/unit/test_kio_specs.py`` checks the rebuilt
  names against every Kafka JSON spec at hand.
* **Defaults**: kio's defaults converted back (timedeltas to milliseconds,
  a struct instance to Kafka's all-default struct, ``None`` to ``null`` on
  nullable types and to the implicit default on uuid/timestamps).
* **Docs**: each field's ``about`` is its attribute docstring in kio's
  source (read with ``ast``; Python drops attribute docstrings at runtime).
* **Listeners**: kio has none; they come from ``LISTENERS`` (Kafka 4.2's
  ``listeners`` of each request; informational in ``ApiEntry``).
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import importlib
import inspect
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any

KIO_VERSION = '0.6.5'

# kio kafka_type -> Kafka spec type
_TYPES = {
    'error_code': 'int16', 'timedelta_i32': 'int32', 'timedelta_i64': 'int64',
    'datetime_i64': 'int64',
}
_TIME_TYPES = frozenset({'timedelta_i32', 'timedelta_i64', 'datetime_i64'})
_NULLABLE_PRIMITIVES = frozenset({'string', 'bytes', 'records'})

# (message, kio attribute) -> Kafka field name, where the rule above misses
# (none in kio 0.6.5: tests/unit/test_kio_specs.py checks every name it can)
KAFKA_NAMES: dict[tuple[str, str], str] = {}

# (message, struct, kio attribute) -> Kafka's JSON default that kio leaves out
# (kio makes these nullable arrays required fields, without a default)
DEFAULTS: dict[tuple[str, str, str], str] = {
    ('ListPartitionReassignmentsRequest', 'ListPartitionReassignmentsRequest', 'topics'): 'null',
    ('ConsumerGroupHeartbeatRequest', 'ConsumerGroupHeartbeatRequest', 'topic_partitions'):
        'null',
}

# (message, struct) -> Kafka's field order, where kio cannot tell it: fields
# that are never on the wire at the same version (a field and its
# replacement) could go either way round. Only the class layout (``__slots__``,
# positional arguments) depends on it, never the wire.
ORDER: dict[tuple[str, str], tuple[str, ...]] = {
    ('AddPartitionsToTxnRequest', 'AddPartitionsToTxnRequest'): (
        'transactions', 'v3_and_below_transactional_id', 'v3_and_below_producer_id',
        'v3_and_below_producer_epoch', 'v3_and_below_topics'),
    ('AddPartitionsToTxnResponse', 'AddPartitionsToTxnResponse'): (
        'throttle_time', 'error_code', 'results_by_transaction', 'results_by_topic_v3_and_below'),
    ('DeleteTopicsRequest', 'DeleteTopicsRequest'): ('topics', 'topic_names', 'timeout'),
    ('OffsetCommitRequest', 'OffsetCommitRequest'): (
        'group_id', 'generation_id_or_member_epoch', 'member_id', 'group_instance_id',
        'retention_time', 'topics'),
}

# Kafka's listeners of each API (its JSON's ``listeners``; informational, in
# ``ApiEntry.listeners``), by api key. From the JSON specs of apache/kafka
# 1eb7644 and kafka-python 3.0.12, without the retired ``zkBroker``; the
# APIs newer than those (88-92) are broker APIs.
_B, _C, _BC = ('broker',), ('controller',), ('broker', 'controller')
LISTENERS: dict[int, tuple[str, ...]] = {
    0: _B, 1: _BC, 2: _B, 3: _B, 8: _B, 9: _B, 10: _B, 11: _B, 12: _B, 13: _B, 14: _B,
    15: _B, 16: _B, 17: _BC, 18: _BC, 19: _BC, 20: _BC, 21: _B, 22: _B, 23: _B, 24: _B,
    25: _B, 26: _B, 27: _B, 28: _B, 29: _BC, 30: _BC, 31: _BC, 32: _BC, 33: _BC, 34: _B,
    35: _B, 36: _BC, 37: _BC, 38: _BC, 39: _BC, 40: _BC, 41: _BC, 42: _B, 43: _BC, 44: _BC,
    45: _BC, 46: _BC, 47: _B, 48: _B, 49: _BC, 50: _BC, 51: _BC, 52: _C, 53: _C, 54: _C,
    55: _BC, 56: _C, 57: _BC, 58: _C, 59: _C, 60: _BC, 61: _B, 62: _C, 63: _C, 64: _BC,
    65: _B, 66: _B, 67: _C, 68: _B, 69: _B, 70: _C, 71: _B, 72: _B, 73: _C, 74: _B, 75: _B,
    76: _B, 77: _B, 78: _B, 79: _B, 80: _BC, 81: _BC, 82: _C, 83: _B, 84: _B, 85: _B, 86: _B,
    87: _B, 88: _B, 89: _B, 90: _B, 91: _B, 92: _B,
}


class KioSpecError(ValueError):
    pass


@dataclasses.dataclass
class _FieldAt:
    """One field of one struct at one version, as kio has it."""
    kafka_type: str
    is_array: bool
    optional: bool
    tag: int | None
    default: Any
    struct: str | None      # struct type name
    about: str


@dataclasses.dataclass
class _Field:
    kio_name: str
    at: dict[int, _FieldAt] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Struct:
    name: str
    fields: list[_Field] = dataclasses.field(default_factory=list)

    def get(self, kio_name: str) -> _Field | None:
        for f in self.fields:
            if f.kio_name == kio_name:
                return f
        return None


def _camel(snake: str) -> str:
    return ''.join(p[:1].upper() + p[1:] for p in snake.split('_'))


def kafka_name(message: str, kio_name: str, kafka_type: str) -> str:
    override = KAFKA_NAMES.get((message, kio_name))
    if override is not None:
        return override
    name = _camel(kio_name)
    return name + 'Ms' if kafka_type in _TIME_TYPES else name


@cache
def _docstrings(cls: type) -> dict[str, str]:
    """Attribute docstrings of a kio dataclass (the string after each field)."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            docs = {}
            body = node.body
            for a, b in zip(body, body[1:], strict=False):
                if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
                        and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                        and isinstance(b.value.value, str)):
                    docs[a.target.id] = b.value.value
            return docs
    return {}


def _unwrap(tp: Any) -> tuple[Any, bool, bool]:
    """(inner type, is array, optional) of a kio field annotation."""
    optional = False
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise KioSpecError(f'unsupported union {tp}')
        optional = True
        tp = args[0]
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise KioSpecError(f'unsupported tuple {tp}')
        return args[0], True, optional
    return tp, False, optional


def _walk(cls: type, version: int, structs: dict[str, _Struct], seen: dict[str, type]) -> None:
    name = cls.__name__
    if seen.get(name, cls) is not cls:
        raise KioSpecError(f'v{version}: two struct classes named {name}')
    seen[name] = cls
    struct = structs.setdefault(name, _Struct(name))
    hints = typing.get_type_hints(cls)
    docs = _docstrings(cls)
    prev: _Field | None = None
    names = {fld.name for fld in dataclasses.fields(cls)}
    for fld in dataclasses.fields(cls):
        inner, is_array, optional = _unwrap(hints[fld.name])
        child = None
        if dataclasses.is_dataclass(inner):
            child = inner.__name__
            _walk(inner, version, structs, seen)
            kafka_type = child
        else:
            kafka_type = fld.metadata['kafka_type']
        if fld.default is not dataclasses.MISSING:
            default = fld.default
        elif fld.default_factory is not dataclasses.MISSING:
            default = fld.default_factory()
        else:
            default = dataclasses.MISSING
        at = _FieldAt(kafka_type, is_array, optional, fld.metadata.get('tag'), default, child,
                      docs.get(fld.name, ''))
        f = struct.get(fld.name)
        if f is None:
            f = _Field(fld.name)
            pos = 0 if prev is None else struct.fields.index(prev) + 1
            # after the fields retired before this version (Kafka lists a
            # replacement after the field it replaces)
            while pos < len(struct.fields) and struct.fields[pos].kio_name not in names:
                pos += 1
            struct.fields.insert(pos, f)
        elif prev is not None and struct.fields.index(f) < struct.fields.index(prev):
            raise KioSpecError(f'{name}.{fld.name}: order differs at v{version}')
        f.at[version] = at
        prev = f


def _check_order(cls: type, structs: dict[str, _Struct]) -> None:
    """Every version's field order is a subsequence of the merged order."""
    merged = [f.kio_name for f in structs[cls.__name__].fields]
    names = [f.name for f in dataclasses.fields(cls)]
    if [n for n in merged if n in names] != names:
        raise KioSpecError(f'{cls.__name__}: field order {names} is not {merged}')
    for fld in dataclasses.fields(cls):
        inner, _, _ = _unwrap(typing.get_type_hints(cls)[fld.name])
        if dataclasses.is_dataclass(inner):
            _check_order(inner, structs)


def _range(versions: list[int], what: str) -> str | None:
    if not versions:
        return None
    lo, hi = versions[0], versions[-1]
    if versions != list(range(lo, hi + 1)):
        raise KioSpecError(f'{what}: versions {versions} are not one range')
    return f'{lo}' if lo == hi else f'{lo}-{hi}'


def _same(values: list[Any], what: str) -> Any:
    first = values[0]
    for v in values[1:]:
        if v != first or type(v) is not type(first):
            raise KioSpecError(f'{what}: differs between versions ({first!r} vs {v!r})')
    return first


def _default(at: _FieldAt, nullable: bool, what: str) -> str | None:
    """Kafka's JSON ``default`` for kio's default (None: the implicit one)."""
    d = at.default
    if d is dataclasses.MISSING:
        return None
    if at.is_array:
        if d == ():
            return None
        if d is None and nullable:
            return 'null'
        raise KioSpecError(f'{what}: array default {d!r}')
    if at.struct is not None:
        if d is None and nullable:
            return 'null'
        if dataclasses.is_dataclass(d) and type(d).__name__ == at.struct:
            if d != type(d)(**{k.name: k.default for k in dataclasses.fields(d)}):
                raise KioSpecError(f'{what}: struct default is not all defaults')
            return None
        raise KioSpecError(f'{what}: struct default {d!r}')
    if d is None:
        if nullable:
            return 'null'
        if at.kafka_type == 'uuid':
            return None
        if at.kafka_type == 'datetime_i64':
            return '-1'
        raise KioSpecError(f'{what}: null default on a non-nullable field')
    if isinstance(d, datetime.timedelta):
        ms = d // datetime.timedelta(milliseconds=1)
        return None if ms == 0 else str(ms)
    if isinstance(d, bool):
        return 'true' if d else None
    if hasattr(d, 'value') and at.kafka_type == 'error_code':
        return None if d.value == 0 else str(d.value)
    if isinstance(d, int):
        return None if d == 0 else str(int(d))
    if isinstance(d, float):
        return None if d == 0.0 else repr(d)
    if isinstance(d, str | bytes):
        if d:
            raise KioSpecError(f'{what}: non-empty string default {d!r}')
        return None
    raise KioSpecError(f'{what}: unsupported default {d!r}')


def _field_json(message: str, struct: _Struct, f: _Field) -> dict[str, Any]:
    what = f'{message}.{struct.name}.{f.kio_name}'
    vs = sorted(f.at)
    ats = [f.at[v] for v in vs]
    kafka_type = _same([a.kafka_type for a in ats], what + ' type')
    is_array = _same([a.is_array for a in ats], what + ' array')
    spec_type = _TYPES.get(kafka_type, kafka_type)
    can_null = is_array or ats[0].struct is not None or kafka_type in _NULLABLE_PRIMITIVES
    nullable = [v for v in vs if f.at[v].optional and can_null]
    tags = [(v, f.at[v].tag) for v in vs if f.at[v].tag is not None]
    out: dict[str, Any] = {
        'name': kafka_name(message, f.kio_name, kafka_type),
        'type': ('[]' if is_array else '') + spec_type,
        'versions': _range(vs, what),
    }
    if nullable:
        out['nullableVersions'] = _range(nullable, what + ' nullable')
    if tags:
        out['taggedVersions'] = _range([v for v, _ in tags], what + ' tagged')
        out['tag'] = int(_same([t for _, t in tags], what + ' tag'))
    defaults = [_default(a, bool(nullable), what) for a in ats]
    default = _same(defaults, what + ' default')
    default = DEFAULTS.get((message, struct.name, f.kio_name), default)
    if default is not None:
        out['default'] = default
    out['about'] = ats[-1].about
    return out


def _message(name: str, kind: str, api_key: int, classes: dict[int, type]) -> dict[str, Any]:
    """One message's spec dict from its per-version classes."""
    structs: dict[str, _Struct] = {}
    for v, cls in sorted(classes.items()):
        _walk(cls, v, structs, {})
    for (message, sname), order in ORDER.items():
        if message == name:
            struct = structs[sname]
            if sorted(order) != sorted(f.kio_name for f in struct.fields):
                raise KioSpecError(f'{name}.{sname}: ORDER does not list its fields')
            struct.fields.sort(key=lambda f: order.index(f.kio_name))
    for cls in classes.values():
        _check_order(cls, structs)
    flexible = [v for v, cls in sorted(classes.items()) if cls.__flexible__]
    valid = sorted(classes)
    if flexible and flexible[-1] != valid[-1]:
        raise KioSpecError(f'{name}: flexible versions {flexible} do not run to the last')
    root = structs.pop(name)
    spec: dict[str, Any] = {
        'apiKey': api_key,
        'kioModule': api_names()[api_key],
        'type': kind,
        'name': name,
        'validVersions': _range(valid, name),
        'flexibleVersions': (f'{flexible[0]}+' if flexible else 'none'),
        'fields': [_field_json(name, root, f) for f in root.fields],
        'commonStructs': [
            {'name': s.name, 'versions': '0+',
             'fields': [_field_json(name, s, f) for f in s.fields]}
            for s in structs.values()
        ],
    }
    if kind == 'request':
        spec['listeners'] = list(LISTENERS[api_key])
    return spec


def _index() -> Any:
    return importlib.import_module('kio.schema.index')


def api_names() -> dict[int, str]:
    """api key -> kio's module name (``fetch``, ``list_offsets``, ...)."""
    return dict(_index().api_key_map)


def kio_classes(api_key: int, kind: str) -> dict[int, type]:
    """version -> kio's class for one API's request or response."""
    from pkgutil import resolve_name

    from kio.static.constants import EntityType
    entity = EntityType.request if kind == 'request' else EntityType.response
    by_version = _index().schema_name_map[api_names()[api_key]]
    return {v: resolve_name(paths[entity]) for v, paths in by_version.items() if entity in paths}


def api_specs() -> Iterator[dict[str, Any]]:
    """Kafka-JSON-format dicts of every API message kio has, by api key, request first."""
    for api_key in sorted(api_names()):
        for kind in ('request', 'response'):
            classes = kio_classes(api_key, kind)
            name = next(iter(classes.values())).__name__
            yield _message(name, kind, api_key, classes)


def source(spec: dict[str, Any]) -> str:
    """Where a spec of :func:`api_specs` comes from, for the generated module's header."""
    return f'kio {KIO_VERSION} kio.schema.{spec["kioModule"]}'
