"""PROTOBUF: ``.proto`` text or a base64 FileDescriptorProto, compiled by protoc; Confluent's rules.

**Parse.** A schema (and each referenced schema) is either ``.proto`` source text or the
base64 of a serialized ``FileDescriptorProto``, which is what confluent-kafka's
``ProtobufSerializer`` registers (``base64(message.DESCRIPTOR.file.serialized_pb)``, its
imports registered the same way as references named by their import path). Text that is
all base64 and decodes to a descriptor is a descriptor; anything else is ``.proto`` text.
Both go through grpcio-tools' bundled protoc (``grpc_tools._protoc_compiler``, run in a
child process so its stderr is ours to read and a crash is not ours): in a temporary
directory, text files are written under their import names (the reference's ``name``),
descriptors go into a ``FileDescriptorSet`` passed with ``--descriptor_set_in``, the
``google/protobuf/*.proto`` well-known types come from grpc_tools' include directory, the
other imports Confluent's clients leave out of the references (``skip.known.types``:
``confluent/meta.proto``, ``confluent/type/*.proto``, ``google/type/*.proto``) from the
descriptors of the installed ``_pb2`` modules that define them (confluent-kafka's,
googleapis-common-protos'), when a schema imports one and no reference of that name was
given, and protoc writes the resolved ``FileDescriptorSet`` (``--include_imports``). The schema itself
is compiled as ``schema.proto``. protoc's diagnostics become ``model.InvalidSchema``, with
the temporary paths taken out. Results are cached by (schema, references) text, so a
schema is compiled once per process however often it is checked or looked up.

**Canonical form.** protoc's own descriptor of the schema's file (type names fully
qualified, ``json_name`` filled in, proto3 ``optional`` as synthetic oneofs, no source
info, no comments or formatting), with its file name cleared, printed in protobuf's text
format. The same schema registered as ``.proto`` text or as the serializer's descriptor
gets the same canonical form and so the same id. ``serialized(parsed)`` gives the base64
``FileDescriptorProto`` that ``?format=serialized`` answers (confluent-kafka's
deserializer asks for it).

**Compatibility** (``incompatibilities(reader, writer)``): Confluent's ``ProtobufSchemaDiff``,
walking the writer's file (Confluent's "original") against the reader's ("update");
each incompatible difference is reported as
``{errorType:"TYPE", description:"... path '#/...' ..."}``. Paths are ``#/`` for the
file, ``#/Outer/Inner`` for a message, ``#/Msg/7`` for field number 7, ``#/Msg/choice/7``
for a member of oneof ``choice``. Messages and enums are matched by name within their
scope, fields by number. Incompatible:

- ``PACKAGE_CHANGED``: the file's package differs.
- ``MESSAGE_REMOVED``: a message of the writer (not a map entry) is gone from the reader.
- ``FIELD_KIND_CHANGED``: a field's kind differs among scalar (enums count as scalars),
  message and map.
- ``FIELD_SCALAR_KIND_CHANGED``: a scalar changes group. The wire-compatible groups are
  {int32, uint32, int64, uint64, bool, enums}, {sint32, sint64}, {string, bytes},
  {fixed32, sfixed32}, {fixed64, sfixed64}, {float}, {double}; a map's key and value are
  compared the same way.
- ``FIELD_NUMERIC_LABEL_CHANGED``: a numeric scalar changes label (repeated, optional,
  required). Confluent's parser gives proto3 fields without a label no label and so
  misses singular <-> repeated there; we count them optional, so that change (which
  loses data) is reported for proto3 too.
- ``FIELD_NAMED_TYPE_CHANGED``: a message field's type changes name (its name less the
  package), or keeps it but the type, defined in an imported file on either side, is
  itself incompatible (its differences are reported too).
- ``REQUIRED_FIELD_ADDED`` / ``REQUIRED_FIELD_REMOVED``: proto2 required fields.
- ``ONEOF_FIELD_REMOVED``: a member of a oneof is gone while the oneof still has members
  (deleting a whole oneof is compatible).
- ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``: fields that were independent, more than one of them
  outside any oneof, are now members of one oneof.
- ``FIELD_MOVED_TO_EXISTING_ONEOF``: a field that was outside (or in another oneof) joins
  a oneof together with fields it was independent of.

Compatible (not reported): messages and enums added, moved or reordered; enums removed;
enum values added, removed or renumbered (proto3 keeps unknown enum values); fields added
or removed (Confluent requires no ``reserved``: transitive levels cover re-use of a
number), renamed; string/bytes singular <-> repeated; message singular <-> repeated; a
single field moved into a new oneof; a field moved out of its oneof; oneofs added or
removed; ``syntax`` changes (Confluent does not check it: what breaks, required fields,
is reported as such); options. proto3 ``optional`` (a synthetic oneof) is a plain field
here, as it is on the wire.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import posixpath
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor_pb2, text_format
from google.protobuf.message import DecodeError

from spool.registry import model

MAIN = "schema.proto"
PROTOC_TIMEOUT_S = 30.0
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_RUN_PROTOC = ("import sys\nfrom grpc_tools import _protoc_compiler as c\n"
               "sys.exit(c.run_main([a.encode() for a in sys.argv[1:]]))")

FDP = descriptor_pb2.FileDescriptorProto
FD = descriptor_pb2.FieldDescriptorProto


@dataclass(frozen=True, eq=False)
class ProtoSchema:
    """A compiled schema: its file as protoc built it, every file it imports
    (transitively, by import name) and every message and enum by full name (``.pkg.M``)."""

    file: descriptor_pb2.FileDescriptorProto
    imports: Mapping[str, descriptor_pb2.FileDescriptorProto]
    types: Mapping[str, _Type]


@dataclass(frozen=True, eq=False)
class _Type:
    proto: descriptor_pb2.DescriptorProto | descriptor_pb2.EnumDescriptorProto
    file: str
    package: str

    @property
    def is_enum(self) -> bool:
        return isinstance(self.proto, descriptor_pb2.EnumDescriptorProto)

    @property
    def is_map(self) -> bool:
        return not self.is_enum and self.proto.options.map_entry


# -- parsing -------------------------------------------------------------------------------

def _include_dir() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).parent / "_proto")


def _as_descriptor(name: str, text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor ``text`` encodes, or None when it is .proto text."""
    compact = text.strip()
    if not compact or not _BASE64.fullmatch(compact):
        return None
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None
    proto = FDP()
    try:
        proto.ParseFromString(raw)
    except DecodeError as e:
        raise model.InvalidSchema(f"{name}: not a serialized FileDescriptorProto: {e}") from e
    proto.name = name
    return proto


