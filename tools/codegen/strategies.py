"""Hypothesis strategies for the generated messages, derived from the specs.

``message_pairs(spec, version)`` draws ``(actual, expected)``: ``actual`` has
random valid values for every field on the wire at ``version`` and junk in
the fields that are not (which encoding must drop); ``expected`` equals
``actual`` with those absent fields left at their defaults, i.e. what
decoding the encoding of ``actual`` must give back. ``scalars(struct, field)``,
when given, may return the strategy of a scalar field's values (None
included where wanted) instead of its type's full range (and null where
nullable, and always for records, which the codec reads null at any
version); it returns None to keep that. Test-only
(needs hypothesis, a dev dependency).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from spool.protocol.primitives import ZERO_UUID
from tools.codegen.schema import DEFAULT_STRUCT, FieldSpec, MessageSpec, StructSpec

_INT_RANGES = {
    'int8': 8, 'int16': 16, 'int32': 32, 'int64': 64,
}
_JUNK = st.sampled_from([12345, 'junk', ('not', 'encoded')])
Scalars = Callable[[StructSpec, FieldSpec], 'st.SearchStrategy[Any] | None'] | None


def message_class(spec: MessageSpec) -> type:
    import spool.protocol._generated as generated
    return generated.MESSAGES[spec.name]


def struct_class(spec: MessageSpec, struct: StructSpec) -> type:
    root = message_class(spec)
    return root if struct is spec.root else getattr(root, struct.name)


def _scalar(elem: str, nullable: bool,
            base: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Any]:
    if base is not None:
        return base
    if elem in _INT_RANGES:
        bits = _INT_RANGES[elem]
        base: st.SearchStrategy[Any] = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif elem == 'uint16':
        base = st.integers(0, 0xFFFF)
    elif elem == 'uint32':
        base = st.integers(0, 0xFFFFFFFF)
    elif elem == 'float64':
        base = st.floats(allow_nan=False)
    elif elem == 'bool':
        base = st.booleans()
    elif elem == 'string':
        base = st.text(max_size=6)
    elif elem == 'bytes':
        base = st.binary(max_size=8)
    elif elem == 'records':
        base = st.binary(max_size=24)
    elif elem == 'uuid':
        base = st.uuids(allow_nil=True)
    else:
        raise ValueError(elem)
    return st.none() | base if nullable else base


def _default(spec: MessageSpec, f: FieldSpec) -> Any:
    if f.is_array:
        return None if f.default is None else []
    if f.elem == 'uuid':
        return ZERO_UUID
    if f.default is DEFAULT_STRUCT:
        return struct_class(spec, f.struct)()
    return f.default


def _field(spec: MessageSpec, struct: StructSpec, f: FieldSpec, version: int,
           scalars: Scalars) -> st.SearchStrategy[tuple[Any, Any]]:
    """(actual, expected) values for a field on the wire at ``version``."""
    values = _field_values(spec, struct, f, version, scalars)
    if f.is_tagged_at(version):
        # a tagged field at its default is not written: draw that case often
        return st.builds(lambda: (_default(spec, f), _default(spec, f))) | values
    return values


def _field_values(spec: MessageSpec, struct: StructSpec, f: FieldSpec, version: int,
                  scalars: Scalars) -> st.SearchStrategy[tuple[Any, Any]]:
    nullable = f.is_nullable_at(version) or (f.elem == 'records' and not f.is_array)
    if f.struct is not None:
        elem = struct_pairs(spec, f.struct, version, scalars)
    else:
        base = scalars(struct, f) if scalars is not None else None
        elem = _scalar(f.elem, nullable and not f.is_array, base).map(lambda x: (x, x))
    if f.is_array:
        arr = st.lists(elem, max_size=3).map(lambda xs: ([a for a, _ in xs], [e for _, e in xs]))
        return st.just((None, None)) | arr if nullable else arr
    if f.struct is not None and nullable:
        return st.just((None, None)) | elem
    return elem


def struct_pairs(spec: MessageSpec, struct: StructSpec, version: int,
                 scalars: Scalars = None) -> st.SearchStrategy[tuple[Any, Any]]:
    cls = struct_class(spec, struct)
    present = {f.attr: _field(spec, struct, f, version, scalars)
               for f in struct.fields if version in f.versions}
    absent = {f.attr: _JUNK for f in struct.fields if version not in f.versions}

    def build(values: dict[str, Any]) -> tuple[Any, Any]:
        actual = {k: (v[0] if k in present else v) for k, v in values.items()}
        expected = {k: v[1] for k, v in values.items() if k in present}
        return cls(**actual), cls(**expected)

    return st.fixed_dictionaries({**present, **absent}).map(build)


def message_pairs(spec: MessageSpec, version: int,
                  scalars: Scalars = None) -> st.SearchStrategy[tuple[Any, Any]]:
    return struct_pairs(spec, spec.root, version, scalars)
