"""valueFormat/keyFormat json and avro: typed columns on read (batch, streaming), encoded on write.

The json reads are checked against Spark's own ``from_json`` over the same
values in the same session: same rows, field by field, for good and broken
values, on the vectorized path (no map/binary fields) and the per-value one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
import struct

import fastavro
import pytest
from pyspark.sql import functions as F

from spool.spark.ddl import parse_ddl
from spool.spark.formats import parse_column_format
from spool.spark.options import parse_options
from spool.spark.schema import ddl as kafka_ddl
from spool.spark.source import SpoolDataSource
from tests.spark.conftest import consume_all, create_topic, produce

GOOD = (
    b'{"id":"g","amount":1.5,"n":3,"ok":true,"price":12.34,"d":"2024-01-02",'
    b'"t":"2024-01-02T03:04:05.123Z","nt":"2024-01-02T03:04:05.5","tags":["a"],'
    b'"inner":{"a":1,"s":"y"},"extra":[1]}'
)
EDGE_VALUES = [
    b'{"id":"a","amount":1.5,"n":3,"ok":true,"price":12.345,"t":"2024-01-02T03:04:05.123Z"}',
    b'{"id":"b","d":"2024-02-29","inner":{"a":7,"s":"x"},"tags":["p","q",null]}',
    b'{"id" 1}',  # not JSON: every field null
    b"",  # empty: null
    None,  # tombstone: null
    b"null",
    b'[{"id":"x"}]',
    b"5",
    b'{"id":5,"amount":"x"}',  # a number into a string field: its text; a bad double: null
    b'{"id":{"a":1},"amount":2}',
    b'{"n":1.0,"amount":1}',
    b'{"n":3000000000}',
    b'{"n":"7","ok":"true"}',
    b'{"id":"a"} {"id":"b"}',  # Spark reads the first value
    b'{\n "id": "multi",\n "n": 2\n}',
    b'{"amount": NaN, "t": "2024-01-02T03:04:05+01:00"}',
    b'{"ID":"case","price":"2.5"}',
    b'{"t":"yesterday","d":"02/03/2024","tags":"no"}',
    b'{"nt":"2024-01-02T03:04:05Z","d":"2024-01-02T03:04:05"}',  # ntz with a zone: null
    b'{"inner":{"a":"x","s":5}}',
    b"\xff\xfe",
    b"{'id':'single','n':2,'inner':{'s':'it\\'s \"q\"'}}",  # Spark allows single quotes
]
FAST_DDL = (
    "id string, amount double, n int, ok boolean, price decimal(6,2), d date, t timestamp, "
    "nt timestamp_ntz, tags array<string>, inner struct<a: bigint, s: string>"
)
SLOW_DDL = FAST_DDL + ", m map<string, int>, b binary"
SLOW_VALUES = [
    b'{"id":"m","m":{"x":1,"y":null,"z":"bad"},"b":"aGk="}',
    b'{"m":[1],"b":"!!"}',
    b'{"m":{"x":1},"b":"aGk","tags":[1,"a",{"x":1}],"inner":[]}',
    b'{"t":1700000000,"d":19000,"n":1e2,"amount":"NaN","price":"1e1"}',
    b"   ",
]


def reader(spark, bootstrap, **opts):
    r = spark.read.format("spool").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def comparable(value):
    """NaN as a marker (NaN != NaN would hide equal rows); Rows as dicts."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def by_offset(rows, column="value"):
    return {
        r.offset: None if r[column] is None else comparable(r[column].asDict(recursive=True))
        for r in rows
    }


