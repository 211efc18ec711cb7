"""confluent-kafka's own schema registry clients against Spool's registry, end to end.

confluent-kafka 2.16.1's ``SchemaRegistryClient`` and its Avro, JSON Schema and Protobuf
serializers and deserializers, through a real broker process and a real registry
process: each format's records are produced and consumed back equal (the serializer
registers ``<topic>-value`` itself, the deserializer fetches the writer schema by the
id in each record's framing); an incompatible change is refused under BACKWARD with
409 and accepted once the subject's level is NONE; an Avro record referring to another
subject's named type and a .proto importing another .proto round-trip too.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

from tests.helpers.registry_proc import roundtrip

pytestmark = pytest.mark.timeout(120)

ORDER_AVRO = {
    "type": "record", "name": "Order", "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {"id": {"type": "string"}, "qty": {"type": "integer"}},
    "required": ["id"],
}
CUSTOMER_PROTO = """syntax = "proto3";
package acme.t{tag};
message Customer {{
  string name = 1;
  int32 tier = 2;
}}
"""
ORDER_PROTO = """syntax = "proto3";
package acme.t{tag};
import "customer_{tag}.proto";
message Order {{
  string id = 1;
  int64 qty = 2;
  Customer customer = 3;
}}
"""


@pytest.fixture
def client(registry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def _roundtrip(bootstrap: str, topic: str, serialize, deserialize, values: list) -> list:
    """Produce each value serialized to ``topic``, consume them back deserialized."""
    got = roundtrip(bootstrap, topic, serialize, deserialize, values)
    assert all(raw[0] == 0 for raw, _ in got)  # Confluent framing: magic byte, 4-byte id
    return [value for _, value in got]


def test_avro_round_trip(broker, client, topic_name):
    serialize = AvroSerializer(client, json.dumps(ORDER_AVRO))
    deserialize = AvroDeserializer(client)  # no schema: the writer's, by the record's id
    values = [{"id": f"o-{i}", "qty": i, "note": None if i % 2 else "x"} for i in range(5)]
    assert _roundtrip(broker.bootstrap, topic_name, serialize, deserialize, values) == values
    latest = client.get_latest_version(f"{topic_name}-value")
    assert latest.version == 1
    assert json.loads(latest.schema.schema_str)["name"] == "Order"


def test_avro_reader_schema_resolves_older_records(broker, client, topic_name):
    """Records written with v1 read with v2 (a field added with a default) as the reader."""
    serialize = AvroSerializer(client, json.dumps(ORDER_AVRO))
    v2 = {**ORDER_AVRO, "fields": [*ORDER_AVRO["fields"],
                                   {"name": "region", "type": "string", "default": "eu"}]}
    deserialize = AvroDeserializer(client, json.dumps(v2))
    got = _roundtrip(broker.bootstrap, topic_name, serialize, deserialize,
                     [{"id": "a", "qty": 1, "note": None}])
    assert got == [{"id": "a", "qty": 1, "note": None, "region": "eu"}]


def test_json_schema_round_trip(broker, client, topic_name):
    serialize = JSONSerializer(json.dumps(ORDER_JSON), client)
    deserialize = JSONDeserializer(None, schema_registry_client=client)
    values = [{"id": f"o-{i}", "qty": i} for i in range(5)]
    assert _roundtrip(broker.bootstrap, topic_name, serialize, deserialize, values) == values
    assert client.get_latest_version(f"{topic_name}-value").schema.schema_type == "JSON"


@pytest.fixture
def proto_modules(protoc):
    """Order (importing Customer from another file) compiled by protoc and imported:
    file names and packages unique to the test (protobuf's default pool is global)."""
    tag = uuid.uuid4().hex[:8]
    pb = protoc({f"customer_{tag}.proto": CUSTOMER_PROTO.format(tag=tag),
                 f"order_{tag}.proto": ORDER_PROTO.format(tag=tag)}, f"order_{tag}_pb2")
    return tag, pb


def test_protobuf_round_trip_with_an_import(broker, client, topic_name, proto_modules):
    """The serializer registers customer_<tag>.proto under its own subject first, then
    the order with a reference to it; the deserializer reads by the record's id."""
    tag, pb = proto_modules
    serialize = ProtobufSerializer(pb.Order, client)
    deserialize = ProtobufDeserializer(pb.Order, schema_registry_client=client)
    values = [pb.Order(id=f"o-{i}", qty=i, customer={"name": f"c{i}", "tier": i % 3})
              for i in range(5)]
    assert _roundtrip(broker.bootstrap, topic_name, serialize, deserialize, values) == values
    latest = client.get_latest_version(f"{topic_name}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        (f"customer_{tag}.proto", f"customer_{tag}.proto", 1)]
    assert f"customer_{tag}.proto" in client.get_subjects()


def test_avro_reference_to_another_subject(broker, client, topic_name):
    """An Order whose ``ship`` field is the Address record registered under ``address``."""
    address = {"type": "record", "name": "Address", "namespace": "com.acme",
               "fields": [{"name": "city", "type": "string"}]}
    addr_subject = f"{topic_name}-address"
    addr_id = client.register_schema(addr_subject, Schema(json.dumps(address), "AVRO"))
    order = {"type": "record", "name": "Shipment", "namespace": "com.acme",
             "fields": [{"name": "id", "type": "string"},
                        {"name": "ship", "type": "com.acme.Address"}]}
    schema = Schema(json.dumps(order), "AVRO",
                    [SchemaReference("com.acme.Address", addr_subject, 1)])
    serialize = AvroSerializer(client, schema)
    deserialize = AvroDeserializer(client)
    values = [{"id": "s-1", "ship": {"city": "Lyon"}}, {"id": "s-2", "ship": {"city": "Oslo"}}]
    assert _roundtrip(broker.bootstrap, topic_name, serialize, deserialize, values) == values
    latest = client.get_latest_version(f"{topic_name}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("com.acme.Address", addr_subject, 1)]
    assert latest.schema_id != addr_id
    with pytest.raises(SchemaRegistryError) as refused:  # a referenced version stays
        client.delete_version(addr_subject, 1)
    assert (refused.value.http_status_code, refused.value.error_code) == (422, 42206)


# (type, v1, v2): v2 cannot read what v1 wrote, so BACKWARD refuses it
INCOMPATIBLE = [
    ("AVRO", json.dumps(ORDER_AVRO),
     json.dumps({**ORDER_AVRO, "fields": [*ORDER_AVRO["fields"],
                                          {"name": "region", "type": "string"}]})),
    ("JSON", json.dumps(ORDER_JSON),
     json.dumps({**ORDER_JSON, "properties": {**ORDER_JSON["properties"],
                                              "qty": {"type": "string"}}})),
    ("PROTOBUF", 'syntax = "proto3";\nmessage Order {\n  string id = 1;\n  int64 qty = 2;\n}\n',
     'syntax = "proto3";\nmessage Order {\n  string id = 1;\n  string qty = 2;\n}\n'),
]


@pytest.mark.parametrize(("kind", "v1", "v2"), INCOMPATIBLE, ids=[c[0] for c in INCOMPATIBLE])
def test_incompatible_change_refused_under_backward_accepted_under_none(client, topic_name,
                                                                       kind, v1, v2):
    subject = f"{topic_name}-value"
    first = client.register_schema(subject, Schema(v1, kind))
    assert client.set_compatibility(subject, "BACKWARD") == {"compatibility": "BACKWARD"}
    assert not client.test_compatibility(subject, Schema(v2, kind))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(v2, kind))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert client.get_versions(subject) == [1]
    assert client.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    second = client.register_schema(subject, Schema(v2, kind))
    assert second != first
    assert client.get_versions(subject) == [1, 2]
    assert client.get_latest_version(subject).schema_id == second
