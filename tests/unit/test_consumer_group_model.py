"""KIP-848 reconciliation against a model of well-behaved clients (Hypothesis, stateful).

Clients join, heartbeat (reporting what they own), go silent, leave; topics grow; time
passes. A client owns what its last answer assigned it, gives up partitions as soon as an
answer takes them away (its next heartbeat reports that), and drops everything when it has
had no successful heartbeat for the session timeout (as librdkafka does: its partitions are
lost) or when it is fenced; a static client (``group.instance.id``) restarts: it leaves with
epoch -2 and a new process with the same instance id takes over its assignment. The invariant: no partition is owned by two clients at any
moment; the coordinator never holds a partition in two members either; and replaying the
records written gives the same group.
"""

from __future__ import annotations

import uuid

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from spool.coordinator import CoordinatorConfig, GroupCoordinator, consumer_ops
from spool.coordinator.consumer_group import StaticTopics
from spool.coordinator.consumer_ops import HeartbeatRequest
from spool.protocol.errors import Errors
from spool.util.clock import FakeClock

T = 10_000  # session timeout = rebalance timeout
TOPIC = uuid.UUID(int=7)
NAMES = ("a", "b", "c", "d")
STATIC = ("c", "d")  # their group.instance.id is their name


class Client:
    def __init__(self, name: str) -> None:
        self.member_id = f"{name}-{uuid.uuid4().hex[:4]}"
        self.epoch = 0
        self.owned: frozenset[int] = frozenset()
        self.joined = False
        self.last_ok = 0
        self.instance = name if name in STATIC else None


class Reconciliation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.coord = GroupCoordinator(self.clock, CoordinatorConfig(
            consumer_session_timeout_ms=T, consumer_assignors=("uniform", "range")))
        self.coord.topics = StaticTopics({"t": (TOPIC, 4)})
        self.clients: dict[str, Client] = {}
        self.records: list = []

    def run(self, result) -> None:
        self.records += result.records
        for rec in result.records:
            self.coord.replay(rec)
        for fn, value in result.replies:
            fn(value)

    def send(self, c: Client, epoch: int, full: bool = False):
        owned = None if epoch < 0 else ((TOPIC, tuple(sorted(c.owned))),) if c.owned else ()
        req = HeartbeatRequest(
            "g", c.member_id, epoch, instance_id=c.instance, rebalance_timeout_ms=T if epoch == 0 or full else -1,
            subscribed_topic_names=("t",) if epoch == 0 or full else None, owned=owned)
        result, answer = consumer_ops.heartbeat(self.coord, req)
        self.run(result)
        return answer

    @rule(name=st.sampled_from(NAMES))
    def heartbeat(self, name: str) -> None:
        c = self.clients.setdefault(name, Client(name))
        a = self.send(c, c.epoch if c.joined else 0)
        if a.error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID,
                       Errors.FENCED_INSTANCE_ID):
            c.owned, c.joined, c.epoch = frozenset(), False, 0  # lost: rejoin next time
            return
        assert a.error == 0, a
        if c.instance is not None and not c.joined and a.assignment:
            event("a static member took over an assignment")
        c.joined, c.epoch, c.last_ok = True, a.member_epoch, self.clock.now_ms()
        if a.assignment is not None:
            c.owned = a.assignment.get(TOPIC, frozenset())

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        c = self.clients.get(name)
        if c is None or not c.joined:
            return
        c.owned = frozenset()  # revoked before leaving
        self.send(c, -1)
        c.joined, c.epoch = False, 0

    @rule(name=st.sampled_from(STATIC))
    def static_restart(self, name: str) -> None:
        """A static member's process closes (epoch -2: it keeps its place) and a new process
        with the same instance id and a new member id takes over."""
        c = self.clients.get(name)
        if c is None or not c.joined:
            return
        c.owned = frozenset()
        a = self.send(c, -2)
        assert a.error in (0, Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH), a
        event(f"static leave: error {a.error}")
        self.clients[name] = Client(name)

    @rule(ms=st.integers(0, T))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)
        now = self.clock.now_ms()
        for c in self.clients.values():
            if c.joined and now - c.last_ok >= T:
                c.owned = frozenset()  # its session is over: its partitions are lost
        self.run(self.coord.tick())

    @rule(more=st.integers(1, 3))
    def partitions_added(self, more: int) -> None:
        tid, n = self.coord.topics.topics["t"]
        if n + more <= 12:
            self.coord.topics.topics["t"] = (tid, n + more)

    @invariant()
    def nobody_owns_a_partition_twice(self) -> None:
        seen: dict[int, str] = {}
        for name, c in self.clients.items():
            for p in c.owned:
                assert p not in seen, f"partition {p} owned by {seen[p]} and {name}"
                seen[p] = name
        group = self.coord.groups.get("g")
        held: set = set()
        for m in group.members.values() if group is not None else ():
            for parts in (m.assigned, m.pending_revocation):
                for p in parts.get(TOPIC, ()):
                    assert p not in held
                    held.add(p)

    def teardown(self) -> None:
        fresh = GroupCoordinator(FakeClock(), CoordinatorConfig())
        for rec in self.records:
            fresh.load(rec.key, rec.value)
        live = self.coord.groups.get("g")
        assert (fresh.groups["g"].snapshot() if "g" in fresh.groups else None) == (
            live.snapshot() if live is not None else None)


Reconciliation.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                            deadline=None)
TestReconciliation = Reconciliation.TestCase