_IMPORT = re.compile(r'\bimport\s+(?:public\s+|weak\s+)?"([^"]+)"')


def _builtin_module(name: str) -> str | None:
    """The Python module whose descriptor is the built-in import ``name``, if any."""
    if not name.endswith(".proto") or not name.replace("/", "").replace("_", "")[:-6].isalnum():
        return None
    if name.startswith("google/type/"):
        return "google.type." + name[len("google/type/"):-6] + "_pb2"
    if name == "confluent/meta.proto" or name.startswith("confluent/type/"):
        return "confluent_kafka.schema_registry." + name[:-6].replace("/", ".") + "_pb2"
    return None


def _builtins(imported: set[str], given: set[str]) -> list[FDP]:
    """Descriptors of the built-in imports among ``imported`` (and theirs) that are not
    ``given`` as references and not well-known (protoc's include directory has those)."""
    found: dict[str, FDP] = {}
    todo = [n for n in imported if n not in given]
    while todo:
        name = todo.pop()
        module = _builtin_module(name)
        if name in found or name in given or module is None:
            continue
        try:
            descriptor = importlib.import_module(module).DESCRIPTOR
        except (ImportError, AttributeError):
            continue  # protoc will say the import was not found
        found[name] = FDP.FromString(descriptor.serialized_pb)
        todo.extend(d.name for d in descriptor.dependencies)
    return list(found.values())


