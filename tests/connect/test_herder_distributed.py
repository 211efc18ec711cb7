"""The distributed herder in real ``spool connect`` workers over a real broker: work spread
over the group, writes forwarded to the leader, a config change, pause/resume, stop and
KIP-875 offsets, restart, delete, a worker leaving and one killed with -9 (its work moves
after the session timeout), and the config topic's records as Kafka writes them."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from spool.connect.config_log import ConfigLog
from spool.connect.herder import ConnectRestError, NotLeaderError
from spool.connect.herder_distributed import DistributedHerder
from spool.connect.plugins import Plugins
from spool.connect.worker_config import WorkerConfig
from tests.helpers.connect_plugins import CountingSourceConnector, counting_config
from tests.helpers.connect_proc import ConnectProcess, distributed_props, wait_until


def _end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in parts)
    finally:
        c.close()


def _workers(status: dict) -> Counter:
    return Counter(t["worker_id"] for t in status["tasks"])


def _all_running(w: ConnectProcess, name: str, tasks: int, on: set[str] | None = None):
    a = w.call("GET", f"/connectors/{name}/status")
    if a.status != 200:
        return None
    s = a.body
    ok = (s["connector"]["state"] == "RUNNING" and len(s["tasks"]) == tasks
          and all(t["state"] == "RUNNING" for t in s["tasks"])
          and (on is None or {t["worker_id"] for t in s["tasks"]} | {
              s["connector"]["worker_id"]} <= on))
    return s if ok else None


def test_workers_share_connectors_and_follow_the_config_topic(broker, tmp_path):
    group = f"connect-{uuid.uuid4().hex[:8]}"
    props = distributed_props(broker.bootstrap, group)
    workers = [ConnectProcess(tmp_path / f"w{i}", props, name=f"w{i}") for i in range(3)]
    name, topic = "count", f"{group}-out"
    try:
        for w in workers:
            w.start()
        a, b, c = workers
        # created through one worker (forwarded to the leader when it is not the leader)
        r = b.call("POST", "/connectors", {"name": name,
                                          "config": counting_config(name, topic, 6)})
        assert r.status == 201, r.body
        s = wait_until(lambda: _all_running(c, name, 6), 60, what="6 tasks running")
        # 1 connector + 6 tasks over 3 workers: every worker runs some of it
        ids = {w.worker_id for w in workers}
        assert set(_workers(s)) == ids
        assert max(_workers(s).values()) - min(_workers(s).values()) <= 1
        assert a.call("POST", "/connectors", {"name": name, "config": counting_config(
            name, topic, 6)}).status == 409
        for w in workers:  # every worker answers reads from its own view of the topic
            assert wait_until(lambda w=w: w.call("GET", f"/connectors/{name}/tasks").body
                              and len(w.call("GET", f"/connectors/{name}/tasks").body) == 6, 60)

        # a config change: fewer tasks
        r = c.call("PUT", f"/connectors/{name}/config", counting_config(name, topic, 2))
        assert r.status == 200, r.body
        wait_until(lambda: _all_running(a, name, 2), 60, what="2 tasks running")

        # pause / resume, from a non-leader
        assert a.call("PUT", f"/connectors/{name}/pause").status == 202

        def paused():
            s = b.call("GET", f"/connectors/{name}/status").body
            return (s["connector"]["state"] == "PAUSED" and len(s["tasks"]) == 2
                    and all(t["state"] == "PAUSED" for t in s["tasks"]))
        wait_until(paused, 60, what="paused")
        assert b.call("PUT", f"/connectors/{name}/resume").status == 202
        wait_until(lambda: _all_running(c, name, 2), 60, what="resumed")

        # stop, offsets, resume
        assert c.call("PUT", f"/connectors/{name}/stop").status == 204

        def stopped():
            s = a.call("GET", f"/connectors/{name}/status").body
            return s["connector"]["state"] == "STOPPED" and s["tasks"] == []
        wait_until(stopped, 60, what="stopped")
        offsets = wait_until(lambda: a.call("GET", f"/connectors/{name}/offsets").body[
            "offsets"], 60, what="offsets")
        assert {o["partition"]["task"] for o in offsets} <= {0, 1, 2, 3, 4, 5}
        r = b.call("PATCH", f"/connectors/{name}/offsets",
                   {"offsets": [{"partition": {"task": 0}, "offset": {"seq": 41}}]})
        assert r.status == 200, r.body
        got = wait_until(lambda: {o["partition"]["task"]: o["offset"] for o in c.call(
            "GET", f"/connectors/{name}/offsets").body["offsets"]}.get(0) == {"seq": 41}, 60)
        assert got
        assert c.call("PUT", f"/connectors/{name}/resume").status == 202
        wait_until(lambda: _all_running(b, name, 2), 60, what="running after stop")

        # restart everything: 202 with what restarts, then running again
        r = a.call("POST", f"/connectors/{name}/restart?includeTasks=true")
        assert r.status == 202 and r.body["connector"]["state"] == "RESTARTING"
        assert [t["state"] for t in r.body["tasks"]] == ["RESTARTING", "RESTARTING"]
        wait_until(lambda: _all_running(a, name, 2), 60, what="running after restart")
        for w in workers:  # a task restart from any worker reaches the task's worker
            assert w.call("POST", f"/connectors/{name}/tasks/1/restart").status == 204
        wait_until(lambda: _all_running(a, name, 2), 60, what="running after task restart")

        # a worker leaving (SIGTERM): its work moves at once; one killed: after the
        # session timeout (6 s here)
        a.stop()
        rest = {b.worker_id, c.worker_id}
        wait_until(lambda: _all_running(b, name, 2, rest), 60, what="moved off a")
        r = b.call("PUT", f"/connectors/{name}/config", counting_config(name, topic, 4))
        assert r.status == 200, r.body
        wait_until(lambda: _all_running(c, name, 4, rest), 60, what="4 tasks on b, c")
        c.kill()
        wait_until(lambda: _all_running(b, name, 4, {b.worker_id}), 60, what="all on b")

        assert b.call("DELETE", f"/connectors/{name}").status == 204
        assert b.call("GET", "/connectors").body == []
        assert b.call("GET", f"/connectors/{name}/status").status == 404
    finally:
        for w in workers:
            w.kill()

    # the config topic holds Kafka's records
    cons = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{group}-check",
                     "enable.auto.commit": False})
    try:
        cons.assign([TopicPartition(f"{group}-configs", 0, OFFSET_BEGINNING)])
        keys = []
        while True:
            m = cons.poll(3)
            if m is None:
                break
            if m.error() is None:
                keys.append(m.key().decode())
    finally:
        cons.close()
    assert keys[:2] == ["target-state-count", "connector-count"]
    assert "commit-count" in keys and "task-count-5" in keys
    assert "restart-connector-count" in keys and keys[-2:] == ["connector-count",
                                                                "target-state-count"]


def test_a_restarted_worker_replays_its_connectors_and_their_states(broker, tmp_path):
    group = f"connect-{uuid.uuid4().hex[:8]}"
    w = ConnectProcess(tmp_path / "w", distributed_props(broker.bootstrap, group), name="w")
    try:
        w.start()
        for name, tasks in (("running", 2), ("paused", 1), ("stopped", 1)):
            r = w.call("POST", "/connectors", {"name": name, "config": counting_config(
                name, f"{group}-{name}", tasks)})
            assert r.status == 201, r.body
            wait_until(lambda n=name, t=tasks: _all_running(w, n, t), 60, what=name)
        # KIP-558: the topics a connector used, kept in connect-status
        topics = wait_until(lambda: w.call("GET", "/connectors/running/topics").body[
            "running"]["topics"], 60, what="active topics")
        assert topics == [f"{group}-running"]
        assert w.call("PUT", "/connectors/running/topics/reset").status == 202
        assert w.call("GET", "/connectors/running/topics").body == {"running": {"topics": []}}
        assert w.call("PUT", "/connectors/paused/pause").status == 202
        assert w.call("PUT", "/connectors/stopped/stop").status == 204
        gen = w.call("GET", "/connectors/running/status").body

        before = _end_offset(broker.bootstrap, f"{group}-running")
        w.kill()
        w.restart()  # same port, so the same worker id; a new member of the group
        s = wait_until(lambda: _all_running(w, "running", 2), 60, what="running again")
        assert s["connector"]["worker_id"] == gen["connector"]["worker_id"]
        # it runs again (records after the kill's), not only says so
        wait_until(lambda: _end_offset(broker.bootstrap, f"{group}-running") > before + 20, 60,
                   what="new records")

        def state_of(name: str) -> tuple:
            a = w.call("GET", f"/connectors/{name}/status")
            if a.status == 404:  # no status yet: not started anywhere so far
                return ()
            return a.body["connector"]["state"], [t["state"] for t in a.body["tasks"]]
        assert state_of("paused") == ("PAUSED", ["PAUSED"])
        assert state_of("stopped") == ("STOPPED", [])
        assert sorted(w.call("GET", "/connectors").body) == ["paused", "running", "stopped"]
        assert w.call("GET", "/connectors/stopped").body["tasks"] == []
        # what the topic kept: both come back when resumed
        for name in ("paused", "stopped"):
            assert w.call("PUT", f"/connectors/{name}/resume").status == 202
            wait_until(lambda n=name: _all_running(w, n, 1), 60, what=f"{name} resumed")

        # created PAUSED or STOPPED (KIP-980's initial_state): no tasks until resumed
        for name, state in (("born-paused", "PAUSED"), ("born-stopped", "STOPPED")):
            r = w.call("POST", "/connectors", {"name": name, "initial_state": state,
                                              "config": counting_config(name, f"{group}-b", 2)})
            assert r.status == 201, r.body
            wait_until(lambda n=name, st=state: state_of(n) == (st, []), 60, what=name)
            assert w.call("PUT", f"/connectors/{name}/resume").status == 202
            wait_until(lambda n=name: _all_running(w, n, 2), 60, what=f"{name} resumed")
    finally:
        w.kill()


# ---- in-process herders: what only a herder's own timing shows

GATE = threading.Event()


class GatedConnector(CountingSourceConnector):
    """A counting source whose start() waits for ``GATE`` (at most 30 s)."""

    def start(self, props: dict[str, str]) -> None:
        GATE.wait(30)
        super().start(props)


def _herder_config(bootstrap: str, group: str) -> WorkerConfig:
    props = distributed_props(bootstrap, group, listeners="http://127.0.0.1:18093")
    return WorkerConfig.load(None, [f"{k}={v}" for k, v in props.items()], standalone=False)


async def _until(fn: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await fn()
        if got:
            return got
        assert time.monotonic() < deadline, f"not reached in {timeout} s; last: {got!r}"
        await asyncio.sleep(0.1)


def test_no_status_until_the_connector_has_started(broker):
    """Kafka's AbstractHerder.connectorStatus: a connector created but not started yet
    has no status: 404 ``No status found for connector <name>``, not UNASSIGNED; a
    restart asking for statuses: 404 ``Status for connector <name> not found``."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    name = "gated"
    GATE.clear()

    async def main() -> None:
        h = DistributedHerder(_herder_config(broker.bootstrap, group), Plugins.discover())
        await h.start()
        try:
            config = {**counting_config(name, f"{group}-out", 1),
                      "connector.class": f"{__name__}:GatedConnector"}
            created, _ = await h.put_connector_config(name, config, allow_replace=False)
            assert created
            assert (await h.connectors()) == [name]
            # the rebalance that assigns it starts it: its start() waits at the gate
            await _until(lambda: asyncio.sleep(0, name in h.worker.connectors()))
            with pytest.raises(ConnectRestError) as e:
                await h.connector_status(name)
            assert (e.value.status, e.value.message) == (
                404, f"No status found for connector {name}")
            # a restart that answers with statuses has none to answer with (Kafka's words)
            with pytest.raises(ConnectRestError) as e:
                await h.restart_connector(name, include_tasks=True)
            assert (e.value.status, e.value.message) == (
                404, f"Status for connector {name} not found")
            GATE.set()

            async def running() -> bool:
                try:
                    s = await h.connector_status(name)
                except ConnectRestError:
                    return False
                return s["connector"]["state"] == "RUNNING" and [
                    t["state"] for t in s["tasks"]] == ["RUNNING"]
            await _until(running)
        finally:
            GATE.set()
            await h.stop()

    asyncio.run(main())