@pytest.mark.parametrize("ddl,values", [(FAST_DDL, EDGE_VALUES), (SLOW_DDL, EDGE_VALUES + SLOW_VALUES)])
def test_json_read_matches_spark_from_json(spark, broker, topic_name, ddl, values):
    create_topic(broker.bootstrap, topic_name, 1)
    # 300 records: long runs of good values between the broken ones, so the vectorized
    # path parses blocks, rejects some and splits them.
    assert len(values) <= 30  # every edge value is sent
    sent = [values[i // 10] if i % 10 == 0 and i // 10 < len(values) else GOOD for i in range(300)]
    produce(
        broker.bootstrap,
        topic_name,
        [{"key": f"k{i}".encode(), "value": v} for i, v in enumerate(sent)],
    )
    typed = reader(spark, broker.bootstrap, subscribe=topic_name, valueFormat="json", valueSchema=ddl)
    assert typed.schema["value"].dataType == parse_ddl(ddl)
    assert typed.schema["key"].dataType.simpleString() == "binary"
    rows = typed.collect()
    raw = reader(spark, broker.bootstrap, subscribe=topic_name)
    want = raw.select("offset", F.from_json(F.col("value").cast("string"), ddl).alias("value"))
    assert by_offset(rows) == by_offset(want.collect())
    assert sorted((r.offset, bytes(r.key)) for r in rows) == [(i, f"k{i}".encode()) for i in range(300)]


def test_json_write_is_spark_to_json_and_null_struct_is_a_tombstone(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    df = spark.sql(
        """
        SELECT CAST(id AS STRING) AS key,
               IF(id = 2, NULL, named_struct(
                 'id', CAST(id AS STRING), 'amount', id * 1.5D, 'missing', CAST(NULL AS INT),
                 't', timestamp'2024-01-02 03:04:05.123456', 'd', date'2024-01-02',
                 'b', X'6869', 'm', map('a', id), 'f', CAST(1.1 AS FLOAT), 'x', 1.50BD,
                 'nan', double('NaN'), 'l', array(1, NULL), 'inner', named_struct('z', true),
                 'e', array(1e20D, 1e-5D, 12345678D, -0.001D, CAST(1e10 AS FLOAT)),
                 's', 'é "q" \\ \n', 'ntz', timestamp_ntz'2024-01-02 03:04:05'
               )) AS value
        FROM range(3)
        """
    )
    (
        df.write.format("spool")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic_name)
        .option("valueFormat", "json")
        .mode("append")
        .save()
    )
    got = {m.key(): m.value() for m in consume_all(broker.bootstrap, topic_name)}
    want = {
        r.key.encode(): None if r.j is None else r.j.encode()
        for r in df.select("key", F.to_json("value").alias("j")).collect()
    }
    assert b'"e":[1.0E20,1.0E-5,1.2345678E7,-0.001,1.0E10]' in want[b"1"]
    assert got == want
    assert got[b"2"] is None


AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": ["null", "double"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["NEW", "PAID"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {
            "name": "ship",
            "type": [
                "null",
                {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]},
            ],
        },
        {"name": "count", "type": ["int", "long"]},
    ],
}
AVRO_DDL = (
    "id string, amount double, kind string, at timestamp, day date, price decimal(9,2), "
    "tags array<string>, attrs map<string, bigint>, ship struct<city: string>, count bigint"
)


def order(i: int) -> dict:
    return {
        "id": f"o{i}",
        "amount": None if i % 2 else i * 1.5,
        "kind": "PAID" if i % 2 else "NEW",
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=dt.UTC) + dt.timedelta(hours=i),
        "day": dt.date(2024, 1, 2) + dt.timedelta(days=i),
        "price": decimal.Decimal(f"{i}.25"),
        "tags": [f"t{i}"] * (i % 3),
        "attrs": {"n": i},
        "ship": None if i % 3 == 0 else {"city": f"c{i}"},
        "count": i,
    }


