"""Emit one generated module per message spec, and the package registry.

A module holds, in order: imports, ``struct.Struct`` constants, one class per
struct (children first, the message class last, with the nested classes as
attributes), ``_DEFAULT_<Struct>`` instances used by tagged-field default
checks, the per-version codec functions (identical bodies shared), and the
``_DECODERS``/``_ENCODERS`` version tables.
"""

from __future__ import annotations

import re
import textwrap

from tools.codegen.emit_codec import (
    Context,
    decode_body,
    default_expr,
    encode_body,
    struct_const_name,
)
from tools.codegen.kio_specs import KIO_VERSION
from tools.codegen.naming import module_name
from tools.codegen.schema import (
    DEFAULT_STRUCT,
    FieldSpec,
    MessageSpec,
    StructSpec,
    Versions,
    vendored_origin,
)

PRIMITIVE_NAMES = (
    'ProtocolDecodeError', 'ZERO_UUID', 'check_tag_end', 'skip_tagged_fields',
    'read_uvarint', 'write_uvarint', 'read_uuid',
    'read_array_len', 'read_nullable_array_len', 'read_compact_array_len',
    'read_compact_nullable_array_len',
    'read_string', 'read_nullable_string', 'read_compact_string', 'read_compact_nullable_string',
    'write_string', 'write_nullable_string', 'write_compact_string',
    'write_compact_nullable_string',
    'read_bytes', 'read_nullable_bytes', 'read_compact_bytes', 'read_compact_nullable_bytes',
    'write_bytes', 'write_nullable_bytes', 'write_compact_bytes', 'write_compact_nullable_bytes',
    'read_records', 'read_compact_records',
)

_PY_TYPES = {
    'int8': 'int', 'int16': 'int', 'int32': 'int', 'int64': 'int', 'uint16': 'int',
    'uint32': 'int', 'float64': 'float', 'bool': 'bool', 'string': 'str', 'bytes': 'bytes',
    'records': 'Any', 'uuid': 'UUID',
}


def fmt_versions(vs: Versions) -> str:
    if not vs:
        return 'none'
    if vs.hi >= 0x7FFF:
        return f'{vs.lo}+'
    return f'{vs.lo}' if vs.lo == vs.hi else f'{vs.lo}-{vs.hi}'


def py_type(f: FieldSpec) -> str:
    base = f.struct.name if f.struct is not None else _PY_TYPES[f.elem]
    if f.is_array:
        base = f'list[{base}]'
    if f.nullable and base != 'Any':
        base += ' | None'
    return base


def _flex_tuple(spec: MessageSpec) -> tuple[int, int] | None:
    return spec.flexible.as_tuple()


