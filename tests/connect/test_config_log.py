"""connect-configs: Kafka's record formats, the replayed image's rules, and a real topic
written by one ConfigLog and replayed by another (as a second worker would)."""

from __future__ import annotations

import json
import threading
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from spool.connect.config_log import (
    CONNECTOR,
    REMOVED,
    RESTART,
    TARGET_STATE,
    TASKS,
    Change,
    ConfigLog,
    ConfigState,
)
from spool.connect.herder import TaskId
from spool.connect.status_log import KafkaStatusStore


def _j(v) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode()


def test_tasks_become_current_only_at_their_commit():
    s = ConfigState()
    assert s.apply(b"connector-a", _j({"properties": {"tasks.max": "2"}}), 0) == \
        [Change(CONNECTOR, "a")]
    assert s.target_state("a") == "STARTED"
    assert s.apply(b"task-a-0", _j({"properties": {"x": "0"}}), 1) == []
    assert s.apply(b"task-a-1", _j({"properties": {"x": "1"}}), 2) == []
    assert s.task_count("a") == 0
    assert s.apply(b"commit-a", _j({"tasks": 2}), 3) == [Change(TASKS, "a")]
    assert s.task_ids("a") == [TaskId("a", 0), TaskId("a", 1)]
    assert s.task_config(TaskId("a", 1)) == {"x": "1"}
    assert s.offset == 4
    # a commit whose tasks were not all written: inconsistent, no tasks run
    s.apply(b"task-a-0", _j({"properties": {"x": "new"}}), 4)
    s.apply(b"commit-a", _j({"tasks": 2}), 5)
    assert "a" in s.inconsistent and s.task_count("a") == 0
    s.apply(b"task-a-0", _j({"properties": {"x": "0"}}), 6)
    s.apply(b"commit-a", _j({"tasks": 1}), 7)
    assert s.task_count("a") == 1 and "a" not in s.inconsistent
    # names with dashes: the task number is after the last one
    s.apply(b"connector-my-conn-2", _j({"properties": {}}), 8)
    s.apply(b"task-my-conn-2-0", _j({"properties": {"y": "1"}}), 9)
    s.apply(b"commit-my-conn-2", _j({"tasks": 1}), 10)
    assert s.task_config(TaskId("my-conn-2", 0)) == {"y": "1"}


def test_target_states_restarts_and_deletion():
    s = ConfigState()
    s.apply(b"connector-a", _j({"properties": {}}), 0)
    # Kafka 3.5+ writes STOPPED as state PAUSED + state.v2 STOPPED; older ones state only
    assert s.apply(b"target-state-a", _j({"state": "PAUSED", "state.v2": "STOPPED"}), 1) == \
        [Change(TARGET_STATE, "a")]
    assert s.target_state("a") == "STOPPED"
    s.apply(b"target-state-a", _j({"state": "PAUSED"}), 2)
    assert s.target_state("a") == "PAUSED"
    assert s.apply(b"restart-connector-a", _j({"include-tasks": True, "only-failed": False}),
                   3) == [Change(RESTART, "a", (True, False))]
    assert s.apply(b"restart-connector-zz", _j({"include-tasks": True}), 4) == []
    s.apply(b"task-a-0", _j({"properties": {}}), 5)
    s.apply(b"commit-a", _j({"tasks": 1}), 6)
    assert s.apply(b"connector-a", None, 7) == [Change(REMOVED, "a")]
    assert s.connectors == {} and s.tasks == {} and s.target_states == {}
    assert s.apply(b"connector-a", None, 8) == []
    assert s.apply(b"session-key", _j({"key": "x"}), 9) == [] and s.offset == 10
    assert s.apply(b"junk", b"not json", 10) == []


