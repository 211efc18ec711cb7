"""The worker running sink connectors against a real broker: records converted and put
with their keys, values, headers and offsets; exactly pre_commit's answer committed for
group connect-<name>; RetriableError retried with the same records; rewinds asked in
open(); pause and resume; a failing put fails the task; a restarted task resumes from
the committed offsets."""

from __future__ import annotations

import json
import threading
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.connect import api
from spool.connect.herder import TaskId
from tests.connect.worker_plugins import new_run, running_worker, wait_until

SINK = "tests.connect.worker_plugins:RecordingSink"


def _topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(20)


def _produce(bootstrap: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}", value=json.dumps({"i": i}), partition=i % partitions,
                  headers=[("h", f"v{i}".encode())])
    assert p.flush(20) == 0


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def _start(worker, name: str, props: dict[str, str], state: str = "STARTED") -> list[TaskId]:
    worker.start_connector(name, props, state, lambda _n: None)
    ids = []
    for i, tc in enumerate(worker.connector_task_configs(name, int(props["tasks.max"]))):
        ids.append(TaskId(name, i))
        worker.start_task(ids[-1], props, tc, state)
    return ids


def _props(name: str, run: str, topic: str, **kw: str) -> dict[str, str]:
    return {"name": name, "connector.class": SINK, "tasks.max": "1", "run": run,
            "topics": topic, **kw}


def _values(run) -> list[int]:
    with run.lock:
        return [r.value["i"] for r in run.records]


def test_sink_puts_converted_records_and_commits_what_was_put(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 3)
    _produce(broker.bootstrap, topic_name, 60, 3)
    rid, run = new_run()
    name = f"sink-{uuid.uuid4().hex[:6]}"
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, name, _props(name, rid, topic_name, **{"tasks.max": "2"}))
        wait_until(lambda: len(_values(run)) == 60, what="60 records put")
        assert [tc.get("topics") for tc in run.started_with] == [topic_name, topic_name]
        assert sorted(_values(run)) == list(range(60))
        rec = next(r for r in run.records if r.value["i"] == 4)
        assert (rec.topic, rec.kafka_partition, rec.kafka_offset) == (topic_name, 1, 1)
        assert rec.key == "k4" and rec.key_schema.type == "string"
        assert rec.value_schema is None  # JsonConverter with schemas.enable=false
        assert [(h.key, h.value) for h in rec.headers] == [("h", "v4")]
        assert rec.timestamp_type == "CreateTime" and rec.timestamp > 0
        # (the second task's join may move partitions: each is opened at least once)
        assert {tp for ps in run.opened for tp in ps} == {(topic_name, p) for p in range(3)}
        wait_until(lambda: _committed(broker.bootstrap, f"connect-{name}", topic_name, 3)
                   == {0: 20, 1: 20, 2: 20}, what="offsets 20 committed")
        assert status.topics[name] == [topic_name]
        worker.stop_tasks(ids)
        assert all(status.task_state(t) == "UNASSIGNED" for t in ids)


def test_only_pre_commit_answer_is_committed_and_a_restart_resumes_there(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 2)
    _produce(broker.bootstrap, topic_name, 40, 2)
    rid, run = new_run()
    run.pre_commit = lambda offsets: {tp: min(o, 10) for tp, o in offsets.items()
                                      if tp[1] == 0}
    name = f"sink-{uuid.uuid4().hex[:6]}"
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, name, _props(name, rid, topic_name))
        wait_until(lambda: len(_values(run)) == 40)
        wait_until(lambda: _committed(broker.bootstrap, f"connect-{name}", topic_name, 2)
                   == {0: 10, 1: -1001}, what="only partition 0 at 10")
        worker.stop_tasks(ids)
        assert _committed(broker.bootstrap, f"connect-{name}", topic_name, 2) == \
            {0: 10, 1: -1001}
        run.records.clear()
        run.pre_commit = None
        ids = _start_task(worker, name, _props(name, rid, topic_name))
        # partition 0 again from offset 10 (records 20, 22, ...), partition 1 from the start
        wait_until(lambda: len(_values(run)) == 30)
        assert sorted(_values(run)) == sorted(list(range(20, 40, 2)) + list(range(1, 40, 2)))
        wait_until(lambda: _committed(broker.bootstrap, f"connect-{name}", topic_name, 2)
                   == {0: 20, 1: 20})
        worker.stop_tasks(ids)


def _start_task(worker, name: str, props: dict[str, str]) -> list[TaskId]:
    tc = worker.connector_task_configs(name, 1)[0]
    worker.start_task(TaskId(name, 0), props, tc, "STARTED")
    return [TaskId(name, 0)]


def test_retriable_put_is_retried_with_the_same_records(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 1)
    _produce(broker.bootstrap, topic_name, 25, 1)
    rid, run = new_run()
    run.put_errors = [api.RetriableError("database busy"), api.RetriableError("still busy")]
    name = f"sink-{uuid.uuid4().hex[:6]}"
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, name, _props(name, rid, topic_name))
        wait_until(lambda: len(_values(run)) == 25)
        assert _values(run) == list(range(25))  # each once, in order
        assert status.task_state(ids[0]) == "RUNNING"


def test_failing_put_fails_the_task(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 1)
    _produce(broker.bootstrap, topic_name, 5, 1)
    rid, run = new_run()
    run.put_errors = [ValueError("constraint violated")]
    name = f"sink-{uuid.uuid4().hex[:6]}"
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, name, _props(name, rid, topic_name))
        trace = status.wait_task(ids[0], "FAILED")
        assert "Exiting WorkerSinkTask due to unrecoverable exception." in trace
        assert "constraint violated" in trace
        assert _committed(broker.bootstrap, f"connect-{name}", topic_name, 1) == {0: -1001}