class ModuleEmitter:
    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.canonical: dict[tuple[str, str, int], str] = {}
        self.ctx = Context(spec, self._child_name)

    def _child_name(self, kind: str, struct: str, version: int) -> str:
        return self.canonical[(kind, struct, version)]

    # ------------------------------------------------------------ functions

    def _functions(self) -> list[str]:
        out: list[str] = []
        for struct in [*self.spec.structs, self.spec.root]:
            for kind, body_fn, params in (('d', decode_body, 'buf, pos'),
                                          ('e', encode_body, 'self, out')):
                seen: dict[tuple[str, ...], str] = {}
                for v in self.spec.reach[struct.name]:
                    body = tuple(body_fn(self.ctx, struct, v))
                    name = seen.get(body)
                    if name is None:
                        name = f'_{kind}_{struct.name}_v{v}'
                        seen[body] = name
                        out.append(f'def {name}({params}):')
                        out.extend(body)
                        out.append('')
                        out.append('')
                    self.canonical[(kind, struct.name, v)] = name
        return out

    def _tables(self) -> list[str]:
        out: list[str] = []
        for struct in [*self.spec.structs, self.spec.root]:
            for kind, table in (('d', '_DECODERS'), ('e', '_ENCODERS')):
                out.append(f'{struct.name}.{table} = {{')
                for v in self.spec.reach[struct.name]:
                    out.append(f'    {v}: {self.canonical[(kind, struct.name, v)]},')
                out.append('}')
        return out

    # ------------------------------------------------------------ classes

    def _class(self, struct: StructSpec, is_root: bool) -> list[str]:
        spec = self.spec
        versions = spec.reach[struct.name]
        out = [f'class {struct.name}(Message):']
        out.append(f'    """{self._class_summary(struct, is_root)}')
        fields_doc = self._fields_doc(struct)
        if fields_doc:
            out.append('')
            out.extend(fields_doc)
        out.append('    """')
        out.append('')
        slots = ', '.join(repr(f.attr) for f in struct.fields)
        out.append(f'    __slots__ = ({slots}{"," if len(struct.fields) == 1 else ""})')
        out.append(f'    NAME = {struct.name!r}')
        if is_root and spec.api_key is not None:
            out.append(f'    API_KEY = {spec.api_key}')
        out.append(f'    VALID_VERSIONS = ({versions[0]}, {versions[-1]})')
        flex = spec.flexible.intersect(Versions(versions[0], versions[-1])).as_tuple()
        out.append(f'    FLEXIBLE_VERSIONS = {flex!r}')
        if is_root:
            for child in spec.structs:
                out.append(f'    {child.name} = {child.name}')
        out.append('')
        out.extend(self._init(struct))
        return out

    def _class_summary(self, struct: StructSpec, is_root: bool) -> str:
        spec = self.spec
        if not is_root:
            return f'{struct.name}: a struct of {spec.name}.'
        if spec.kind == 'metadata':
            key = f'record type {spec.api_key}, '
        else:
            key = f'api key {spec.api_key}, ' if spec.api_key is not None else ''
        return (f'{spec.name} ({key}{spec.kind}): versions {fmt_versions(spec.valid)}, '
                f'flexible {fmt_versions(spec.flexible)}.')

    def _fields_doc(self, struct: StructSpec) -> list[str]:
        out = []
        for f in struct.fields:
            parts = [f'{f.attr}: {f.type_name}, v{fmt_versions(f.versions)}']
            if f.nullable:
                parts.append(f'nullable v{fmt_versions(f.nullable)}')
            if f.tag is not None:
                parts.append(f'tag {f.tag} in v{fmt_versions(f.tagged)}')
            if (f.default is not DEFAULT_STRUCT and f.elem != 'uuid'
                    and f.default not in ([], '', 0, False, b'')):
                parts.append(f'default {f.default!r}')
            out.append('    ' + ', '.join(parts))
            about = f.about.strip().replace('\\', '\\\\').replace('"""', "'''")
            if about:
                out.extend(textwrap.wrap(about, width=96, initial_indent='        ',
                                         subsequent_indent='        '))
        return out

    def _init(self, struct: StructSpec) -> list[str]:
        if not struct.fields:
            return ['    def __init__(self) -> None:', '        pass']
        params = []
        body = []
        for f in struct.fields:
            fresh = default_expr(f)
            if fresh in ('[]',) or (f.struct is not None and f.default is DEFAULT_STRUCT):
                params.append(f'{f.attr}: {py_type(f)} = UNSET')
                body.append(f'        self.{f.attr} = {fresh} if {f.attr} is UNSET else {f.attr}')
            else:
                params.append(f'{f.attr}: {py_type(f)} = {fresh}')
                body.append(f'        self.{f.attr} = {f.attr}')
        out = ['    def __init__(', '        self,']
        out.extend(f'        {p},' for p in params)
        out.append('    ) -> None:')
        out.extend(body)
        return out

    # ------------------------------------------------------------ module

    def render(self) -> str:
        spec = self.spec
        functions = self._functions()
        tables = self._tables()
        classes: list[str] = []
        for struct in spec.structs:
            classes.extend(self._class(struct, False))
            classes.extend(['', ''])
        classes.extend(self._class(spec.root, True))
        defaults = sorted({f.struct.name for s in [*spec.structs, spec.root] for f in s.fields
                           if f.tag is not None and f.default is DEFAULT_STRUCT})
        used = '\n'.join(functions)
        default_lines = [f'_DEFAULT_{name} = {name}()' for name in defaults
                         if f'_DEFAULT_{name}' in used]
        body = '\n'.join([*classes, '', '', *default_lines, '', '', *functions, *tables])
        consts = [f'{struct_const_name(fmt)} = Struct({">" + fmt!r})'
                  for fmt in sorted(self.ctx.formats)]
        header = self._header('\n'.join([*consts, body]))
        parts = [header, '\n'.join(consts), '', '', body]
        text = '\n'.join(parts)
        text = re.sub(r'\n{3,}', '\n\n\n', text).rstrip('\n') + '\n'
        return text

    def _header(self, body: str) -> str:
        spec = self.spec
        code_only = re.sub(r'"""[\s\S]*?"""', '', body)
        words = set(re.findall(r'(?<![.\w])[A-Za-z_]\w*', code_only))
        prims = sorted((n for n in PRIMITIVE_NAMES if n in words), key=_isort_key)
        struct_imports = [n for n in ('Struct', 'pack', 'unpack_from') if n in words]
        lines = [
            f'"""{spec.name}: generated by ``python -m tools.codegen``; do not edit.',
            '',
            _source_line(spec),
            'See ``spool.protocol.message`` for the API every class here shares.',
            '"""',
            '',
            'from __future__ import annotations',
            '',
        ]
        stdlib = []
        if struct_imports:
            stdlib.append(f'from struct import {", ".join(struct_imports)}')
        if 'Any' in words:
            stdlib.append('from typing import Any')
        if 'UUID' in words:
            stdlib.append('from uuid import UUID')
        if stdlib:
            lines.extend([*stdlib, ''])
        msg_imports = sorted(['Message'] + (['UNSET'] if 'UNSET' in words else []), key=_isort_key)
        lines.append(f'from spool.protocol.message import {", ".join(msg_imports)}')
        if prims:
            lines.append('from spool.protocol.primitives import (')
            lines.extend(f'    {n},' for n in prims)
            lines.append(')')
        lines.append('')
        return '\n'.join(lines)


