"""Kafka Connect's REST API as a user drives it, against a real standalone ``spool connect``
worker and a real broker: every route's status code and body as Kafka Connect answers."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

import spool
from tests.helpers.connect_plugins import counting_config
from tests.helpers.connect_proc import ConnectProcess, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory) -> Iterator[ConnectProcess]:
    d = tmp_path_factory.mktemp("rest")
    w = ConnectProcess(d, {"bootstrap.servers": broker.bootstrap,
                           "offset.storage.file.filename": str(d / "offsets"),
                           "offset.flush.interval.ms": "300",
                           "value.converter.schemas.enable": "false",
                           "key.converter.schemas.enable": "false"},
                       standalone=True)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _state(w: ConnectProcess, name: str) -> tuple[str, list[str]]:
    s = w.call("GET", f"/connectors/{name}/status").body
    return s["connector"]["state"], [t["state"] for t in s["tasks"]]


def _wait_state(w: ConnectProcess, name: str, connector: str, tasks: list[str]) -> None:
    wait_until(lambda: _state(w, name) == (connector, tasks), 30,
               what=f"{name}: {connector} {tasks}")


def _counted(bootstrap: str, topic: str, until: int, tasks: int) -> dict[int, set[int]]:
    """Each task's numbers read from ``topic`` once every task has reached ``until``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{_uid()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen: dict[int, set[int]] = {i: set() for i in range(tasks)}
    try:
        deadline = time.monotonic() + 30
        while not all(len(s) >= until for s in seen.values()):
            assert time.monotonic() < deadline, {k: len(v) for k, v in seen.items()}
            m = c.poll(0.5)
            if m is not None and not m.error():
                v = json.loads(m.value())
                seen[v["task"]].add(v["seq"])
    finally:
        c.close()
    return seen


def test_root_answers_version_commit_and_cluster_id(worker, broker):
    a = worker.call("GET", "/")
    assert a.status == 200
    assert a.headers["Content-Type"].startswith("application/json")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster(request_timeout=10).result()
    assert a.body["version"] == spool.__version__
    assert isinstance(a.body["commit"], str)
    assert a.body["kafka_cluster_id"] == cluster.cluster_id


def test_connector_plugins(worker):
    a = worker.call("GET", "/connector-plugins")
    assert a.status == 200
    by_class = {p["class"]: p for p in a.body}
    for cls, kind in [("org.apache.kafka.connect.file.FileStreamSourceConnector", "source"),
                      ("org.apache.kafka.connect.file.FileStreamSinkConnector", "sink"),
                      ("io.debezium.connector.postgresql.PostgresConnector", "source"),
                      ("io.debezium.connector.jdbc.JdbcSinkConnector", "sink")]:
        assert by_class[cls]["type"] == kind
        assert by_class[cls]["version"]
    assert {p["type"] for p in a.body} == {"source", "sink"}
    assert [p["class"] for p in a.body] == sorted(p["class"] for p in a.body)
    everything = worker.call("GET", "/connector-plugins?connectorsOnly=false").body
    kinds = {(p["class"], p["type"]) for p in everything}
    assert {("org.apache.kafka.connect.json.JsonConverter", "converter"),
            ("org.apache.kafka.connect.json.JsonConverter", "header_converter"),
            ("org.apache.kafka.connect.storage.StringConverter", "converter"),
            ("org.apache.kafka.connect.transforms.RegexRouter", "transformation"),
            ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicate"),
            ("io.debezium.connector.postgresql.PostgresConnector", "source")} <= kinds
    config = worker.call("GET", "/connector-plugins/FileStreamSourceConnector/config")
    assert config.status == 200
    names = {k["name"] for k in config.body}
    assert {"file", "topic"} <= names
    assert {"name", "type", "required", "importance", "documentation"} <= set(config.body[0])
    missing = worker.call("GET", "/connector-plugins/NoSuchConnector/config")
    assert missing.status in (400, 404)
    assert "NoSuchConnector" in missing.body["message"]


