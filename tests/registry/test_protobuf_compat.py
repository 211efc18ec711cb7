"""PROTOBUF (spool.registry.formats.protobuf): parsing .proto text and confluent-kafka's
base64 descriptors through protoc, the canonical form, and Confluent's compatibility rules
as a table of (old, new) cases checked in both directions."""

from __future__ import annotations

import base64
import importlib
import re
import subprocess
import sys

import pytest
from confluent_kafka.schema_registry.common.protobuf import _schema_to_str

from spool.registry import model
from spool.registry.formats import formats
from spool.registry.formats.protobuf import FORMAT

_MESSAGE = re.compile(r"""\{errorType:"(\w+)", description:"[^"]*'(#/[^']*)'[^"]*"\}""")


def proto(body: str, *, package: str = "shop", syntax: str = "proto3",
          imports: tuple[str, ...] = ()) -> str:
    head = f'syntax = "{syntax}";\n' + (f"package {package};\n" if package else "")
    return head + "".join(f'import "{i}";\n' for i in imports) + body


def found(reader: str, writer: str, references: dict[str, str] | None = None
          ) -> list[tuple[str, str]]:
    """The (errorType, path) of each incompatibility, reading ``writer``'s data with
    ``reader``."""
    refs = references or {}
    messages = FORMAT.incompatibilities(FORMAT.parse(reader, refs), FORMAT.parse(writer, refs))
    parsed = [_MESSAGE.fullmatch(m) for m in messages]
    assert all(parsed), messages
    return [(m.group(1), m.group(2)) for m in parsed if m]


M = "message M {{ {} }}\n"
TWO = "message A { int32 x = 1; }\nmessage B { int32 x = 1; }\n"

