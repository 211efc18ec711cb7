"""The message-spec model and its loader.

``load_specs()`` reads the specs from two sources and returns
:class:`MessageSpec` objects sorted by name:

* Kafka 4.2's API messages as kio publishes them
  (:mod:`tools.codegen.kio_specs` folds kio's per-version classes back into
  Kafka's JSON spec format): the source of every request and response,
  except the few in :data:`overrides.JSON_APIS`;
* the JSON specs vendored under ``tools/codegen/specs`` (``message/``: the
  APIs of ``JSON_APIS``, whose versions Kafka 4.2 dropped and Spool still
  serves, the consumer protocol and Raft control records (``data``);
  ``metadata/``: the ``__cluster_metadata`` records, which kio lacks). A
  vendored request or response not named in ``JSON_APIS`` is an error: kio
  is its source (see ``tools/codegen/specs/README.md``).

It applies :mod:`tools.codegen.overrides` and resolves ``commonStructs`` and
struct references. Header specs (``RequestHeader``/``ResponseHeader``) are
skipped: headers are hand-written in ``spool.protocol``. Spec kinds are
``request``, ``response``, ``data`` (a bare struct with versions) and
``metadata`` (a metadata record: ``apiKey`` is its record type; no header).

A version range is inclusive on both ends; ``none`` is the empty range and
``N+`` ends at :data:`MAX_VERSION`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.codegen import jsonc, kio_specs, overrides
from tools.codegen.naming import attr_name

MAX_VERSION = 0x7FFF

PRIMITIVES = frozenset({
    'int8', 'int16', 'int32', 'int64', 'uint16', 'uint32', 'float64', 'bool',
    'string', 'bytes', 'records', 'uuid',
})
# struct format character of each fixed-width primitive
FIXED = {
    'int8': 'b', 'int16': 'h', 'int32': 'i', 'int64': 'q', 'uint16': 'H',
    'uint32': 'I', 'float64': 'd', 'bool': '?',
}
NULLABLE_TYPES = frozenset({'string', 'bytes', 'records'})
VENDORED_DIR = Path(__file__).resolve().parent / 'specs'
VENDORED_SUBDIRS = ('message', 'metadata', 'coordinator')
# the apache/kafka commit the vendored specs come from (tools/codegen/specs/README.md)
VENDORED_COMMIT = '1eb7644349cb07139d6a3c1ad1986979647cac99'
# vendored files copied from kafka-python 3.0.12's wheel instead (Kafka 4.1+ JSON)
FROM_KAFKA_PYTHON = frozenset({
    'message/ProduceRequest.json', 'message/ProduceResponse.json',
    'message/ConsumerProtocolAssignment.json', 'message/ConsumerProtocolSubscription.json',
})
SKIPPED_TYPES = frozenset({'header'})


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == 'none':
            return NO_VERSIONS
        text = text.strip()
        if text.endswith('+'):
            return cls(int(text[:-1]), MAX_VERSION)
        if '-' in text:
            lo, hi = text.split('-')
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __bool__(self) -> bool:
        return self.lo <= self.hi

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NO_VERSIONS

    def range(self) -> range:
        return range(self.lo, self.hi + 1)

    def as_tuple(self) -> tuple[int, int] | None:
        return (self.lo, self.hi) if self else None


NO_VERSIONS = Versions(1, 0)


@dataclass
class FieldSpec:
    name: str                   # Kafka name, CamelCase
    attr: str                   # Python attribute, snake_case
    type_name: str              # as written in the spec, e.g. "[]int32"
    is_array: bool
    elem: str                   # primitive name or struct name (array element type)
    struct: StructSpec | None   # the struct for struct / []struct fields
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any                # Python value; for struct fields: None or DEFAULT_STRUCT
    ignorable: bool
    zero_copy: bool
    about: str

    @property
    def is_struct(self) -> bool:
        return self.struct is not None and not self.is_array

    def is_tagged_at(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged

    def is_nullable_at(self, version: int) -> bool:
        return version in self.nullable


class _DefaultStruct:
    def __repr__(self) -> str:
        return 'DEFAULT_STRUCT'


DEFAULT_STRUCT: Any = _DefaultStruct()


@dataclass
class StructSpec:
    name: str
    versions: Versions
    fields: list[FieldSpec] = field(default_factory=list)


@dataclass
class MessageSpec:
    name: str
    kind: str                   # "request", "response", "data" or "metadata"
    api_key: int | None         # the API key; for "metadata", the record type
    valid: Versions
    flexible: Versions
    root: StructSpec
    structs: list[StructSpec]   # nested structs, children before parents (root excluded)
    source: str                 # spec file name, or the kio package it comes from
    vendored: bool = False      # from tools/codegen/specs, not from kio
    listeners: tuple[str, ...] = ()  # requests: the listener types serving it (Kafka's spec)
    reach: dict[str, list[int]] = field(default_factory=dict)  # struct -> versions on the wire

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


class SpecError(ValueError):
    pass


def _parse_default(ftype: str, is_array: bool, is_struct: bool, raw: Any, nullable: Versions,
                   where: str) -> Any:
    if is_array:
        if raw is None or raw == '':
            return []
        if raw == 'null':
            return None
        raise SpecError(f'{where}: unsupported array default {raw!r}')
    if is_struct:
        if raw == 'null':
            return None
        if raw is None:
            return DEFAULT_STRUCT
        raise SpecError(f'{where}: unsupported struct default {raw!r}')
    if raw == 'null':
        if ftype not in NULLABLE_TYPES or not nullable:
            raise SpecError(f'{where}: null default on a non-nullable field')
        return None
    if ftype in ('int8', 'int16', 'int32', 'int64', 'uint16', 'uint32'):
        return 0 if raw is None or raw == '' else int(str(raw), 0)
    if ftype == 'float64':
        return 0.0 if raw is None or raw == '' else float(raw)
    if ftype == 'bool':
        if raw is None or raw == '':
            return False
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() not in ('true', 'false'):
            raise SpecError(f'{where}: bad bool default {raw!r}')
        return str(raw).lower() == 'true'
    if ftype == 'string':
        return '' if raw is None else str(raw)
    if ftype in ('bytes', 'records'):
        if raw not in (None, ''):
            raise SpecError(f'{where}: unsupported bytes default {raw!r}')
        return b''
    if ftype == 'uuid':
        if raw not in (None, ''):
            raise SpecError(f'{where}: unsupported uuid default {raw!r}')
        return None  # the generator renders ZERO_UUID
    raise SpecError(f'{where}: unknown type {ftype}')


class _Builder:
    """Turns one parsed spec into FieldSpec/StructSpec objects."""

    def __init__(self, data: dict, valid: Versions) -> None:
        self.name = data['name']
        self.valid = valid
        self.common: dict[str, dict] = {s['name']: s for s in data.get('commonStructs', [])}
        self.structs: dict[str, StructSpec] = {}
        self.order: list[StructSpec] = []
        self.defs: dict[str, dict] = {}
        self._collect(data.get('fields', []))
        for cs in self.common.values():
            self._collect(cs['fields'])

    def _collect(self, fields: list[dict]) -> None:
        # First pass: every inline struct definition, so references to a
        # struct defined elsewhere in the same message resolve.
        for f in fields:
            if 'fields' in f:
                sname = f['type'].removeprefix('[]')
                if sname in self.defs and self.defs[sname] is not f:
                    raise SpecError(f'{self.name}: struct {sname} defined twice')
                self.defs[sname] = f
                self._collect(f['fields'])

    def struct(self, sname: str) -> StructSpec:
        # A struct is clipped to the message's versions only: the field that
        # holds it decides when it is on the wire.
        if sname in self.structs:
            return self.structs[sname]
        versions = self.valid
        if sname in self.defs:
            fields = self.defs[sname]['fields']
        elif sname in self.common:
            fields = self.common[sname]['fields']
        else:
            raise SpecError(f'{self.name}: unknown struct type {sname}')
        spec = StructSpec(sname, versions)
        self.structs[sname] = spec  # registered before children: no cycles in Kafka specs
        spec.fields = [self.field(f, versions) for f in fields]
        self.order.append(spec)
        return spec

    def field(self, f: dict, parent_versions: Versions) -> FieldSpec:
        where = f'{self.name}.{f["name"]}'
        ftype: str = f['type']
        is_array = ftype.startswith('[]')
        elem = ftype.removeprefix('[]')
        versions = Versions.parse(f.get('versions')).intersect(parent_versions)
        nullable = Versions.parse(f.get('nullableVersions')).intersect(versions)
        struct = None
        if elem not in PRIMITIVES:
            if not elem[:1].isupper():
                raise SpecError(f'{where}: unknown type {ftype}')
            struct = self.struct(elem)
        elif elem == 'records' and is_array:
            raise SpecError(f'{where}: array of records')
        tag = f.get('tag')
        if isinstance(tag, str):  # a few Kafka specs write the tag as a string ("0")
            tag = int(tag)
        tagged = Versions.parse(f.get('taggedVersions')).intersect(versions)
        if (tag is None) != (f.get('taggedVersions') is None):
            raise SpecError(f'{where}: tag and taggedVersions must come together')
        default = _parse_default(elem, is_array, struct is not None and not is_array,
                                 f.get('default'), nullable, where)
        return FieldSpec(
            name=f['name'], attr=attr_name(f['name']), type_name=ftype, is_array=is_array,
            elem=elem, struct=struct, versions=versions, nullable=nullable, tagged=tagged,
            tag=tag, default=default, ignorable=bool(f.get('ignorable', False)),
            zero_copy=bool(f.get('zeroCopy', False)), about=f.get('about', ''),
        )


def build_spec(data: dict, source: str, vendored: bool = False) -> MessageSpec:
    name = data['name']
    valid = Versions.parse(overrides.VALID_VERSIONS.get(name, data['validVersions']))
    builder = _Builder(data, valid)
    root = StructSpec(name, valid)
    root.fields = [builder.field(f, valid) for f in data.get('fields', [])]
    flexible = Versions.parse(data.get('flexibleVersions')).intersect(valid)
    spec = MessageSpec(
        name=name, kind=data['type'], api_key=data.get('apiKey'), valid=valid,
        flexible=flexible, root=root, structs=builder.order, source=source, vendored=vendored,
        listeners=tuple(sorted(data.get('listeners', ()))),
    )
    spec.reach = _reachability(spec)
    _validate(spec)
    return spec


def _reachability(spec: MessageSpec) -> dict[str, list[int]]:
    """The message versions at which each struct can appear on the wire."""
    reach: dict[str, set[int]] = {spec.name: set(spec.valid.range())}
    for struct in [spec.root, *reversed(spec.structs)]:  # parents before children
        for f in struct.fields:
            if f.struct is not None:
                vs = {v for v in reach.get(struct.name, ()) if v in f.versions}
                reach.setdefault(f.struct.name, set()).update(vs)
    return {name: sorted(vs) for name, vs in reach.items()}


def _validate(spec: MessageSpec) -> None:
    for struct in [*spec.structs, spec.root]:
        attrs = [f.attr for f in struct.fields]
        if len(set(attrs)) != len(attrs):
            raise SpecError(f'{spec.name}.{struct.name}: duplicate attribute names')
        for f in struct.fields:
            if f.tag is not None:
                for v in f.tagged.range():
                    if not spec.is_flexible(v):
                        raise SpecError(f'{spec.name}.{f.name}: tagged in non-flexible v{v}')
    names = [s.name for s in spec.structs]
    if spec.name in names or len(set(names)) != len(names):
        raise SpecError(f'{spec.name}: struct name clash')


def vendored_origin(path: str) -> str:
    """Where a vendored spec file was copied from."""
    if path in FROM_KAFKA_PYTHON:
        return 'kafka-python 3.0.12'
    return f'apache/kafka {VENDORED_COMMIT[:12]}'


def vendored_files() -> list[tuple[str, str]]:
    """(path relative to tools/codegen/specs, text) of every vendored spec, sorted."""
    return sorted((f'{sub}/{p.name}', p.read_text(encoding='utf-8'))
                  for sub in VENDORED_SUBDIRS for p in (VENDORED_DIR / sub).glob('*.json'))


def load_specs() -> list[MessageSpec]:
    specs: dict[str, MessageSpec] = {}
    for fname, text in vendored_files():
        data = jsonc.loads(text)
        if data.get('type') in SKIPPED_TYPES:
            continue
        if data['type'] in ('request', 'response') and data['name'] not in overrides.JSON_APIS:
            raise SpecError(f'{fname}: an API message not in overrides.JSON_APIS'
                            ' (kio is the source of Kafka 4.2\'s API messages)')
        spec = build_spec(data, fname, vendored=True)
        if spec.name in specs:
            raise SpecError(f'{spec.name}: {fname} duplicates {specs[spec.name].source}')
        specs[spec.name] = spec
    for data in kio_specs.api_specs():
        if data['name'] in overrides.JSON_APIS:
            continue
        if data['name'] in specs:
            raise SpecError(f'{data["name"]}: vendored and in kio')
        specs[data['name']] = build_spec(data, kio_specs.source(data))
    missing = overrides.JSON_APIS - set(specs)
    if missing:
        raise SpecError(f'overrides.JSON_APIS without a vendored spec: {sorted(missing)}')
    return sorted(specs.values(), key=lambda s: s.name)


def specs_by_name() -> dict[str, MessageSpec]:
    return {s.name: s for s in load_specs()}
