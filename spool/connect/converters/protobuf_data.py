"""Connect schemas and values <-> Protobuf (proto3), for ``registry.ProtobufConverter``.

Writing (``file_descriptor(schema)``): a struct named ``a.b.C`` becomes message ``C`` in
package ``a.b`` (unnamed: ``ConnectDefault1``); any other top-level schema is wrapped in
``ConnectDefault1 { T value = 1; }``. Fields are numbered from 1 in schema order:

==================  ======================================================================
int8, int16, int32  ``int32``; int64 ``int64``; float32 ``float``; float64 ``double``;
                    boolean ``bool``; string, bytes
optional primitive  proto3 ``optional`` (presence kept: None round-trips)
struct              a nested message (named after the struct's last name part, else the
                    field's name), read back as an optional struct (message presence)
                    named after the nested message's full name (``pkg.Outer.Inner``)
array               ``repeated`` (elements may not be arrays, maps or optional)
map                 ``map<K, V>`` (K an integer, string or bool; V not an array or map)
Decimal             ``string`` holding the exact decimal text (read back as a string)
Date, Time          ``int32`` days since the epoch / ms of the day (read back as int32)
Timestamp           ``google.protobuf.Timestamp`` (read back as an optional Timestamp)
==================  ======================================================================

The file is registered as Confluent's clients do: the base64 of its serialized
``FileDescriptorProto``. The payload is the message's binary encoding, after Confluent's
message indexes (``read_indexes``).

Reading (``message_schema(descriptor)``): also messages Connect did not write: int32,
sint32, sfixed32 int32; uint32, fixed32 and the 64-bit kinds int64; enums a string (the
value's name); ``google.protobuf.*Value`` wrappers optional primitives; a recursive
message is a DataError.
"""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    timestamp_pb2,  # noqa: F401 - loads google/protobuf/timestamp.proto
)

from spool.connect import data
from spool.connect.data import DataError, Schema, Struct

FD = descriptor_pb2.FieldDescriptorProto
WRAPPED = "ConnectDefault1"
TIMESTAMP_PROTO = "google/protobuf/timestamp.proto"
EPOCH = datetime.date(1970, 1, 1)
_SCALAR = {"int8": FD.TYPE_INT32, "int16": FD.TYPE_INT32, "int32": FD.TYPE_INT32,
           "int64": FD.TYPE_INT64, "float32": FD.TYPE_FLOAT, "float64": FD.TYPE_DOUBLE,
           "boolean": FD.TYPE_BOOL, "string": FD.TYPE_STRING, "bytes": FD.TYPE_BYTES}
_READ = {FD.TYPE_INT32: "int32", FD.TYPE_SINT32: "int32", FD.TYPE_SFIXED32: "int32",
         FD.TYPE_UINT32: "int64", FD.TYPE_FIXED32: "int64", FD.TYPE_INT64: "int64",
         FD.TYPE_SINT64: "int64", FD.TYPE_SFIXED64: "int64", FD.TYPE_UINT64: "int64",
         FD.TYPE_FIXED64: "int64", FD.TYPE_FLOAT: "float32", FD.TYPE_DOUBLE: "float64",
         FD.TYPE_BOOL: "boolean", FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes",
         FD.TYPE_ENUM: "string"}
_WRAPPERS = {"google.protobuf.DoubleValue": "float64", "google.protobuf.FloatValue": "float32",
             "google.protobuf.Int64Value": "int64", "google.protobuf.UInt64Value": "int64",
             "google.protobuf.Int32Value": "int32", "google.protobuf.UInt32Value": "int64",
             "google.protobuf.BoolValue": "boolean", "google.protobuf.StringValue": "string",
             "google.protobuf.BytesValue": "bytes"}


# ---- Connect schema -> descriptor

def _split(name: str | None) -> tuple[str, str]:
    if not name:
        return "", WRAPPED
    pkg, _, msg = name.rpartition(".")
    return pkg, msg


def file_descriptor(schema: Schema) -> descriptor_pb2.FileDescriptorProto:
    top = schema if schema.type == "struct" else data.struct(None, [("value", schema)])
    pkg, msg_name = _split(top.name)
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{pkg or 'connect'}.{msg_name}.proto",
                                             package=pkg, syntax="proto3")
    msg = fdp.message_type.add(name=msg_name)
    scope = f".{pkg}.{msg_name}" if pkg else f".{msg_name}"
    _message(msg, top, scope, fdp)
    return fdp


