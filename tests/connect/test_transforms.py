"""The single message transforms and predicates, built through the chain from a
connector's keys as a user writes them, applied to records shaped as the converters and
connectors produce them (structs with schemas, schemaless maps, tombstones)."""

from __future__ import annotations

import datetime
import decimal

import pytest

from spool.connect import api, data
from spool.connect.data import DataError, Struct
from spool.connect.plugins import Plugins
from spool.connect.transforms.chain import TransformationChain, config_errors

UTC = datetime.UTC
VALUE = data.struct("db.public.users.Value", [
    ("id", data.INT32), ("email", data.OPTIONAL_STRING), ("age", data.OPTIONAL_INT16),
    ("balance", data.decimal_schema(2)), ("born", data.DATE_SCHEMA)], version=1)
TS = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins.discover()


def chain(plugins: Plugins, **props: str) -> TransformationChain:
    return TransformationChain.from_config({k.replace("__", "."): v for k, v in props.items()},
                                           plugins)


def user(i: int = 1, email: str | None = "a@x.org") -> Struct:
    return Struct(VALUE, {"id": i, "email": email, "age": 30,
                          "balance": decimal.Decimal("10.50"), "born": datetime.date(1990, 1, 2)})


def sink_record(value: object = None, schema: data.Schema | None = VALUE, topic: str = "users",
                key: object = None, headers: tuple = ()) -> api.SinkRecord:
    return api.SinkRecord(topic, 3, None, key, schema, value if value is not None else user(),
                          timestamp=TS, headers=headers, kafka_offset=42)


