"""``?format=`` and ``?normalize=true`` against a real registry process and broker.

A Protobuf schema registered as ``.proto`` text over HTTP (as ``spool schemas register``
or curl do), importing another subject's ``.proto``, is what confluent-kafka 2.16.1's
``ProtobufSerializer`` (``use.latest.version``, no auto-registration) writes with and its
``ProtobufDeserializer`` reads with: both fetch ``?format=serialized`` and base64-decode
the answer. The serialized form itself (a FileDescriptorProto naming its imports by the
references' names), Avro's ``format=resolved`` (a schema with its references inlined,
standalone for fastavro) and ``normalize=true`` (the normalised text registered, the
same id for the same schema written otherwise) are checked on the wire.
"""

from __future__ import annotations

import base64
import json
import uuid

import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2

from tests.helpers.registry_proc import roundtrip

pytestmark = pytest.mark.timeout(120)

CUSTOMER = """syntax = "proto3";
package acme.s{tag};

// a comment the serialized form leaves out
message Customer {{
  string name = 1;
  int32 tier = 2;
}}
"""
ORDER = """syntax = "proto3";
package acme.s{tag};
import "customer_{tag}.proto";

message Order {{
  string id = 1;
  int64 qty = 2;
  Customer customer = 3;
  repeated string tags = 4;
}}
"""


@pytest.fixture
def protos(protoc, sr, subject):
    """customer_<tag>.proto and order_<tag>.proto registered as text over HTTP (the
    order with a reference to the customer's subject), and their compiled _pb2."""
    tag = uuid.uuid4().hex[:8]
    customer, order = CUSTOMER.format(tag=tag), ORDER.format(tag=tag)
    pb = protoc({f"customer_{tag}.proto": customer, f"order_{tag}.proto": order},
                f"order_{tag}_pb2")
    customer_subject = f"customer_{tag}.proto"  # the serializer's reference subject
    a = sr("POST", f"/subjects/{customer_subject}/versions",
           {"schema": customer, "schemaType": "PROTOBUF"})
    assert a.status == 200, a.body
    ref = {"name": f"customer_{tag}.proto", "subject": customer_subject, "version": 1}
    b = sr("POST", f"/subjects/{subject}-value/versions",
           {"schema": order, "schemaType": "PROTOBUF", "references": [ref]})
    assert b.status == 200, b.body
    return {"tag": tag, "pb": pb, "order": order, "customer": customer, "ref": ref,
            "topic": subject, "order_id": b.body["id"], "customer_id": a.body["id"]}


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.ParseFromString(base64.b64decode(text, validate=True))
    return fdp


def test_serialized_answers_a_descriptor_of_the_text(sr, protos):
    tag, order_id = protos["tag"], protos["order_id"]
    plain = sr("GET", f"/schemas/ids/{order_id}")
    assert plain.status == 200 and plain.body["schema"] == protos["order"]
    answers = [
        sr("GET", f"/schemas/ids/{order_id}?format=serialized").body,
        sr("GET", f"/subjects/{protos['topic']}-value/versions/latest?format=serialized").body,
        sr("GET", f"/subjects/{protos['topic']}-value/versions/1?format=SERIALIZED").body,
    ]
    for body in answers:
        assert body["schemaType"] == "PROTOBUF"
        assert body["references"] == [protos["ref"]]
        fdp = _descriptor(body["schema"])
        assert fdp.package == f"acme.s{tag}"
        assert list(fdp.dependency) == [f"customer_{tag}.proto"]
        assert [m.name for m in fdp.message_type] == ["Order"]
        assert [(f.name, f.number) for f in fdp.message_type[0].field] == [
            ("id", 1), ("qty", 2), ("customer", 3), ("tags", 4)]
        assert fdp.message_type[0].field[2].type_name == f".acme.s{tag}.Customer"
    text = sr("GET", f"/schemas/ids/{order_id}/schema?format=serialized")
    assert text.status == 200 and _descriptor(text.text).message_type[0].name == "Order"
    # the referenced subject's version, as the deserializer fetches it
    ref = sr("GET", f"/subjects/{protos['ref']['subject']}/versions/1?format=serialized")
    assert [m.name for m in _descriptor(ref.body["schema"]).message_type] == ["Customer"]
    # the default and unknown formats answer the text as registered
    for fmt in ("default", "ignore_extensions", "resolved", "nonsense"):
        assert sr("GET", f"/schemas/ids/{order_id}?format={fmt}").body["schema"] == \
            protos["order"]


