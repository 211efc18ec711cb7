"""Emit the straight-line decode/encode function bodies of one struct version.

For a struct ``S`` at message version ``v`` the generated functions are::

    def _d_S_vN(buf, pos):       # -> (S, new_pos)
    def _e_S_vN(self, out):      # appends chunks to the list ``out``

Only the fields present at ``v`` appear, in schema order; consecutive
fixed-width fields share one precompiled ``struct.Struct``; tagged fields
(flexible versions only) follow in ascending tag order. A function body that
is identical for several versions is emitted once (see ``emit_module``).

Bodies reference helpers from ``spool.protocol.primitives`` by name, struct
constants ``_S_<fmt>`` (collected in :class:`Context`), child functions by
their canonical names, and default constants ``_DEFAULT_<Struct>``.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.codegen.schema import DEFAULT_STRUCT, FIXED, FieldSpec, MessageSpec, StructSpec

ChildName = Callable[[str, str, int], str]  # (kind 'd'/'e', struct name, version) -> function


class Context:
    """Per-module state: the struct.Struct constants a module needs."""

    def __init__(self, spec: MessageSpec, child_name: ChildName) -> None:
        self.spec = spec
        self.child_name = child_name
        self.formats: set[str] = set()

    def struct_const(self, fmt: str) -> str:
        self.formats.add(fmt)
        return struct_const_name(fmt)


def struct_const_name(fmt: str) -> str:
    return '_S_' + fmt.replace('?', 'o')


def fixed_size(fmt: str) -> int:
    import struct
    return struct.calcsize('>' + fmt)


class Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def __call__(self, text: str) -> None:
        self.lines.append('    ' * self.depth + text)

    def indent(self) -> Code:
        self.depth += 1
        return self

    def dedent(self) -> None:
        self.depth -= 1


def default_expr(f: FieldSpec) -> str:
    """A Python expression producing a fresh default value for ``f``."""
    d = f.default
    if f.is_array:
        return 'None' if d is None else '[]'
    if f.struct is not None:
        return 'None' if d is None else f'{f.struct.name}()'
    if f.elem == 'uuid':
        return 'ZERO_UUID'
    return repr(d)


def non_default_test(f: FieldSpec, src: str, version: int | None = None) -> str:
    """A condition that is true when ``src`` differs from ``f``'s default.

    For a struct whose fields at ``version`` are all scalars the test is
    inlined field by field (much cheaper than ``Message.__eq__``); fields of
    the struct absent at ``version`` are not compared since they are never
    written.
    """
    d = f.default
    if f.is_array:
        return f'{src} is not None' if d is None else f'{src} != []'
    if f.elem == 'uuid':
        return f'{src} != ZERO_UUID'
    if d is None:
        return f'{src} is not None'
    if d is DEFAULT_STRUCT:
        inner = [g for g in f.struct.fields if version is not None and version in g.versions]
        if inner and all(g.struct is None and not g.is_array and g.tag is None for g in inner):
            return ' or '.join(non_default_test(g, f'{src}.{g.attr}') for g in inner)
        return f'{src} != _DEFAULT_{f.struct.name}'
    if f.elem == 'bool':
        return src if d is False else f'not {src}'
    return f'{src} != {d!r}'


def _null_len(flexible: bool) -> str:
    """The literal encoding of a null length (compact uvarint 0 or int32 -1)."""
    return repr(b'\x00') if flexible else repr(b'\xff\xff\xff\xff')


def _variant(base: str, compact: bool, nullable: bool) -> str:
    return f'{"compact_" if compact else ""}{"nullable_" if nullable else ""}{base}'


# ------------------------------------------------------------------ decode


def decode_body(ctx: Context, struct: StructSpec, version: int) -> list[str]:
    flexible = ctx.spec.is_flexible(version)
    code = Code()
    pending: list[FieldSpec] = []
    for f in struct.fields:
        if version not in f.versions or f.is_tagged_at(version):
            continue
        if not f.is_array and f.elem in FIXED:
            pending.append(f)
            continue
        _flush_unpack(ctx, code, pending)
        _decode_field(ctx, code, f, version, flexible)
    _flush_unpack(ctx, code, pending)
    if flexible:
        _decode_tagged(ctx, code, struct, version)
    args = []
    for f in struct.fields:
        if version in f.versions:
            args.append(f'f_{f.attr}')
        else:
            args.append(default_expr(f))
    code(f'return {struct.name}({", ".join(args)}), pos')
    return code.lines


def _flush_unpack(ctx: Context, code: Code, pending: list[FieldSpec]) -> None:
    if not pending:
        return
    fmt = ''.join(FIXED[f.elem] for f in pending)
    targets = ', '.join(f'f_{f.attr}' for f in pending)
    if len(pending) == 1:
        targets += ','
    code(f'{targets} = {ctx.struct_const(fmt)}.unpack_from(buf, pos)')
    code(f'pos += {fixed_size(fmt)}')
    pending.clear()


def _decode_field(ctx: Context, code: Code, f: FieldSpec, version: int, flexible: bool,
                  target: str | None = None) -> None:
    target = target or f'f_{f.attr}'
    nullable = f.is_nullable_at(version)
    if f.is_array:
        reader = _variant('array_len', flexible, nullable)
        code(f'n, pos = read_{reader}(buf, pos)')
        if nullable:
            code('if n < 0:')
            code.indent()(f'{target} = None')
            code.dedent()
            code('else:')
            code.indent()
        _decode_elements(ctx, code, f, version, flexible, target)
        if nullable:
            code.dedent()
    elif f.struct is not None:
        child = ctx.child_name('d', f.struct.name, version)
        if nullable:
            code(f'if {ctx.struct_const("b")}.unpack_from(buf, pos)[0] < 0:')
            code.indent()(f'{target} = None')
            code('pos += 1')
            code.dedent()
            code('else:')
            code.indent()(f'{target}, pos = {child}(buf, pos + 1)')
            code.dedent()
        else:
            code(f'{target}, pos = {child}(buf, pos)')
    elif f.elem in FIXED:
        fmt = FIXED[f.elem]
        code(f'{target}, = {ctx.struct_const(fmt)}.unpack_from(buf, pos)')
        code(f'pos += {fixed_size(fmt)}')
    else:
        code(f'{target}, pos = {_scalar_reader(f.elem, flexible, nullable)}(buf, pos)')


def _scalar_reader(elem: str, flexible: bool, nullable: bool) -> str:
    if elem == 'uuid':
        return 'read_uuid'
    if elem == 'records':
        return 'read_compact_records' if flexible else 'read_records'
    return 'read_' + _variant(elem, flexible, nullable)


def _decode_elements(ctx: Context, code: Code, f: FieldSpec, version: int, flexible: bool,
                     target: str) -> None:
    if f.struct is not None:
        child = ctx.child_name('d', f.struct.name, version)
        code(f'{target} = []')
        code('for _ in range(n):')
        code.indent()(f'e, pos = {child}(buf, pos)')
        code(f'{target}.append(e)')
        code.dedent()
    elif f.elem in FIXED:
        fmt = FIXED[f.elem]
        code(f"{target} = list(unpack_from(f'>{{n}}{fmt}', buf, pos))")
        code(f'pos += {fixed_size(fmt)} * n')
    else:
        reader = _scalar_reader(f.elem, flexible, False)
        code(f'{target} = []')
        code('for _ in range(n):')
        code.indent()(f'e, pos = {reader}(buf, pos)')
        code(f'{target}.append(e)')
        code.dedent()


def _decode_tagged(ctx: Context, code: Code, struct: StructSpec, version: int) -> None:
    tagged = sorted((f for f in struct.fields if f.is_tagged_at(version)), key=lambda f: f.tag)
    if not tagged:
        # fast path for the usual empty section (a truncated buffer raises
        # IndexError, which the decode entry point turns into ProtocolDecodeError)
        code('if buf[pos]:')
        code.indent()('pos = skip_tagged_fields(buf, pos)')
        code.dedent()
        code('else:')
        code.indent()('pos += 1')
        code.dedent()
        return
    for f in tagged:
        code(f'f_{f.attr} = {default_expr(f)}')
    code('n_tags, pos = read_uvarint(buf, pos)')
    code('for _ in range(n_tags):')
    code.indent()
    code('tag, pos = read_uvarint(buf, pos)')
    code('size, pos = read_uvarint(buf, pos)')
    code('end = pos + size')
    code('if end > len(buf):')
    code.indent()("raise ProtocolDecodeError('truncated tagged field')")
    code.dedent()
    for i, f in enumerate(tagged):
        code(f'{"if" if i == 0 else "elif"} tag == {f.tag}:')
        code.indent()
        _decode_field(ctx, code, f, version, True)
        code('check_tag_end(pos, end)')
        code.dedent()
    code('pos = end')
    code.dedent()


# ------------------------------------------------------------------ encode


def encode_body(ctx: Context, struct: StructSpec, version: int) -> list[str]:
    flexible = ctx.spec.is_flexible(version)
    code = Code()
    code('ap = out.append')
    pending: list[FieldSpec] = []
    for f in struct.fields:
        if version not in f.versions or f.is_tagged_at(version):
            continue
        if not f.is_array and f.elem in FIXED:
            pending.append(f)
            continue
        _flush_pack(ctx, code, pending)
        _encode_field(ctx, code, f, version, flexible, f'self.{f.attr}', 'out', 'ap')
    _flush_pack(ctx, code, pending)
    if flexible:
        _encode_tagged(ctx, code, struct, version)
    if len(code.lines) == 1:
        return ['    pass']
    if not any('ap(' in line for line in code.lines[1:]):
        return code.lines[1:]
    return code.lines


def _flush_pack(ctx: Context, code: Code, pending: list[FieldSpec]) -> None:
    if not pending:
        return
    fmt = ''.join(FIXED[f.elem] for f in pending)
    args = ', '.join(f'self.{f.attr}' for f in pending)
    code(f'ap({ctx.struct_const(fmt)}.pack({args}))')
    pending.clear()


def _encode_field(ctx: Context, code: Code, f: FieldSpec, version: int, flexible: bool,
                  src: str, out: str, ap: str) -> None:
    nullable = f.is_nullable_at(version)
    if f.is_array:
        if src != 'v':
            code(f'v = {src}')
        if nullable:
            code('if v is None:')
            code.indent()(f"{ap}({_null_len(flexible)})")
            code.dedent()
            code('else:')
            code.indent()
        if flexible:
            code(f'{ap}(write_uvarint(len(v) + 1))')
        else:
            code(f'{ap}({ctx.struct_const("i")}.pack(len(v)))')
        _encode_elements(ctx, code, f, version, flexible, out, ap)
        if nullable:
            code.dedent()
    elif f.struct is not None:
        child = ctx.child_name('e', f.struct.name, version)
        if nullable:
            if src != 'v':
                code(f'v = {src}')
            code('if v is None:')
            code.indent()(f"{ap}(b'\\xff')")
            code.dedent()
            code('else:')
            code.indent()(f"{ap}(b'\\x01')")
            code(f'{child}(v, {out})')
            code.dedent()
        else:
            code(f'{child}({src}, {out})')
    elif f.elem in FIXED:
        code(f'{ap}({ctx.struct_const(FIXED[f.elem])}.pack({src}))')
    elif f.elem == 'records':
        # The value is its own chunk: bytes, memoryview or any sized object.
        if src != 'v':
            code(f'v = {src}')
        code('if v is None:')
        code.indent()(f"{ap}({_null_len(flexible)})")
        code.dedent()
        code('else:')
        if flexible:
            code.indent()(f'{ap}(write_uvarint(len(v) + 1))')
        else:
            code.indent()(f'{ap}({ctx.struct_const("i")}.pack(len(v)))')
        code(f'{ap}(v)')
        code.dedent()
    elif f.elem == 'uuid':
        code(f'{ap}({src}.bytes)')
    else:
        code(f'{ap}(write_{_variant(f.elem, flexible, nullable)}({src}))')


def _encode_elements(ctx: Context, code: Code, f: FieldSpec, version: int, flexible: bool,
                     out: str, ap: str) -> None:
    if f.struct is not None:
        child = ctx.child_name('e', f.struct.name, version)
        code('for e in v:')
        code.indent()(f'{child}(e, {out})')
        code.dedent()
    elif f.elem in FIXED:
        code(f"{ap}(pack(f'>{{len(v)}}{FIXED[f.elem]}', *v))")
    elif f.elem == 'uuid':
        code('for e in v:')
        code.indent()(f'{ap}(e.bytes)')
        code.dedent()
    else:
        writer = 'write_' + _variant(f.elem, flexible, False)
        code('for e in v:')
        code.indent()(f'{ap}({writer}(e))')
        code.dedent()


def _encode_tagged(ctx: Context, code: Code, struct: StructSpec, version: int) -> None:
    tagged = sorted((f for f in struct.fields if f.is_tagged_at(version)), key=lambda f: f.tag)
    if not tagged:
        code("ap(b'\\x00')")
        return
    code('tagged = []')
    for f in tagged:
        code(f'v = self.{f.attr}')
        code(f'if {non_default_test(f, "v", version)}:')
        code.indent()
        code('t = []')
        _encode_field(ctx, code, f, version, True, 'v', 't', 't.append')
        code("d = b''.join(t)")
        code(f'tagged.append(write_uvarint({f.tag}) + write_uvarint(len(d)) + d)')
        code.dedent()
    code('if tagged:')
    code.indent()('ap(write_uvarint(len(tagged)))')
    code('out += tagged')
    code.dedent()
    code('else:')
    code.indent()("ap(b'\\x00')")
    code.dedent()
