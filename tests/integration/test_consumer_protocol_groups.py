"""KIP-848 consumer groups with real confluent-kafka 2.16 consumers (``group.protocol=consumer``).

Every member is its own process (``tests.helpers.kip848_member``) reporting its
rebalance callbacks and consumed records with timestamps; the whole history is
checked by ``tests.helpers.assignment_history.check`` (never a partition owned
by two members at once, never a record consumed outside ownership). A feeder
keeps producing to every partition. One broker for the module, with short
heartbeats and session timeouts:

- 3 members on 6 partitions: each partition owned by exactly one member; one
  killed with -9 is removed after the session timeout and its partitions move
  to the others, never owned twice, and they go on from its committed offsets (no
  record of any partition left unconsumed);
- a 4th member joining takes exactly its share (one partition) from one member;
  the others keep their partitions (never revoked) and keep consuming: no
  member pauses longer than one heartbeat interval during the join;
- static members (``group.instance.id``, range assignor): one restarted within
  the session timeout gets its partitions back and the others see nothing;
- a regex subscription (``^orders-.*``) picks up a topic created later, and not
  one that does not match;
- the broker killed with -9 and restarted: the group, loaded from its records, goes on
  with the same assignment and no rebalance.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.assignment_history import Event, check, longest_pause, owned_by
from tests.helpers.broker_proc import BrokerProcess

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
HEARTBEAT_MS = 2000  # generous for a loaded 2-core CI machine: the join-pause bound
SESSION_MS = 4000
OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "3000",
    "offsets.topic.num.partitions": "3",
}
SETTLE_S = SESSION_MS / 1000 + 6 * HEARTBEAT_MS / 1000 + 20  # wait bound, not an assertion


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("consumer-protocol")
    with BrokerProcess(d / "data", OVERRIDES) as b:
        yield b


class Member:
    """One member process; its events go to the shared history."""

    def __init__(self, history: History, name: str, bootstrap: str, group: str, topics: str,
                 assignor: str = "uniform", instance: str | None = None) -> None:
        self.name = name
        self.history = history
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.kip848_member", bootstrap, group, assignor,
             instance or "-", topics],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.history.add(Event.parse(self.name, line))

    def _gone(self) -> None:
        self.reader.join(10)  # every line it printed is in the history first
        self.history.add(Event(self.name, "dead", time.monotonic()))

    def kill(self) -> None:
        """kill -9."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self._gone()

    def stop(self) -> None:
        """A graceful close: the member leaves the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
                return
            self._gone()


class History:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[Event] = []
        self.members: list[Member] = []

    def add(self, e: Event) -> None:
        with self.lock:
            self.events.append(e)

    def snapshot(self) -> list[Event]:
        with self.lock:
            return list(self.events)

    def start(self, *args, **kw) -> Member:
        m = Member(self, *args, **kw)
        self.members.append(m)
        return m

    def owned(self) -> dict[str, set]:
        """Each member's partitions now."""
        return owned_by(self.snapshot(), time.monotonic())

    def of(self, member: str, *kinds: str, since: float = 0.0) -> list[Event]:
        return [e for e in self.snapshot() if e.member == member and e.kind in kinds
                and e.t >= since]


@pytest.fixture
def history():
    h = History()
    yield h
    for m in h.members:
        m.kill()
    problems = check(h.snapshot())
    assert problems == [], "\n".join(problems[:20])


