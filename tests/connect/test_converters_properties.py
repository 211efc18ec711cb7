"""Property tests: any Connect schema and value survive JsonConverter (schemas on), and
Confluent's Avro and JSON Schema mappings (schema and value through fastavro's binary
encoding, or Kafka's JSON), unchanged."""

from __future__ import annotations

import datetime
import decimal
import io
import json

import fastavro
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.connect import data
from spool.connect.converters import avro_data, json_schema_data
from spool.connect.converters.json import JsonConverter, dumps, loads
from spool.connect.data import Schema, Struct

UTC = datetime.UTC
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def leaf_schemas() -> st.SearchStrategy[Schema]:
    plain = st.sampled_from([data.INT8, data.INT16, data.INT32, data.INT64, data.FLOAT64,
                             data.BOOLEAN, data.STRING, data.BYTES, data.DATE_SCHEMA,
                             data.TIME_SCHEMA, data.TIMESTAMP_SCHEMA])
    decimals = st.integers(0, 6).map(data.decimal_schema)
    return st.one_of(plain, decimals)


def schemas() -> st.SearchStrategy[Schema]:
    def extend(inner: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        fields = st.lists(st.tuples(names, inner), min_size=1, max_size=4,
                          unique_by=lambda t: t[0])
        return st.one_of(
            inner.map(data.array),
            inner.map(lambda v: data.map_of(data.STRING, v)),
            st.tuples(st.sampled_from([data.INT32, data.INT64]), inner).map(
                lambda kv: data.map_of(*kv)),
            st.tuples(names, fields).map(lambda nf: data.struct(f"ns.{nf[0].title()}",
                                                                nf[1])),
        )
    base = st.recursive(leaf_schemas(), extend, max_leaves=6)
    return st.tuples(base, st.booleans()).map(lambda t: data.optional(t[0]) if t[1] else t[0])


def values(schema: Schema, allow_none: bool = True) -> st.SearchStrategy:
    if schema.optional and allow_none:
        return st.one_of(st.none(), values(schema, False))
    name, t = schema.name, schema.type
    if name == data.DECIMAL:
        scale = int(schema.params["scale"])
        return st.integers(-10**12, 10**12).map(lambda n: decimal.Decimal(n).scaleb(-scale))
    if name == data.DATE:
        return st.dates(datetime.date(1900, 1, 1), datetime.date(2200, 1, 1))
    if name == data.TIME:
        return st.times().map(lambda x: x.replace(microsecond=x.microsecond // 1000 * 1000))
    if name == data.TIMESTAMP:
        return st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1)).map(
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC))
    if t in INT_BITS:
        b = INT_BITS[t]
        return st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1)
    if t == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if t == "boolean":
        return st.booleans()
    if t == "string":
        return st.text(max_size=20)
    if t == "bytes":
        return st.binary(max_size=20)
    if t == "array":
        return st.lists(values(schema.value_schema), max_size=3)  # type: ignore[arg-type]
    if t == "map":
        return st.dictionaries(values(schema.key_schema, False),  # type: ignore[arg-type]
                               values(schema.value_schema), max_size=3)  # type: ignore[arg-type]
    return st.fixed_dictionaries({f.name: values(f.schema) for f in schema.fields}).map(
        lambda d: Struct(schema, d))


pairs = schemas().flatmap(lambda s: st.tuples(st.just(s), values(s)))
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pairs)
def test_json_converter_round_trip(pair: tuple[Schema, object]) -> None:
    schema, value = pair
    for fmt in ("BASE64", "NUMERIC"):
        conv = JsonConverter()
        conv.configure({"decimal.format": fmt}, False)
        raw = conv.from_connect_data("t", None, schema, value)
        assert conv.to_connect_data("t", None, raw) == ((schema, value) if value is not None
                                                        or schema is not None else (None, None))
        json.loads(raw)  # standard JSON


@SETTINGS
@given(pairs)
def test_avro_mapping_round_trip(pair: tuple[Schema, object]) -> None:
    schema, value = pair
    avro = avro_data.to_avro(schema)
    text = json.dumps(avro)
    parsed = fastavro.parse_schema(json.loads(text))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, avro_data.to_avro_value(schema, value))
    read_schema = avro_data.to_connect(json.loads(text))
    assert read_schema == schema
    datum = fastavro.schemaless_reader(io.BytesIO(out.getvalue()), parsed, None)
    assert avro_data.to_connect_value(read_schema, datum) == value


@SETTINGS
@given(pairs)
def test_json_schema_mapping_round_trip(pair: tuple[Schema, object]) -> None:
    schema, value = pair
    doc = json.loads(json.dumps(json_schema_data.to_json_schema(schema)))
    read_schema = json_schema_data.to_connect(doc)
    assert read_schema == schema
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false", "decimal.format": "NUMERIC"}, False)
    assert conv.to_connect(read_schema, loads(dumps(conv.to_json(schema, value)))) == value
