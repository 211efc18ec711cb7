"""The worker running source connectors against a real broker: records produced with
their keys, values and headers, offsets committed and resumed from, commit_record /
commit called, pause and resume, failures reported with their traces, a stuck task
abandoned after the graceful timeout."""

from __future__ import annotations

import json
import threading
import uuid

from confluent_kafka import Consumer, TopicPartition

from spool.connect.herder import TaskId
from tests.connect.worker_plugins import new_run, running_worker, wait_until

SOURCE = "tests.connect.worker_plugins:CountingSource"


def _props(name: str, run: str, topic: str, **kw: str) -> dict[str, str]:
    return {"name": name, "connector.class": SOURCE, "tasks.max": "1", "run": run,
            "topic": topic, **kw}


def _start(worker, name: str, props: dict[str, str], state: str = "STARTED") -> list[TaskId]:
    worker.start_connector(name, props, state, lambda _n: None)
    configs = worker.connector_task_configs(name, int(props["tasks.max"]))
    ids = []
    for i, tc in enumerate(configs):
        tid = TaskId(name, i)
        worker.start_task(tid, props, tc, state)
        ids.append(tid)
    return ids


def _read_all(bootstrap: str, topic: str, count: int, **conf: str) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    out: list = []
    try:
        deadline_polls = 0
        while len(out) < count and deadline_polls < 200:
            batch = c.consume(500, 0.2)
            out.extend(m for m in batch if m.error() is None)
            deadline_polls = 0 if batch else deadline_polls + 1
    finally:
        c.close()
    return out


def _end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    try:
        md = c.list_topics(topic, timeout=10)
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in md.topics[topic].partitions)
    finally:
        c.close()


def test_source_records_offsets_and_commit_callbacks(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, "src", _props("src", rid, topic_name, limit="100", batch="7"))
        assert status.wait_connector("src", "RUNNING") is None
        status.wait_task(ids[0], "RUNNING")
        msgs = _read_all(broker.bootstrap, topic_name, 100)
        assert [json.loads(m.value()) for m in msgs] == [{"task": 0, "n": n}
                                                         for n in range(100)]
        assert [m.key() for m in msgs] == [f"0-{n}".encode() for n in range(100)]
        assert [m.headers() for m in msgs[:2]] == [[("n", b"0")], [("n", b"1")]]
        wait_until(lambda: worker.offsets.get("src", {"task": 0}) == {"n": 99},
                   what="offset n=99 committed")
        wait_until(lambda: len(run.committed) == 100 and run.commits > 0)
        meta = [md for _, md in run.committed]
        assert [(md.topic, md.offset) for md in meta] == [(topic_name, n) for n in range(100)]
        assert status.topics["src"] == [topic_name]
        worker.stop_tasks(ids)
        assert status.task_state(ids[0]) == "UNASSIGNED"
        worker.stop_connector("src")
        assert status.connectors["src"][-1][0] == "UNASSIGNED"
        assert worker.tasks() == set() and worker.connectors() == set()


def test_restarted_task_resumes_after_the_committed_offset(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        props = _props("src", rid, topic_name, limit="50", batch="5", **{"tasks.max": "2"})
        ids = _start(worker, "src", props)
        assert len(ids) == 2
        wait_until(lambda: all(worker.offsets.get("src", {"task": i}) == {"n": 49}
                               for i in range(2)), what="both tasks' offsets")
        worker.stop_tasks(ids)
        props["limit"] = "80"
        ids = _start_tasks_again(worker, "src", props)
        wait_until(lambda: worker.offsets.get("src", {"task": 1}) == {"n": 79})
        msgs = _read_all(broker.bootstrap, topic_name, 160)
        by_task: dict[int, list[int]] = {0: [], 1: []}
        for m in msgs:
            v = json.loads(m.value())
            by_task[v["task"]].append(v["n"])
        assert {t: sorted(ns) for t, ns in by_task.items()} == {0: list(range(80)),
                                                               1: list(range(80))}
        worker.stop_tasks(ids)


def _start_tasks_again(worker, name: str, props: dict[str, str]) -> list[TaskId]:
    ids = []
    for i, tc in enumerate(worker.connector_task_configs(name, int(props["tasks.max"]))):
        tc.update(limit=props["limit"])
        ids.append(TaskId(name, i))
        worker.start_task(ids[-1], props, tc, "STARTED")
    return ids


def test_pause_stops_polling_and_resume_continues(broker, topic_name):
    rid, _ = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, "src", _props("src", rid, topic_name, batch="5"))
        wait_until(lambda: _end_offset(broker.bootstrap, topic_name) > 20)
        worker.set_target_state("src", "PAUSED")
        status.wait_connector("src", "PAUSED")
        status.wait_task(ids[0], "PAUSED")
        first = _end_offset(broker.bootstrap, topic_name)
        threading.Event().wait(0.5)
        assert _end_offset(broker.bootstrap, topic_name) == first
        worker.set_target_state("src", "STARTED")
        status.wait_connector("src", "RUNNING")
        status.wait_task(ids[0], "RUNNING")
        wait_until(lambda: _end_offset(broker.bootstrap, topic_name) > first + 20)


