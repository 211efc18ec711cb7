"""Exactly-once sources (KIP-618) against a real broker: each poll's records and their
offsets in one transaction; a failure inside a transaction aborts it, so
read_committed consumers see every record once across the restart while
read_uncommitted ones see the aborted copies; the offsets are in the offsets topic;
exactly.once.support=required is refused by a worker without it; a second instance
of the same task fences the first."""

from __future__ import annotations

import json

from spool.connect.herder import TaskId
from tests.connect.test_worker_source import _props, _read_all, _start
from tests.connect.worker_plugins import new_run, running_worker, wait_until

EOS = {"exactly.once.source.support": "enabled"}


def _ns(msgs: list) -> list[int]:
    return [json.loads(m.value())["n"] for m in msgs]


def test_records_and_offsets_commit_together(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap, **EOS) as (worker, status):
        ids = _start(worker, "eos", _props("eos", rid, topic_name, limit="50", batch="10"))
        wait_until(lambda: worker.offsets.get("eos", {"task": 0}) == {"n": 49},
                   what="offset n=49 read back from the offsets topic")
        assert _ns(_read_all(broker.bootstrap, topic_name, 50,
                             **{"isolation.level": "read_committed"})) == list(range(50))
        wait_until(lambda: len(run.committed) == 50)
        assert run.commits >= 5  # one per transaction (one per poll)
        assert all(md is not None for _, md in run.committed)
        offsets = _read_all(broker.bootstrap, worker.offsets.topic, 5,
                            **{"isolation.level": "read_committed"})
        assert {m.key() for m in offsets} == {b'["eos",{"task":0}]'}
        assert [json.loads(m.value()) for m in offsets] == [{"n": n} for n in
                                                            (9, 19, 29, 39, 49)]
        worker.stop_tasks(ids)
        assert status.task_state(ids[0]) == "UNASSIGNED"


def test_aborted_transaction_is_invisible_and_the_restart_resumes_exactly(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap, **EOS) as (worker, status):
        # record 25 (in the poll of 20..29) cannot be converted: that transaction aborts
        props = _props("eos", rid, topic_name, limit="60", batch="10", **{"poison.at": "25"})
        ids = _start(worker, "eos", props)
        trace = status.wait_task(ids[0], "FAILED")
        assert "Tolerance exceeded" in trace or "DataError" in trace
        wait_until(lambda: worker.offsets.get("eos", {"task": 0}) == {"n": 19})
        worker.stop_tasks(ids)
        ids = [TaskId("eos", 0)]
        worker.start_task(ids[0], props, worker.connector_task_configs("eos", 1)[0], "STARTED")
        wait_until(lambda: worker.offsets.get("eos", {"task": 0}) == {"n": 59})
        assert _ns(_read_all(broker.bootstrap, topic_name, 60,
                             **{"isolation.level": "read_committed"})) == list(range(60))
        # read_uncommitted may also see what the aborted transaction had sent of 20..24
        uncommitted = _ns(_read_all(broker.bootstrap, topic_name, 60))
        assert sorted(set(uncommitted)) == list(range(60))
        worker.stop_tasks(ids)


def test_required_exactly_once_is_refused_without_worker_support(broker, topic_name):
    rid, _ = new_run()
    with running_worker(broker.bootstrap) as (worker, status):
        worker.start_connector("eos", _props("eos", rid, topic_name, **{
            "exactly.once.support": "required"}), "STARTED", lambda _n: None)
        trace = status.wait_connector("eos", "FAILED")
        assert "exactly.once.source.support" in trace
    with running_worker(broker.bootstrap, **EOS) as (worker, status):
        worker.start_connector("eos", _props("eos", rid, topic_name, **{
            "exactly.once.support": "required"}), "STARTED", lambda _n: None)
        assert status.wait_connector("eos", "RUNNING") is None


def test_a_second_instance_of_a_task_fences_the_first(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap, **EOS) as (w1, s1):
        group = w1.config.get("group.id")
        props = _props("eos", rid, topic_name, batch="5")
        ids = _start(w1, "eos", props)
        wait_until(lambda: len(run.committed) > 20)
        offsets_topic = w1.offsets.topic
        with running_worker(broker.bootstrap, **EOS, **{
                "group.id": group, "offset.storage.topic": offsets_topic}) as (w2, s2):
            w2.start_task(ids[0], props, run.started_with[0], "STARTED")
            s2.wait_task(ids[0], "RUNNING")
            trace = s1.wait_task(ids[0], "FAILED")
            assert "fenced" in trace.lower()
            w2.stop_tasks(ids)
        w1.stop_tasks(ids)


def test_interval_boundary_spans_polls(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap, **EOS) as (worker, status):
        props = _props("eos", rid, topic_name, limit="200", batch="2", **{
            "transaction.boundary": "interval", "transaction.boundary.interval.ms": "300"})
        _start(worker, "eos", props)
        wait_until(lambda: worker.offsets.get("eos", {"task": 0}) == {"n": 199})
        assert _ns(_read_all(broker.bootstrap, topic_name, 200,
                             **{"isolation.level": "read_committed"})) == list(range(200))
        wait_until(lambda: len(run.committed) == 200)
        assert run.commits < 100  # 100 polls of 2 records, fewer transactions


def test_a_task_started_paused_sends_nothing_until_resumed(broker, topic_name):
    rid, run = new_run()
    with running_worker(broker.bootstrap, **EOS) as (worker, status):
        props = _props("eos", rid, topic_name, limit="30")
        worker.start_connector("eos", props, "STARTED", lambda _n: None)
        tc = worker.connector_task_configs("eos", 1)[0]
        worker.set_target_state("eos", "PAUSED")  # as a herder restarting a paused one
        assert status.wait_connector("eos", "PAUSED") is None
        ids = [TaskId("eos", 0)]
        worker.start_task(ids[0], props, tc, "PAUSED")
        status.wait_task(ids[0], "PAUSED")
        assert run.committed == [] and status.topics.get("eos") is None
        worker.set_target_state("eos", "STARTED")
        status.wait_task(ids[0], "RUNNING")
        wait_until(lambda: len(run.committed) == 30)
        assert _ns(_read_all(broker.bootstrap, topic_name, 30,
                             **{"isolation.level": "read_committed"})) == list(range(30))
