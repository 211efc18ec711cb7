"""Converters and transforms in the runtime: a real standalone ``spool connect`` worker
runs a source whose records go through a transformation chain (InsertField, MaskField,
RegexRouter) and the AvroConverter into a real broker and a real ``spool registry``;
confluent-kafka's own AvroDeserializer reads what landed. A connector whose transforms
are wrong is refused by the REST API with Kafka's messages, and nothing starts."""

from __future__ import annotations

import decimal
import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spool.connect import api, data
from spool.connect.data import Struct
from tests.helpers.connect_proc import ConnectProcess, wait_until
from tests.helpers.registry_proc import RegistryProcess, call

ROW = data.struct("shop.Payment", [("id", data.INT64), ("secret", data.STRING),
                                   ("price", data.decimal_schema(2))])
COUNT = 30


class PaymentsTask(api.SourceTask):
    """``COUNT`` payments as structs to ``topic``, then nothing."""

    def start(self, props: dict[str, str]) -> None:
        self.topic = props["topic"]
        last = self.context.offset_storage_reader.offset({"p": 0})
        self.next = int(last["n"]) + 1 if last else 0
        self.stopped = threading.Event()

    def poll(self) -> list[api.SourceRecord]:
        if self.next >= COUNT:
            self.stopped.wait(0.2)
            return []
        out = []
        for n in range(self.next, min(self.next + 10, COUNT)):
            out.append(api.SourceRecord(
                self.topic, None, data.STRING, f"k{n}", ROW,
                Struct(ROW, {"id": n, "secret": f"card-{n}",
                             "price": decimal.Decimal(n).scaleb(-2)}),
                source_partition={"p": 0}, source_offset={"n": n}))
        self.next += len(out)
        return out

    def stop(self) -> None:
        self.stopped.set()


class PaymentsConnector(api.SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[api.Task]:
        return PaymentsTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef().define("topic", api.STRING, importance=api.HIGH)


@pytest.fixture
def worker(broker, registry: RegistryProcess, tmp_path) -> Iterator[ConnectProcess]:
    w = ConnectProcess(tmp_path, {
        "bootstrap.servers": broker.bootstrap,
        "offset.storage.file.filename": str(tmp_path / "offsets"),
        "offset.flush.interval.ms": "500",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
    }, standalone=True)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def consume(bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[tuple[bytes, bytes]] = []
    try:
        def enough() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append((msg.key(), msg.value()))
            return len(got) >= n
        wait_until(enough, 60)
    finally:
        consumer.close()
    return got


def test_transforms_and_avro_in_a_running_worker(broker, registry: RegistryProcess,
                                                 worker: ConnectProcess) -> None:
    base = f"pay-{uuid.uuid4().hex[:8]}"
    config = {
        "connector.class": f"{__name__}:PaymentsConnector", "tasks.max": "1",
        "topic": f"{base}-raw",
        "transforms": "origin,mask,route",
        "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.origin.static.field": "origin", "transforms.origin.static.value": "spool",
        "transforms.origin.topic.field": "source_topic",
        "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
        "transforms.mask.fields": "secret",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)-raw", "transforms.route.replacement": "$1-avro",
    }
    a = worker.call("POST", "/connectors", {"name": base, "config": config})
    assert a.status == 201, a.body
    worker.wait_running(base, 1)
    got = consume(broker.bootstrap, f"{base}-avro", COUNT)
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    ctx = SerializationContext(f"{base}-avro", MessageField.VALUE)
    values = [deserialize(v, ctx) for _, v in got]
    assert [k for k, _ in got] == [f"k{n}".encode() for n in range(COUNT)]
    assert values == [{"id": n, "secret": "", "price": decimal.Decimal(n).scaleb(-2),
                       "source_topic": f"{base}-raw", "origin": "spool"}
                      for n in range(COUNT)]
    assert call(registry.url, "GET", f"/subjects/{base}-avro-value/versions").body == [1]


def test_bad_transforms_are_refused(worker: ConnectProcess) -> None:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    config = {"connector.class": f"{__name__}:PaymentsConnector", "tasks.max": "1",
              "topic": "t", "transforms": "nope,mask",
              "transforms.nope.type": "com.example.NoSuchTransform",
              "transforms.mask.type": "MaskField$Value"}
    a = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert a.status == 400, a.body
    assert a.body["message"].startswith("Connector configuration is invalid")
    assert "Invalid value com.example.NoSuchTransform for configuration " \
           "transforms.nope.type: Class com.example.NoSuchTransform could not be found." \
           in a.body["message"]
    assert 'Missing required configuration "transforms.mask.fields" which has no default ' \
           "value." in a.body["message"]
    assert worker.call("GET", f"/connectors/{name}").status == 404
