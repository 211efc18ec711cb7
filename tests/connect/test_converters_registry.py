"""AvroConverter and JsonSchemaConverter against a real ``spool registry`` on the real
broker: records written by the converter go through a topic and come back equal; the
subjects are Confluent's; confluent-kafka's own serializers read what the converters
write and write what they read (Confluent's wire format: magic 0 + 4-byte id)."""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Iterator

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


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory) -> Iterator[RegistryProcess]:
    reg = RegistryProcess(broker.bootstrap,
                          tmp_path_factory.mktemp("connect-registry") / "registry.log")
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


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
