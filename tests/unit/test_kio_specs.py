"""kio's per-version classes fold back into the JSON specs Kafka wrote.

``tools.codegen.kio_specs`` rebuilds each API message's spec from kio; what
kio does not carry (Kafka's field names where kio drops ``Ms``, the order of
fields that never share a version, two ``null`` defaults) comes from rules
and small tables. Here every API message that kafka-python 3.0.12 ships the
JSON of (Kafka's own files, equal to Kafka 4.2's for those APIs) is built
both ways and compared struct by struct at every version both have: the
same fields in the same order with the same attribute names, types,
nullability, tags and defaults. A field that is on the wire only at
versions Kafka 4 dropped is left out of the JSON side (kio cannot have it).
The fold itself is shown on small kio-like classes: what it rebuilds, and
what it refuses (an order or a range Kafka's spec format cannot express);
and the loader refuses a vendored API message that kio has.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kafka
import pytest

from tools.codegen import jsonc, kio_specs, overrides
from tools.codegen.schema import MessageSpec, StructSpec, Versions, build_spec

RESOURCES = Path(kafka.__file__).parent / 'protocol' / 'schemas' / 'resources'
JSON = {d['name']: d for d in (jsonc.loads(p.read_text(encoding='utf-8'))
                                for p in sorted(RESOURCES.glob('*.json')))
        if d['type'] in ('request', 'response')}
KIO = {d['name']: d for d in kio_specs.api_specs()}
COMMON = sorted(set(JSON) & set(KIO))


def _layout(spec: MessageSpec, struct: StructSpec, version: int) -> list[Any]:
    out: list[Any] = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        out.append((f.attr, f.type_name, f.is_nullable_at(version),
                    f.tag if f.is_tagged_at(version) else None, repr(f.default)))
        if f.struct is not None:
            out.append(_layout(spec, f.struct, version))
    return out


def _order(struct: StructSpec) -> list[str]:
    return [f.attr for f in struct.fields if f.versions]


def test_every_kafka_python_api_is_compared() -> None:
    assert len(COMMON) == len(JSON) == 104  # 52 APIs


@pytest.mark.parametrize('name', COMMON)
def test_kio_fold_matches_kafkas_json(name: str) -> None:
    ours = build_spec(copy.deepcopy(KIO[name]), 'kio')
    theirs = build_spec(copy.deepcopy(JSON[name]), 'json')
    # (Produce: the versions kio has, not those overrides.VALID_VERSIONS adds)
    versions = [v for v in Versions.parse(KIO[name]['validVersions']).range() if v in theirs.valid]
    if name not in overrides.VALID_VERSIONS:
        assert ours.valid == theirs.valid
    assert [ours.is_flexible(v) for v in versions] == [theirs.is_flexible(v) for v in versions]
    for v in versions:
        assert _layout(ours, ours.root, v) == _layout(theirs, theirs.root, v), f'v{v}'
    # the order of every field, also of fields that never share a version
    assert _order(ours.root) == _order(theirs.root)
    theirs_structs = {s.name: s for s in theirs.structs}
    for struct in ours.structs:
        assert _order(struct) == _order(theirs_structs[struct.name]), struct.name
    assert ours.listeners == tuple(sorted(set(theirs.listeners) - {'zkBroker'}))


def test_tables_name_only_what_kio_has() -> None:
    for (message, struct, attr) in kio_specs.DEFAULTS:
        spec = build_spec(copy.deepcopy(KIO[message]), 'kio')
        structs = {s.name: s for s in [spec.root, *spec.structs]}
        assert attr in {f.attr for f in structs[struct].fields}
    for (message, struct), order in kio_specs.ORDER.items():
        assert message in KIO
        assert struct in {message} | {s['name'] for s in KIO[message]['commonStructs']}
        assert len(order) == len(set(order))


# ------------------------------------------------------------ the fold itself


def _versions_of(name: str, fields_by_version: dict[int, list[tuple]],
                 flexible_from: int) -> dict[int, type]:
    """kio-like classes: one frozen dataclass per version, fields as (name, type, metadata,
    default)."""
    import dataclasses
    from typing import ClassVar

    out = {}
    for v, fields in fields_by_version.items():
        specs = [(n, t, dataclasses.field(metadata=m, **({} if d is None else {'default': d})))
                 for n, t, m, d in fields]
        cls = dataclasses.make_dataclass(name, specs, frozen=True, kw_only=True)
        cls.__flexible__ = v >= flexible_from
        cls.__annotations__['__flexible__'] = ClassVar[bool]
        out[v] = cls
    return out


def test_fold_rebuilds_ranges_nullability_tags_and_defaults() -> None:
    import datetime
    i32 = {'kafka_type': 'int32'}
    s = {'kafka_type': 'string'}
    td = {'kafka_type': 'timedelta_i32'}
    v0 = [('group_id', str, s, None), ('member_id', str, s, None),
          ('timeout', datetime.timedelta, td, datetime.timedelta(milliseconds=-1))]
    v1 = [('group_id', str, s, None), ('member_id', str | None, s, None),
          ('timeout', datetime.timedelta, td, datetime.timedelta(milliseconds=-1)),
          ('epoch', int, {'kafka_type': 'int32', 'tag': 0}, -1)]
    v2 = [('group_id', str, s, None), ('members', tuple[int, ...], i32, ()),
          ('timeout', datetime.timedelta, td, datetime.timedelta(milliseconds=-1)),
          ('epoch', int, {'kafka_type': 'int32', 'tag': 0}, -1)]
    spec = kio_specs._message('HeartbeatRequest', 'request', 12,
                              _versions_of('HeartbeatRequest', {0: v0, 1: v1, 2: v2}, 1))
    fields = {f['name']: {k: v for k, v in f.items() if k != 'about'} for f in spec['fields']}
    assert list(fields) == ['GroupId', 'MemberId', 'Members', 'TimeoutMs', 'Epoch']
    assert spec['validVersions'] == '0-2' and spec['flexibleVersions'] == '1+'
    assert fields['MemberId'] == {'name': 'MemberId', 'type': 'string', 'versions': '0-1',
                                  'nullableVersions': '1'}
    assert fields['Members'] == {'name': 'Members', 'type': '[]int32', 'versions': '2'}
    assert fields['TimeoutMs'] == {'name': 'TimeoutMs', 'type': 'int32', 'versions': '0-2',
                                   'default': '-1'}
    assert fields['Epoch'] == {'name': 'Epoch', 'type': 'int32', 'versions': '1-2',
                               'taggedVersions': '1-2', 'tag': 0, 'default': '-1'}


def test_fold_refuses_what_a_spec_cannot_say() -> None:
    s = {'kafka_type': 'string'}
    a, b = ('a', str, s, None), ('b', str, s, None)
    with pytest.raises(kio_specs.KioSpecError, match='order'):
        kio_specs._message('XRequest', 'request', 12,
                           _versions_of('XRequest', {0: [a, b], 1: [b, a]}, 9))
    with pytest.raises(kio_specs.KioSpecError, match='not one range'):
        kio_specs._message('XRequest', 'request', 12,
                           _versions_of('XRequest', {0: [a, b], 1: [a], 2: [a, b]}, 9))
    with pytest.raises(kio_specs.KioSpecError, match='differs between versions'):
        kio_specs._message('XRequest', 'request', 12, _versions_of(
            'XRequest', {0: [a], 1: [('a', int, {'kafka_type': 'int32'}, None)]}, 9))


def test_loader_refuses_a_vendored_api_message_kio_has(monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.codegen import schema
    extra = '{"apiKey": 12, "type": "request", "name": "HeartbeatRequest", ' \
            '"validVersions": "0-4", "flexibleVersions": "4+", "fields": []}'
    files = schema.vendored_files() + [('message/HeartbeatRequest.json', extra)]
    monkeypatch.setattr(schema, 'vendored_files', lambda: files)
    with pytest.raises(schema.SpecError, match='not in overrides.JSON_APIS'):
        schema.load_specs()
