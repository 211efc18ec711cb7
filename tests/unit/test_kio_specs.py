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