class Feeder:
    """Produces one record to every partition of ``topic`` every ``every`` seconds."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, every: float = 0.05) -> None:
        self.stopped = threading.Event()
        self.args = (bootstrap, topic, partitions, every)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        bootstrap, topic, partitions, every = self.args
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        i = 0
        while not self.stopped.wait(every):
            for part in range(partitions):
                p.produce(topic, value=b"%d" % i, partition=part)
            p.poll(0)
            i += 1
        p.flush(10)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(15)


def create(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics]).values():
        f.result(15)


def wait_for(cond, what: str, timeout: float = SETTLE_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out ({timeout:.0f} s) waiting for {what}")
        time.sleep(0.05)


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def consumed_offsets(history: History, tp) -> set[int]:
    return {e.offset for e in history.snapshot() if e.kind == "msg" and tp in e.parts}


def settled(history: History, names: list[str], topic: str, partitions: int) -> bool:
    """Every partition owned by exactly one of ``names``, counts differing by at most 1."""
    owned = history.owned()
    sets = [owned.get(n, set()) for n in names]
    union = set().union(*sets)
    return (sum(len(s) for s in sets) == len(union) == partitions
            and union == {(topic, p) for p in range(partitions)}
            and max(map(len, sets)) - min(map(len, sets)) <= 1)


def test_three_members_then_one_killed_its_partitions_move(broker, history):
    topic, group = f"cp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create(broker.bootstrap, (topic, 6))
    feeder = Feeder(broker.bootstrap, topic, 6)
    try:
        names = ["m1", "m2", "m3"]
        for n in names:
            history.start(n, broker.bootstrap, group, topic)
        wait_for(lambda: settled(history, names, topic, 6), "3 members with 2 partitions each")
        before = history.owned()
        assert sorted(len(before[n]) for n in names) == [2, 2, 2]

        victim = history.members[1]
        victim.kill()
        killed_at = time.monotonic()
        survivors = ["m1", "m3"]
        wait_for(lambda: settled(history, survivors, topic, 6), "the victim's partitions to move")
        moved_after = time.monotonic() - killed_at
        after = history.owned()
        for n in survivors:
            assert before[n] <= after[n], f"{n} lost a partition it had: sticky"
        victims = before["m2"]
        assert victims <= after["m1"] | after["m3"]
        # and the survivors consume the moved partitions
        wait_for(lambda: {tp for e in history.snapshot() if e.kind == "msg"
                          and e.member in survivors and e.t > killed_at for tp in e.parts}
                 >= victims, "records of the moved partitions")
        print(f"partitions moved {moved_after:.1f} s after kill -9 (session {SESSION_MS} ms)")
        # nothing lost: the new owners went on from the victim's committed offsets (OffsetCommit
        # with member epochs); what it consumed after its last commit comes again
        feeder.stop()
        ends = high_watermarks(broker.bootstrap, topic, 6)
        wait_for(lambda: all(consumed_offsets(history, (topic, p)) >= set(range(end))
                             for p, end in ends.items()), "every record consumed")
        for p, end in ends.items():
            assert consumed_offsets(history, (topic, p)) == set(range(end))
    finally:
        feeder.stop()


def test_member_joining_moves_only_what_it_must_and_nobody_pauses(broker, history):
    topic, group = f"cp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create(broker.bootstrap, (topic, 6))
    feeder = Feeder(broker.bootstrap, topic, 6)
    try:
        old = ["m1", "m2", "m3"]
        for n in old:
            history.start(n, broker.bootstrap, group, topic)
        wait_for(lambda: settled(history, old, topic, 6), "3 members with 2 partitions each")
        # everyone consuming before the join starts
        wait_for(lambda: all(history.of(n, "msg", since=time.monotonic() - 0.5) for n in old),
                 "the members to consume")
        joined_at = time.monotonic()
        before = history.owned()
        history.start("m4", broker.bootstrap, group, topic)
        everyone = [*old, "m4"]
        wait_for(lambda: settled(history, everyone, topic, 6), "the 4th member's partition")
        settled_at = time.monotonic()
        after = history.owned()

        assert len(after["m4"]) == 1  # uniform: 6 over 4 is 2, 2, 1, 1
        moved = {tp for n in old for tp in before[n] - after[n]}
        assert moved == after["m4"], f"moved {moved}, the new member got {after['m4']}"
        events = history.snapshot()
        for n in old:
            assert after[n] <= before[n]
            revoked = {tp for e in history.of(n, "revoke", "lost", since=joined_at)
                       for tp in e.parts}
            assert not revoked & after[n], f"{n} had kept partitions revoked: {revoked}"
            consumed = len(history.of(n, "msg", since=joined_at))
            pause = longest_pause(events, n, joined_at, settled_at)
            print(f"{n}: {consumed} records during the join, longest pause {pause:.2f} s")
            assert consumed > 0
            assert pause <= HEARTBEAT_MS / 1000, (
                f"{n} consumed nothing for {pause:.2f} s during the join "
                f"(heartbeat interval {HEARTBEAT_MS} ms); {consumed} records in "
                f"{settled_at - joined_at:.1f} s")
    finally:
        feeder.stop()


def test_static_member_restart_keeps_its_assignment(broker, history):
    topic, group = f"cp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create(broker.bootstrap, (topic, 6))
    feeder = Feeder(broker.bootstrap, topic, 6)
    try:
        for i in (1, 2, 3):
            history.start(f"s{i}", broker.bootstrap, group, topic, assignor="range",
                          instance=f"static-{i}")
        wait_for(lambda: settled(history, ["s1", "s2", "s3"], topic, 6), "3 static members")
        before = history.owned()
        # range orders static members by instance id: contiguous pairs
        assert before["s2"] == {(topic, 2), (topic, 3)}

        restart_at = time.monotonic()
        history.members[1].stop()  # leaves with epoch -2: its assignment waits for it
        history.start("s2-again", broker.bootstrap, group, topic, assignor="range",
                      instance="static-2")
        wait_for(lambda: history.owned().get("s2-again") == before["s2"],
                 "the restarted static member's partitions")
        wait_for(lambda: history.of("s2-again", "msg"), "the restarted member to consume")
        for n in ("s1", "s3"):
            assert history.of(n, "assign", "revoke", "lost", since=restart_at) == [], (
                f"{n} saw a rebalance during a static member's restart")
            assert history.owned()[n] == before[n]
    finally:
        feeder.stop()


def test_regex_subscription_picks_up_a_topic_created_later(broker, history):
    first, later, other = "orders-1", "orders-2", f"payments-{uuid.uuid4().hex[:6]}"
    create(broker.bootstrap, (first, 2), (other, 1))
    group = f"g-{uuid.uuid4().hex[:8]}"
    history.start("r1", broker.bootstrap, group, "^orders-.*")
    wait_for(lambda: history.owned().get("r1") == {(first, 0), (first, 1)},
             "the regex member's first assignment")
    create(broker.bootstrap, (later, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for t in (later, other, first):
        p.produce(t, value=b"x")
    assert p.flush(15) == 0
    wait_for(lambda: any((later, 0) in e.parts for e in history.of("r1", "msg")),
             "a record of the topic created later")
    assigned = {tp for e in history.of("r1", "assign") for tp in e.parts}
    assert assigned == {(first, 0), (first, 1), (later, 0)}
    assert not any(e.parts & {(other, 0)} for e in history.of("r1", "msg"))


def test_broker_killed_and_restarted_the_group_goes_on_unchanged(broker, history):
    # The group's state is records in __consumer_offsets: a coordinator restarted from its
    # log knows the members, epochs and assignments, so nobody rebalances.
    topic, group = f"cp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create(broker.bootstrap, (topic, 4))
    feeder = Feeder(broker.bootstrap, topic, 4)
    try:
        names = ["k1", "k2"]
        for n in names:
            history.start(n, broker.bootstrap, group, topic)
        wait_for(lambda: settled(history, names, topic, 4), "2 members with 2 partitions each")
        before = history.owned()
        killed_at = time.monotonic()
        broker.restart()  # kill -9, then the same port and data
        back_at = time.monotonic()
        wait_for(lambda: all(history.of(n, "msg", since=back_at) for n in names),
                 "both members to consume from the restarted broker")
        for n in names:
            assert history.of(n, "assign", "revoke", "lost", since=killed_at) == [], (
                f"{n} rebalanced across the coordinator's restart")
        assert history.owned() == before
    finally:
        feeder.stop()