def _source_line(spec: MessageSpec) -> str:
    if spec.vendored:
        where = f'Source: tools/codegen/specs/{spec.source}, from {vendored_origin(spec.source)}'
    else:
        where = f"Source: {spec.source} (Kafka 4.2's message schemas)"
    if spec.name in _overridden():
        return where + ' (versions extended by tools/codegen/overrides.py).'
    return where + '.'


def _isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def _overridden() -> set[str]:
    from tools.codegen import overrides
    return set(overrides.VALID_VERSIONS)


def render_module(spec: MessageSpec) -> tuple[str, str]:
    """(file name, source text) of one message's module."""
    return module_name(spec.name) + '.py', ModuleEmitter(spec).render()


def render_registry(specs: list[MessageSpec]) -> str:
    by_name = {s.name: s for s in specs}
    lines = [
        '"""Registry of the generated Kafka message classes; do not edit.',
        '',
        'Generated by ``python -m tools.codegen`` from Kafka 4.2\'s message schemas as kio',
        f'{KIO_VERSION} publishes them, and the specs vendored in tools/codegen/specs.',
        '',
        '* ``API_BY_KEY[api_key]`` -> ``ApiEntry(request, response, valid_versions,',
        '  flexible_versions, name, listeners)``; ranges are inclusive ``(lo, hi)`` tuples,',
        '  ``flexible_versions`` is ``None`` when no version is flexible; ``listeners``',
        '  are the listener types Kafka serves it on (``broker``, ``controller``, and',
        '  the retired ``zkBroker``). Being listed here means Spool can encode and',
        '  decode the API, not that a broker serves it.',
        '* ``DATA_SCHEMAS[name]``: non-API structs. Consumer protocol metadata encodes',
        '  the struct only: the int16 version that the consumer protocol puts in front',
        '  of it is the caller\'s to write and read. The Raft control records carry',
        '  their own ``Version`` field (``spool.protocol.metadata_records``).',
        '* ``METADATA_RECORDS[record_type]``: the ``__cluster_metadata`` record classes',
        '  by their ``apiKey`` (Kafka\'s MetadataRecordType); frame them with',
        '  ``spool.protocol.metadata_records``.',
        '* ``MESSAGES[name]``: every generated top-level class.',
        '',
        'Nothing is imported until it is used: a class name resolves through the module\'s',
        '``__getattr__`` and the registries are ``spool.protocol.message.LazyMap``s, so',
        '``API_BY_KEY[18]`` imports ApiVersions\' two modules only, and iterating a',
        'registry imports all of its classes.',
        '"""',
        '',
        'from __future__ import annotations',
        '',
    ]
    lines += [
        'import importlib',
        'from typing import TYPE_CHECKING, Any',
        '',
        'from spool.protocol.message import ApiEntry, LazyMap, Message',
        '',
        '# The classes load on first use (module __getattr__; the registries are LazyMaps):',
        '# importing this package costs no message module, so a CLI command or a client',
        '# pays only for the messages it uses.',
        'if TYPE_CHECKING:',
    ]
    for spec in specs:
        lines.append(f'    from .{module_name(spec.name)} import {spec.name}')
    lines += [
        '',
        '_MODULE_OF: dict[str, str] = {',
        *(f'    {s.name!r}: {module_name(s.name)!r},' for s in specs),
        '}',
        '',
        '',
        'def __getattr__(name: str) -> Any:',
        '    module = _MODULE_OF.get(name)',
        '    if module is None:',
        "        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')",
        "    cls = getattr(importlib.import_module(f'{__name__}.{module}'), name)",
        '    globals()[name] = cls',
        '    return cls',
        '',
        '',
        'def _api_entry(spec: tuple[Any, ...]) -> ApiEntry:',
        '    return ApiEntry(__getattr__(spec[0]), __getattr__(spec[1]), *spec[2:])',
        '',
        '',
    ]
    lines.append('API_BY_KEY: dict[int, ApiEntry] = LazyMap(_api_entry, {')
    apis = sorted((s for s in specs if s.kind == 'request'), key=lambda s: s.api_key)
    for req in apis:
        base = req.name.removesuffix('Request')
        resp = by_name[base + 'Response']
        if (resp.api_key, resp.valid, resp.flexible) != (req.api_key, req.valid, req.flexible):
            raise ValueError(f'{base}: request and response specs disagree')
        lines.append(f'    {req.api_key}: ({req.name!r}, {resp.name!r}, '
                     f'{req.valid.as_tuple()!r}, {_flex_tuple(req)!r}, {base!r}, '
                     f'{req.listeners!r}),')
    lines.append('})')
    lines.append('')
    lines.append('DATA_SCHEMAS: dict[str, type[Message]] = LazyMap(__getattr__, {')
    for spec in specs:
        if spec.kind == 'data':
            lines.append(f'    {spec.name!r}: {spec.name!r},')
    lines.append('})')
    lines.append('')
    lines.append('METADATA_RECORDS: dict[int, type[Message]] = LazyMap(__getattr__, {')
    for spec in sorted((s for s in specs if s.kind == 'metadata'), key=lambda s: s.api_key):
        lines.append(f'    {spec.api_key}: {spec.name!r},')
    lines.append('})')
    lines.append('')
    lines.append('MESSAGES: dict[str, type[Message]] = LazyMap(__getattr__, {')
    for spec in specs:
        lines.append(f'    {spec.name!r}: {spec.name!r},')
    lines.append('})')
    lines.append('')
    lines.append('__all__ = [')
    for name in ['API_BY_KEY', 'DATA_SCHEMAS', 'METADATA_RECORDS', 'MESSAGES', 'ApiEntry',
                 'Message',
                 *(s.name for s in specs)]:
        lines.append(f'    {name!r},')
    lines.append(']')
    return '\n'.join(lines) + '\n'