def test_rewind_in_open_starts_there(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 1)
    _produce(broker.bootstrap, topic_name, 30, 1)
    rid, run = new_run()
    run.on_open = lambda ctx, partitions: ctx.offset({tp: 17 for tp in partitions})
    name = f"sink-{uuid.uuid4().hex[:6]}"
    with running_worker(broker.bootstrap) as (worker, status):
        _start(worker, name, _props(name, rid, topic_name))
        wait_until(lambda: len(_values(run)) == 13)
        assert _values(run) == list(range(17, 30))


def test_pause_holds_records_until_resumed(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 2)
    _produce(broker.bootstrap, topic_name, 10, 2)
    rid, run = new_run()
    name = f"sink-{uuid.uuid4().hex[:6]}"
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, name, _props(name, rid, topic_name))
        wait_until(lambda: len(_values(run)) == 10)
        worker.set_target_state(name, "PAUSED")
        status.wait_task(ids[0], "PAUSED")
        status.wait_connector(name, "PAUSED")
        _produce(broker.bootstrap, topic_name, 10, 2, start=10)
        threading.Event().wait(1.0)
        assert len(_values(run)) == 10
        worker.set_target_state(name, "STARTED")
        status.wait_task(ids[0], "RUNNING")
        wait_until(lambda: len(_values(run)) == 20)
        assert sorted(_values(run)) == list(range(20))


def test_topics_regex_subscribes_to_matching_topics(broker, topic_name):
    for suffix in ("a", "b"):
        _topic(broker.bootstrap, f"{topic_name}-{suffix}", 1)
        _produce(broker.bootstrap, f"{topic_name}-{suffix}", 5, 1)
    _topic(broker.bootstrap, f"x{topic_name}-c", 1)
    _produce(broker.bootstrap, f"x{topic_name}-c", 5, 1)
    rid, run = new_run()
    name = f"sink-{uuid.uuid4().hex[:6]}"
    props = _props(name, rid, "")
    del props["topics"]
    props["topics.regex"] = f"{topic_name}-.*"
    with running_worker(broker.bootstrap) as (worker, status):
        _start(worker, name, props)
        wait_until(lambda: len(_values(run)) == 10)
        assert {r.topic for r in run.records} == {f"{topic_name}-a", f"{topic_name}-b"}


def test_tolerated_bad_records_go_to_the_dead_letter_queue(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        value = b"not json {" if i in (2, 4) else json.dumps({"i": i}).encode()
        p.produce(topic_name, key=f"k{i}", value=value, headers=[("h", b"x")])
    assert p.flush(20) == 0
    rid, run = new_run()
    name = f"sink-{uuid.uuid4().hex[:6]}"
    dlq = f"{topic_name}-dlq"
    with running_worker(broker.bootstrap) as (worker, status):
        _start(worker, name, _props(name, rid, topic_name, **{
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"}))
        wait_until(lambda: len(_values(run)) == 4)
        assert _values(run) == [0, 1, 3, 5]
        wait_until(lambda: _committed(broker.bootstrap, f"connect-{name}", topic_name, 1)
                   == {0: 6}, what="all six offsets committed")
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                      "auto.offset.reset": "earliest"})
        c.subscribe([dlq])
        got: list = []
        try:
            for _ in range(100):
                got.extend(m for m in c.consume(10, 0.2) if m.error() is None)
                if len(got) >= 2:
                    break
        finally:
            c.close()
        assert [(m.key(), m.value()) for m in got] == [(b"k2", b"not json {"),
                                                       (b"k4", b"not json {")]
        headers = dict(got[0].headers())
        assert headers["h"] == b"x"
        assert headers["__connect.errors.topic"] == topic_name.encode()
        assert headers["__connect.errors.offset"] == b"2"
        assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"


def test_task_pauses_a_partition_and_requests_commits(broker, topic_name):
    _topic(broker.bootstrap, topic_name, 2)
    _produce(broker.bootstrap, topic_name, 20, 2)
    rid, run = new_run()
    contexts: list = []

    def on_open(ctx, partitions):
        contexts.append(ctx)
        ctx.pause((topic_name, 1))
        ctx.request_commit()

    run.on_open = on_open
    name = f"sink-{uuid.uuid4().hex[:6]}"
    # offsets are committed on request only: the interval is longer than the test
    with running_worker(broker.bootstrap, **{"offset.flush.interval.ms": "600000"}) as (
            worker, status):
        _start(worker, name, _props(name, rid, topic_name))
        wait_until(lambda: len(_values(run)) >= 10)
        assert sorted(_values(run)) == list(range(0, 20, 2))  # partition 0 only
        assert contexts[0].assignment() == {(topic_name, 0), (topic_name, 1)}
        threading.Event().wait(0.5)
        assert len(_values(run)) == 10
        contexts[0].request_commit()
        wait_until(lambda: _committed(broker.bootstrap, f"connect-{name}", topic_name, 2)
                   == {0: 10, 1: -1001}, what="the requested commit")
        run.on_open = None
        run.resume = (topic_name, 1)  # resumed from put, on the task's thread
        _produce(broker.bootstrap, topic_name, 2, 2, start=20)
        wait_until(lambda: len(_values(run)) == 22)
        assert sorted(_values(run)) == list(range(22))