# (rule, old, new, incompatibilities when new reads old's data (BACKWARD), when old reads
# new's data (FORWARD)). Each says the rule it checks.
CASES: list[tuple[str, str, str, list[tuple[str, str]], list[tuple[str, str]]]] = [
    ("identical", proto(M.format("int32 a = 1;")), proto(M.format("int32 a = 1;")), [], []),
    ("field added or removed: compatible both ways",
     proto(M.format("int32 a = 1;")), proto(M.format("int32 a = 1; string b = 2;")), [], []),
    ("field renamed: numbers are identity",
     proto(M.format("int32 a = 1;")), proto(M.format("int32 renamed = 1;")), [], []),
    ("field renumbered: a removal and an addition, both compatible",
     proto(M.format("int32 a = 1;")), proto(M.format("int32 a = 2;")), [], []),
    ("int32 -> int64: same varint group",
     proto(M.format("int32 a = 1;")), proto(M.format("int64 a = 1;")), [], []),
    ("int32 -> uint64: same varint group",
     proto(M.format("int32 a = 1;")), proto(M.format("uint64 a = 1;")), [], []),
    ("uint32 -> bool: same varint group",
     proto(M.format("uint32 a = 1;")), proto(M.format("bool a = 1;")), [], []),
    ("int32 -> enum: enums are varints",
     proto(M.format("int32 a = 1;")),
     proto(M.format("E a = 1;") + "enum E { E0 = 0; E1 = 1; }\n"), [], []),
    ("int32 -> sint32: zigzag is another encoding",
     proto(M.format("int32 a = 1;")), proto(M.format("sint32 a = 1;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("sint32 -> sint64: same zigzag group",
     proto(M.format("sint32 a = 1;")), proto(M.format("sint64 a = 1;")), [], []),
    ("string -> bytes",
     proto(M.format("string a = 1;")), proto(M.format("bytes a = 1;")), [], []),
    ("fixed32 -> sfixed32",
     proto(M.format("fixed32 a = 1;")), proto(M.format("sfixed32 a = 1;")), [], []),
    ("fixed64 -> sfixed64",
     proto(M.format("fixed64 a = 1;")), proto(M.format("sfixed64 a = 1;")), [], []),
    ("fixed32 -> fixed64: another width",
     proto(M.format("fixed32 a = 1;")), proto(M.format("fixed64 a = 1;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("float -> double",
     proto(M.format("float a = 1;")), proto(M.format("double a = 1;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("string -> int32",
     proto(M.format("string a = 1;")), proto(M.format("int32 a = 1;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("scalar -> message: another kind",
     proto(M.format("int32 a = 1;") + "message N { int32 x = 1; }\n"),
     proto(M.format("N a = 1;") + "message N { int32 x = 1; }\n"),
     [("FIELD_KIND_CHANGED", "#/M/1")], [("FIELD_KIND_CHANGED", "#/M/1")]),
    ("message -> map: another kind",
     proto(M.format("N a = 1;") + "message N { int32 x = 1; }\n"),
     proto(M.format("map<string, int32> a = 1;") + "message N { int32 x = 1; }\n"),
     [("FIELD_KIND_CHANGED", "#/M/1")], [("FIELD_KIND_CHANGED", "#/M/1")]),
    ("map value int32 -> int64",
     proto(M.format("map<string, int32> a = 1;")), proto(M.format("map<string, int64> a = 1;")),
     [], []),
    ("map value int32 -> string",
     proto(M.format("map<string, int32> a = 1;")),
     proto(M.format("map<string, string> a = 1;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("map key string -> int32",
     proto(M.format("map<string, int32> a = 1;")), proto(M.format("map<int32, int32> a = 1;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("int32 -> repeated int32: numeric label",
     proto(M.format("int32 a = 1;")), proto(M.format("repeated int32 a = 1;")),
     [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")], [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")]),
    ("string -> repeated string: compatible",
     proto(M.format("string a = 1;")), proto(M.format("repeated string a = 1;")), [], []),
    ("message -> repeated message: compatible",
     proto(M.format("N a = 1;") + "message N { int32 x = 1; }\n"),
     proto(M.format("repeated N a = 1;") + "message N { int32 x = 1; }\n"), [], []),
    ("message field's type A -> B",
     proto(M.format("A a = 1;") + TWO), proto(M.format("B a = 1;") + TWO),
     [("FIELD_NAMED_TYPE_CHANGED", "#/M/1")], [("FIELD_NAMED_TYPE_CHANGED", "#/M/1")]),
    ("message removed: the reader lacks a writer's message",
     proto(M.format("int32 a = 1;") + "message N { int32 x = 1; }\n"),
     proto(M.format("int32 a = 1;")),
     [("MESSAGE_REMOVED", "#/N")], []),
    ("nested message removed",
     proto("message Outer { message Inner { int32 x = 1; } int32 a = 1; }\n"),
     proto("message Outer { int32 a = 1; }\n"),
     [("MESSAGE_REMOVED", "#/Outer/Inner")], []),
    ("nested message's field changes kind",
     proto("message Outer { message Inner { int32 x = 1; } }\n"),
     proto("message Outer { message Inner { double x = 1; } }\n"),
     [("FIELD_SCALAR_KIND_CHANGED", "#/Outer/Inner/1")],
     [("FIELD_SCALAR_KIND_CHANGED", "#/Outer/Inner/1")]),
    ("messages reordered: compatible",
     proto(TWO), proto("message B { int32 x = 1; }\nmessage A { int32 x = 1; }\n"), [], []),
    ("enum removed: compatible",
     proto(M.format("int32 a = 1;") + "enum E { E0 = 0; }\n"), proto(M.format("int32 a = 1;")),
     [], []),
    ("enum values added, removed, renamed: compatible",
     proto("enum E { E0 = 0; E1 = 1; E2 = 2; }\n"),
     proto("enum E { E0 = 0; RENAMED = 1; E3 = 3; }\n"), [], []),
    ("package changed",
     proto(M.format("int32 a = 1;"), package="shop"),
     proto(M.format("int32 a = 1;"), package="store"),
     [("PACKAGE_CHANGED", "#/")], [("PACKAGE_CHANGED", "#/")]),
    ("syntax proto2 -> proto3: not checked (as Confluent)",
     proto(M.format("optional int32 a = 1;"), syntax="proto2"),
     proto(M.format("int32 a = 1;")), [], []),
    ("proto2 required field added",
     proto(M.format("optional int32 a = 1;"), syntax="proto2"),
     proto(M.format("optional int32 a = 1; required string b = 2;"), syntax="proto2"),
     [("REQUIRED_FIELD_ADDED", "#/M/2")], [("REQUIRED_FIELD_REMOVED", "#/M/2")]),
    ("proto2 optional -> required int32: numeric label",
     proto(M.format("optional int32 a = 1;"), syntax="proto2"),
     proto(M.format("required int32 a = 1;"), syntax="proto2"),
     [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")], [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")]),
    ("proto3 optional (a synthetic oneof) is no oneof",
     proto(M.format("int32 a = 1; int32 b = 2;")),
     proto(M.format("optional int32 a = 1; optional int32 b = 2;")), [], []),
    ("one field moved into a new oneof; out of it (forward): compatible",
     proto(M.format("int32 a = 1; string b = 2;")),
     proto(M.format("oneof c { int32 a = 1; } string b = 2;")), [], []),
    ("two fields moved into a new oneof",
     proto(M.format("int32 a = 1; string b = 2;")),
     proto(M.format("oneof c { int32 a = 1; string b = 2; }")),
     [("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "#/M/c")], []),
    ("field moved into an existing oneof; out of one (forward): compatible",
     proto(M.format("int32 a = 1; oneof c { string p = 2; string q = 3; }")),
     proto(M.format("oneof c { string p = 2; string q = 3; int32 a = 1; }")),
     [("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/c")], []),
    ("field moved from one oneof into another, existing one",
     proto(M.format("oneof c { string p = 2; string q = 3; } oneof d { int32 a = 1; int32 b = 4; }")),
     proto(M.format("oneof c { string p = 2; string q = 3; int32 a = 1; } oneof d { int32 b = 4; }")),
     [("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/c")], [("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/d")]),
    ("oneof member removed while the oneof stays; added (forward)",
     proto(M.format("oneof c { string p = 2; string q = 3; }")),
     proto(M.format("oneof c { string p = 2; }")),
     [("ONEOF_FIELD_REMOVED", "#/M/c/3")], []),
    ("whole oneof removed: compatible",
     proto(M.format("int32 a = 1; oneof c { string p = 2; string q = 3; }")),
     proto(M.format("int32 a = 1;")), [], []),
    ("oneof renamed with its members",
     proto(M.format("oneof c { string p = 2; string q = 3; }")),
     proto(M.format("oneof d { string p = 2; string q = 3; }")), [], []),
    ("several changes at once, each reported",
     proto(M.format("int32 a = 1; string b = 2;") + "message N { int32 x = 1; }\n"),
     proto(M.format("sint32 a = 1; repeated string b = 2; double c = 3;")),
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1"), ("MESSAGE_REMOVED", "#/N")],
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
]


@pytest.mark.parametrize(("rule", "old", "new", "backward", "forward"), CASES,
                         ids=[c[0] for c in CASES])
def test_compatibility_rule(rule: str, old: str, new: str, backward: list, forward: list):
    assert sorted(found(reader=new, writer=old)) == sorted(backward), rule
    assert sorted(found(reader=old, writer=new)) == sorted(forward), rule


def test_table_size():
    assert len(CASES) >= 30


def test_message_names_the_rule_and_path_in_confluents_shape():
    messages = FORMAT.incompatibilities(
        FORMAT.parse(proto(M.format("string a = 1;")), {}),
        FORMAT.parse(proto(M.format("int32 a = 1;")), {}))
    assert messages == ['{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The SCALAR '
                        "field at path '#/M/1' in the reader schema has a type that is not "
                        'wire-compatible with its type in the writer schema"}']


def test_registered_through_formats():
    pytest.importorskip("spool.registry.formats.avro")
    pytest.importorskip("spool.registry.formats.json_schema")
    assert formats()["PROTOBUF"] is FORMAT
    assert FORMAT.name == "PROTOBUF"


# -- references -----------------------------------------------------------------------------

MONEY_V1 = proto("message Money { string currency = 1; int64 units = 2; }\n", package="common")
MONEY_V2 = proto("message Money { string currency = 1; double units = 2; }\n", package="common")
ORDER = proto(M.format("common.Money price = 1;"), imports=("common/money.proto",))


def test_reference_by_import_name():
    parsed = FORMAT.parse(ORDER, {"common/money.proto": MONEY_V1})
    assert "type_name: \".common.Money\"" in FORMAT.canonical(parsed)


def test_missing_reference_is_invalid():
    with pytest.raises(model.InvalidSchema, match="common/money.proto"):
        FORMAT.parse(ORDER, {})


def test_transitive_references():
    units = proto("message Units { int64 n = 1; }\n", package="common")
    money = proto("message Money { common.Units u = 1; }\n", package="common",
                  imports=("common/units.proto",))
    parsed = FORMAT.parse(ORDER, {"common/money.proto": money, "common/units.proto": units})
    assert set(parsed.imports) == {"common/money.proto", "common/units.proto"}


def test_referenced_type_changed_incompatibly():
    old = FORMAT.parse(ORDER, {"common/money.proto": MONEY_V1})
    new = FORMAT.parse(ORDER, {"common/money.proto": MONEY_V2})
    messages = FORMAT.incompatibilities(reader=new, writer=old)
    kinds = sorted((m.group(1), m.group(2)) for m in map(_MESSAGE.fullmatch, messages) if m)
    assert kinds == [("FIELD_NAMED_TYPE_CHANGED", "#/M/1"),
                     ("FIELD_SCALAR_KIND_CHANGED", "#/Money/2")]


def test_referenced_type_changed_compatibly():
    widened = MONEY_V1.replace("int64 units = 2;", "int64 units = 2; string note = 3;")
    old = FORMAT.parse(ORDER, {"common/money.proto": MONEY_V1})
    new = FORMAT.parse(ORDER, {"common/money.proto": widened})
    assert FORMAT.incompatibilities(reader=new, writer=old) == []
    assert FORMAT.incompatibilities(reader=old, writer=new) == []


def test_well_known_types_need_no_reference():
    text = proto(M.format("google.protobuf.Timestamp at = 1;"),
                 imports=("google/protobuf/timestamp.proto",))
    assert "google.protobuf.Timestamp" in FORMAT.canonical(FORMAT.parse(text, {}))


def test_reference_name_may_not_leave_the_tree():
    with pytest.raises(model.InvalidSchema, match="relative import path"):
        FORMAT.parse(proto(M.format("int32 a = 1;")), {"../evil.proto": MONEY_V1})


# -- descriptors, as confluent-kafka's ProtobufSerializer registers them --------------------

USER = """// A user: comments, options and layout are not part of the schema.
syntax = "proto3";
package shop.v1;

import "common/money.proto";
import "google/protobuf/timestamp.proto";

message User {
  string name = 1;  // the name
  optional int64 age = 2;
  google.protobuf.Timestamp at = 3;
  map<string, int32> tags = 4;
  oneof contact { string email = 5; string phone = 6; }
  enum Kind { KIND_UNSPECIFIED = 0; ADMIN = 1; }
  Kind kind = 7;
  repeated int32 nums = 8 [packed = false];
  string renamed = 9 [json_name = "other"];
  common.Money balance = 10;
}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory):
    """user_pb2 and common/money_pb2, generated by protoc and imported, as an application
    using confluent-kafka's ProtobufSerializer has them."""
    root = tmp_path_factory.mktemp("gen")
    (root / "common").mkdir()
    (root / "common" / "money.proto").write_text(MONEY_V1)
    (root / "user.proto").write_text(USER)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}",
                    f"--python_out={root}", "user.proto", "common/money.proto"],
                   check=True, timeout=60)
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("user_pb2")
    finally:
        sys.path.remove(str(root))
        for name in ("user_pb2", "common.money_pb2", "common"):
            sys.modules.pop(name, None)


def test_serializers_descriptor_and_text_have_one_canonical_form(generated):
    # What ProtobufSerializer sends: the file's descriptor, and each import (but the
    # well-known ones, skip.known.types) as a reference named by its import path.
    file = generated.User.DESCRIPTOR.file
    sent = _schema_to_str(file)
    refs_sent = {dep.name: _schema_to_str(dep) for dep in file.dependencies
                 if not dep.name.startswith("google/protobuf/")}
    assert set(refs_sent) == {"common/money.proto"}
    from_descriptor = FORMAT.parse(sent, refs_sent)
    from_text = FORMAT.parse(USER, {"common/money.proto": MONEY_V1})
    assert FORMAT.canonical(from_descriptor) == FORMAT.canonical(from_text)
    assert FORMAT.incompatibilities(from_descriptor, from_text) == []
    # References may mix: text schema, descriptor reference.
    mixed = FORMAT.parse(USER, refs_sent)
    assert FORMAT.canonical(mixed) == FORMAT.canonical(from_text)


def test_serialized_form_round_trips(generated):
    text = FORMAT.parse(USER, {"common/money.proto": MONEY_V1})
    again = FORMAT.parse(FORMAT.serialized(text), {"common/money.proto": MONEY_V1})
    assert FORMAT.canonical(again) == FORMAT.canonical(text)
    raw = base64.standard_b64decode(FORMAT.serialized(text))
    from google.protobuf import descriptor_pb2

    assert descriptor_pb2.FileDescriptorProto.FromString(raw).package == "shop.v1"


def test_canonical_ignores_comments_and_layout():
    a = proto(M.format("int32 a = 1;"))
    b = '// hello\nsyntax="proto3";  package   shop;\n\nmessage M {\n  int32 a = 1; // x\n}\n'
    assert FORMAT.canonical(FORMAT.parse(a, {})) == FORMAT.canonical(FORMAT.parse(b, {}))
    c = proto(M.format("int64 a = 1;"))
    assert FORMAT.canonical(FORMAT.parse(a, {})) != FORMAT.canonical(FORMAT.parse(c, {}))


def test_parse_is_cached_by_text():
    text = proto(M.format("int32 cached = 1;"))
    assert FORMAT.parse(text, {}) is FORMAT.parse(text, {})


# -- invalid schemas --------------------------------------------------------------------------

INVALID = [
    ("syntax error", proto("message M { int32 a = 1 }\n"), "schema.proto:"),
    ("duplicate field number", proto(M.format("int32 a = 1; int32 b = 1;")),
     "Field number 1 has already been used"),
    ("unknown type", proto(M.format("Nope a = 1;")), '"Nope" is not defined'),
    ("missing import", proto(M.format("int32 a = 1;"), imports=("nope.proto",)),
     "nope.proto"),
    ("field number 0", proto(M.format("int32 a = 0;")), "Field numbers must be positive"),
    ("required in proto3", proto(M.format("required int32 a = 1;")), "Required fields"),
    ("reserved number used", proto(M.format("reserved 1; int32 a = 1;")), "reserved"),
    ("unknown syntax", proto(M.format("int32 a = 1;"), syntax="proto4"), "proto4"),
    ("not a descriptor", base64.b64encode(b"\xff\xff\xff\xff").decode(),
     "not a serialized FileDescriptorProto"),
    ("empty", "   ", "empty schema"),
]


@pytest.mark.parametrize(("what", "text", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_schema(what: str, text: str, message: str):
    with pytest.raises(model.InvalidSchema) as error:
        FORMAT.parse(text, {})
    assert message in str(error.value), (what, str(error.value))
    assert "spool-proto-" not in str(error.value)  # no temporary paths


def test_descriptor_with_unresolvable_type_is_invalid():
    from google.protobuf import descriptor_pb2

    bad = descriptor_pb2.FileDescriptorProto(name="x.proto", package="p", syntax="proto3")
    m = bad.message_type.add(name="M")
    m.field.add(name="a", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL, type_name=".p.Gone")
    with pytest.raises(model.InvalidSchema, match="Gone"):
        FORMAT.parse(base64.b64encode(bad.SerializeToString()).decode(), {})


# -- transitive levels, through spool.registry.compatibility --------------------------------

V1 = proto(M.format("int32 a = 1;"))
V2 = proto(M.format("int32 b = 2;"))  # a removed: compatible with V1
V3 = proto(M.format("string a = 1; int32 b = 2;"))  # a back as another type


def test_transitive_levels_through_compatibility():
    compatibility = pytest.importorskip("spool.registry.compatibility")
    v1, v2, v3 = (FORMAT.parse(s, {}) for s in (V1, V2, V3))
    assert compatibility.check("BACKWARD", v3, [v1, v2], FORMAT) == []
    transitive = compatibility.check("BACKWARD_TRANSITIVE", v3, [v1, v2], FORMAT)
    assert len(transitive) == 1 and "FIELD_SCALAR_KIND_CHANGED" in transitive[0]
    assert "'#/M/1'" in transitive[0] and "previous version 1 of 2" in transitive[0]
    assert compatibility.check("FORWARD", v3, [v1, v2], FORMAT) == []
    assert compatibility.check("FORWARD_TRANSITIVE", v3, [v1, v2], FORMAT) == transitive
    # FULL: the same difference both ways, reported once.
    assert compatibility.check("FULL_TRANSITIVE", v3, [v1, v2], FORMAT) == transitive
    assert compatibility.check("FULL", v3, [v1, v2], FORMAT) == []
    assert compatibility.check("NONE", v3, [v1, v2], FORMAT) == []


def test_reference_may_not_take_the_schemas_own_file_name():
    with pytest.raises(model.InvalidSchema, match="schema.proto"):
        FORMAT.parse(V1, {"schema.proto": V1})


def test_confluent_and_google_type_imports_need_no_reference():
    # ProtobufSerializer (skip.known.types) registers no reference for these.
    pytest.importorskip("google.type.date_pb2")  # googleapis-common-protos
    text = proto(M.format("confluent.type.Decimal amount = 1 [(confluent.field_meta).doc = "
                          '"money"]; google.type.Date day = 2;'),
                 imports=("confluent/meta.proto", "confluent/type/decimal.proto",
                          "google/type/date.proto"))
    canonical = FORMAT.canonical(FORMAT.parse(text, {}))
    assert '".confluent.type.Decimal"' in canonical and '".google.type.Date"' in canonical


def test_a_reference_overrides_a_builtin_import():
    own = proto("message Date { string iso = 1; }\n", package="google.type")
    text = proto(M.format("google.type.Date day = 1;"), imports=("google/type/date.proto",))
    parsed = FORMAT.parse(text, {"google/type/date.proto": own})
    assert "iso" in FORMAT.canonical(FORMAT.parse(own, {}))
    assert [f.name for f in parsed.imports["google/type/date.proto"].message_type[0].field] \
        == ["iso"]


def test_deserializer_builds_the_message_from_the_serialized_form(generated):
    # ProtobufDeserializer fetches the writer schema and its references with
    # ?format=serialized and adds them to a DescriptorPool as below.
    from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
    from google.protobuf.descriptor_pool import DescriptorPool
    from google.protobuf.message_factory import GetMessageClass

    pool = DescriptorPool()
    _init_pool(pool)
    money = FORMAT.parse(MONEY_V1, {})
    pool.Add(_str_to_proto("common/money.proto", FORMAT.serialized(money)))
    user = FORMAT.parse(USER, {"common/money.proto": MONEY_V1})
    pool.Add(_str_to_proto("default", FORMAT.serialized(user)))
    cls = GetMessageClass(pool.FindMessageTypeByName("shop.v1.User"))
    sent = generated.User(name="ada", age=36, tags={"x": 1}, email="a@b", renamed="r")
    sent.balance.currency = "EUR"
    got = cls.FromString(sent.SerializeToString())
    assert (got.name, got.age, dict(got.tags), got.email, got.renamed, got.balance.currency) \
        == ("ada", 36, {"x": 1}, "a@b", "r", "EUR")