def test_task_configs_are_judged_on_the_config_topic_read_to_its_end(broker):
    """The leader takes a connector's new task configs by what the config topic says read
    to its end, not by what its own reader has applied so far: the worker sending them
    decided from records the leader wrote and may have read first. A resume after a stop
    whose task configs reached a leader still seeing STOPPED were dropped, and the
    connector ran without tasks, nothing asking for a rebalance (seen under load). The
    leader's reader is made slow here to show it every time."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    name = "count"
    cfg = _herder_config(broker.bootstrap, group)

    async def main() -> None:
        h = DistributedHerder(cfg, Plugins.discover())
        await h.start()
        other = ConfigLog(cfg.internal_client_config(), f"{group}-configs")
        await asyncio.to_thread(other.start)
        try:
            await h.put_connector_config(name, counting_config(name, f"{group}-out", 2),
                                         allow_replace=False)
            await _until(lambda: _task_count(h, name, 2))
            await h.stop_connector(name)
            assert await h.task_configs(name) == []

            # the leader's reader applies the next target-state record 2 s late
            reader = h.config_log._log
            applied = reader._on_record
            key = f"target-state-{name}".encode()

            def late(k: bytes | None, v: bytes | None, partition: int, offset: int) -> None:
                if k == key:
                    time.sleep(2)
                applied(k, v, partition, offset)
            reader._on_record = late
            # the resume as another worker reads it, then its connector's task configs
            await asyncio.to_thread(other.put_target_state, name, "STARTED")
            configs = [{**counting_config(name, f"{group}-out", 2), "task.index": str(i),
                        "task.class": "tests.helpers.connect_plugins.CountingSourceTask"}
                       for i in range(2)]  # as its connector gives them
            await h.put_task_configs(name, configs)
            await asyncio.to_thread(other.read_to_end)
            snap = other.snapshot()
            assert snap.target_state(name) == "STARTED"
            assert snap.tasks.get(name) == configs  # written, not dropped as STOPPED
        finally:
            await asyncio.to_thread(other.stop)
            await h.stop()

    asyncio.run(main())


def test_no_task_configs_are_committed_between_a_stops_two_writes(broker):
    """A stop commits zero task configs, then STOPPED. A connector that read the first
    (its task configs changed) may answer with its own before the second is written; the
    leader takes them only after both, and drops them as STOPPED. Taken in between, the
    connector was STOPPED with its tasks back, and its status listed them (the clean-clone
    CI at 3f88836, under load). The STOPPED write is made slow here to show it every time."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    name = "count"
    cfg = _herder_config(broker.bootstrap, group)

    async def main() -> None:
        h = DistributedHerder(cfg, Plugins.discover())
        await h.start()
        try:
            await h.put_connector_config(name, counting_config(name, f"{group}-out", 2),
                                         allow_replace=False)
            await _until(lambda: _task_count(h, name, 2))
            configs = [t["config"] for t in await h.task_configs(name)]
            put, write = h.config_log.put_task_configs, h.config_log.put_target_state
            zero_written = threading.Event()

            def put_then_tell(connector: str, task_configs: list) -> None:
                put(connector, task_configs)
                if not task_configs:
                    zero_written.set()

            def slow(connector: str, state: str) -> None:
                time.sleep(3)
                write(connector, state)
            h.config_log.put_task_configs, h.config_log.put_target_state = put_then_tell, slow
            stopping = asyncio.ensure_future(h.stop_connector(name))
            assert await asyncio.to_thread(zero_written.wait, 30)
            assert not stopping.done()
            # the connector's answer to its zero task configs, while STOPPED is being written
            # (retried through the rebalance the zero task configs start, as a worker does)
            while True:
                try:
                    await h.put_task_configs(name, configs)
                    break
                except NotLeaderError:
                    assert not stopping.done()
                    await asyncio.sleep(0.05)
            await stopping
            assert h._state().target_state(name) == "STOPPED"
            assert await h.task_configs(name) == []
        finally:
            await h.stop()

    asyncio.run(main())