def test_a_source_connectors_life(worker, broker):
    name, topic = f"count-{_uid()}", f"count-{_uid()}"
    config = counting_config(name, topic, 2, **{"poll.interval.ms": 50})
    created = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert created.status == 201, created.text
    assert created.headers["Location"].endswith(f"/connectors/{name}")
    assert created.body["name"] == name and created.body["type"] == "source"
    assert created.body["config"] == config
    again = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert (again.status, again.body) == (
        409, {"error_code": 409, "message": f"Connector {name} already exists"})

    status = worker.wait_running(name, 2)
    assert status["name"] == name and status["type"] == "source"
    assert status["connector"]["worker_id"] == worker.worker_id
    assert [(t["id"], t["worker_id"]) for t in status["tasks"]] == [
        (0, worker.worker_id), (1, worker.worker_id)]
    assert name in worker.call("GET", "/connectors").body
    info = worker.call("GET", f"/connectors/{name}").body
    assert info == {"name": name, "config": config, "type": "source",
                    "tasks": [{"connector": name, "task": 0}, {"connector": name, "task": 1}]}
    assert worker.call("GET", f"/connectors/{name}/config").body == config
    tasks = worker.call("GET", f"/connectors/{name}/tasks").body
    assert [t["id"] for t in tasks] == [{"connector": name, "task": i} for i in (0, 1)]
    assert [t["config"]["task.index"] for t in tasks] == ["0", "1"]
    assert all(t["config"]["topic"] == topic for t in tasks)
    one = worker.call("GET", f"/connectors/{name}/tasks/1/status")
    assert one.body == {"id": 1, "state": "RUNNING", "worker_id": worker.worker_id}
    no_task = worker.call("GET", f"/connectors/{name}/tasks/7/status")
    assert no_task.status == 404

    seen = _counted(broker.bootstrap, topic, 20, 2)
    assert all(set(range(20)) <= s for s in seen.values())
    topics = worker.call("GET", f"/connectors/{name}/topics")
    assert topics.status == 200
    assert topics.body == {name: {"topics": [topic]}}

    # offsets: committed every 300 ms; altering them needs the connector stopped
    offsets = wait_until(lambda: (o := worker.call("GET", f"/connectors/{name}/offsets").body)
                         and len(o["offsets"]) == 2 and o, 20, what="two offsets")
    by_task = {o["partition"]["task"]: o["offset"]["seq"] for o in offsets["offsets"]}
    assert set(by_task) == {0, 1} and min(by_task.values()) >= 0
    busy = worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [
        {"partition": {"task": 0}, "offset": {"seq": 5}}]})
    assert busy.status == 400

    # pause, resume, stop
    paused = worker.call("PUT", f"/connectors/{name}/pause")
    assert (paused.status, paused.text) == (202, "")
    _wait_state(worker, name, "PAUSED", ["PAUSED", "PAUSED"])
    assert worker.call("PUT", f"/connectors/{name}/resume").status == 202
    _wait_state(worker, name, "RUNNING", ["RUNNING", "RUNNING"])
    stopped = worker.call("PUT", f"/connectors/{name}/stop")
    assert (stopped.status, stopped.text) == (204, "")
    _wait_state(worker, name, "STOPPED", [])
    assert worker.call("GET", f"/connectors/{name}/tasks").body == []
    reset_topics = worker.call("PUT", f"/connectors/{name}/topics/reset")
    assert (reset_topics.status, reset_topics.text) == (202, "")
    assert worker.call("GET", f"/connectors/{name}/topics").body == {name: {"topics": []}}

    altered = worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [
        {"partition": {"task": 0}, "offset": {"seq": 999}}]})
    assert altered.status == 200, altered.text
    # Kafka's message for a connector that keeps no offsets of its own elsewhere
    assert altered.body["message"].startswith(
        "The Connect framework-managed offsets for this connector have been altered "
        "successfully.")
    after = worker.call("GET", f"/connectors/{name}/offsets").body["offsets"]
    assert {"partition": {"task": 0}, "offset": {"seq": 999}} in after
    empty_patch = worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": []})
    assert empty_patch.body == {"error_code": 400, "message": "Partitions / offsets need to "
                                "be provided for an alter offsets request"}
    reset = worker.call("DELETE", f"/connectors/{name}/offsets")
    assert reset.status == 200, reset.text
    assert reset.body["message"].startswith(
        "The Connect framework-managed offsets for this connector have been reset "
        "successfully.")
    assert worker.call("GET", f"/connectors/{name}/offsets").body == {"offsets": []}

    # reconfigure: PATCH merges (null removes), PUT replaces
    patched = worker.call("PATCH", f"/connectors/{name}/config",
                          {"batch.size": "3", "poll.interval.ms": None})
    assert patched.status == 200, patched.text
    want = {k: v for k, v in config.items() if k != "poll.interval.ms"} | {"batch.size": "3"}
    assert patched.body["config"] == want
    replaced = worker.call("PUT", f"/connectors/{name}/config", {**config, "tasks.max": "1"})
    assert replaced.status == 200, replaced.text
    assert replaced.body["config"]["tasks.max"] == "1"
    assert worker.call("GET", f"/connectors/{name}/config").body["tasks.max"] == "1"
    assert worker.call("PUT", f"/connectors/{name}/resume").status == 202
    worker.wait_running(name, 1)

    # restarts
    assert worker.call("POST", f"/connectors/{name}/restart").status == 204
    both = worker.call("POST", f"/connectors/{name}/restart?includeTasks=true")
    assert both.status == 202, both.text
    assert both.body["name"] == name and len(both.body["tasks"]) == 1
    assert both.body["connector"]["state"] in ("RESTARTING", "RUNNING")
    assert worker.call("POST", f"/connectors/{name}/tasks/0/restart").status == 204
    worker.wait_running(name, 1)

    deleted = worker.call("DELETE", f"/connectors/{name}")
    assert (deleted.status, deleted.text) == (204, "")
    assert worker.call("GET", f"/connectors/{name}").status == 404
    assert name not in worker.call("GET", "/connectors").body