def _message(msg: descriptor_pb2.DescriptorProto, schema: Schema, scope: str,
             fdp: descriptor_pb2.FileDescriptorProto) -> None:
    used: set[str] = set()
    for number, f in enumerate(schema.fields, start=1):
        fs = f.schema
        fd = msg.field.add(name=f.name, number=number, label=FD.LABEL_OPTIONAL)
        if fs.type == "array":
            el = fs.value_schema
            assert el is not None
            if el.type in ("array", "map") or el.optional:
                raise DataError(f"Protobuf cannot hold {f.name}: arrays of arrays, maps or "
                                "optional elements")
            fd.label = FD.LABEL_REPEATED
            _typed(fd, el, f.name, msg, scope, fdp, used)
        elif fs.type == "map":
            ks, vs = fs.key_schema, fs.value_schema
            assert ks is not None and vs is not None
            if ks.type not in ("int8", "int16", "int32", "int64", "string", "boolean") \
                    or ks.name is not None or vs.type in ("array", "map"):
                raise DataError(f"Protobuf cannot hold the map {f.name}")
            entry_name = _unique(_camel(f.name) + "Entry", used)
            entry = msg.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            kf = entry.field.add(name="key", number=1, label=FD.LABEL_OPTIONAL)
            _typed(kf, ks, "key", entry, f"{scope}.{entry_name}", fdp, set())
            vf = entry.field.add(name="value", number=2, label=FD.LABEL_OPTIONAL)
            _typed(vf, vs, "value", entry, f"{scope}.{entry_name}", fdp, set())
            fd.label = FD.LABEL_REPEATED
            fd.type = FD.TYPE_MESSAGE
            fd.type_name = f"{scope}.{entry_name}"
        else:
            _typed(fd, fs, f.name, msg, scope, fdp, used)
            if fs.optional and fd.type != FD.TYPE_MESSAGE:
                fd.proto3_optional = True
                fd.oneof_index = len(msg.oneof_decl)
                msg.oneof_decl.add(name=f"_{f.name}")


def _typed(fd: FD, s: Schema, field_name: str, msg: descriptor_pb2.DescriptorProto,
           scope: str, fdp: descriptor_pb2.FileDescriptorProto, used: set[str]) -> None:
    if s.name == data.DECIMAL:
        fd.type = FD.TYPE_STRING
    elif s.name == data.TIMESTAMP:
        fd.type = FD.TYPE_MESSAGE
        fd.type_name = ".google.protobuf.Timestamp"
        if TIMESTAMP_PROTO not in fdp.dependency:
            fdp.dependency.append(TIMESTAMP_PROTO)
    elif s.type == "struct":
        name = _unique(_split(s.name)[1] if s.name else _camel(field_name), used)
        nested = msg.nested_type.add(name=name)
        _message(nested, s, f"{scope}.{name}", fdp)
        fd.type = FD.TYPE_MESSAGE
        fd.type_name = f"{scope}.{name}"
    else:
        fd.type = _SCALAR[s.type]


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_") if p) or "Field"


def _unique(name: str, used: set[str]) -> str:
    out, n = name, 1
    while out in used:
        n += 1
        out = f"{name}{n}"
    used.add(out)
    return out


