"""The whole codec against Kafka 4.2 as kio 0.6.5 implements it.

kio is a separate implementation of Kafka 4.2's protocol (its own classes,
one per message version, and its own serializer, ``kio.serial``). For every
API kio has:

* our codec has the same valid versions and flexible versions, request and
  response (apart from the old versions Spool still serves:
  ``tools/codegen/overrides.py``);
* at every version kio has, Hypothesis-generated messages encode to exactly
  kio's bytes for the same content, and our decoding of kio's bytes gives
  the message back.

Content is converted field by field from our message to kio's dataclass by
kio's own field list at that version (names matched through
``tools.codegen.kio_specs.kafka_name``): a field missing on either side, in
another order, of another type or width, nullable or tagged differently,
changes the bytes. kio's typed values get what they need: timedeltas for
its ``timedelta_*`` fields, datetimes for ``datetime_i64`` (-1 is None where
kio types it optional; kio reads no other negative timestamp), None for the
zero UUID, ``ErrorCode`` members for error codes (so those are
drawn from the codes kio knows), and the integers of the time types are
kept within what ``datetime``/``timedelta`` hold.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from spool.protocol._generated import API_BY_KEY
from spool.protocol.primitives import ZERO_UUID
from tools.codegen import kio_specs
from tools.codegen.naming import attr_name
from tools.codegen.schema import FieldSpec, MessageSpec, StructSpec, specs_by_name
from tools.codegen.strategies import message_pairs

SPECS = specs_by_name()
KIO_APIS = kio_specs.api_names()
KIO: dict[tuple[int, str], dict[int, type]] = {
    (key, kind): kio_specs.kio_classes(key, kind)
    for key in KIO_APIS for kind in ('request', 'response')}
# versions Kafka 4 dropped that Spool still serves (overrides.JSON_APIS)
KEPT_BELOW = {0: 0, 56: 0}  # Produce from v0, AlterPartition from v0

ERROR_CODES = sorted(e.value for e in ErrorCode)
UTC = datetime.UTC


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(type inside ``X | None`` and ``tuple[X, ...]``, optional)."""
    optional = False
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        optional = True
    if typing.get_origin(tp) is tuple:
        tp = typing.get_args(tp)[0]
    return tp, optional


def _kio_fields(cls: type, message: str) -> list[tuple[dataclasses.Field, str, Any, bool]]:
    """kio's fields of ``cls``: (field, our attribute, inner type, optional)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        inner, optional = _unwrap(hints[f.name])
        kafka_type = f.metadata.get('kafka_type', '')
        out.append((f, attr_name(kio_specs.kafka_name(message, f.name, kafka_type)), inner,
                    optional))
    return out


def _kio_types(message: str, cls: type) -> dict[tuple[str, str], tuple[str, bool]]:
    """(struct name, our attribute) -> (kio's kafka_type, optional), over a message version."""
    out: dict[tuple[str, str], tuple[str, bool]] = {}
    for f, attr, inner, optional in _kio_fields(cls, message):
        if dataclasses.is_dataclass(inner):
            out.update(_kio_types(message, inner))
        else:
            out[(cls.__name__, attr)] = (f.metadata['kafka_type'], optional)
    return out


def _scalars(kio_types: dict[tuple[str, str], tuple[str, bool]]) -> Any:
    def scalars(struct: StructSpec, f: FieldSpec) -> st.SearchStrategy[Any] | None:
        kind, optional = kio_types.get((struct.name, f.attr), ('', False))
        if kind == 'error_code':
            return st.sampled_from(ERROR_CODES)
        if kind == 'timedelta_i64':
            return st.integers(-(1 << 40), 1 << 40)
        if kind == 'datetime_i64':  # kio reads no negative timestamp but -1 as None
            ms = st.integers(0, 1 << 40)
            return st.just(-1) | ms if optional else ms
        if kind == 'records':  # null only where Kafka's spec says nullable
            data = st.binary(max_size=24)
            return st.none() | data if optional else data
        return None
    return scalars


def _to_kio(value: Any, cls: type, message: str) -> Any:
    """Our message/struct object -> kio's dataclass ``cls`` with the same content."""
    kwargs = {}
    for f, attr, inner, optional in _kio_fields(cls, message):
        kwargs[f.name] = _value(getattr(value, attr), f, inner, optional, message)
    return cls(**kwargs)


def _value(v: Any, f: dataclasses.Field, inner: Any, optional: bool, message: str) -> Any:
    if v is None:
        return None
    if isinstance(v, list):
        return tuple(_value(e, f, inner, False, message) for e in v)
    if dataclasses.is_dataclass(inner):
        return _to_kio(v, inner, message)
    kind = f.metadata['kafka_type']
    if kind == 'error_code':
        return ErrorCode(v)
    if kind in ('timedelta_i32', 'timedelta_i64'):
        return datetime.timedelta(milliseconds=v)
    if kind == 'uuid' and v == ZERO_UUID:
        return None  # kio reads the zero UUID as None
    if kind == 'datetime_i64':
        if v == -1 and optional:
            return None
        return datetime.datetime.fromtimestamp(v / 1000, tz=UTC)
    return v


def _kio_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


CASES = [(key, kind, v) for (key, kind), classes in sorted(KIO.items()) for v in sorted(classes)]


def _spec(key: int, kind: str) -> MessageSpec:
    entry = API_BY_KEY[key]
    return SPECS[(entry.request if kind == 'request' else entry.response).NAME]


@pytest.mark.parametrize('key', sorted(KIO_APIS), ids=lambda k: KIO_APIS[k])
def test_same_versions_as_kafka_4_2(key: int) -> None:
    entry = API_BY_KEY[key]
    for kind, cls in (('request', entry.request), ('response', entry.response)):
        classes = KIO[(key, kind)]
        lo, hi = min(classes), max(classes)
        assert sorted(classes) == list(range(lo, hi + 1))
        assert cls.API_KEY == key
        assert cls.VALID_VERSIONS == (KEPT_BELOW.get(key, lo), hi), kind
        flexible = [v for v, c in classes.items() if c.__flexible__]
        if key not in KEPT_BELOW:  # (their kept versions have their own flexibility)
            assert cls.FLEXIBLE_VERSIONS == ((min(flexible), max(flexible)) if flexible else None)
        assert [cls.is_flexible(v) for v in sorted(classes)] == [
            classes[v].__flexible__ for v in sorted(classes)]
    assert entry.valid_versions == entry.request.VALID_VERSIONS


def test_every_kio_api_has_a_codec() -> None:
    assert set(KIO_APIS) <= set(API_BY_KEY)
    assert len(KIO_APIS) == 89


@pytest.mark.parametrize(('key', 'kind', 'version'), CASES,
                         ids=[f'{KIO_APIS[k]}-{kind}-v{v}' for k, kind, v in CASES])
def test_encodes_as_kio(key: int, kind: str, version: int) -> None:
    spec = _spec(key, kind)
    kio_cls = KIO[(key, kind)][version]
    reader = entity_reader(kio_cls)

    @settings(max_examples=8, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(pair=message_pairs(spec, version, _scalars(_kio_types(spec.name, kio_cls))))
    def check(pair: tuple[Any, Any]) -> None:
        ours, expected = pair
        theirs = _to_kio(expected, kio_cls, spec.name)
        data = _kio_bytes(theirs)
        assert ours.to_bytes(version) == data
        assert type(ours).from_bytes(data, version) == expected
        assert reader(data, 0) == (theirs, len(data))

    check()
