"""Bad connector configurations (an unknown class, a missing required key, values of the
wrong type) are refused by ``PUT /connector-plugins/{p}/config/validate`` (200, the errors
in Kafka's ConfigInfos) and by create (400, Kafka's ``Connector configuration is invalid
and contains the following N error(s):`` message), and nothing starts: the connector is
not listed, has no status, writes nothing; in distributed mode nothing reaches the config
topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.helpers.connect_plugins import counting_config
from tests.helpers.connect_proc import ConnectProcess, distributed_props

COUNTING = "tests.helpers.connect_plugins:CountingSourceConnector"
INVALID = "Connector configuration is invalid and contains the following {} error(s):"


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory) -> Iterator[ConnectProcess]:
    d = tmp_path_factory.mktemp("bad-configs")
    w = ConnectProcess(d, {"bootstrap.servers": broker.bootstrap,
                           "offset.storage.file.filename": str(d / "offsets")},
                       standalone=True)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def _errors(infos: dict) -> dict[str, list[str]]:
    return {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]
            if c["value"]["errors"]}


def _uid() -> str:
    return uuid.uuid4().hex[:8]


CASES = [
    # (plugin in the URL, config, {key: an error message it must have})
    pytest.param(
        "NoSuchConnector",
        {"connector.class": "com.example.NoSuchConnector", "tasks.max": "1"},
        {"connector.class": "Failed to find any class that implements Connector and which "
                            "name matches com.example.NoSuchConnector"},
        id="unknown-class"),
    pytest.param(
        "CountingSourceConnector",
        {"connector.class": COUNTING, "tasks.max": "1"},
        {"topic": 'Missing required configuration "topic" which has no default value.'},
        id="missing-required"),
    pytest.param(
        "FileStreamSourceConnector",
        {"connector.class": "FileStreamSource", "tasks.max": "1", "file": "/dev/null"},
        {"topic": 'Missing required configuration "topic" which has no default value.'},
        id="missing-required-shipped"),
    pytest.param(
        "CountingSourceConnector",
        {"connector.class": COUNTING, "tasks.max": "abc", "topic": "t"},
        {"tasks.max": "Invalid value abc for configuration tasks.max: Not a number of type "
                      "INT"},
        id="wrong-type-common"),
    pytest.param(
        "CountingSourceConnector",
        {"connector.class": COUNTING, "tasks.max": "1", "topic": "t", "batch.size": "ten",
         "errors.tolerance": "some"},
        {"batch.size": "Invalid value ten for configuration batch.size: Not a number of "
                       "type INT",
         "errors.tolerance": "Invalid value some for configuration errors.tolerance: String "
                             "must be one of: none, all"},
        id="wrong-types-two"),
]


@pytest.mark.parametrize("plugin, config, expected", CASES)
def test_validate_reports_the_errors(worker, plugin, config, expected):
    a = worker.call("PUT", f"/connector-plugins/{plugin}/config/validate", config)
    assert a.status == 200, a.text
    errors = _errors(a.body)
    for key, message in expected.items():
        assert any(message in e for e in errors.get(key, [])), (key, errors)
    assert a.body["error_count"] == sum(len(v) for v in errors.values()) >= len(expected)
    # every definition is reported, in Kafka's shape
    names = {c["definition"]["name"] for c in a.body["configs"]}
    assert {"name", "connector.class", "tasks.max"} <= names
    assert {"Common"} <= set(a.body["groups"])


@pytest.mark.parametrize("plugin, config, expected", CASES)
def test_create_refuses_it_and_nothing_starts(worker, broker, plugin, config, expected):
    name = f"bad-{_uid()}"
    topic = config.get("topic")
    a = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert a.status == 400, a.text
    assert a.body["error_code"] == 400
    message = a.body["message"]
    validated = worker.call("PUT", f"/connector-plugins/{plugin}/config/validate",
                            {**config, "name": name})
    assert message.startswith(INVALID.format(validated.body["error_count"]) + "\n")
    for m in expected.values():
        assert m in message
    # PUT /connectors/{name}/config refuses it the same way
    b = worker.call("PUT", f"/connectors/{name}/config", config)
    assert (b.status, b.body["message"]) == (400, message)
    assert name not in worker.call("GET", "/connectors").body
    assert worker.call("GET", f"/connectors/{name}/status").status == 404
    assert worker.call("GET", f"/connectors/{name}").body == {
        "error_code": 404, "message": f"Connector {name} not found"}
    if topic:
        assert _records(broker.bootstrap, topic) == 0


def test_a_valid_config_validates_without_errors(worker):
    a = worker.call("PUT", "/connector-plugins/CountingSourceConnector/config/validate",
                    counting_config("ok", "t", 2))
    assert a.status == 200
    assert a.body["error_count"] == 0, _errors(a.body)


def test_validate_refuses_a_class_other_than_the_urls(worker):
    a = worker.call("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate",
                    {"connector.class": "FileStreamSource", "topic": "t"})
    assert a.status == 400
    assert a.body == {"error_code": 400, "message": "Included connector type "
                      "FileStreamSource does not match request type FileStreamSinkConnector"}


def _records(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{_uid()}"})
    try:
        md = c.list_topics(timeout=10)
        if topic not in md.topics:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in md.topics[topic].partitions)
    finally:
        c.close()


def _config_keys(bootstrap: str, topic: str) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{_uid()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        c.assign([TopicPartition(topic, 0, 0)])
        keys: list[str] = []
        while end and len(keys) < end:
            m = c.poll(5)
            assert m is not None, "the config topic could not be read"
            if not m.error():
                keys.append(m.key().decode())
        return keys
    finally:
        c.close()


def test_distributed_create_writes_nothing_to_the_config_topic(broker, tmp_path):
    group = f"bad-{_uid()}"
    w = ConnectProcess(tmp_path, distributed_props(broker.bootstrap, group))
    try:
        w.start()
        bad = w.call("POST", "/connectors", {"name": "bad", "config": {
            "connector.class": COUNTING, "tasks.max": "x"}})
        assert bad.status == 400
        assert bad.body["message"].startswith(INVALID.format(2) + "\n")
        good = w.call("POST", "/connectors", {"name": "good", "config": counting_config(
            "good", f"{group}-n", 1)})
        assert good.status == 201, good.text
        w.wait_running("good", 1)
        keys = _config_keys(broker.bootstrap, f"{group}-configs")
        assert "connector-good" in keys
        assert not [k for k in keys if k.endswith("-bad") or "-bad-" in k]
        assert w.call("GET", "/connectors").body == ["good"]
    finally:
        w.stop()
