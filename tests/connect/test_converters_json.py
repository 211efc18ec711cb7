"""JsonConverter: Kafka's JsonConverter's bytes (golden strings from Kafka's own
JsonConverterTest and what Kafka Connect writes), both directions, with and without
schemas, logical types, and Kafka's errors."""

from __future__ import annotations

import datetime
import decimal

import pytest

from spool.connect import api, converters, data
from spool.connect.converters.json import JsonConverter, schema_from_json, schema_to_json
from spool.connect.data import DataError, Struct
from spool.connect.plugins import Plugins

UTC = datetime.UTC


def conv(**props: str) -> JsonConverter:
    c = converters.make(Plugins.discover(), "org.apache.kafka.connect.json.JsonConverter",
                        props, False)
    assert isinstance(c, JsonConverter)
    return c


def test_struct_envelope_is_kafkas_bytes() -> None:
    s = data.struct("server1.public.t.Value", [
        ("id", data.INT32), ("name", data.OPTIONAL_STRING), ("f", data.FLOAT32),
        ("d", data.FLOAT64), ("b", data.BYTES), ("flag", data.BOOLEAN)])
    v = Struct(s, {"id": 7, "name": "é\"x", "f": 1.5, "d": -2.25, "b": b"\x00\x01",
                   "flag": True})
    raw = conv().from_connect_data("t", None, s, v)
    assert raw == (
        '{"schema":{"type":"struct","fields":['
        '{"type":"int32","optional":false,"field":"id"},'
        '{"type":"string","optional":true,"field":"name"},'
        '{"type":"float","optional":false,"field":"f"},'
        '{"type":"double","optional":false,"field":"d"},'
        '{"type":"bytes","optional":false,"field":"b"},'
        '{"type":"boolean","optional":false,"field":"flag"}],'
        '"optional":false,"name":"server1.public.t.Value"},'
        '"payload":{"id":7,"name":"é\\"x","f":1.5,"d":-2.25,"b":"AAE=","flag":true}}'
    ).encode()
    schema, value = conv().to_connect_data("t", None, raw)
    assert schema == s
    assert value == v and isinstance(value, Struct) and value.schema == s


@pytest.mark.parametrize("text,schema,value", [
    ('{ "schema": { "type": "boolean" }, "payload": true }', data.BOOLEAN, True),
    ('{ "schema": { "type": "int8" }, "payload": 12 }', data.INT8, 12),
    ('{ "schema": { "type": "int64" }, "payload": 4398046511104 }', data.INT64, 4398046511104),
    ('{ "schema": { "type": "float" }, "payload": 12.34 }', data.FLOAT32, 12.34),
    ('{ "schema": { "type": "double" }, "payload": 12.34 }', data.FLOAT64, 12.34),
    ('{ "schema": { "type": "bytes" }, "payload": "dGVzdC1zdHJpbmc=" }', data.BYTES,
     b"test-string"),
    ('{ "schema": { "type": "string" }, "payload": "foo-bar-baz" }', data.STRING, "foo-bar-baz"),
    ('{ "schema": { "type": "array", "items": { "type" : "int32" } }, "payload": [1, 2, 3] }',
     data.array(data.INT32), [1, 2, 3]),
    ('{ "schema": { "type": "map", "keys" : { "type" : "string" }, "values" : { "type" : '
     '"int32" } }, "payload": { "key1": 12, "key2": 15} }',
     data.map_of(data.STRING, data.INT32), {"key1": 12, "key2": 15}),
    ('{ "schema": { "type": "map", "keys" : { "type" : "int32" }, "values" : { "type" : '
     '"int32" } }, "payload": [ [1, 12], [2, 15] ] }',
     data.map_of(data.INT32, data.INT32), {1: 12, 2: 15}),
    ('{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", '
     '"version": 1, "parameters": { "scale": "2" } }, "payload": "AJw=" }',
     data.decimal_schema(2), decimal.Decimal("1.56")),
    ('{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", '
     '"version": 1, "parameters": { "scale": "2" } }, "payload": 1.56 }',
     data.decimal_schema(2), decimal.Decimal("1.56")),
    ('{ "schema": { "type": "int32", "name": "org.apache.kafka.connect.data.Date", '
     '"version": 1 }, "payload": 10000 }', data.DATE_SCHEMA, datetime.date(1997, 5, 19)),
    ('{ "schema": { "type": "int32", "name": "org.apache.kafka.connect.data.Time", '
     '"version": 1 }, "payload": 14400000 }', data.TIME_SCHEMA, datetime.time(4, 0)),
    ('{ "schema": { "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", '
     '"version": 1 }, "payload": 4000000000 }', data.TIMESTAMP_SCHEMA,
     datetime.datetime(1970, 2, 16, 7, 6, 40, tzinfo=UTC)),
])
def test_kafkas_golden_documents_read(text: str, schema: data.Schema, value: object) -> None:
    got_schema, got = conv().to_connect_data("t", None, text.encode())
    assert got_schema == schema
    assert got == value
    # and back: the same document, compacted (Kafka writes "optional" explicitly)
    again = conv().from_connect_data("t", None, schema, value)
    assert conv().to_connect_data("t", None, again) == (schema, value)