def test_insert_field_struct_and_map(plugins: Plugins) -> None:
    c = chain(plugins, transforms="ins", transforms__ins__type="InsertField$Value",
              **{"transforms.ins.topic.field": "t!", "transforms.ins.partition.field": "p",
                 "transforms.ins.offset.field": "o", "transforms.ins.timestamp.field": "ts",
                 "transforms.ins.static.field": "src", "transforms.ins.static.value": "pg"})
    out = c.apply(sink_record())
    assert out is not None and isinstance(out.value, Struct)
    assert [f.name for f in out.value_schema.fields] == \
        ["id", "email", "age", "balance", "born", "t", "p", "o", "ts", "src"]
    assert out.value_schema.name == "db.public.users.Value"
    assert out.value_schema.field("t").schema == data.STRING
    assert out.value_schema.field("p").schema == data.OPTIONAL_INT32
    assert out.value_schema.field("ts").schema == data.optional(data.TIMESTAMP_SCHEMA)
    assert {k: out.value[k] for k in ("id", "t", "p", "o", "src")} == \
        {"id": 1, "t": "users", "p": 3, "o": 42, "src": "pg"}
    assert out.value["ts"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    data.validate(out.value_schema, out.value)
    m = c.apply(sink_record({"id": 1}, schema=None))
    assert m.value == {"id": 1, "t": "users", "p": 3, "o": 42, "ts": TS, "src": "pg"}
    tomb = api.SinkRecord("users", 0, None, None, None, None, kafka_offset=1)
    assert c.apply(tomb) is tomb
    with pytest.raises(DataError, match=r"Only Map objects supported in absence of schema for "
                                        r"\[field insertion\], found: str"):
        c.apply(sink_record("text", schema=None))
    source = api.SourceRecord("users", 0, None, None, None, {"id": 1})
    with pytest.raises(DataError, match="Only SinkRecord supported"):
        c.apply(source)


def test_replace_field(plugins: Plugins) -> None:
    c = chain(plugins, transforms="r", transforms__r__type="ReplaceField$Value",
              transforms__r__exclude="age", transforms__r__renames="email:mail,id:user_id")
    out = c.apply(sink_record())
    assert [f.name for f in out.value_schema.fields] == ["user_id", "mail", "balance", "born"]
    assert out.value["user_id"] == 1 and out.value["mail"] == "a@x.org"
    inc = chain(plugins, transforms="r", transforms__r__type="ReplaceField$Value",
                transforms__r__include="id,email", transforms__r__exclude="email")
    assert inc.apply(sink_record({"id": 1, "email": "e", "age": 3}, schema=None)).value == \
        {"id": 1}
    errs = config_errors({"transforms": "r", "transforms.r.type": "ReplaceField$Value",
                          "transforms.r.renames": "nocolon"}, plugins)
    assert errs == {"transforms.r.renames": [
        "Invalid value ['nocolon'] for configuration transforms.r.renames: "
        "Invalid rename mapping: nocolon"]}


def test_mask_field(plugins: Plugins) -> None:
    c = chain(plugins, transforms="m", transforms__m__type="MaskField$Value",
              transforms__m__fields="email,age,balance,born")
    out = c.apply(sink_record())
    assert out.value == {"id": 1, "email": "", "age": 0, "balance": decimal.Decimal(0),
                         "born": datetime.date(1970, 1, 1)}
    assert out.value_schema == VALUE
    nulls = c.apply(sink_record(user(email=None)))
    assert nulls.value["email"] is None
    r = chain(plugins, transforms="m", transforms__m__type="MaskField$Value",
              transforms__m__fields="email,age", transforms__m__replacement="7")
    assert r.apply(sink_record({"email": "x", "age": 5, "n": 1}, schema=None)).value == \
        {"email": "7", "age": 7, "n": 1}
    assert config_errors({"transforms": "m", "transforms.m.type": "MaskField$Value"},
                         plugins) == {"transforms.m.fields": [
        'Missing required configuration "transforms.m.fields" which has no default value.']}


def test_extract_field_and_value_to_key(plugins: Plugins) -> None:
    c = chain(plugins, transforms="vk,ex",
              transforms__vk__type="org.apache.kafka.connect.transforms.ValueToKey",
              transforms__vk__fields="id", transforms__ex__type="ExtractField$Key",
              transforms__ex__field="id")
    out = c.apply(sink_record())
    assert (out.key_schema, out.key) == (data.INT32, 1)
    assert out.value == user()
    m = c.apply(sink_record({"id": 9, "x": 1}, schema=None))
    assert (m.key_schema, m.key) == (None, 9)
    ex = chain(plugins, transforms="ex", transforms__ex__type="ExtractField$Value",
               transforms__ex__field="email")
    got = ex.apply(sink_record())
    assert (got.value_schema, got.value) == (data.OPTIONAL_STRING, "a@x.org")
    bad = chain(plugins, transforms="ex", transforms__ex__type="ExtractField$Value",
                transforms__ex__field="nope")
    with pytest.raises(DataError, match="Unknown field: nope"):
        bad.apply(sink_record())
    vk = chain(plugins, transforms="vk", transforms__vk__type="ValueToKey",
               transforms__vk__fields="id,nope")
    with pytest.raises(DataError, match="Field does not exist: nope"):
        vk.apply(sink_record())


def test_routers(plugins: Plugins) -> None:
    c = chain(plugins, transforms="ts", transforms__ts__type="TimestampRouter",
              **{"transforms.ts.topic.format": "${topic}_${timestamp}",
                 "transforms.ts.timestamp.format": "yyyy-MM-dd'T'HH.mm.ss.SSS"})
    assert c.apply(sink_record()).topic == "users_2023-11-14T22.13.20.123"
    default = chain(plugins, transforms="ts", transforms__ts__type="TimestampRouter")
    assert default.apply(sink_record()).topic == "users-20231114"
    with pytest.raises(DataError, match="Timestamp missing on record"):
        default.apply(api.SinkRecord("t", 0, None, None, None, {"a": 1}))
    rr = chain(plugins, transforms="rr", transforms__rr__type="RegexRouter",
               transforms__rr__regex=r"db\.(?<schema>[^.]+)\.(.*)",
               transforms__rr__replacement="${schema}_$2")
    assert rr.apply(sink_record(topic="db.public.users")).topic == "public_users"
    assert rr.apply(sink_record(topic="other.public.users")).topic == "other.public.users"


def test_filter_with_predicates(plugins: Plugins) -> None:
    props = {"transforms": "dropTombstones,onlyUsers,mark",
             "transforms.dropTombstones.type": "Filter",
             "transforms.dropTombstones.predicate": "isTombstone",
             "transforms.onlyUsers.type": "org.apache.kafka.connect.transforms.Filter",
             "transforms.onlyUsers.predicate": "users", "transforms.onlyUsers.negate": "true",
             "transforms.mark.type": "InsertField$Value",
             "transforms.mark.static.field": "marked", "transforms.mark.static.value": "y",
             "transforms.mark.predicate": "hasTrace",
             "predicates": "isTombstone,users,hasTrace",
             "predicates.isTombstone.type": "RecordIsTombstone",
             "predicates.users.type": "TopicNameMatches", "predicates.users.pattern": "user.*",
             "predicates.hasTrace.type": "HasHeaderKey", "predicates.hasTrace.name": "trace"}
    c = TransformationChain.from_config(props, plugins)
    assert len(c) == 3
    tomb = api.SinkRecord("users", 0, None, 1, None, None)
    assert c.apply(tomb) is None
    assert c.apply(sink_record({"a": 1}, schema=None, topic="orders")) is None
    kept = c.apply(sink_record({"a": 1}, schema=None))
    assert kept.value == {"a": 1}
    traced = c.apply(sink_record({"a": 1}, schema=None,
                                 headers=(api.Header("trace", None, "x"),)))
    assert traced.value == {"a": 1, "marked": "y"}
    c.close()


def test_chain_config_errors(plugins: Plugins) -> None:
    errs = config_errors({"transforms": "a,b,a", "transforms.a.type": "com.example.Nope",
                          "transforms.b.type": "RegexRouter", "transforms.b.regex": "(",
                          "transforms.b.replacement": "x", "transforms.b.predicate": "p",
                          "transforms.b.negate": "maybe"}, plugins)
    assert errs["transforms"] == ["Invalid value [a, b, a] for configuration transforms: "
                                  "Duplicate alias provided."]
    assert errs["transforms.a.type"] == ["Invalid value com.example.Nope for configuration "
                                         "transforms.a.type: Class com.example.Nope could not "
                                         "be found."]
    assert list(errs["transforms.b.regex"])[0].startswith(
        "Invalid value ( for configuration transforms.b.regex")
    assert set(errs) == {"transforms", "transforms.a.type", "transforms.b.regex"}
    errs = config_errors({"transforms": "c", "transforms.c.type": "Filter",
                          "transforms.c.predicate": "p", "transforms.c.negate": "maybe"},
                         plugins)
    assert set(errs) == {"transforms.c.negate", "transforms.c.predicate"}
    assert config_errors({"transforms": "n", "transforms.n.type": "Filter",
                          "transforms.n.negate": "true"}, plugins) == {"transforms.n.type": [
        "Config 'transforms.n.negate' was provided but there is no config "
        "'transforms.n.predicate' defining a predicate to be negated."]}
    assert config_errors({"transforms": "x"}, plugins) == {"transforms.x.type": [
        'Missing required configuration "transforms.x.type" which has no default value.']}
    assert config_errors({"predicates": "p", "predicates.p.type": "TopicNameMatches"},
                         plugins) == {"predicates.p.pattern": [
        'Missing required configuration "predicates.p.pattern" which has no default value.']}
    with pytest.raises(api.ConfigError) as e:
        TransformationChain.from_config({"transforms": "x"}, plugins)
    assert "transforms.x.type" in e.value.errors
    assert config_errors({}, plugins) == {}
    assert TransformationChain.from_config({}, plugins).apply(sink_record()) == sink_record()
