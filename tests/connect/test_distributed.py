"""Distributed mode with real processes: three ``spool connect`` workers in one group, a
connector with six tasks spread over them; the REST API answers from any worker (writes
forwarded to the leader, ``forward=false`` refused by the others as Kafka does); a worker
killed with -9 (a follower, or the leader) has its tasks moved to the others once its
session times out, and they go on counting where their committed offsets say."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer

from tests.helpers.connect_plugins import counting_config
from tests.helpers.connect_proc import Answer, ConnectProcess, distributed_props, wait_until

pytestmark = pytest.mark.timeout(240)

SESSION_MS = 6000  # distributed_props' session.timeout.ms


class Counts:
    """Reads the counting connector's topic as it grows: each task's numbers seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"read-{uuid.uuid4().hex[:8]}",
                                  "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
        self.consumer.subscribe([topic])
        self.seen: dict[int, set[int]] = {}

    def until(self, done: Callable[[dict[int, set[int]]], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            assert time.monotonic() < deadline, {k: max(v) for k, v in self.seen.items()}
            for m in self.consumer.consume(500, 0.5):
                if not m.error():
                    v = json.loads(m.value())
                    self.seen.setdefault(v["task"], set()).add(v["seq"])

    def close(self) -> None:
        self.consumer.close()


REBALANCING = ("Cannot complete request momentarily due to no known leader URL",
               "Cannot complete request because of a conflicting operation")


def write(w: ConnectProcess, method: str, path: str, body=None) -> Answer:
    """A write, retried as a client would while the cluster rebalances (Kafka's 409)."""
    deadline = time.monotonic() + 60
    while True:
        a = w.call(method, path, body)
        if not (a.status == 409 and a.body["message"].startswith(REBALANCING)):
            return a
        assert time.monotonic() < deadline, a.body
        time.sleep(0.5)


def _placement(status: dict) -> dict[int, str]:
    return {t["id"]: t["worker_id"] for t in status["tasks"] if t["state"] == "RUNNING"}


def _leader(workers: list[ConnectProcess]) -> ConnectProcess | None:
    """The one worker that takes a write itself: asked with ``forward=false`` the others
    answer Kafka's 409 instead of forwarding it."""
    answers = [w.call("POST", "/connectors/count/restart?forward=false") for w in workers]
    took = [w for w, a in zip(workers, answers, strict=True) if a.status == 204]
    refused = [a for a in answers if a.status == 409]
    if len(took) != 1 or len(refused) != len(workers) - 1:
        return None
    assert all(a.body == {"error_code": 409, "message": "Cannot complete request because "
                          "of a conflicting operation (e.g. worker rebalance)"}
               for a in refused)
    return took[0]


@pytest.mark.parametrize("victim_role", ["follower", "leader"])
def test_three_workers_six_tasks_and_a_worker_killed(broker, tmp_path, victim_role):
    group = f"dist-{uuid.uuid4().hex[:8]}"
    topic = f"{group}-counts"
    props = distributed_props(broker.bootstrap, group)
    workers = [ConnectProcess(tmp_path / f"w{i}", props, name=f"w{i}") for i in range(3)]
    counts = Counts(broker.bootstrap, topic)
    try:
        for w in workers:
            w.start()
        ids = {w.worker_id for w in workers}

        # create through one worker, update through another: at least one of them is not
        # the leader, so writes are forwarded
        config = counting_config("count", topic, 6, **{"poll.interval.ms": 100})
        created = write(workers[1], "POST", "/connectors", {"name": "count", "config": config})
        assert created.status == 201, created.text
        assert created.headers["Location"].endswith("/connectors/count")
        dup = write(workers[2], "POST", "/connectors", {"name": "count", "config": config})
        assert (dup.status, dup.body) == (
            409, {"error_code": 409, "message": "Connector count already exists"})

        def spread() -> dict | None:
            s = workers[0].call("GET", "/connectors/count/status").body
            placed = _placement(s) if isinstance(s, dict) and "tasks" in s else {}
            ok = (len(placed) == 6 and s["connector"]["state"] == "RUNNING"
                  and set(placed.values()) == ids)
            return s if ok else None

        status = wait_until(spread, 90, what="6 tasks RUNNING on 3 workers")
        # round robin: two tasks on each worker
        assert sorted(Counter(_placement(status).values()).values()) == [2, 2, 2]

        # any worker answers reads, the same way
        for w in workers:
            assert w.call("GET", "/connectors").body == ["count"]
            info = w.call("GET", "/connectors/count").body
            assert info["config"] == config
            assert info["tasks"] == [{"connector": "count", "task": i} for i in range(6)]
            assert len(w.call("GET", "/connectors/count/tasks").body) == 6
            assert w.call("GET", "/connectors/count/tasks/3/status").body["state"] == "RUNNING"

        counts.until(lambda seen: len(seen) == 6 and all(len(s) >= 30 for s in seen.values()))

        # a write through each worker: forwarded to the leader by the two that are not it
        for i, w in enumerate(workers):
            a = write(w, "PATCH", "/connectors/count/config", {"batch.size": str(5 + i)})
            assert a.status == 200, (w.name, a.text)
            assert a.body["config"]["batch.size"] == str(5 + i)
        for w in workers:
            wait_until(lambda w=w: w.call("GET", "/connectors/count/config").body.get(
                "batch.size") == "7", 30, what=f"{w.name} sees the last write")
        status = wait_until(spread, 90, what="6 tasks RUNNING again after the update")

        # a task restart runs where the task does: asked anywhere, it takes up to two hops
        # (to the leader, then to the task's worker)
        for t in range(6):
            a = write(workers[t % 3], "POST", f"/connectors/count/tasks/{t}/restart")
            assert (a.status, a.text) == (204, ""), (t, a.text)
        both = write(workers[2], "POST", "/connectors/count/restart?includeTasks=true")
        assert both.status == 202, both.text
        assert both.body["name"] == "count" and len(both.body["tasks"]) == 6
        status = wait_until(spread, 90, what="6 tasks RUNNING after the restarts")

        # kill -9 a worker (the leader, or one that is not); all run tasks
        leader = wait_until(lambda: _leader(workers), 30, what="one leader")
        victim = leader if victim_role == "leader" else next(
            w for w in workers if w is not leader)
        alive = [w for w in workers if w is not victim]
        moved = sorted(t for t, wid in _placement(status).items() if wid == victim.worker_id)
        assert len(moved) == 2
        before = {t: max(s) for t, s in counts.seen.items()}
        victim.kill()
        killed_at = time.monotonic()
        if victim_role == "leader":
            # until the group notices, a write cannot reach the leader: Kafka's answers
            a = alive[0].call("PUT", "/connectors/count/resume")
            assert (a.status, a.body["message"].split(":")[0]) in (
                (500, "IO Error trying to forward REST request"),
                (409, "Cannot complete request momentarily due to no known leader URL, "
                      "likely because a rebalance was underway.")), a.text
        survivors = {w.worker_id for w in alive}

        def moved_to_survivors() -> dict | None:
            s = alive[0].call("GET", "/connectors/count/status").body
            placed = _placement(s) if isinstance(s, dict) and "tasks" in s else {}
            ok = (len(placed) == 6 and set(placed.values()) <= survivors
                  and s["connector"]["worker_id"] in survivors
                  and s["connector"]["state"] == "RUNNING")
            return s if ok else None

        # within the session timeout (plus the rebalance and the tasks' start)
        status = wait_until(moved_to_survivors, SESSION_MS / 1000 + 30,
                            what="the killed worker's tasks on the others")
        print(f"the killed {victim_role}'s tasks RUNNING elsewhere after "
              f"{time.monotonic() - killed_at:.1f} s (session.timeout.ms={SESSION_MS})")
        assert sorted(Counter(_placement(status).values()).values()) == [3, 3]
        assert alive[1].call("GET", "/connectors/count/status").body["tasks"] \
            == status["tasks"]

        # every task goes on counting, the moved ones from their committed offsets: no gap
        counts.until(lambda seen: all(max(seen[t]) >= before[t] + 30 for t in range(6)))
        for t in range(6):
            top = max(counts.seen[t])
            assert counts.seen[t] == set(range(top + 1)), f"task {t} has a gap"

        # writes still work through the survivors
        assert write(alive[1], "PUT", "/connectors/count/pause").status == 202
        wait_until(lambda: {t["state"] for t in alive[0].call(
            "GET", "/connectors/count/status").body["tasks"]} == {"PAUSED"}, 30,
            what="paused")
        assert write(alive[0], "DELETE", "/connectors/count").status == 204
        wait_until(lambda: all(w.call("GET", "/connectors").body == [] for w in alive),
                   30, what="deleted everywhere")
    finally:
        counts.close()
        for w in workers:
            w.stop()


def test_a_worker_stopped_with_sigterm_hands_its_tasks_over_at_once(broker, tmp_path):
    """SIGTERM is a clean stop: the worker leaves the group, so its tasks move without
    waiting for its session (45 s here) to time out."""
    group = f"term-{uuid.uuid4().hex[:8]}"
    props = distributed_props(broker.bootstrap, group, **{"session.timeout.ms": "45000",
                                                          "rebalance.timeout.ms": "20000"})
    workers = [ConnectProcess(tmp_path / f"w{i}", props, name=f"w{i}") for i in range(2)]
    try:
        for w in workers:
            w.start()
        config = counting_config("count", f"{group}-counts", 4)
        assert write(workers[0], "POST", "/connectors",
                     {"name": "count", "config": config}).status == 201

        def placed_on(ids: set[str]) -> dict | None:
            s = workers[0].call("GET", "/connectors/count/status").body
            placed = _placement(s) if isinstance(s, dict) and "tasks" in s else {}
            return s if len(placed) == 4 and set(placed.values()) == ids else None

        wait_until(lambda: placed_on({w.worker_id for w in workers}), 60,
                   what="4 tasks on 2 workers")
        stopped_at = time.monotonic()
        assert workers[1].stop() == 0
        # well before the 45 s session timeout
        wait_until(lambda: placed_on({workers[0].worker_id}), 30,
                   what="the stopped worker's tasks on the other")
        print(f"tasks moved {time.monotonic() - stopped_at:.1f} s after SIGTERM")
    finally:
        for w in workers:
            w.stop()