def test_logical_types_written_as_kafka() -> None:
    s = data.struct(None, [("amt", data.decimal_schema(2)), ("neg", data.decimal_schema(0)),
                           ("d", data.DATE_SCHEMA), ("t", data.TIME_SCHEMA),
                           ("ts", data.TIMESTAMP_SCHEMA)])
    v = Struct(s, {"amt": decimal.Decimal("1.56"), "neg": decimal.Decimal("-129"),
                   "d": datetime.date(1997, 5, 19), "t": datetime.time(4, 0, 0, 5000),
                   "ts": datetime.datetime(1970, 2, 16, 7, 6, 40, tzinfo=UTC)})
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", None, s, v) == \
        b'{"amt":"AJw=","neg":"/38=","d":10000,"t":14400005,"ts":4000000000}'
    numeric = conv(**{"schemas.enable": "false", "decimal.format": "NUMERIC"})
    assert numeric.from_connect_data("t", None, s, v).startswith(b'{"amt":1.56,"neg":-129,')
    # a value with fewer decimals than the scale is exact at the scale
    assert c.from_connect_data("t", None, data.decimal_schema(2), decimal.Decimal("1.5")) \
        == b'"AJY="'
    with pytest.raises(DataError):
        c.from_connect_data("t", None, data.decimal_schema(1), decimal.Decimal("1.55"))


def test_schemaless() -> None:
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", None, None, {"a": [1, 2.5, "x", None], "b": True}) == \
        b'{"a":[1,2.5,"x",null],"b":true}'
    assert c.to_connect_data("t", None, b'{"a":[1,2.5,"x",null],"b":true}') == \
        (None, {"a": [1, 2.5, "x", None], "b": True})
    # schemas enabled, schemaless value: "schema": null
    assert conv().from_connect_data("t", None, None, {"k": 1}) == \
        b'{"schema":null,"payload":{"k":1}}'
    assert conv().to_connect_data("t", None, b'{"schema":null,"payload":{"k":1}}') == \
        (None, {"k": 1})


def test_nulls() -> None:
    c = conv()
    assert c.from_connect_data("t", None, None, None) is None
    assert c.to_connect_data("t", None, None) == (None, None)
    assert c.from_connect_data("t", None, data.OPTIONAL_STRING, None) == \
        b'{"schema":{"type":"string","optional":true},"payload":null}'
    with pytest.raises(DataError, match="null value for field that is required"):
        c.from_connect_data("t", None, data.STRING, None)
    with_default = data.Schema("int32", default=5)
    assert c.from_connect_data("t", None, with_default, None) == \
        b'{"schema":{"type":"int32","optional":false,"default":5},"payload":5}'
    assert c.to_connect_data("t", None, b'{"schema":{"type":"int32","default":5},'
                                        b'"payload":null}') == (with_default, 5)
    with pytest.raises(DataError, match="Invalid null value for required INT32 field"):
        c.to_connect_data("t", None, b'{"schema":{"type":"int32"},"payload":null}')


def test_envelope_required_when_schemas_enabled() -> None:
    for raw in (b'{"a":1}', b'[1]', b'{"schema":null,"payload":1,"x":2}', b"1"):
        with pytest.raises(DataError, match='JsonConverter with schemas.enable requires '
                                            '"schema" and "payload" fields'):
            conv().to_connect_data("t", None, raw)
    with pytest.raises(DataError, match="Converting byte\\[\\] to Kafka Connect data failed "
                                        "due to serialization error"):
        conv().to_connect_data("t", None, b"{not json")


def test_wrong_types_are_data_errors() -> None:
    c = conv()
    with pytest.raises(DataError):
        c.from_connect_data("t", None, data.INT32, "x")
    with pytest.raises(DataError, match="Structs should be encoded as JSON objects"):
        c.to_connect_data("t", None, b'{"schema":{"type":"struct","fields":[]},"payload":1}')
    with pytest.raises(DataError, match="Unknown schema type: nope"):
        c.to_connect_data("t", None, b'{"schema":{"type":"nope"},"payload":1}')


def test_schema_json_round_trip_keeps_everything() -> None:
    inner = data.struct("inner", [("x", data.OPTIONAL_INT64)], optional=True, version=3,
                        doc="the inner one")
    s = data.struct("outer", [("m", data.map_of(data.STRING, data.array(inner))),
                              ("n", data.Schema("string", default="dflt"))])
    doc = schema_to_json(s)
    assert schema_from_json(doc) == s
    assert doc["fields"][1] == {"type": "string", "optional": False, "default": "dflt",
                                "field": "n"}


def test_bad_config_is_a_config_error() -> None:
    with pytest.raises(api.ConfigError, match="decimal.format"):
        conv(**{"decimal.format": "HEX"})
    with pytest.raises(api.ConfigError, match="schemas.enable"):
        conv(**{"schemas.enable": "maybe"})


def test_schemas_read_again_come_from_the_cache_and_stay_right() -> None:
    c = conv()
    a = data.struct("A", [("x", data.INT32)])
    b = data.struct("A", [("x", data.INT32), ("y", data.OPTIONAL_STRING)])
    raws = [c.from_connect_data("t", None, s, Struct(s, {"x": i}))
            for i, s in enumerate([a, b, a, b, b, a])]
    reader = conv()
    got = [reader.to_connect_data("t", None, r) for r in raws]
    assert [s for s, _ in got] == [a, b, a, b, b, a]
    assert [v["x"] for _, v in got] == list(range(6))
    # the same envelope with spaces, or keys in another order, reads the same
    spaced = b'{ "payload": {"x": 3}, "schema": {"type": "struct", "name": "A", "fields": ' \
             b'[{"type": "int32", "field": "x"}]} }'
    assert reader.to_connect_data("t", None, spaced) == (a, {"x": 3})
    with pytest.raises(DataError, match="JsonConverter with schemas.enable requires"):
        reader.to_connect_data("t", None, raws[0][:-1] + b',"extra":1}')