def _imports(text: str, descriptor: FDP | None) -> set[str]:
    return set(descriptor.dependency) if descriptor is not None else set(_IMPORT.findall(text))


def _checked_import_name(name: str) -> str:
    normal = posixpath.normpath(name)
    if (not name or name.startswith("/") or normal != name or normal.startswith("..")
            or "\\" in name or "\0" in name):
        raise model.InvalidSchema(f"reference name {name!r} is not a relative import path")
    return name


def _compile(schema: str, references: tuple[tuple[str, str], ...]) -> list[FDP]:
    """protoc's FileDescriptorSet for ``schema`` (named MAIN) and everything it imports."""
    names = {name for name, _ in references}
    if MAIN in names:
        raise model.InvalidSchema(f"a reference may not be named {MAIN!r}")
    descriptors = descriptor_pb2.FileDescriptorSet()
    with tempfile.TemporaryDirectory(prefix="spool-proto-") as tmp:
        src = Path(tmp, "src")
        src.mkdir()
        imported: set[str] = set()
        for name, text in [*references, (MAIN, schema)]:
            proto = _as_descriptor(_checked_import_name(name), text)
            imported |= _imports(text, proto)
            if proto is not None:
                descriptors.file.append(proto)
            else:
                path = src / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        descriptors.file.extend(_builtins(imported, names))
        out = Path(tmp, "out.pb")
        args = ["protoc", f"-I{src}", f"-I{_include_dir()}", "--include_imports",
                f"--descriptor_set_out={out}"]
        if descriptors.file:
            given = Path(tmp, "in.pb")
            given.write_bytes(descriptors.SerializeToString())
            args.append(f"--descriptor_set_in={given}")
        args.append(MAIN)
        try:
            done = subprocess.run([sys.executable, "-c", _RUN_PROTOC, *args], cwd=tmp,
                                  capture_output=True, timeout=PROTOC_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            raise model.operation_timeout(f"protoc ran over {PROTOC_TIMEOUT_S:.0f} s") from e
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").replace(f"{src}/", "")
            message = message.replace(f"{tmp}/", "").strip()
            raise model.InvalidSchema(message or f"protoc failed ({done.returncode})")
        result = descriptor_pb2.FileDescriptorSet()
        result.ParseFromString(out.read_bytes())
    return list(result.file)


def _index(files: list[FDP]) -> dict[str, _Type]:
    types: dict[str, _Type] = {}

    def walk(scope: str, messages, enums, file: FDP) -> None:  # noqa: ANN001
        for e in enums:
            types[f"{scope}.{e.name}"] = _Type(e, file.name, file.package)
        for m in messages:
            types[f"{scope}.{m.name}"] = _Type(m, file.name, file.package)
            walk(f"{scope}.{m.name}", m.nested_type, m.enum_type, file)

    for f in files:
        walk(f".{f.package}" if f.package else "", f.message_type, f.enum_type, f)
    return types


@functools.lru_cache(maxsize=512)
def _parse(schema: str, references: tuple[tuple[str, str], ...]) -> ProtoSchema:
    files = _compile(schema, references)
    main = next(f for f in files if f.name == MAIN)
    return ProtoSchema(file=main, imports={f.name: f for f in files if f.name != MAIN},
                       types=_index(files))


# -- compatibility -------------------------------------------------------------------------

COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
    "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED",
    "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})

_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{p}' in the reader schema differs from the "
                       "package in the writer schema",
    "MESSAGE_REMOVED": "The reader schema has no MESSAGE type at path '{p}' of the "
                       "writer schema",
    "FIELD_KIND_CHANGED": "The field at path '{p}' is not of the same kind (scalar, "
                          "message or map) in the reader and the writer schema",
    "FIELD_SCALAR_KIND_CHANGED": "The SCALAR field at path '{p}' in the reader schema "
                                 "has a type that is not wire-compatible with its type "
                                 "in the writer schema",
    "FIELD_NAMED_TYPE_CHANGED": "The MESSAGE field at path '{p}' in the reader schema "
                                "does not have the same type as in the writer schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The NUMERIC field at path '{p}' in the reader schema "
                                   "has another label (repeated, optional, required) than "
                                   "in the writer schema",
    "REQUIRED_FIELD_ADDED": "The required field at path '{p}' in the reader schema is "
                            "not in the writer schema",
    "REQUIRED_FIELD_REMOVED": "The reader schema has no field at path '{p}', a required "
                              "field in the writer schema",
    "ONEOF_FIELD_REMOVED": "The reader schema has no oneof field at path '{p}' of the "
                           "writer schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Several fields of the oneof at path '{p}' in the "
                                      "reader schema are outside any oneof in the writer "
                                      "schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field of the oneof at path '{p}' in the reader "
                                     "schema is outside that oneof in the writer schema",
}