def registered_text(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.b64encode(fdp.SerializeToString()).decode("ascii")


def message_class(files: list[descriptor_pb2.FileDescriptorProto], full_name: str) -> Any:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    for fdp in files:
        _add(pool, fdp, added)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def _add(pool: Any, fdp: descriptor_pb2.FileDescriptorProto, added: set[str]) -> None:
    for dep in fdp.dependency:
        if dep not in added:
            try:
                known = descriptor_pool.Default().FindFileByName(dep)
            except KeyError:
                continue
            _add(pool, descriptor_pb2.FileDescriptorProto.FromString(known.serialized_pb),
                 added)
    if fdp.name not in added:
        pool.Add(fdp)
        added.add(fdp.name)


# ---- values

def encode(schema: Schema, cls: Any, value: Any) -> bytes:
    msg = cls()
    if schema.type == "struct":
        _fill(msg, schema, value)
    else:
        _fill(msg, data.struct(None, [("value", schema)]), {"value": value})
    return msg.SerializeToString()  # type: ignore[no-any-return]


def _fill(msg: Any, schema: Schema, value: Any) -> None:
    if not isinstance(value, dict):
        raise DataError(f"Invalid type for STRUCT: {type(value).__name__}")
    for f in schema.fields:
        v = value.get(f.name)
        if v is None:
            v = f.schema.default
        if v is None:
            if not f.schema.optional:
                raise DataError(f"Conversion error: null value for field {f.name} that is "
                                "required and has no default value")
            continue
        fs = f.schema
        if fs.type == "array":
            target = getattr(msg, f.name)
            for el in v:
                if fs.value_schema.type == "struct" or fs.value_schema.name == data.TIMESTAMP:  # type: ignore[union-attr]
                    _set_message(target.add(), fs.value_schema, el)
                else:
                    target.append(_scalar(fs.value_schema, el))  # type: ignore[arg-type]
        elif fs.type == "map":
            target = getattr(msg, f.name)
            for k, el in v.items():
                vs = fs.value_schema
                assert vs is not None
                if vs.type == "struct" or vs.name == data.TIMESTAMP:
                    _set_message(target[k], vs, el)
                else:
                    target[k] = _scalar(vs, el)
        elif fs.type == "struct" or fs.name == data.TIMESTAMP:
            _set_message(getattr(msg, f.name), fs, v)
        else:
            setattr(msg, f.name, _scalar(fs, v))


def _set_message(target: Any, schema: Schema, value: Any) -> None:
    if schema.name == data.TIMESTAMP:
        if not isinstance(value, datetime.datetime):
            raise DataError(f"Invalid type for Timestamp: {type(value).__name__}")
        target.FromDatetime(value if value.tzinfo else value.replace(tzinfo=datetime.UTC))
        return
    target.SetInParent()
    _fill(target, schema, value)


def _scalar(schema: Schema, v: Any) -> Any:
    if schema.name == data.DECIMAL:
        if not isinstance(v, decimal.Decimal):
            raise DataError(f"Invalid type for Decimal: {type(v).__name__}")
        return format(v, "f")
    if schema.name == data.DATE:
        return (v - EPOCH).days
    if schema.name == data.TIME:
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000
    data.validate(schema, v)
    return bytes(v) if schema.type == "bytes" else v


def is_wrapped(desc: Any) -> bool:
    """A message ``file_descriptor`` wrapped a non-struct schema in."""
    return desc.name == WRAPPED and not desc.file.package \
        and [f.name for f in desc.fields] == ["value"]


def decode(schema: Schema, cls: Any, payload: bytes) -> Any:
    msg = cls.FromString(payload)
    if is_wrapped(cls.DESCRIPTOR):
        return _read_field(msg, cls.DESCRIPTOR.fields_by_name["value"], schema)
    return _read_struct(msg, schema)


def _read_struct(msg: Any, schema: Schema) -> Struct:
    fields = msg.DESCRIPTOR.fields_by_name
    return Struct(schema, {f.name: _read_field(msg, fields[f.name], f.schema)
                           for f in schema.fields})


def _read_field(msg: Any, fd: Any, schema: Schema) -> Any:
    if not fd.is_repeated and fd.has_presence and not msg.HasField(fd.name):
        return None
    v = getattr(msg, fd.name)
    if schema.type == "map":
        return {k: _read_value(fd.message_type.fields_by_name["value"], schema.value_schema,  # type: ignore[arg-type]
                               x) for k, x in v.items()}
    if schema.type == "array":
        return [_read_value(fd, schema.value_schema, x) for x in v]  # type: ignore[arg-type]
    return _read_value(fd, schema, v)


def _read_value(fd: Any, schema: Schema, v: Any) -> Any:
    if schema.name == data.TIMESTAMP:
        return v.ToDatetime(tzinfo=datetime.UTC)
    if fd.type == FD.TYPE_ENUM:
        return fd.enum_type.values_by_number[v].name if v in fd.enum_type.values_by_number \
            else str(v)
    if fd.type == FD.TYPE_MESSAGE and fd.message_type.full_name in _WRAPPERS:
        return v.value
    if schema.type == "struct":
        return _read_struct(v, schema)
    return v


# ---- descriptor -> Connect schema

def message_schema(desc: Any) -> Schema:
    """The Connect schema of a message descriptor (module doc)."""
    if is_wrapped(desc):
        return _field_schema(desc.fields[0], set())
    return _struct(desc, set())


def _struct(desc: Any, seen: set[str]) -> Schema:
    if desc.full_name in seen:
        raise DataError(f"Recursive Protobuf message {desc.full_name} is not supported")
    seen = seen | {desc.full_name}
    fields = [(f.name, _field_schema(f, seen)) for f in desc.fields]
    return data.struct(None if desc.name == WRAPPED and not desc.file.package
                       else desc.full_name, fields)


def _field_schema(fd: Any, seen: set[str]) -> Schema:
    if fd.is_repeated:
        if fd.type == FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
            kf = fd.message_type.fields_by_name["key"]
            vf = fd.message_type.fields_by_name["value"]
            return data.map_of(_single(kf, seen, False), _single(vf, seen, False))
        return data.array(_single(fd, seen, False))
    return _single(fd, seen, fd.has_presence)


def _single(fd: Any, seen: set[str], optional: bool) -> Schema:
    if fd.type == FD.TYPE_MESSAGE:
        name = fd.message_type.full_name
        if name == "google.protobuf.Timestamp":
            s = data.TIMESTAMP_SCHEMA
        elif name in _WRAPPERS:
            s = Schema(_WRAPPERS[name])
        else:
            s = _struct(fd.message_type, seen)
    else:
        s = Schema(_READ[fd.type])
    return data.optional(s) if optional else s


# ---- Confluent's message indexes

def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def write_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)


def _read_zigzag(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = z = 0
    while True:
        if pos >= len(buf):
            raise DataError("truncated Protobuf message indexes")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1), pos


def read_indexes(buf: memoryview) -> tuple[list[int], int]:
    count, pos = _read_zigzag(buf, 0)
    if count == 0:
        return [0], pos
    out = []
    for _ in range(count):
        i, pos = _read_zigzag(buf, pos)
        out.append(i)
    return out, pos


def message_by_indexes(fdp: descriptor_pb2.FileDescriptorProto, indexes: list[int]) -> str:
    """The full name of the message the indexes point at in ``fdp``."""
    types = fdp.message_type
    parts = [fdp.package] if fdp.package else []
    for i in indexes:
        if i >= len(types):
            raise DataError(f"Protobuf message index {indexes} not in the schema")
        parts.append(types[i].name)
        types = types[i].nested_type
    return ".".join(parts)