def test_avro_write_framed_then_read_back_with_plain_and_broken_values(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    rows = [(f"o{i}", order(i)) for i in range(4)] + [("gone", None)]
    df = spark.createDataFrame(rows, f"key string, value struct<{AVRO_DDL}>")
    (
        df.write.format("spool")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic_name)
        .option("valueFormat", "avro")
        .option("valueSchema", json.dumps(AVRO_SCHEMA))
        .option("valueSchemaId", "42")
        .mode("append")
        .save()
    )
    written = consume_all(broker.bootstrap, topic_name)
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    assert {m.key(): m.value() for m in written}[b"gone"] is None  # a null struct: a tombstone
    for m in written:  # Confluent framing, then the Avro binary of the row
        value = m.value()
        if m.key() == b"gone":
            continue
        assert struct.unpack(">bI", value[:5]) == (0, 42)
        i = int(m.key()[1:])
        assert fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None) == order(i)
    plain = io.BytesIO()
    fastavro.schemaless_writer(plain, parsed, order(4))
    produce(broker.bootstrap, topic_name, [{"key": b"o4", "value": plain.getvalue()}])
    produce(broker.bootstrap, topic_name, [{"key": b"bad", "value": b"\x01\x02"}])

    got = reader(
        spark,
        broker.bootstrap,
        subscribe=topic_name,
        valueFormat="avro",
        valueSchema=json.dumps(AVRO_SCHEMA),
    )
    assert got.schema["value"].dataType == parse_ddl(AVRO_DDL)
    values = {bytes(r.key): r.value for r in got.collect()}
    assert values.pop(b"bad") is None
    assert values.pop(b"gone") is None
    want = spark.createDataFrame(
        [(f"o{i}", order(i)) for i in range(5)], f"key string, value struct<{AVRO_DDL}>"
    ).collect()
    assert values == {r.key.encode(): r.value for r in want}


def test_streaming_json_in_avro_out_exactly_once(spark, broker, topic_name, tmp_path):
    """Key and value decoded from JSON in a stream, re-encoded as framed Avro by the
    exactly-once sink with a schema derived from the column types (as to_avro)."""
    create_topic(broker.bootstrap, topic_name, 2)
    out_topic = topic_name + "-avro"
    create_topic(broker.bootstrap, out_topic, 1)
    produce(
        broker.bootstrap,
        topic_name,
        [
            {
                "key": json.dumps({"user": f"u{i % 3}"}).encode(),
                "value": json.dumps({"id": f"e{i}", "n": i}).encode(),
                "partition": i % 2,
            }
            for i in range(40)
        ],
    )
    q = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .option("keyFormat", "json")
        .option("keySchema", "user string")
        .option("valueFormat", "json")
        .option("valueSchema", "id string, n int")
        .load()
        .selectExpr("key.user AS key", "named_struct('id', value.id, 'n', value.n, 'p', partition) AS value")
        .writeStream.format("spool")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", out_topic)
        .option("valueFormat", "avro")
        .option("valueSchemaId", "5")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    derived = fastavro.parse_schema(
        {
            "type": "record",
            "name": "topLevelRecord",
            "fields": [
                {"name": "id", "type": ["string", "null"]},
                {"name": "n", "type": ["int", "null"]},
                {"name": "p", "type": ["int", "null"]},
            ],
        }
    )
    got = []
    for m in consume_all(broker.bootstrap, out_topic, "read_committed"):
        assert m.value()[:5] == b"\x00\x00\x00\x00\x05"
        record = fastavro.schemaless_reader(io.BytesIO(m.value()[5:]), derived, None)
        got.append((m.key(), record["id"], record["n"], record["p"]))
    assert sorted(got) == sorted((f"u{i % 3}".encode(), f"e{i}", i, i % 2) for i in range(40))


