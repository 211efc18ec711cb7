"""Flatten, HoistField, Cast, SetSchemaMetadata, InsertHeader, DropHeaders and Debezium's
ExtractNewRecordState, built through the chain from a connector's keys and applied to
records as the runtime hands them over (the PostgreSQL source's envelopes included).

The types are named by Python path here (the entry-point names, e.g.
``org.apache.kafka.connect.transforms.Flatten$Value``, need the package installed with
this pyproject; ``test_plugins`` checks every registered name loads)."""

from __future__ import annotations

import decimal

import pytest

from spool.connect import api, data
from spool.connect.data import DataError, Struct
from spool.connect.plugins import Plugins
from spool.connect.transforms.chain import TransformationChain, config_errors

S = "spool.connect.transforms.structure:"
UNWRAP = "spool.connect.transforms.debezium:ExtractNewRecordState"
ADDR = data.struct("Addr", [("city", data.STRING), ("geo", data.struct(
    "Geo", [("lat", data.FLOAT64)], optional=True))], optional=True)
PERSON = data.struct("Person", [("id", data.INT64), ("addr", ADDR)], version=3)


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins.discover()


def build(plugins: Plugins, **props: str) -> TransformationChain:
    return TransformationChain.from_config({k.replace("__", "."): v for k, v in props.items()},
                                           plugins)


def rec(value: object, schema: data.Schema | None, key: object = None,
        key_schema: data.Schema | None = None, headers: tuple = ()) -> api.SinkRecord:
    return api.SinkRecord("t", 0, key_schema, key, schema, value, timestamp=1,
                          headers=headers, kafka_offset=9)


def test_flatten(plugins: Plugins) -> None:
    c = build(plugins, transforms="f", transforms__f__type=S + "FlattenValue",
              transforms__f__delimiter="_")
    v = Struct(PERSON, {"id": 1, "addr": Struct(ADDR, {"city": "Rome", "geo": Struct(
        ADDR.field("geo").schema, {"lat": 41.9})})})
    out = c.apply(rec(v, PERSON))
    assert [(f.name, f.schema) for f in out.value_schema.fields] == [
        ("id", data.INT64), ("addr_city", data.OPTIONAL_STRING),
        ("addr_geo_lat", data.OPTIONAL_FLOAT64)]
    assert out.value_schema.name == "Person" and out.value_schema.version == 3
    assert out.value == {"id": 1, "addr_city": "Rome", "addr_geo_lat": 41.9}
    assert c.apply(rec(Struct(PERSON, {"id": 2, "addr": None}), PERSON)).value == \
        {"id": 2, "addr_city": None, "addr_geo_lat": None}
    assert c.apply(rec({"a": {"b": 1, "c": {"d": 2}}, "e": [1]}, None)).value == \
        {"a_b": 1, "a_c_d": 2, "e": [1]}


def test_hoist_cast_and_schema_metadata(plugins: Plugins) -> None:
    c = build(plugins, transforms="h,c,m", transforms__h__type=S + "HoistFieldKey",
              transforms__h__field="id", transforms__c__type=S + "CastValue",
              transforms__c__spec="n:int32,s:float64,b:string,ok:boolean",
              transforms__m__type=S + "SetSchemaMetadataValue",
              **{"transforms.m.schema.name": "renamed", "transforms.m.schema.version": "7"})
    schema = data.struct("V", [("n", data.INT64), ("s", data.OPTIONAL_STRING),
                               ("b", data.decimal_schema(2)), ("ok", data.INT8)])
    out = c.apply(rec(Struct(schema, {"n": 5, "s": "2.5", "b": decimal.Decimal("1.50"),
                                      "ok": 1}), schema, key=42, key_schema=data.INT64))
    assert (out.key_schema, out.key) == (data.struct(None, [("id", data.INT64)]), {"id": 42})
    assert [f.schema for f in out.value_schema.fields] == [
        data.INT32, data.OPTIONAL_FLOAT64, data.STRING, data.BOOLEAN]
    assert (out.value_schema.name, out.value_schema.version) == ("renamed", 7)
    assert out.value == {"n": 5, "s": 2.5, "b": "1.50", "ok": True}
    assert out.value.schema is out.value_schema
    whole = build(plugins, transforms="c", transforms__c__type=S + "CastValue",
                  transforms__c__spec="int16")
    assert whole.apply(rec("12", data.STRING)).value == 12
    with pytest.raises(DataError, match="cannot cast 'x' to int16"):
        whole.apply(rec("x", data.STRING))
    with pytest.raises(DataError):
        whole.apply(rec(1 << 20, data.INT64))
    assert config_errors({"transforms": "c", "transforms.c.type": S + "CastValue",
                          "transforms.c.spec": "a:date"}, plugins) == {"transforms.c.spec": [
        "Invalid value ['a:date'] for configuration transforms.c.spec: Invalid type found in "
        "casting spec: a:date"]}