_SCALAR_GROUPS = {
    FD.TYPE_INT32: "number", FD.TYPE_INT64: "number", FD.TYPE_UINT32: "number",
    FD.TYPE_UINT64: "number", FD.TYPE_BOOL: "number", FD.TYPE_ENUM: "number",
    FD.TYPE_SINT32: "signed", FD.TYPE_SINT64: "signed",
    FD.TYPE_STRING: "string_or_bytes", FD.TYPE_BYTES: "string_or_bytes",
    FD.TYPE_FIXED32: "fixed32", FD.TYPE_SFIXED32: "fixed32",
    FD.TYPE_FIXED64: "fixed64", FD.TYPE_SFIXED64: "fixed64",
    FD.TYPE_FLOAT: "float", FD.TYPE_DOUBLE: "double",
}


@dataclass
class _Diff:
    """The differences found walking writer (``old``) against reader (``new``)."""

    old: ProtoSchema
    new: ProtoSchema
    found: list[tuple[str, str]] = field(default_factory=list)
    visiting: set[tuple[str, str]] = field(default_factory=set)

    def add(self, kind: str, path: str) -> None:
        self.found.append((kind, path))

    def incompatible(self) -> list[tuple[str, str]]:
        return [(k, p) for k, p in self.found if k not in COMPATIBLE]

    # files, messages, enums

    def file(self, old: FDP, new: FDP) -> None:
        if old.package != new.package:
            self.add("PACKAGE_CHANGED", "#/")
        self.types("#", old.message_type, old.enum_type, new.message_type, new.enum_type)

    def types(self, path: str, old_messages, old_enums, new_messages, new_enums) -> None:  # noqa: ANN001
        # A map field's entry message is the map's, compared with the field.
        olds = {m.name: (i, m) for i, m in enumerate(old_messages) if not m.options.map_entry}
        news = {m.name: (i, m) for i, m in enumerate(new_messages) if not m.options.map_entry}
        for name in sorted(olds.keys() | news.keys()):
            where = f"{path}/{name}"
            if name not in news:
                self.add("MESSAGE_REMOVED", where)
            elif name not in olds:
                self.add("MESSAGE_ADDED", where)
            else:
                self.message(where, olds[name][1], news[name][1])
                if olds[name][0] != news[name][0]:
                    self.add("MESSAGE_MOVED", where)
        old_e = {e.name: e for e in old_enums}
        new_e = {e.name: e for e in new_enums}
        for name in sorted(old_e.keys() | new_e.keys()):
            where = f"{path}/{name}"
            if name not in new_e:
                self.add("ENUM_REMOVED", where)
            elif name not in old_e:
                self.add("ENUM_ADDED", where)
            else:
                self.enum(where, old_e[name], new_e[name])

    def enum(self, path: str, old, new) -> None:  # noqa: ANN001
        olds = {v.number: v.name for v in old.value}
        news = {v.number: v.name for v in new.value}
        for number in sorted(olds.keys() | news.keys()):
            if number not in news:
                self.add("ENUM_CONST_REMOVED", f"{path}/{number}")
            elif number not in olds:
                self.add("ENUM_CONST_ADDED", f"{path}/{number}")
            elif olds[number] != news[number]:
                self.add("ENUM_CONST_CHANGED", f"{path}/{number}")

    def message(self, path: str, old: descriptor_pb2.DescriptorProto,
                new: descriptor_pb2.DescriptorProto) -> None:
        old_fields, old_oneof, old_oneofs = _fields(old)
        new_fields, new_oneof, new_oneofs = _fields(new)
        deleted = {name for name, members in old_oneofs.items() if name not in new_oneofs
                   and not any(n in new_fields for n in members)}
        for name, members in new_oneofs.items():
            origins: set[str] = set()
            moved_in = 0
            for number in members:
                if number in old_oneof:
                    origins.add("oneof:" + old_oneof[number])
                elif number in old_fields:
                    origins.add(f"field:{number}")
                    moved_in += 1
            if len(origins) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1
                         else "FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{name}")
        for name in sorted(old_oneofs.keys() | new_oneofs.keys()):
            if name not in new_oneofs:
                self.add("ONEOF_REMOVED", f"{path}/{name}")
            elif name not in old_oneofs:
                self.add("ONEOF_ADDED", f"{path}/{name}")
        for number in sorted(old_fields.keys() | new_fields.keys()):
            o, n = old_fields.get(number), new_fields.get(number)
            if n is None:
                if number in old_oneof:
                    if old_oneof[number] not in deleted:
                        self.add("ONEOF_FIELD_REMOVED", f"{path}/{old_oneof[number]}/{number}")
                else:
                    self.add("REQUIRED_FIELD_REMOVED" if o.label == FD.LABEL_REQUIRED
                             else "FIELD_REMOVED", f"{path}/{number}")
            elif o is None:
                if number in new_oneof:
                    self.add("ONEOF_FIELD_ADDED", f"{path}/{new_oneof[number]}/{number}")
                else:
                    self.add("REQUIRED_FIELD_ADDED" if n.label == FD.LABEL_REQUIRED
                             else "FIELD_ADDED", f"{path}/{number}")
            else:
                if number in old_oneof and number not in new_oneof:
                    self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", f"{path}/{number}")
                where = (f"{path}/{new_oneof[number]}/{number}" if number in new_oneof
                         else f"{path}/{number}")
                if o.name != n.name:
                    self.add("FIELD_NAME_CHANGED", where)
                self.field_type(where, o, n, o.label, n.label)
        self.types(path, old.nested_type, old.enum_type, new.nested_type, new.enum_type)

    # fields

    def field_type(self, path: str, old: FD, new: FD, old_label: int | None,
                   new_label: int | None) -> None:
        old_map, new_map = self._map_entry(old, self.old), self._map_entry(new, self.new)
        old_kind, new_kind = _kind(old, old_map), _kind(new, new_map)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", path)
        elif old_kind == "scalar":
            group = _SCALAR_GROUPS[old.type]
            if group != _SCALAR_GROUPS[new.type]:
                self.add("FIELD_SCALAR_KIND_CHANGED", path)
            elif old_label is not None and new_label is not None and old_label != new_label:
                self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if group == "string_or_bytes"
                         else "FIELD_NUMERIC_LABEL_CHANGED", path)
        elif old_kind == "map":
            assert old_map is not None and new_map is not None
            for o, n in zip(_key_value(old_map), _key_value(new_map), strict=True):
                self.field_type(path, o, n, None, None)
        else:
            self.named_type(path, old.type_name, new.type_name)

    def named_type(self, path: str, old_name: str, new_name: str) -> None:
        old, new = self.old.types.get(old_name), self.new.types.get(new_name)
        if old is None or new is None:  # cannot happen after protoc; compare names then
            if old_name != new_name:
                self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        if _local(old_name, old) != _local(new_name, new):
            self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        if old.file == MAIN and new.file == MAIN:
            return  # compared where the file's own types are walked
        if old.proto.SerializeToString(deterministic=True) == \
                new.proto.SerializeToString(deterministic=True) or \
                (old_name, new_name) in self.visiting:
            return
        sub = _Diff(self.old, self.new, visiting=self.visiting | {(old_name, new_name)})
        sub.message("#/" + _local(old_name, old).replace(".", "/"), old.proto, new.proto)
        found = sub.incompatible()
        self.found.extend(found)
        if found:
            self.add("FIELD_NAMED_TYPE_CHANGED", path)

    @staticmethod
    def _map_entry(f: FD, schema: ProtoSchema) -> descriptor_pb2.DescriptorProto | None:
        if f.type != FD.TYPE_MESSAGE:
            return None
        t = schema.types.get(f.type_name)
        return t.proto if t is not None and t.is_map else None  # type: ignore[return-value]


