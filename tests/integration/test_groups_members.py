"""Consumer groups with real confluent-kafka consumer processes against a real broker.

Each member is its own process (``MEMBER`` below) printing one JSON line per
event: its whole assignment after every rebalance callback, and every
record it consumed (the offset is stored, then auto-committed, only after
the line is flushed: at-least-once). Tests kill members with ``kill -9``.
Short session timeouts (6 s) keep the expiry waits short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(150)

SESSION_MS = 6000

MEMBER = r"""
import json, sys
from confluent_kafka import Consumer
bootstrap, topic, group, strategy, instance = sys.argv[1:6]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "enable.auto.offset.store": False, "auto.commit.interval.ms": 200,
        "partition.assignment.strategy": strategy, "topic.metadata.refresh.interval.ms": 2000}
if instance != "-":
    conf["group.instance.id"] = instance
c = Consumer(conf)
def out(**kw):
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
def cb(kind):
    def f(consumer, parts):
        if kind == "assign":
            if strategy == "cooperative-sticky": consumer.incremental_assign(parts)
            else: consumer.assign(parts)
        elif kind in ("revoke", "lost"):
            if strategy == "cooperative-sticky": consumer.incremental_unassign(parts)
            else: consumer.unassign()
        out(event=kind, parts=sorted(p.partition for p in parts),
            now=sorted(p.partition for p in consumer.assignment()))
    return f
c.subscribe([topic], on_assign=cb("assign"), on_revoke=cb("revoke"), on_lost=cb("lost"))
out(event="started")
while True:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    out(event="msg", p=m.partition(), o=m.offset(), v=m.value().decode())
    c.store_offsets(m)
"""


class Member:
    """One consumer process and the events it printed."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str = "range",
                 instance: str | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MEMBER, bootstrap, topic, group, strategy, instance or "-"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.events: list[dict] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.events)

    @property
    def assignment(self) -> set[int]:
        rebalances = [e for e in self.snapshot() if e["event"] in ("assign", "revoke", "lost")]
        return set(rebalances[-1]["now"]) if rebalances else set()

    def values(self) -> set[str]:
        return {e["v"] for e in self.snapshot() if e["event"] == "msg"}

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def members():
    started: list[Member] = []
    yield started
    for m in started:
        m.kill()


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, key=str(i).encode(), value=v.encode())
    assert p.flush(30) == 0


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def balanced(live: list[Member], partitions: int = 6) -> bool:
    sets = [m.assignment for m in live]
    union = set().union(*sets)
    disjoint = sum(len(s) for s in sets) == len(union)
    sizes = sorted(len(s) for s in sets)
    return disjoint and union == set(range(partitions)) and sizes[-1] - sizes[0] <= 1


def test_members_share_partitions_survive_kill_and_scale_to_seven(broker, topic_name, members):
    create(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    for _ in range(3):
        members.append(Member(broker.bootstrap, topic_name, group))
    wait_for(lambda: balanced(members), 60, "three members with two partitions each")
    assert sorted(len(m.assignment) for m in members) == [2, 2, 2]

    before = [f"before-{i}" for i in range(3000)]
    produce(broker.bootstrap, topic_name, before)
    victim = members[0]
    wait_for(lambda: len(victim.values()) > 0, 30, "the victim to consume something")
    victim.kill()
    during = [f"during-{i}" for i in range(3000)]
    produce(broker.bootstrap, topic_name, during)
    survivors = members[1:]
    # within its session timeout (plus a rebalance) the survivors own all six partitions
    wait_for(lambda: balanced(survivors), SESSION_MS / 1000 + 20, "the survivors to own all six")
    seen = lambda: set().union(*(m.values() for m in members))  # noqa: E731
    wait_for(lambda: seen() >= set(before) | set(during), 60, "every record to be consumed")

    for _ in range(2):
        members.append(Member(broker.bootstrap, topic_name, group))
    live = members[1:]
    wait_for(lambda: balanced(live), 60, "four members to share six partitions")
    assert sorted(len(m.assignment) for m in live) == [1, 1, 2, 2]

    for _ in range(3):
        members.append(Member(broker.bootstrap, topic_name, group))
    live = members[1:]
    wait_for(lambda: balanced(live) and len(live) == 7, 60, "seven members on six partitions")
    assert sorted(len(m.assignment) for m in live) == [0, 1, 1, 1, 1, 1, 1]


def test_cooperative_sticky_keeps_kept_partitions_consuming(broker, topic_name, members):
    create(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    first = [Member(broker.bootstrap, topic_name, group, "cooperative-sticky") for _ in range(2)]
    members.extend(first)
    wait_for(lambda: balanced(first), 60, "two cooperative members with three partitions each")
    held = {id(m): m.assignment for m in first}
    marks = {id(m): len(m.snapshot()) for m in first}
    members.append(Member(broker.bootstrap, topic_name, group, "cooperative-sticky"))
    wait_for(lambda: balanced(members), 60, "three cooperative members with two each")
    newcomer = members[2].assignment
    for m in first:
        later = m.snapshot()[marks[id(m)]:]
        revoked = {p for e in later if e["event"] in ("revoke", "lost") for p in e["parts"]}
        kept = held[id(m)] - revoked
        assert revoked <= newcomer, "only partitions that move are revoked"
        assert kept == m.assignment and kept, "the kept partitions were never given up"
        assert not [e for e in later if e["event"] == "lost"]


def test_static_member_restart_gets_its_partitions_back_without_rebalance(broker, topic_name,
                                                                           members):
    create(broker.bootstrap, topic_name, 4)
    group = f"g-{topic_name}"
    a = Member(broker.bootstrap, topic_name, group, instance="static-a")
    b = Member(broker.bootstrap, topic_name, group, instance="static-b")
    members.extend([a, b])
    wait_for(lambda: balanced([a, b], 4), 60, "two static members with two partitions each")
    time.sleep(1.5)  # let any trailing rebalance settle before taking the mark
    a_mark = len([e for e in a.snapshot() if e["event"] != "msg"])
    b_parts = b.assignment
    b.kill()
    b2 = Member(broker.bootstrap, topic_name, group, instance="static-b")
    members.append(b2)
    wait_for(lambda: b2.assignment == b_parts, SESSION_MS / 1000 - 1, "b's partitions back on b2")
    produce(broker.bootstrap, topic_name, [f"after-{i}" for i in range(200)])
    wait_for(lambda: len(a.values() | b2.values()) >= 200, 30, "both to consume")
    a_events = [e for e in a.snapshot() if e["event"] != "msg"][a_mark:]
    assert a_events == [], "the other member saw no rebalance"