async def _task_count(h: DistributedHerder, name: str, n: int) -> bool:
    return len(await h.task_configs(name)) == n


def test_a_connector_written_while_the_leader_assigns_is_assigned(broker):
    """A connector config written after the leader computed an assignment but read by a
    worker before it applies that assignment: the worker asks for another rebalance, so
    the connector is assigned and runs (else nothing would: the worker's view already
    holds it, no later record changes anything). The write is placed in that window by
    making it from inside the leader's assignment callback."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    cfg = _herder_config(broker.bootstrap, group)

    async def main() -> None:
        h = DistributedHerder(cfg, Plugins.discover())
        await h.start()
        other = ConfigLog(cfg.internal_client_config(), f"{group}-configs")
        await asyncio.to_thread(other.start)
        try:
            assign = h.member.on_assign
            armed = [True]

            async def assign_then_write(leader: str, members: list) -> dict:
                out = await assign(leader, members)
                if armed.pop() if armed else False:
                    await asyncio.to_thread(other.put_connector_config, "late", counting_config(
                        "late", f"{group}-out", 1), "STARTED")
                    await asyncio.to_thread(h.config_log.read_to_end)
                return out
            h.member.on_assign = assign_then_write
            h.member.request_rejoin()  # a rebalance, as another worker joining would make

            async def late_running() -> bool:
                try:
                    s = await h.connector_status("late")
                except ConnectRestError:
                    return False
                return s["connector"]["state"] == "RUNNING" and [
                    t["state"] for t in s["tasks"]] == ["RUNNING"]
            await _until(late_running, 20)
            assert not armed  # the write did happen inside the assignment
        finally:
            await asyncio.to_thread(other.stop)
            await h.stop()

    asyncio.run(main())