def test_retriable_poll_error_is_retried(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, "src", _props("src", rid, topic_name, limit="30", batch="10", **{
            "retry.at": "15"}))
        wait_until(lambda: worker.offsets.get("src", {"task": 0}) == {"n": 29})
        assert not run.retry_once
        assert [json.loads(m.value())["n"] for m in _read_all(
            broker.bootstrap, topic_name, 30)] == list(range(30))
        assert [s for s, _ in status.tasks[ids[0]]] == ["RUNNING"]


def test_task_and_connector_failures_are_reported_with_traces(broker, topic_name):
    rid, _ = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        ids = _start(worker, "src", _props("src", rid, topic_name, batch="5", **{
            "fail.at": "12"}))
        trace = status.wait_task(ids[0], "FAILED")
        assert trace and "task failed at 12" in trace and "ConnectError" in trace
        assert ids[0] in worker.tasks()  # failed tasks stay until the herder stops them
        # records of the polls before the failure were delivered and their offsets committed
        wait_until(lambda: worker.offsets.get("src", {"task": 0}) == {"n": 9})
        worker.stop_tasks(ids)
        assert status.task_state(ids[0]) == "FAILED"

        worker.start_connector("bad", _props("bad", rid, topic_name, **{
            "connector.fail": "start"}), "STARTED", lambda _n: None)
        trace = status.wait_connector("bad", "FAILED")
        assert trace and "connector refused to start" in trace


def test_connector_task_configs_and_reconfiguration(broker, topic_name):
    rid, _ = new_run()
    asked: list[str] = []
    with running_worker(broker.bootstrap) as (worker, status):
        props = _props("src", rid, topic_name, **{"tasks.max": "3"})
        worker.start_connector("src", props, "STARTED", asked.append)
        configs = worker.connector_task_configs("src", 3)
        assert [c["task.id"] for c in configs] == ["0", "1", "2"]
        assert {c["task.class"] for c in configs} == {
            "tests.connect.worker_plugins.CountingSourceTask"}
        worker._connector("src").connector.context.request_task_reconfiguration()
        assert asked == ["src"]
        worker.stop_connector("src")
        props["tasks.generated"] = "4"
        worker.start_connector("src", props, "STARTED", asked.append)
        try:
            worker.connector_task_configs("src", 3)
        except Exception as e:  # Kafka's TooManyTasksException message
            assert "has generated 4 tasks, which is greater than 3" in str(e)
        else:
            raise AssertionError("4 task configs for tasks.max=3 accepted")
        assert "has generated 4 tasks" in status.wait_connector("src", "FAILED")


def test_stuck_task_is_abandoned_after_the_graceful_timeout(broker, topic_name):
    rid, run = new_run()
    run.block_stop = threading.Event()
    with running_worker(broker.bootstrap, **{
            "task.shutdown.graceful.timeout.ms": "300"}) as (worker, status):
        props = _props("stuck", rid, topic_name)
        props["connector.class"] = "tests.connect.worker_plugins:StubbornSource"
        ids = _start(worker, "stuck", props)
        status.wait_task(ids[0], "RUNNING")
        worker.stop_tasks(ids)  # returns after 0.3 s although poll() still blocks
        assert worker.tasks() == set()
        run.block_stop.set()
        wait_until(lambda: not any(t.is_alive() for t in threading.enumerate()
                                   if t.name == f"connect-task-{ids[0]}"))
        assert status.task_state(ids[0]) == "RUNNING"  # the abandoned task reports nothing


def test_transformations_route_and_filter_records(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        _start(worker, "routed", _props("routed", rid, topic_name, limit="10", **{
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-routed"}))
        msgs = _read_all(broker.bootstrap, f"{topic_name}-routed", 10)
        assert [json.loads(m.value())["n"] for m in msgs] == list(range(10))
        rid2, run2 = new_run()
        _start(worker, "dropped", _props("dropped", rid2, f"{topic_name}-x", limit="10", **{
            "transforms": "drop",
            "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter"}))
        # filtered records are acknowledged at once: commit_record(record, None), offsets
        wait_until(lambda: worker.offsets.get("dropped", {"task": 0}) == {"n": 9})
        assert [md for _, md in run2.committed] == [None] * 10
        assert f"{topic_name}-x" not in status.topics.get("dropped", [])
