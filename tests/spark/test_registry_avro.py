"""valueFormat=avro with schema.registry.url: the writer schema by each record's id, the
columns from the subject's latest schema, the sink registering and framing.

Records are written by confluent-kafka's own AvroSerializer (v1, then v2 adding a field
with a default) and read by the ``spool`` source; the sink's output is read by
confluent-kafka's AvroDeserializer. A real broker and a real ``spool registry`` process,
both the module's own.
"""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spool.spark.formats import parse_column_format
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.registry_proc import RegistryProcess
from tests.spark.conftest import consume_all, create_topic, produce

V1 = {"type": "record", "name": "Order", "namespace": "com.acme",
      "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}]}
V2 = {**V1, "fields": [*V1["fields"],
                       {"name": "region", "type": "string", "default": "eu"},
                       {"name": "price", "type": ["null", "double"], "default": None}]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker of the module's own: its registry's _schemas and group stay apart from the
    session broker's (tests/registry's registry compares _schemas' end offsets)."""
    b = BrokerProcess(tmp_path_factory.mktemp("registry-broker") / "data")
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory):
    """A ``spool registry`` process on the module's broker."""
    reg = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry") / "registry.log")
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


def _produce_serialized(bootstrap, client, topic, schema, values, key_prefix):
    serialize = AvroSerializer(client, json.dumps(schema))
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, key=f"{key_prefix}{i}".encode(),
                  value=serialize(v, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0


def test_read_resolves_each_writer_schema_into_the_latest(spark, broker, registry, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    client = SchemaRegistryClient({"url": registry.url})
    _produce_serialized(broker.bootstrap, client, topic_name, V1,
                        [{"id": "a", "qty": 1}, {"id": "b", "qty": 2}], "v1-")
    _produce_serialized(broker.bootstrap, client, topic_name, V2,
                        [{"id": "c", "qty": 3, "region": "us", "price": 9.5}], "v2-")
    v1_id = client.get_version(f"{topic_name}-value", 1).schema_id
    plain = io.BytesIO()  # plain Avro, no framing: null
    fastavro.schemaless_writer(plain, fastavro.parse_schema(V1), {"id": "p", "qty": 0})
    unknown = struct.pack(">bI", 0, 2**31 - 7) + plain.getvalue()  # an id nobody registered
    produce(broker.bootstrap, topic_name, [
        {"key": b"plain", "value": plain.getvalue()},
        {"key": b"unknown", "value": unknown},
        {"key": b"broken", "value": struct.pack(">bI", 0, v1_id) + b"\x02"},
        {"key": b"tombstone", "value": None},
    ])

    df = (spark.read.format("spool")
          .option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic_name)
          .option("valueFormat", "avro")
          .option("schema.registry.url", registry.url)
          .load())
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,qty:int,region:string,price:double>")
    got = {bytes(r.key).decode(): (None if r.value is None else r.value.asDict())
           for r in df.collect()}
    assert got == {
        "v1-0": {"id": "a", "qty": 1, "region": "eu", "price": None},  # v2's defaults
        "v1-1": {"id": "b", "qty": 2, "region": "eu", "price": None},
        "v2-0": {"id": "c", "qty": 3, "region": "us", "price": 9.5},
        "plain": None, "unknown": None, "broken": None, "tombstone": None,
    }

    # valueSchema, when given, is the reader schema instead of the latest
    narrow = {**V1, "fields": [{"name": "id", "type": "string"}]}
    ids = (spark.read.format("spool")
           .option("kafka.bootstrap.servers", broker.bootstrap)
           .option("subscribe", topic_name)
           .option("valueFormat", "avro")
           .option("valueSchema", json.dumps(narrow))
           .option("schema.registry.url", registry.url)
           .load().where("value is not null").selectExpr("value.id").collect())
    assert sorted(r.id for r in ids) == ["a", "b", "c"]


def test_write_registers_and_frames_then_confluent_reads_it(spark, broker, registry,
                                                           topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    rows = [(f"k{i}", (f"o{i}", i)) for i in range(3)]
    df = spark.createDataFrame(rows, "key string, value struct<id: string, qty: int>")
    (df.write.format("spool")
       .option("kafka.bootstrap.servers", broker.bootstrap)
       .option("topic", topic_name)
       .option("valueFormat", "avro")
       .option("schema.registry.url", registry.url)
       .mode("append").save())
    client = SchemaRegistryClient({"url": registry.url})
    latest = client.get_latest_version(f"{topic_name}-value")
    assert latest.version == 1
    deserialize = AvroDeserializer(client)
    values = {}
    for m in consume_all(broker.bootstrap, topic_name):
        assert struct.unpack(">bI", m.value()[:5]) == (0, latest.schema_id)
        values[m.key().decode()] = deserialize(
            m.value(), SerializationContext(topic_name, MessageField.VALUE))
    assert values == {f"k{i}": {"id": f"o{i}", "qty": i} for i in range(3)}

    # the same write again: the same schema, the same id, no new version
    (df.write.format("spool")
       .option("kafka.bootstrap.servers", broker.bootstrap)
       .option("topic", topic_name)
       .option("valueFormat", "avro")
       .option("schema.registry.url", registry.url)
       .mode("append").save())
    assert client.get_versions(f"{topic_name}-value") == [1]

    # read back by Spark through the registry
    back = (spark.read.format("spool")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name)
            .option("valueFormat", "avro")
            .option("schema.registry.url", registry.url)
            .load().selectExpr("value.id", "value.qty").collect())
    assert sorted((r.id, r.qty) for r in back) == sorted(
        [(f"o{i}", i) for i in range(3)] * 2)


def test_key_and_value_under_their_own_subjects(spark, broker, registry, topic_name):
    """keyFormat=avro too: the key's schema under <topic>-key, read back by both sides."""
    create_topic(broker.bootstrap, topic_name, 1)
    df = spark.createDataFrame([((f"u{i}",), (f"o{i}", i)) for i in range(3)],
                               "key struct<user: string>, value struct<id: string, qty: int>")
    (df.write.format("spool")
       .option("kafka.bootstrap.servers", broker.bootstrap)
       .option("topic", topic_name)
       .option("keyFormat", "avro")
       .option("valueFormat", "avro")
       .option("schema.registry.url", registry.url)
       .mode("append").save())
    client = SchemaRegistryClient({"url": registry.url})
    key_id = client.get_latest_version(f"{topic_name}-key").schema_id
    value_id = client.get_latest_version(f"{topic_name}-value").schema_id
    deserialize = AvroDeserializer(client)
    pairs = []
    for m in consume_all(broker.bootstrap, topic_name):
        assert struct.unpack(">bI", m.key()[:5]) == (0, key_id)
        assert struct.unpack(">bI", m.value()[:5]) == (0, value_id)
        pairs.append((deserialize(m.key(), SerializationContext(topic_name, MessageField.KEY)),
                      deserialize(m.value(), SerializationContext(topic_name,
                                                                  MessageField.VALUE))))
    assert sorted(pairs, key=str) == [({"user": f"u{i}"}, {"id": f"o{i}", "qty": i})
                                      for i in range(3)]
    back = (spark.read.format("spool")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name)
            .option("keyFormat", "avro")
            .option("valueFormat", "avro")
            .option("schema.registry.url", registry.url)
            .load().selectExpr("key.user", "value.qty").collect())
    assert sorted((r.user, r.qty) for r in back) == [(f"u{i}", i) for i in range(3)]


def test_write_of_an_incompatible_schema_is_refused(spark, broker, registry, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"{topic_name}-value"
    client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    client.set_compatibility(subject, "BACKWARD")
    # qty as a string and no default: not a reader of V1's records
    df = spark.createDataFrame([("k", ("o", "many"))],
                               "key string, value struct<id: string, qty: string>")
    writer = (df.write.format("spool")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("topic", topic_name)
              .option("valueFormat", "avro")
              .option("schema.registry.url", registry.url)
              .mode("append"))
    with pytest.raises(Exception, match=r"incompatible.*error_code 409"):
        writer.save()
    assert client.get_versions(subject) == [1]
    assert consume_all(broker.bootstrap, topic_name) == []
    with pytest.raises(SchemaRegistryError):  # and nothing was registered meanwhile
        client.get_version(subject, 2)

    # a DataFrame that can read V1's records: its derived schema takes the subject's record
    # name (Avro resolves records by name) and is registered as version 2
    ok = spark.createDataFrame([("k", ("o", 7))], "key string, value struct<id: string, qty: int>")
    (ok.write.format("spool")
       .option("kafka.bootstrap.servers", broker.bootstrap)
       .option("topic", topic_name)
       .option("valueFormat", "avro")
       .option("schema.registry.url", registry.url)
       .mode("append").save())
    v2 = client.get_version(subject, 2)
    assert json.loads(v2.schema.schema_str)["name"] == "Order"
    assert json.loads(v2.schema.schema_str)["namespace"] == "com.acme"
    [m] = consume_all(broker.bootstrap, topic_name)
    assert struct.unpack(">bI", m.value()[:5]) == (0, v2.schema_id)


def test_streaming_registry_avro_in_and_out(spark, broker, registry, topic_name, tmp_path):
    """A stream reads confluent-kafka's v1 and v2 records through the registry and writes
    them on with the exactly-once sink, registered under the output topic's subject."""
    create_topic(broker.bootstrap, topic_name, 2)
    out_topic = topic_name + "-out"
    create_topic(broker.bootstrap, out_topic, 1)
    client = SchemaRegistryClient({"url": registry.url})
    _produce_serialized(broker.bootstrap, client, topic_name, V1,
                        [{"id": f"a{i}", "qty": i} for i in range(10)], "v1-")
    _produce_serialized(broker.bootstrap, client, topic_name, V2,
                        [{"id": f"b{i}", "qty": i, "region": "us", "price": None}
                         for i in range(10)], "v2-")
    q = (spark.readStream.format("spool")
         .option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic_name)
         .option("startingOffsets", "earliest")
         .option("valueFormat", "avro")
         .option("schema.registry.url", registry.url)
         .load()
         .selectExpr("key", "named_struct('id', value.id, 'region', value.region) AS value")
         .writeStream.format("spool")
         .option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", out_topic)
         .option("valueFormat", "avro")
         .option("schema.registry.url", registry.url)
         .option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(availableNow=True)
         .start())
    q.awaitTermination(120)
    assert q.exception() is None
    out = client.get_latest_version(f"{out_topic}-value")
    deserialize = AvroDeserializer(client)
    got = []
    for m in consume_all(broker.bootstrap, out_topic, "read_committed"):
        assert struct.unpack(">bI", m.value()[:5]) == (0, out.schema_id)
        got.append(deserialize(m.value(), SerializationContext(out_topic, MessageField.VALUE)))
    assert sorted((r["id"], r["region"]) for r in got) == sorted(
        [(f"a{i}", "eu") for i in range(10)] + [(f"b{i}", "us") for i in range(10)])


@pytest.mark.parametrize(("opts", "error"), [
    ({"subscribePattern": "t.*"}, "give the option valueSubject"),
    ({"subscribe": "a,b"}, "give the option valueSubject"),
    ({"subscribe": "a", "valueSchemaId": "3"}, "valueSchemaId and schema.registry.url"),
])
def test_registry_options_refused_before_asking(opts, error):
    given = {"valueFormat": "avro", "schema.registry.url": "http://127.0.0.1:9", **opts}
    with pytest.raises(ValueError, match=error):
        parse_column_format(given, "value", for_read=True)


def test_unreachable_registry_names_the_url():
    given = {"valueFormat": "avro", "subscribe": "t", "schema.registry.url": "http://127.0.0.1:9"}
    with pytest.raises(ValueError, match=r"schema registry http://127.0.0.1:9: cannot get the "
                       r"latest schema of subject 't-value': cannot reach"):
        parse_column_format(given, "value", for_read=True)