def test_confluent_protobuf_serdes_over_a_text_registration(broker, registry, protos):
    """use.latest.version without auto-registration: the serializer writes with the id
    registered over HTTP; the deserializer parses the writer schema it fetches by id."""
    pb, topic = protos["pb"], protos["topic"]
    client = SchemaRegistryClient({"url": registry.url})
    serialize = ProtobufSerializer(pb.Order, client, {"auto.register.schemas": False,
                                                      "use.latest.version": True})
    deserialize = ProtobufDeserializer(pb.Order, {"use.latest.version": True},
                                       schema_registry_client=client)
    values = [pb.Order(id=f"o-{i}", qty=i * 10, customer={"name": f"c{i}", "tier": i % 3},
                       tags=[f"t{j}" for j in range(i)]) for i in range(5)]
    got = roundtrip(broker.bootstrap, topic, serialize, deserialize, values)
    assert [value for _, value in got] == values
    assert {int.from_bytes(raw[1:5], "big") for raw, _ in got} == {protos["order_id"]}
    # the client looked nothing up by registering: still one version each
    assert client.get_versions(f"{topic}-value") == [1]


def test_serializer_registration_and_text_share_an_id(registry, sr, protos):
    """The serializer's own lookup (auto.register off, no use.latest.version) sends the
    descriptor; it finds the version registered as text."""
    pb, topic = protos["pb"], protos["topic"]
    client = SchemaRegistryClient({"url": registry.url})
    serialize = ProtobufSerializer(pb.Order, client, {"auto.register.schemas": False})
    data = serialize(pb.Order(id="x"), SerializationContext(topic, MessageField.VALUE))
    assert int.from_bytes(data[1:5], "big") == protos["order_id"]


ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme",
           "fields": [{"name": "city", "type": "string"}]}
SHIPMENT = {"type": "record", "name": "Shipment", "namespace": "com.acme",
            "fields": [{"name": "to", "type": "com.acme.Address"},
                       {"name": "from", "type": ["null", "Address"], "default": None}]}


def test_avro_resolved_inlines_references(sr, subject):
    a = sr("POST", f"/subjects/{subject}-address/versions", {"schema": json.dumps(ADDRESS)})
    assert a.status == 200, a.body
    ref = {"name": "com.acme.Address", "subject": f"{subject}-address", "version": 1}
    b = sr("POST", f"/subjects/{subject}/versions",
           {"schema": json.dumps(SHIPMENT), "references": [ref]})
    assert b.status == 200, b.body
    resolved = sr("GET", f"/schemas/ids/{b.body['id']}?format=resolved").body
    assert resolved["references"] == [ref]
    doc = json.loads(resolved["schema"])
    assert doc["fields"][0]["type"] == {"type": "record", "name": "com.acme.Address",
                                        "fields": [{"name": "city", "type": "string"}]}
    assert doc["fields"][1]["type"] == ["null", "com.acme.Address"]  # defined once
    fastavro.parse_schema(doc)  # standalone: no named types given
    again = sr("GET", f"/subjects/{subject}/versions/1/schema?format=resolved")
    assert json.loads(again.text) == doc
    assert sr("GET", f"/schemas/ids/{b.body['id']}").body["schema"] == json.dumps(SHIPMENT)


def test_normalize_registers_the_normalised_text(sr, subject):
    spaced = json.dumps({"type": "record", "namespace": "com.acme", "name": "N",
                         "fields": [{"type": "int", "name": "a", "doc": "x"}]}, indent=2)
    a = sr("POST", f"/subjects/{subject}/versions?normalize=true", {"schema": spaced})
    assert a.status == 200, a.body
    stored = sr("GET", f"/subjects/{subject}/versions/1").body["schema"]
    assert stored == ('{"name":"com.acme.N","type":"record",'
                      '"fields":[{"name":"a","type":"int","doc":"x"}]}')
    # the text as sent, and the stored one, are the same schema: its id, no new version
    for text in (spaced, stored):
        assert sr("POST", f"/subjects/{subject}/versions?normalize=true",
                  {"schema": text}).body == {"id": a.body["id"]}
        assert sr("POST", f"/subjects/{subject}?normalize=true",
                  {"schema": text}).body["version"] == 1
    assert sr("GET", f"/subjects/{subject}/versions").body == [1]
    js = json.dumps({"type": "object", "properties": {"b": {"type": "string"},
                                                      "a": {"type": "integer"}}}, indent=1)
    j = sr("POST", f"/subjects/{subject}-json/versions?normalize=true",
           {"schema": js, "schemaType": "JSON"})
    assert j.status == 200, j.body
    assert sr("GET", f"/subjects/{subject}-json/versions/1/schema").text == (
        '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}')
    bad = sr("POST", f"/subjects/{subject}-bad/versions?normalize=true", {"schema": "{"})
    assert (bad.status, bad.body["error_code"]) == (422, 42201)