def test_headers(plugins: Plugins) -> None:
    c = build(plugins, transforms="i,d", transforms__i__type=S + "InsertHeader",
              transforms__i__header="source", **{"transforms.i.value.literal": "pg"},
              transforms__d__type=S + "DropHeaders", transforms__d__headers="secret,other")
    out = c.apply(rec({"a": 1}, None, headers=(api.Header("secret", None, "x"),
                                               api.Header("keep", None, "y"))))
    assert out.headers == (api.Header("keep", None, "y"), api.Header("source", data.STRING,
                                                                     "pg"))


def events():
    from spool.connect.postgres import envelope as env

    row = env.row_schema("srv", "public", "t", [("id", data.INT32),
                                                ("name", data.OPTIONAL_STRING)])
    schema = env.envelope_schema("srv", "public", "t", row)

    def event(op: str, before: dict | None, after: dict | None) -> api.SinkRecord:
        source = env.source_struct(version="2", name="srv", db="db", schema="public",
                                   table="t", ts_us=5_000_000, tx_id=3, lsn=99)
        value = env.envelope(schema, op, before and Struct(row, before),
                             after and Struct(row, after), source, 6_000_000)
        return rec(value, schema, key={"id": 1})
    return row, schema, event


def test_extract_new_record_state(plugins: Plugins) -> None:
    row, _, event = events()
    create = event("c", None, {"id": 1, "name": "a"})
    delete = event("d", {"id": 1, "name": "a"}, None)
    tomb = rec(None, None, key={"id": 1})

    default = build(plugins, transforms="u", transforms__u__type=UNWRAP)
    out = default.apply(create)
    assert out.value_schema == data.struct("srv.public.t.Value", [
        ("id", data.INT32), ("name", data.OPTIONAL_STRING)])
    assert out.value == {"id": 1, "name": "a"}
    deleted = default.apply(delete)
    assert (deleted.value_schema, deleted.value, deleted.key) == (None, None, {"id": 1})
    assert default.apply(tomb) is tomb
    assert default.apply(rec({"plain": 1}, None)).value == {"plain": 1}

    rewrite = build(plugins, transforms="u", transforms__u__type=UNWRAP,
                    **{"transforms.u.delete.tombstone.handling.mode": "rewrite",
                       "transforms.u.add.fields": "op,table,lsn,source.ts_ms",
                       "transforms.u.add.headers": "op"})
    out = rewrite.apply(delete)
    assert [f.name for f in out.value_schema.fields] == [
        "id", "name", "__op", "__table", "__lsn", "__source_ts_ms", "__deleted"]
    assert out.value_schema.field("__lsn").schema == data.OPTIONAL_INT64
    assert out.value == {"id": 1, "name": "a", "__op": "d", "__table": "t", "__lsn": 99,
                         "__source_ts_ms": 5000, "__deleted": "true"}
    assert out.headers == (api.Header("__op", data.OPTIONAL_STRING, "d"),)
    assert rewrite.apply(create).value["__deleted"] == "false"
    assert rewrite.apply(tomb) is None

    legacy = build(plugins, transforms="u", transforms__u__type=UNWRAP,
                   **{"transforms.u.drop.tombstones": "true"})
    assert legacy.apply(delete) is None and legacy.apply(tomb) is None
    assert legacy.apply(create).value == {"id": 1, "name": "a"}
    drop = build(plugins, transforms="u", transforms__u__type=UNWRAP,
                 **{"transforms.u.delete.tombstone.handling.mode": "drop"})
    assert drop.apply(delete) is None and drop.apply(tomb) is None
    assert set(config_errors({"transforms": "u", "transforms.u.type": UNWRAP,
                              "transforms.u.delete.tombstone.handling.mode": "keep"},
                             plugins)) == {"transforms.u.delete.tombstone.handling.mode"}