def test_put_config_creates_with_201(worker):
    name = f"put-{_uid()}"
    a = worker.call("PUT", f"/connectors/{name}/config",
                    counting_config(name, f"t-{_uid()}", 1))
    assert a.status == 201, a.text
    assert a.headers["Location"].endswith(f"/connectors/{name}")
    worker.wait_running(name, 1)
    assert worker.call("DELETE", f"/connectors/{name}").status == 204


@pytest.mark.parametrize("initial, state", [("STOPPED", "STOPPED"), ("PAUSED", "PAUSED")])
def test_initial_state(worker, initial, state):
    name = f"init-{_uid()}"
    a = worker.call("POST", "/connectors", {"name": name, "initial_state": initial,
                                            "config": counting_config(name, "t", 1)})
    assert a.status == 201, a.text
    wait_until(lambda: _state(worker, name)[0] == state, 30, what=state)
    if state == "STOPPED":
        assert _state(worker, name) == ("STOPPED", [])
    assert worker.call("DELETE", f"/connectors/{name}").status == 204


def test_expand(worker):
    names = sorted(f"exp-{i}-{_uid()}" for i in range(2))
    for n in names:
        assert worker.call("POST", "/connectors", {
            "name": n, "config": counting_config(n, f"t-{n}", 1)}).status == 201
    try:
        for n in names:
            worker.wait_running(n, 1)
        both = worker.call("GET", "/connectors?expand=status&expand=info").body
        for n in names:
            assert set(both[n]) == {"status", "info"}
            assert both[n]["status"]["connector"]["state"] == "RUNNING"
            assert both[n]["info"]["config"]["name"] == n
        only = worker.call("GET", "/connectors?expand=info").body
        assert all(set(only[n]) == {"info"} for n in names)
    finally:
        for n in names:
            worker.call("DELETE", f"/connectors/{n}")


def test_a_sink_connectors_offsets(worker, broker, tmp_path: Path):
    name, topic = f"sink-{_uid()}", f"sink-{_uid()}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce(topic, json.dumps(f"line {i}").encode())
    assert p.flush(10) == 0
    out = tmp_path / "out.txt"
    a = worker.call("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink", "tasks.max": "1", "topics": topic,
        "file": str(out)}})
    assert a.status == 201, a.text
    assert a.body["type"] == "sink"
    wait_until(lambda: out.exists() and out.read_text().splitlines() == [
        "line 0", "line 1", "line 2"], 30, what="the sink's file")
    assert worker.call("PUT", f"/connectors/{name}/stop").status == 204
    _wait_state(worker, name, "STOPPED", [])
    offsets = wait_until(lambda: worker.call("GET", f"/connectors/{name}/offsets").body, 20)
    assert offsets == {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                    "offset": {"kafka_offset": 3}}]}
    partition = {"kafka_topic": topic, "kafka_partition": 0}
    altered = worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [
        {"partition": partition, "offset": {"kafka_offset": 1}}]})
    assert altered.status == 200, altered.text
    assert worker.call("GET", f"/connectors/{name}/offsets").body == {
        "offsets": [{"partition": partition, "offset": {"kafka_offset": 1}}]}
    assert worker.call("DELETE", f"/connectors/{name}/offsets").status == 200
    assert worker.call("GET", f"/connectors/{name}/offsets").body == {"offsets": []}
    # resumed from offset 0 (no committed offset, the consumer starts at the earliest)
    assert worker.call("PUT", f"/connectors/{name}/resume").status == 202
    wait_until(lambda: len(out.read_text().splitlines()) == 6, 30, what="the file again")
    assert worker.call("DELETE", f"/connectors/{name}").status == 204