def _fields(message: descriptor_pb2.DescriptorProto
            ) -> tuple[dict[int, FD], dict[int, str], dict[str, list[int]]]:
    """Fields by number, each oneof member's oneof, each oneof's members (real oneofs
    only: a proto3 ``optional`` field's synthetic oneof is no oneof on the wire)."""
    by_number = {f.number: f for f in message.field}
    in_oneof: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for f in message.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            name = message.oneof_decl[f.oneof_index].name
            in_oneof[f.number] = name
            oneofs.setdefault(name, []).append(f.number)
    return by_number, in_oneof, oneofs


def _kind(f: FD, map_entry: descriptor_pb2.DescriptorProto | None) -> str:
    if map_entry is not None:
        return "map"
    if f.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        return "message"
    return "scalar"


def _key_value(entry: descriptor_pb2.DescriptorProto) -> Iterator[FD]:
    by_number = {f.number: f for f in entry.field}
    yield by_number[1]
    yield by_number[2]


def _local(full_name: str, t: _Type) -> str:
    """A type's name without its package (Confluent compares these)."""
    prefix = f".{t.package}." if t.package else "."
    return full_name[len(prefix):] if full_name.startswith(prefix) else full_name.lstrip(".")


def _render(kind: str, path: str) -> str:
    description = _DESCRIPTIONS.get(kind, "{p}").format(p=path)
    return f'{{errorType:"{kind}", description:"{description}"}}'


# -- the format ------------------------------------------------------------------------------

class _Protobuf:
    name = "PROTOBUF"

    def parse(self, schema: str, references: Mapping[str, str]) -> ProtoSchema:
        if not isinstance(schema, str) or not schema.strip():
            raise model.InvalidSchema("empty schema")
        return _parse(schema, tuple(sorted(references.items())))

    def canonical(self, parsed: ProtoSchema) -> str:
        return text_format.MessageToString(_normalised(parsed))

    def serialized(self, parsed: ProtoSchema) -> str:
        """The base64 FileDescriptorProto (``GET ...?format=serialized``)."""
        return base64.standard_b64encode(
            _normalised(parsed).SerializeToString(deterministic=True)).decode("ascii")

    def incompatibilities(self, reader: ProtoSchema, writer: ProtoSchema) -> list[str]:
        diff = _Diff(old=writer, new=reader)
        diff.file(writer.file, reader.file)
        return [_render(kind, path) for kind, path in diff.incompatible()]


def _normalised(parsed: ProtoSchema) -> descriptor_pb2.FileDescriptorProto:
    proto = FDP()
    proto.CopyFrom(parsed.file)
    proto.ClearField("name")
    proto.ClearField("source_code_info")
    return proto


FORMAT = _Protobuf()