def test_timestamp_converter(plugins: Plugins) -> None:
    import datetime

    t = "spool.connect.transforms.timestamps:TimestampConverterValue"
    schema = data.struct("E", [("id", data.INT32), ("at", data.OPTIONAL_STRING)])
    to_ts = build(plugins, transforms="t", transforms__t__type=t,
                  **{"transforms.t.target.type": "Timestamp", "transforms.t.field": "at",
                     "transforms.t.format": "yyyy-MM-dd HH:mm:ss.SSSX"})
    out = to_ts.apply(rec(Struct(schema, {"id": 1, "at": "2024-02-29 13:05:07.123+02:00"}),
                          schema))
    assert out.value_schema.field("at").schema == data.optional(data.TIMESTAMP_SCHEMA)
    assert out.value["at"] == datetime.datetime(2024, 2, 29, 11, 5, 7, 123000,
                                                tzinfo=datetime.UTC)
    assert to_ts.apply(rec(Struct(schema, {"id": 2, "at": None}), schema)).value["at"] is None
    with pytest.raises(DataError, match="Could not parse timestamp"):
        to_ts.apply(rec(Struct(schema, {"id": 3, "at": "yesterday"}), schema))
    to_unix = build(plugins, transforms="t", transforms__t__type=t,
                    **{"transforms.t.target.type": "unix",
                       "transforms.t.unix.precision": "microseconds"})
    out = to_unix.apply(rec(datetime.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=datetime.UTC),
                            data.TIMESTAMP_SCHEMA))
    assert (out.value_schema, out.value) == (data.INT64, 1_000_005)
    to_text = build(plugins, transforms="t", transforms__t__type=t,
                    **{"transforms.t.target.type": "string", "transforms.t.field": "ms",
                       "transforms.t.format": "yyyyMMdd'T'HHmm"})
    assert to_text.apply(rec({"ms": 1_700_000_000_123}, None)).value == {"ms": "20231114T2213"}
    to_date = build(plugins, transforms="t", transforms__t__type=t,
                    **{"transforms.t.target.type": "Date"})
    assert to_date.apply(rec(1_700_000_000_123, data.INT64)).value == \
        datetime.date(2023, 11, 14)
    assert config_errors({"transforms": "t", "transforms.t.type": t,
                          "transforms.t.target.type": "string"}, plugins) == {
        "transforms.t.format": ["TimestampConverter requires format option to be specified "
                                "when using string timestamps"]}


def test_extract_field_nested_path(plugins: Plugins) -> None:
    _, _, event = events()
    c = build(plugins, transforms="x", transforms__x__type="ExtractField$Value",
              **{"transforms.x.field": "after.name", "transforms.x.field.syntax.version": "V2"})
    out = c.apply(event("u", None, {"id": 1, "name": "b"}))
    assert (out.value_schema, out.value) == (data.OPTIONAL_STRING, "b")
    assert c.apply(event("d", {"id": 1, "name": "b"}, None)).value is None
    assert c.apply(rec({"after": {"name": "m"}}, None)).value == "m"
    v1 = build(plugins, transforms="x", transforms__x__type="ExtractField$Value",
               **{"transforms.x.field": "after.name"})
    with pytest.raises(DataError, match="Unknown field: after.name"):
        v1.apply(event("u", None, {"id": 1, "name": "b"}))