def test_error_answers(worker):
    def err(a) -> tuple[int, int, str]:
        return a.status, a.body["error_code"], a.body["message"]

    assert err(worker.call("GET", "/nope")) == (404, 404, "HTTP 404 Not Found")
    assert err(worker.call("DELETE", "/connectors")) == (405, 405, "HTTP 405 Method Not Allowed")
    bad_json = worker.call("POST", "/connectors", data=b"{not json",
                           headers={"Content-Type": "application/json"})
    assert bad_json.status == 400 and bad_json.body["error_code"] == 400
    text = worker.call("POST", "/connectors", data=b"name=x",
                       headers={"Content-Type": "text/plain"})
    assert err(text) == (415, 415, "HTTP 415 Unsupported Media Type")
    mismatch = worker.call("PUT", "/connectors/a/config", {"name": "b", "tasks.max": "1"})
    assert err(mismatch) == (400, 400, "Connector name configuration (b) doesn't match "
                                       "connector name in the URL (a)")
    nested = worker.call("POST", "/connectors", {"name": "n", "config": {"x": {"y": 1}}})
    assert nested.status == 400
    no_config = worker.call("POST", "/connectors", {"name": "n"})
    assert no_config.status == 400
    bad_state = worker.call("POST", "/connectors", {
        "name": "n", "initial_state": "SLEEPING", "config": counting_config("n", "t", 1)})
    assert bad_state.status == 400
    missing = f"missing-{_uid()}"
    for method, path in [("GET", ""), ("GET", "/config"), ("GET", "/status"),
                         ("GET", "/tasks"), ("PUT", "/pause"), ("PUT", "/resume"),
                         ("PUT", "/stop"), ("POST", "/restart"), ("DELETE", ""),
                         ("GET", "/offsets"), ("DELETE", "/offsets"),
                         ("POST", "/tasks/0/restart")]:
        a = worker.call(method, f"/connectors/{missing}{path}")
        # Kafka's AbstractHerder.connectorStatus asks the status store only
        message = f"No status found for connector {missing}" if path == "/status" \
            else f"Connector {missing} not found"
        assert err(a) == (404, 404, message), (method, path, a.text)
    internal = worker.call("POST", f"/connectors/{missing}/tasks", [{"a": "b"}])
    assert internal.status in (400, 404)


NULL_VALUE = "Null value can not be supplied as the configuration value."


def err(a) -> tuple[int, int, str]:
    return a.status, a.body["error_code"], a.body["message"]


def test_a_null_config_value_is_refused(worker, broker):
    """A JSON null as a key's value is an error on that key (Kafka's AbstractHerder), in
    /config/validate and in create and update alike; nothing is created or changed."""
    name, topic = f"nul-{_uid()}", f"nul-{_uid()}"
    config = counting_config(name, topic, 1)
    for key in ("batch.size", "errors.tolerance", "not.a.key"):
        bad = {**config, key: None}
        validated = worker.call(
            "PUT", "/connector-plugins/CountingSourceConnector/config/validate", bad)
        assert validated.status == 200, validated.text
        errors = {c["value"]["name"]: c["value"]["errors"] for c in validated.body["configs"]
                  if c["value"]["errors"]}
        assert (validated.body["error_count"], errors) == (1, {key: [NULL_VALUE]})
        message = (f"Connector configuration is invalid and contains the following 1 "
                   f"error(s):\n{NULL_VALUE}\nYou can also find the above list of errors at "
                   "the endpoint `/connector-plugins/{connectorType}/config/validate`")
        created = worker.call("POST", "/connectors", {"name": name, "config": bad})
        assert err(created) == (400, 400, message), (key, created.text)
        put = worker.call("PUT", f"/connectors/{name}/config", bad)
        assert err(put) == (400, 400, message), (key, put.text)
        assert name not in worker.call("GET", "/connectors").body
    # an existing connector's config is kept as it was
    assert worker.call("POST", "/connectors", {"name": name, "config": config}).status == 201
    try:
        put = worker.call("PUT", f"/connectors/{name}/config", {**config, "topic": None})
        assert put.status == 400 and NULL_VALUE in put.body["message"], put.text
        assert worker.call("GET", f"/connectors/{name}/config").body == config
    finally:
        assert worker.call("DELETE", f"/connectors/{name}").status == 204
    assert err(worker.call("GET", f"/connectors/{name}/status")) == (
        404, 404, f"No status found for connector {name}")
