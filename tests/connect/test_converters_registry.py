"""AvroConverter and JsonSchemaConverter against a real ``spool registry`` on the real
broker: records written by the converter go through a topic and come back equal; the
subjects are Confluent's; confluent-kafka's own serializers read what the converters
write and write what they read (Confluent's wire format: magic 0 + 4-byte id)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spool.connect import api, converters, data
from spool.connect.data import DataError, Struct
from spool.connect.plugins import Plugins
from tests.helpers.ports import free_base_port
from tests.helpers.registry_proc import RegistryProcess, call

UTC = datetime.UTC
ADDRESS = data.struct("shop.Address", [("city", data.STRING), ("zip", data.OPTIONAL_STRING)],
                      optional=True)
VALUE = data.struct("server1.public.customers.Value", [
    ("id", data.INT32), ("small", data.INT16), ("big", data.INT64),
    ("name", data.OPTIONAL_STRING), ("ratio", data.FLOAT64), ("active", data.BOOLEAN),
    ("blob", data.OPTIONAL_BYTES), ("price", data.decimal_schema(2)),
    ("born", data.DATE_SCHEMA), ("at", data.TIMESTAMP_SCHEMA),
    ("tags", data.array(data.STRING)), ("attrs", data.map_of(data.STRING, data.INT64)),
    ("address", ADDRESS)], version=1)


def customer(i: int, name: str | None = "Ada") -> Struct:
    return Struct(VALUE, {
        "id": i, "small": -3, "big": 1 << 40, "name": name, "ratio": 0.25, "active": True,
        "blob": b"\x00\xff", "price": decimal.Decimal("19.99"), "born": datetime.date(1990, 5, 17),
        "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        "tags": ["a", "b"], "attrs": {"x": 1},
        "address": Struct(ADDRESS, {"city": "Paris", "zip": None}) if i % 2 else None})


@pytest.fixture
def topic() -> str:
    return f"conv-{uuid.uuid4().hex[:10]}"


def make(registry: RegistryProcess, cls: str, is_key: bool = False, **props: str):
    return converters.make(Plugins.discover(), cls,
                           {"schema.registry.url": registry.url, **props}, is_key)


def through_topic(bootstrap: str, topic: str, values: list[bytes | None]) -> list[bytes | None]:
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, v, key=b"k")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes | None] = []
    try:
        for _ in range(120):
            if len(got) == len(values):
                break
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("cls", ["io.confluent.connect.avro.AvroConverter",
                                 "io.confluent.connect.json.JsonSchemaConverter"])
def test_round_trip_through_the_broker(broker, registry: RegistryProcess, topic: str,
                                       cls: str) -> None:
    conv = make(registry, cls)
    values = [customer(1), customer(2, name=None), None]
    raw = [conv.from_connect_data(topic, None, VALUE if v is not None else None, v)
           for v in values]
    assert raw[2] is None and all(r[0] == 0 for r in raw[:2])
    assert raw[0][1:5] == raw[1][1:5]  # one schema id for both
    back = [make(registry, cls).to_connect_data(topic, None, r)
            for r in through_topic(broker.bootstrap, topic, raw)]
    assert back[2] == (None, None)
    for (schema, value), sent in zip(back[:2], values[:2], strict=True):
        assert schema == VALUE
        assert value == sent
        data.validate(schema, value)
    versions = call(registry.url, "GET", f"/subjects/{topic}-value/versions")
    assert (versions.status, versions.body) == (200, [1])
    key_conv = make(registry, cls, is_key=True)
    key_raw = key_conv.from_connect_data(topic, None, data.INT64, 7)
    assert key_conv.to_connect_data(topic, None, key_raw) == (data.INT64, 7)
    assert call(registry.url, "GET", f"/subjects/{topic}-key/versions").body == [1]


def test_avro_is_confluents_wire_format(broker, registry: RegistryProcess, topic: str) -> None:
    sr = SchemaRegistryClient({"url": registry.url})
    conv = make(registry, "AvroConverter")
    raw = conv.from_connect_data(topic, None, VALUE, customer(1))
    ctx = SerializationContext(topic, MessageField.VALUE)
    got = AvroDeserializer(sr)(raw, ctx)
    assert got["id"] == 1 and got["small"] == -3 and got["name"] == "Ada"
    assert got["price"] == decimal.Decimal("19.99")
    assert got["born"] == datetime.date(1990, 5, 17)
    assert got["at"] == datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert got["address"] == {"city": "Paris", "zip": None}
    # and the other way: a record confluent-kafka's serializer wrote
    other = f"{topic}-other"
    avro = ('{"type":"record","name":"Order","namespace":"shop","fields":['
            '{"name":"id","type":"long"},{"name":"note","type":["null","string"],'
            '"default":null},{"name":"kind","type":{"type":"enum","name":"Kind",'
            '"symbols":["A","B"]}},{"name":"lines","type":{"type":"array","items":"double"}}]}')
    written = AvroSerializer(sr, avro)({"id": 5, "note": None, "kind": "B", "lines": [1.5]},
                                       SerializationContext(other, MessageField.VALUE))
    schema, value = conv.to_connect_data(other, None, written)
    assert schema == data.struct("shop.Order", [
        ("id", data.INT64), ("note", data.OPTIONAL_STRING), ("kind", data.STRING),
        ("lines", data.array(data.FLOAT64))])
    assert value == {"id": 5, "note": None, "kind": "B", "lines": [1.5]}


def test_json_schema_is_confluents_wire_format(registry: RegistryProcess, topic: str) -> None:
    sr = SchemaRegistryClient({"url": registry.url})
    conv = make(registry, "JsonSchemaConverter")
    raw = conv.from_connect_data(topic, None, VALUE, customer(1))
    sid = int.from_bytes(raw[1:5], "big")
    got = JSONDeserializer(sr.get_schema(sid).schema_str)(
        raw, SerializationContext(topic, MessageField.VALUE))
    assert got["id"] == 1 and got["price"] == 19.99 and got["born"] == 7441
    assert got["blob"] == "AP8=" and got["address"] == {"city": "Paris", "zip": None}


def test_errors(registry: RegistryProcess, topic: str) -> None:
    conv = make(registry, "AvroConverter")
    with pytest.raises(DataError, match="Unknown magic byte!"):
        conv.to_connect_data(topic, None, b"\x01\x00\x00\x00\x01abc")
    with pytest.raises(DataError, match="Error retrieving Avro schema for id 987654"):
        conv.to_connect_data(topic, None, b"\x00" + (987654).to_bytes(4, "big") + b"\x02")
    strict = make(registry, "AvroConverter", **{"auto.register.schemas": "false"})
    with pytest.raises(DataError, match="Failed to serialize Avro data from topic"):
        strict.from_connect_data(topic, None, data.STRING, "x")
    # after registering, the lookup finds the id
    first = conv.from_connect_data(topic, None, data.STRING, "x")
    assert strict.from_connect_data(topic, None, data.STRING, "y")[:5] == first[:5]
    down = converters.make(Plugins.discover(), "AvroConverter",
                           {"schema.registry.url": f"http://127.0.0.1:{free_base_port(1)}"}, False)
    with pytest.raises(api.RetriableError):
        down.from_connect_data(topic, None, data.STRING, "x")
    with pytest.raises(api.ConfigError, match="schema.registry.url"):
        converters.make(Plugins.discover(), "AvroConverter", {}, False)


def test_record_name_strategy(registry: RegistryProcess, topic: str) -> None:
    conv = make(registry, "AvroConverter", **{
        "value.subject.name.strategy":
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"})
    conv.from_connect_data(topic, None, VALUE, customer(3))
    assert call(registry.url, "GET",
                f"/subjects/{topic}-server1.public.customers.Value/versions").body == [1]


PROTO_VALUE = data.struct("shop.orders.Order", [
    ("id", data.INT32), ("big", data.INT64), ("note", data.OPTIONAL_STRING),
    ("ratio", data.FLOAT64), ("paid", data.BOOLEAN), ("blob", data.BYTES),
    ("tags", data.array(data.STRING)), ("qty", data.map_of(data.STRING, data.INT64)),
    ("address", ADDRESS)])


def test_protobuf_round_trip_and_logical_types(broker, registry: RegistryProcess,
                                               topic: str) -> None:
    conv = make(registry, "io.confluent.connect.protobuf.ProtobufConverter")
    values = [Struct(PROTO_VALUE, {"id": 1, "big": 1 << 40, "note": None, "ratio": 0.5,
                                   "paid": True, "blob": b"\x01", "tags": ["a"],
                                   "qty": {"x": 2},
                                   "address": Struct(ADDRESS, {"city": "Oslo", "zip": "0150"})}),
              Struct(PROTO_VALUE, {"id": 2, "big": 0, "note": "", "ratio": 0.0, "paid": False,
                                   "blob": b"", "tags": [], "qty": {}, "address": None})]
    raw = [conv.from_connect_data(topic, None, PROTO_VALUE, v) for v in values]
    assert all(r[0] == 0 and r[5] == 0 for r in raw)  # magic, id, message index [0]
    back = [make(registry, "ProtobufConverter").to_connect_data(topic, None, r)
            for r in through_topic(broker.bootstrap, topic, raw)]
    # a nested struct is a nested message: its name is the message's full name
    read = data.struct("shop.orders.Order", [
        (f.name, f.schema if f.name != "address"
         else dataclasses.replace(ADDRESS, name="shop.orders.Order.Address"))
        for f in PROTO_VALUE.fields])
    assert [s for s, _ in back] == [read] * 2
    assert [v for _, v in back] == values
    logical = data.struct("shop.L", [("price", data.decimal_schema(2)),
                                     ("day", data.DATE_SCHEMA),
                                     ("at", data.optional(data.TIMESTAMP_SCHEMA)),
                                     ("n", data.INT16)])
    at = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    one = conv.from_connect_data(f"{topic}-l", None, logical, Struct(logical, {
        "price": decimal.Decimal("19.90"), "day": datetime.date(1970, 1, 11), "at": at, "n": 3}))
    schema, value = conv.to_connect_data(f"{topic}-l", None, one)
    assert value == {"price": "19.90", "day": 10, "at": at, "n": 3}
    assert schema.field("at").schema == data.optional(data.TIMESTAMP_SCHEMA)
    key_conv = make(registry, "ProtobufConverter", is_key=True)
    key = key_conv.from_connect_data(topic, None, data.INT64, 42)
    assert key_conv.to_connect_data(topic, None, key) == (data.INT64, 42)
    assert call(registry.url, "GET", f"/subjects/{topic}-value/versions").body == [1]


def test_protobuf_reads_confluents_serializer(registry: RegistryProcess, topic: str) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import descriptor_pb2

    from spool.connect.converters import protobuf_data

    fd = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/outer.proto", package="shop",
                                             syntax="proto3")
    fdp.message_type.add(name="Unused").field.add(name="x", number=1, type=fd.TYPE_INT32,
                                                  label=fd.LABEL_OPTIONAL)
    outer = fdp.message_type.add(name="Outer")
    inner = outer.nested_type.add(name="Line")
    inner.field.add(name="sku", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    outer.field.add(name="id", number=1, type=fd.TYPE_INT64, label=fd.LABEL_OPTIONAL)
    outer.field.add(name="lines", number=2, type=fd.TYPE_MESSAGE, label=fd.LABEL_REPEATED,
                    type_name=".shop.Outer.Line")
    cls = protobuf_data.message_class([fdp], "shop.Outer")
    msg = cls(id=7)
    msg.lines.add(sku="A-1")
    sr = SchemaRegistryClient({"url": registry.url})
    raw = ProtobufSerializer(cls, sr, {"use.deprecated.format": False})(
        msg, SerializationContext(topic, MessageField.VALUE))
    schema, value = make(registry, "ProtobufConverter").to_connect_data(topic, None, raw)
    line = data.struct("shop.Outer.Line", [("sku", data.STRING)])
    assert schema == data.struct("shop.Outer", [("id", data.INT64), ("lines", data.array(line))])
    assert value == {"id": 7, "lines": [{"sku": "A-1"}]}


def debezium_event() -> tuple[data.Schema, Struct, data.Schema, Struct]:
    """An update event as the PostgreSQL source makes it (its envelope module's schemas)."""
    from spool.connect.postgres import envelope as env

    cols = [("id", data.INT32), ("name", data.OPTIONAL_STRING),
            ("price", data.optional(data.decimal_schema(2))),
            ("amount", env.variable_scale_decimal_schema()),
            ("born", data.Schema("int32", optional=True, name=env.DATE, version=1)),
            ("seen", data.Schema("int64", optional=True, name=env.MICRO_TIMESTAMP, version=1)),
            ("doc", data.Schema("string", optional=True, name=env.JSON, version=1)),
            ("raw", data.OPTIONAL_BYTES), ("ok", data.OPTIONAL_BOOLEAN),
            ("ratio", data.OPTIONAL_FLOAT64)]
    row = env.row_schema("server1", "public", "items", cols)
    value_schema = env.envelope_schema("server1", "public", "items", row)
    key_schema = env.key_schema("server1", "public", "items", [("id", data.INT32)])
    before = Struct(row, {"id": 5, "name": "old", "price": decimal.Decimal("1.00"),
                          "amount": env.variable_scale_decimal(decimal.Decimal("-3.14159")),
                          "born": 10, "seen": 1_700_000_000_000_001, "doc": '{"a": 1}',
                          "raw": b"\x00", "ok": False, "ratio": 0.5})
    after = Struct(row, {**before, "name": "new", "price": decimal.Decimal("2.50"),
                         "ok": True})
    source = env.source_struct(version="2.7.0", name="server1", db="shop", schema="public",
                               table="items", ts_us=1_700_000_000_000_000, tx_id=77, lsn=123,
                               snapshot="false")
    value = env.envelope(value_schema, env.OP_UPDATE, before, after, source,
                         1_700_000_000_500_000)
    return key_schema, Struct(key_schema, {"id": 5}), value_schema, value


@pytest.mark.parametrize("cls", ["io.confluent.connect.avro.AvroConverter",
                                 "io.confluent.connect.json.JsonSchemaConverter",
                                 "org.apache.kafka.connect.json.JsonConverter"])
def test_debezium_envelopes_round_trip(registry: RegistryProcess, topic: str, cls: str) -> None:
    key_schema, key, value_schema, value = debezium_event()
    for is_key, schema, v in ((True, key_schema, key), (False, value_schema, value)):
        conv = make(registry, cls, is_key=is_key)
        raw = conv.from_connect_data(topic, None, schema, v)
        got_schema, got = make(registry, cls, is_key=is_key).to_connect_data(topic, None, raw)
        assert got_schema == schema
        assert got == v
        data.validate(got_schema, got)