def test_invalid_options_are_refused_naming_the_option(spark, broker):
    with pytest.raises(Exception, match="option valueFormat must be json or avro"):
        reader(spark, broker.bootstrap, subscribe="x", valueFormat="xml").schema  # noqa: B018
    base = {"kafka.bootstrap.servers": "b:1", "subscribe": "t"}
    cases = [
        ({"valueFormat": "json"}, "option valueSchema is required"),
        ({"valueFormat": "json", "valueSchema": "id strng"}, "option valueSchema is not a Spark DDL"),
        ({"valueFormat": "avro", "valueSchema": "{"}, "option valueSchema is not Avro schema JSON"),
        ({"valueFormat": "avro", "valueSchema": '"string"'}, "option valueSchema must be an Avro record"),
        (
            {"valueFormat": "avro", "valueSchema": json.dumps({"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]})},
            "option valueSchema: union",
        ),
        ({"valueFormat": "json", "valueSchema": "a int", "valueSchemaId": "1"}, "option valueSchemaId is only"),
        ({"valueFormat": "avro", "valueSchema": json.dumps(AVRO_SCHEMA), "valueSchemaId": "x"}, "option valueSchemaId must be"),
        ({"valueSchema": "a int"}, "option valueSchema needs the option valueFormat"),
        ({"keyFormat": "csv"}, "option keyFormat must be json or avro"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            parse_options({**base, **extra}, for_read=True)
    # writing: checked against the DataFrame's columns before any task runs
    write = {"kafka.bootstrap.servers": broker.bootstrap, "topic": "x"}
    for schema, extra, message in [
        ("value string", {"valueFormat": "json"}, "option valueFormat=json writes a struct value"),
        (
            "value struct<id: string>",
            {"valueFormat": "avro", "valueSchema": json.dumps(AVRO_SCHEMA)},
            "option valueSchema: field 'kind' has no default",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            SpoolDataSource({**write, **extra}).writer(parse_ddl(schema), False)


def test_ddl_and_avro_mapping_without_spark():
    assert parse_ddl("struct<`a b`: int NOT NULL COMMENT 'x', c: decimal>") == parse_ddl(
        "`a b` int, c decimal(10,0)"
    )
    assert parse_ddl(kafka_ddl(include_headers=True)).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    for bad in ("a int, a string", "a int,", "a array<int", "a int b"):
        with pytest.raises(ValueError):
            parse_ddl(bad)
    fmt = parse_column_format(
        {"valueFormat": "avro", "valueSchema": json.dumps(AVRO_SCHEMA)}, "value", for_read=True
    )
    assert fmt.spark_type == parse_ddl(AVRO_DDL)
    # zone-less JSON timestamps are UTC; on the vectorized path as on the per-value one
    json_fmt = parse_column_format({"valueFormat": "json", "valueSchema": "t timestamp"}, "value", for_read=True)
    import pyarrow as pa

    for n in (1, 40):
        out = json_fmt.decode(pa.array([b'{"t":"2024-01-02 03:04:05"}'] * n, pa.binary()))
        assert out.to_pylist()[-1] == {"t": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)}


def test_vectorized_json_gives_the_per_value_parsers_rows():
    """Blocks pyarrow.json accepts and blocks it rejects (bisected) both give, row by row,
    what the per-value parser (checked against Spark above) gives."""
    import random

    import pyarrow as pa

    from spool.spark.json_format import _slow, decode_json

    t = parse_ddl(FAST_DDL)
    fields = {
        "id": ["x", "é", "", 'a"b', 5, {"a": 1}],
        "amount": [1.5, 2, -0.0, 1e308, "NaN", "x"],
        "n": [1, -5, 2**31, 1.0, "3"],
        "ok": [True, False, "true"],
        "price": [1.25, 2, 9999.99, "2.5", 1.255, 1e10],
        "d": ["2024-01-02", "2024-12-31", "2024-01-02T03:04:05", "2024-02-30"],
        "t": ["2024-01-02T03:04:05Z", "2024-01-02 03:04:05", "2024-01-02T03:04:05.5+02:00", 1700000000],
        "nt": ["2024-01-02T03:04:05", "2024-01-02", "2024-01-02T03:04:05Z"],
        "tags": [["a", None], [], [1, "b"], "no"],
        "inner": [{"a": 1, "s": "q"}, None, {"a": "x"}, []],
    }
    rng = random.Random(19)
    # the first two values of each field pyarrow reads as they are; one field at a time
    # takes any of its values, so blocks with one kind of oddity get through pyarrow whole
    for odd in [None, *fields]:
        pool = {k: v if k == odd else v[:2] for k, v in fields.items()}
        values = [
            json.dumps({k: rng.choice(v) for k, v in pool.items() if rng.random() < 0.8}).encode()
            for _ in range(200)
        ]
        column = pa.array(values, pa.binary())
        fast = [comparable(r) for r in decode_json(column, t).to_pylist()]
        assert fast == [comparable(r) for r in _slow(column, t).to_pylist()]
