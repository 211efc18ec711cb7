"""KIP-618 zombie fencing: the config topic's ``tasks-fencing-<connector>`` records as
Kafka's ClusterConfigState reads them, ``fencing.fence_producers`` against a real broker's
transaction coordinator, and a real distributed ``spool connect`` worker with
exactly-once sources fencing a shrunk connector's old task generation: a producer with a
transactional id of that generation (a zombie: a confluent-kafka transactional Producer
here) holding an open transaction cannot commit it; a commit left without its fencing
(written by the test, as a leader that died in between leaves it) is fenced by the
leader's reconcile loop before the task runs again."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from spool.connect.config_log import FENCED, TASKS, Change, ConfigState, dumps
from spool.connect.fencing import FencingError, fence_producers, transactional_ids
from tests.helpers.connect_plugins import counting_config
from tests.helpers.connect_proc import ConnectProcess, distributed_props, wait_until


def _apply(state: ConfigState, key: str, value: object) -> list[Change]:
    return state.apply(key.encode(), None if value is None else dumps(value), state.offset)


def test_a_commit_is_pending_fencing_until_its_task_count_record():
    s = ConfigState()
    _apply(s, "connector-c", {"properties": {"name": "c"}})
    assert "c" not in s.pending_fencing and s.task_count_records == {}
    _apply(s, "task-c-0", {"properties": {"a": "1"}})
    assert _apply(s, "commit-c", {"tasks": 1}) == [Change(TASKS, "c")]
    assert "c" in s.pending_fencing
    assert _apply(s, "tasks-fencing-c", {"task-count": 1}) == [Change(FENCED, "c")]
    assert "c" not in s.pending_fencing and s.task_count_records == {"c": 1}
    _apply(s, "commit-c", {"tasks": 0})  # a new generation needs fencing again
    assert "c" in s.pending_fencing and s.task_count_records == {"c": 1}
    assert _apply(s, "tasks-fencing-c", "not a record") == []
    _apply(s, "connector-c", None)  # deleted: nothing left of it
    assert "c" not in s.pending_fencing and s.task_count_records == {}


def test_transactional_ids_are_the_tasks_producers():
    assert transactional_ids("g", "c", 3) == ["g-c-0", "g-c-1", "g-c-2"]
    assert transactional_ids("g", "c", 0) == []


def _zombie(bootstrap: str, txn_id: str, topic: str) -> Producer:
    """A producer of an old task generation with an open transaction holding one record."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, key=b"zombie", value=b"zombie")
    assert p.flush(30) == 0
    return p


def _values(bootstrap: str, topic: str, *, committed: bool) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    out = []
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        while (m := c.poll(3)) is not None:
            if m.error() is None:
                out.append(m.value())
    finally:
        c.close()
    return out


def _assert_fenced(p: Producer) -> None:
    with pytest.raises(KafkaException) as e:
        p.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), e.value


def test_fence_producers_fences_an_open_transaction(broker, topic_name):
    txn_id = f"{topic_name}-txn"
    p = _zombie(broker.bootstrap, txn_id, topic_name)
    try:
        asyncio.run(fence_producers([broker.bootstrap], [txn_id, f"{txn_id}-unused"]))
        _assert_fenced(p)
    finally:
        del p
    assert _values(broker.bootstrap, topic_name, committed=True) == []


def test_fence_producers_names_what_it_could_not_fence():
    with pytest.raises(FencingError, match="x-0"):
        asyncio.run(fence_producers(["127.0.0.1:1"], ["x-0"], timeout_s=0.5))


def _running(w: ConnectProcess, name: str, tasks: int) -> dict | None:
    a = w.call("GET", f"/connectors/{name}/status")
    s = a.body if a.status == 200 else None
    if (s and s["connector"]["state"] == "RUNNING" and len(s["tasks"]) == tasks
            and all(t["state"] == "RUNNING" for t in s["tasks"])):
        return s
    return None


def _config_records(bootstrap: str, topic: str) -> list[tuple[str, object]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    out = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while (m := c.poll(3)) is not None:
            if m.error() is None:
                out.append((m.key().decode(), None if m.value() is None
                            else json.loads(m.value())))
    finally:
        c.close()
    return out


def test_a_shrunk_connector_fences_its_old_task_generation(broker, tmp_path):
    group = f"connect-{uuid.uuid4().hex[:8]}"
    props = distributed_props(broker.bootstrap, group, **{
        "exactly.once.source.support": "enabled"})
    w = ConnectProcess(tmp_path / "w", props, name="w")
    name, topic = "eos", f"{group}-out"
    zombie = None
    try:
        w.start()
        r = w.call("POST", "/connectors", {"name": name, "config": counting_config(
            name, topic, 3)})
        assert r.status == 201, r.body
        wait_until(lambda: _running(w, name, 3), 60, what="3 tasks running")
        assert w.call("PUT", f"/connectors/{name}/stop").status == 204
        wait_until(lambda: w.call("GET", f"/connectors/{name}/status").body["tasks"] == [],
                   60, what="stopped")

        # task 2 of the old generation lives on as a zombie with an open transaction
        zombie = _zombie(broker.bootstrap, f"{group}-{name}-2", topic)
        r = w.call("PUT", f"/connectors/{name}/config", counting_config(
            name, topic, 1))
        assert r.status == 200, r.body
        assert w.call("PUT", f"/connectors/{name}/resume").status == 202
        wait_until(lambda: _running(w, name, 1), 60, what="1 task running")
        _assert_fenced(zombie)

        # a commit left without its fencing (a leader that died in between): the leader's
        # reconcile loop fences it, then the task runs again
        (task,) = w.call("GET", f"/connectors/{name}/tasks").body
        p = Producer({"bootstrap.servers": broker.bootstrap})
        p.produce(f"{group}-configs", key=f"task-{name}-0".encode(),
                  value=dumps({"properties": task["config"]}))
        p.produce(f"{group}-configs", key=f"commit-{name}".encode(), value=dumps({"tasks": 1}))
        assert p.flush(30) == 0
        wait_until(lambda: [k for k, _ in _config_records(broker.bootstrap, f"{group}-configs")
                            ].count(f"tasks-fencing-{name}") == 3, 60, what="fenced again")
        wait_until(lambda: _running(w, name, 1), 60, what="1 task running again")
    finally:
        w.kill()
    assert b"zombie" not in _values(broker.bootstrap, topic, committed=True)

    # Kafka's records: each generation that ran was fenced (recorded) after its commit
    records = _config_records(broker.bootstrap, f"{group}-configs")
    ours = [(k, v) for k, v in records if k in (f"commit-{name}", f"tasks-fencing-{name}")]
    assert ours == [(f"commit-{name}", {"tasks": 3}), (f"tasks-fencing-{name}", {"task-count": 3}),
                    (f"commit-{name}", {"tasks": 0}), (f"commit-{name}", {"tasks": 1}),
                    (f"tasks-fencing-{name}", {"task-count": 1}),
                    (f"commit-{name}", {"tasks": 1}), (f"tasks-fencing-{name}", {"task-count": 1})]