def test_a_second_reader_replays_what_the_first_wrote(broker):
    topic = f"connect-configs-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": broker.bootstrap}
    seen: list[Change] = []
    done = threading.Event()

    def on_change(changes: list[Change], offset: int) -> None:
        seen.extend(changes)
        if any(c.kind == RESTART for c in changes):
            done.set()

    writer = ConfigLog(conf, topic, replication_factor=1)
    writer.start()
    try:
        writer.put_connector_config("c", {"connector.class": "X", "tasks.max": "2"},
                                    target_state="PAUSED")
        writer.put_task_configs("c", [{"t": "0"}, {"t": "1"}])
        writer.put_target_state("c", "STOPPED")
        writer.put_connector_config("d", {"connector.class": "Y"})
        writer.remove_connector_config("d")
        writer.put_restart_request("c", True, True)
        writer.read_to_end()
        mine = writer.snapshot()
        assert mine.connectors == {"c": {"connector.class": "X", "tasks.max": "2"}}
        assert mine.target_state("c") == "STOPPED"

        reader = ConfigLog(conf, topic, on_change, replication_factor=1)
        reader.start()
        try:
            reader.read_to_end()
            assert done.wait(10)
            theirs = reader.snapshot()
            assert (theirs.connectors, theirs.tasks, theirs.target_states, theirs.offset) == \
                (mine.connectors, mine.tasks, mine.target_states, mine.offset)
            assert seen == [Change(TARGET_STATE, "c"), Change(CONNECTOR, "c"),
                            Change(TASKS, "c"), Change(TARGET_STATE, "c"),
                            Change(CONNECTOR, "d"), Change(REMOVED, "d"),
                            Change(RESTART, "c", (True, True))]
        finally:
            reader.stop()
    finally:
        writer.stop()

    # the records as Kafka writes them (compact JSON, string keys)
    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records = []
        while len(records) < 10:
            m = c.poll(10)
            assert m is not None
            if m.error() is None:
                records.append((m.key().decode(), m.value()))
    finally:
        c.close()
    assert records[:3] == [
        ("target-state-c", b'{"state":"PAUSED","state.v2":"PAUSED"}'),
        ("connector-c", b'{"properties":{"connector.class":"X","tasks.max":"2"}}'),
        ("task-c-0", b'{"properties":{"t":"0"}}')]
    assert records[4] == ("commit-c", b'{"tasks":2}')
    assert records[5] == ("target-state-c", b'{"state":"PAUSED","state.v2":"STOPPED"}')
    assert records[7:] == [("connector-d", None), ("target-state-d", None),
                           ("restart-connector-c", b'{"include-tasks":true,"only-failed":true}')]


def test_status_store_replays_and_ignores_a_zombies_older_generation(broker):
    topic = f"connect-status-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": broker.bootstrap}
    a = KafkaStatusStore(conf, topic, partitions=2, replication_factor=1)
    a.start()
    try:
        t = TaskId("c", 0)
        a.put_connector("c", {"state": "RUNNING", "trace": None, "worker_id": "w1:1",
                              "generation": 3})
        a.put_task(t, {"state": "RUNNING", "trace": None, "worker_id": "w2:1", "generation": 4})
        a.put_task(t, {"state": "UNASSIGNED", "trace": None, "worker_id": "w1:1",
                       "generation": 2})  # a zombie's late write
        a.put_topic("c", "orders")
        a.flush()
        a.read_to_end()
        b = KafkaStatusStore(conf, topic, partitions=2, replication_factor=1)
        b.start()
        try:
            b.read_to_end()
            for s in (a, b):
                assert s.connector("c")["state"] == "RUNNING"
                assert s.task(t) == {"state": "RUNNING", "trace": None, "worker_id": "w2:1",
                                     "generation": 4}
                assert s.topics("c") == ["orders"]
            a.remove_connector("c", 1)
            a.flush()
            b.read_to_end()
            assert b.connector("c") is None and b.tasks("c") == {} and b.topics("c") == []
        finally:
            b.stop()
    finally:
        a.stop()
