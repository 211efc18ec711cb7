"""Group membership state machine: every transition with a fake clock, no sockets."""

from __future__ import annotations

import pytest

from spool.coordinator import (
    ClassicGroup,
    CoordinatorConfig,
    GroupCoordinator,
    GroupState,
    IllegalStateTransition,
    JoinRequest,
)
from spool.coordinator.admin import describe_group
from spool.protocol.errors import Errors
from spool.util.clock import FakeClock

S = GroupState
SESSION = 10_000
REBALANCE = 30_000


class Harness:
    """A coordinator plus helpers that play clients: every reply lands in a list."""

    def __init__(self, **cfg) -> None:
        self.clock = FakeClock()
        cfg.setdefault("initial_rebalance_delay_ms", 0)
        self.coord = GroupCoordinator(self.clock, CoordinatorConfig(**cfg))
        self.records: list = []

    def _run(self, result):
        """What the runtime does once the records are appended: replay them, release replies."""
        self.records += result.records
        for rec in result.records:
            self.coord.replay(rec)
        for fn, value in result.replies:
            fn(value)
        return result

    def join(self, member_id="", group="g", protocols=(("range", b"r"),), instance=None,
             session=SESSION, rebalance=REBALANCE, require_known=True, ptype="consumer"):
        box: list = []
        req = JoinRequest(group, member_id, instance, ptype, list(protocols), session, rebalance,
                          "client", "/127.0.0.1", require_known)
        self._run(self.coord.join_group(req, box.append))
        return box

    def join_new(self, **kw):
        """MEMBER_ID_REQUIRED round trip; returns the box of the second join."""
        first = self.join(**kw)
        if kw.get("instance") is not None:
            return first
        assert first[0].error == Errors.MEMBER_ID_REQUIRED
        return self.join(member_id=first[0].member_id, **kw)

    def sync(self, member_id, generation, assignments=None, group="g"):
        box: list = []
        self._run(self.coord.sync_group(group, generation, member_id, None, None, None,
                                        assignments or {}, box.append))
        return box

    def heartbeat(self, member_id, generation, group="g", instance=None):
        result, code = self.coord.heartbeat(group, generation, member_id, instance)
        self._run(result)
        return code

    def leave(self, *members, group="g"):
        result, codes = self.coord.leave_group(group, list(members))
        self._run(result)
        return codes

    def advance(self, ms):
        self.clock.advance(ms)
        return self._run(self.coord.tick())

    def state(self, group="g"):
        return self.coord.groups[group].state

    def stable_pair(self):
        """Two members, Stable; returns (leader_id, follower_id, generation)."""
        a = self.join_new()
        a_id, gen = a[0].member_id, a[0].generation
        self.sync(a_id, gen, {a_id: b"A"})
        b = self.join_new()
        assert b == [] and self.state() == S.PREPARING_REBALANCE
        a2 = self.join(member_id=a_id)
        assert a2[0].error == 0 and b[0].error == 0
        gen = a2[0].generation
        sb = self.sync(b[0].member_id, gen)
        assert sb == []  # waits for the leader
        sa = self.sync(a_id, gen, {a_id: b"A", b[0].member_id: b"B"})
        assert sa[0].assignment == b"A" and sb[0].assignment == b"B"
        return a_id, b[0].member_id, gen


def test_valid_previous_states_table():
    g = ClassicGroup("g")
    for bad in (S.COMPLETING_REBALANCE, S.STABLE, S.EMPTY):
        with pytest.raises(IllegalStateTransition):
            g.transition(bad, 0)
    g.transition(S.PREPARING_REBALANCE, 0)
    with pytest.raises(IllegalStateTransition):
        g.transition(S.STABLE, 0)
    g.transition(S.COMPLETING_REBALANCE, 0)
    with pytest.raises(IllegalStateTransition):
        g.transition(S.EMPTY, 0)
    g.transition(S.STABLE, 0)
    g.transition(S.PREPARING_REBALANCE, 0)
    g.transition(S.EMPTY, 0)
    g.transition(S.DEAD, 0)
    g.transition(S.DEAD, 0)
    with pytest.raises(IllegalStateTransition):
        g.transition(S.PREPARING_REBALANCE, 0)


def test_member_id_required_then_single_member_leads_and_syncs():
    h = Harness()
    first = h.join()
    assert first[0].error == Errors.MEMBER_ID_REQUIRED and first[0].member_id.startswith("client-")
    assert h.state() == S.EMPTY
    second = h.join(member_id=first[0].member_id)
    r = second[0]
    assert (r.error, r.generation, r.protocol_name, r.leader) == (0, 1, "range", r.member_id)
    assert [m.member_id for m in r.members] == [r.member_id]
    assert h.state() == S.COMPLETING_REBALANCE
    s = h.sync(r.member_id, 1, {r.member_id: b"assign"})
    assert s[0].error == 0 and s[0].assignment == b"assign"
    assert h.state() == S.STABLE
    assert h.records and h.records[-1].value is not None  # GroupMetadata written when Stable


def test_old_clients_join_without_member_id_round_trip():
    h = Harness()
    r = h.join(require_known=False)[0]
    assert r.error == 0 and r.generation == 1


def test_second_member_triggers_rebalance_and_only_leader_gets_members():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert gen == 2 and h.state() == S.STABLE
    assert h.heartbeat(leader, gen) == 0 and h.heartbeat(follower, gen) == 0


def test_follower_join_waits_until_every_member_rejoined():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    a = h.join(member_id=leader, protocols=(("range", b"changed"),))
    assert a == [] and h.state() == S.PREPARING_REBALANCE
    assert h.heartbeat(follower, gen) == Errors.REBALANCE_IN_PROGRESS
    b = h.join(member_id=follower)
    assert a[0].generation == b[0].generation == gen + 1
    assert len(a[0].members) == 2 and b[0].members == ()


def test_stable_follower_rejoin_with_same_protocols_is_answered_at_once():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    r = h.join(member_id=follower)
    assert r[0].generation == gen and r[0].error == 0 and h.state() == S.STABLE


def test_protocol_selection_by_votes_among_common_protocols():
    h = Harness()
    a = h.join_new(protocols=(("range", b""), ("roundrobin", b"")))[0]
    h.sync(a.member_id, a.generation, {})
    b = h.join_new(protocols=(("roundrobin", b""), ("range", b"")))
    c = h.join_new(protocols=(("roundrobin", b""), ("sticky", b"")))
    h.join(member_id=a.member_id, protocols=(("range", b""), ("roundrobin", b"")))
    assert b[0].protocol_name == c[0].protocol_name == "roundrobin"


def test_inconsistent_protocols_are_refused():
    h = Harness()
    a = h.join_new(protocols=(("range", b""),))[0]
    bad = h.join(protocols=(("sticky", b""),))
    assert bad[0].error == Errors.INCONSISTENT_GROUP_PROTOCOL
    other_type = h.join(ptype="connect")
    assert other_type[0].error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert a.error == 0


def test_join_validation_errors():
    h = Harness()
    assert h.join(group="")[0].error == Errors.INVALID_GROUP_ID
    assert h.join(session=10)[0].error == Errors.INVALID_SESSION_TIMEOUT
    assert h.join(member_id="nobody")[0].error == Errors.UNKNOWN_MEMBER_ID
    assert h.coord.groups == {}  # a refused join creates no group


def test_unknown_member_and_illegal_generation():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert h.heartbeat("ghost", gen) == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(leader, gen - 1) == Errors.ILLEGAL_GENERATION
    assert h.heartbeat(leader, gen, group="nogroup") == Errors.UNKNOWN_MEMBER_ID
    assert h.sync(leader, gen + 5)[0].error == Errors.ILLEGAL_GENERATION
    assert h.sync("ghost", gen)[0].error == Errors.UNKNOWN_MEMBER_ID
    assert h.join(member_id="ghost")[0].error == Errors.UNKNOWN_MEMBER_ID


def test_sync_during_preparing_rebalance_is_rebalance_in_progress():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    h.join(member_id=leader, protocols=(("range", b"x"),))
    assert h.sync(follower, gen)[0].error == Errors.REBALANCE_IN_PROGRESS


def test_session_timeout_removes_dead_member_and_rebalances():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    h.advance(SESSION // 2)
    assert h.heartbeat(leader, gen) == 0
    h.advance(SESSION // 2 + 1)  # the follower never heartbeated
    assert follower not in h.coord.groups["g"].members
    assert h.state() == S.PREPARING_REBALANCE
    assert h.heartbeat(leader, gen) == Errors.REBALANCE_IN_PROGRESS
    r = h.join(member_id=leader)
    assert r[0].generation == gen + 1 and [m.member_id for m in r[0].members] == [leader]


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    a = h.join(member_id=leader, protocols=(("range", b"x"),))
    for _ in range(REBALANCE // 5000):
        h.advance(5000)
        h.heartbeat(leader, gen)
        if a:
            break
        # the follower keeps heartbeating but never rejoins
        h.heartbeat(follower, gen)
    assert a and a[0].error == 0 and a[0].generation == gen + 1
    assert list(h.coord.groups["g"].members) == [leader]


def test_last_member_leaving_empties_the_group():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert h.leave((follower, None), ("ghost", None)) == [0, Errors.UNKNOWN_MEMBER_ID]
    assert h.state() == S.PREPARING_REBALANCE
    assert h.leave((leader, None)) == [0]
    assert h.state() == S.EMPTY
    assert h.coord.groups["g"].generation == gen + 1
    assert h.leave((leader, None)) == [Errors.UNKNOWN_MEMBER_ID]


def test_leave_during_preparing_completes_the_join_for_the_others():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    a = h.join(member_id=leader, protocols=(("range", b"x"),))
    assert a == []
    h.leave((follower, None))
    assert a[0].error == 0 and a[0].generation == gen + 1


def test_pending_member_id_expires():
    h = Harness()
    first = h.join()
    h.advance(SESSION + 1)
    assert h.join(member_id=first[0].member_id)[0].error == Errors.UNKNOWN_MEMBER_ID


def test_group_max_size():
    h = Harness(max_size=1)
    h.join_new()
    assert h.join()[0].error == Errors.GROUP_MAX_SIZE_REACHED


def test_initial_rebalance_delay_collects_members():
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.join_new()
    assert a == [] and h.state() == S.PREPARING_REBALANCE
    h.advance(1000)
    b = h.join_new()
    h.advance(2001)
    assert a == [] and b == []  # a member arrived during the delay: wait once more
    h.advance(3000)
    assert a[0].generation == b[0].generation == 1
    assert len(a[0].members) == 2


def test_static_member_restart_within_session_keeps_assignment_without_rebalance():
    h = Harness()
    a = h.join(instance="i-a")[0]
    assert a.error == 0 and a.member_id.startswith("i-a-")
    h.sync(a.member_id, a.generation, {a.member_id: b"A"})
    b = h.join(instance="i-b")
    h.join(member_id=a.member_id, instance="i-a")
    gen = b[0].generation
    h.sync(a.member_id, gen, {a.member_id: b"A", b[0].member_id: b"B"})
    h.sync(b[0].member_id, gen)
    # b restarts: a fresh JoinGroup with no member id but the same instance id
    again = h.join(instance="i-b")[0]
    assert again.error == 0 and again.generation == gen and again.member_id != b[0].member_id
    assert h.state() == S.STABLE
    assert h.sync(again.member_id, gen)[0].assignment == b"B"
    # the old incarnation is fenced
    assert h.heartbeat(b[0].member_id, gen, instance="i-b") == Errors.FENCED_INSTANCE_ID
    assert h.sync(b[0].member_id, gen)[0].error == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a.member_id, gen, instance="i-a") == 0


def test_static_leader_restart_is_answered_as_a_follower():
    h = Harness()
    a = h.join(instance="i-a")[0]
    h.sync(a.member_id, a.generation, {a.member_id: b"A"})
    again = h.join(instance="i-a")[0]
    assert again.error == 0 and again.leader == a.member_id != again.member_id
    assert again.members == ()
    assert h.sync(again.member_id, again.generation)[0].assignment == b"A"


def test_static_member_leave_by_instance_id_and_fencing():
    h = Harness()
    a = h.join(instance="i-a")[0]
    h.sync(a.member_id, a.generation, {})
    assert h.leave(("someone-else", "i-a")) == [Errors.FENCED_INSTANCE_ID]
    assert h.leave(("", "i-a")) == [0]
    assert h.state() == S.EMPTY


def test_static_member_claimed_by_dynamic_id_is_fenced():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert h.heartbeat(leader, gen, instance="stolen") == Errors.FENCED_INSTANCE_ID


def test_describe_shows_members_and_assignments_when_stable():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    d = describe_group(h.coord, "g")
    assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in d.members} == {leader: b"A", follower: b"B"}
    assert describe_group(h.coord, "none").state == "Dead"


def test_replay_rebuilds_stable_group_and_timers():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    fresh = GroupCoordinator(h.clock, h.coord.config)
    for rec in h.records:
        fresh.load(rec.key, rec.value)
    fresh.loaded()
    g = fresh.groups["g"]
    assert (g.state, g.generation, g.leader_id, g.protocol_name) == (S.STABLE, gen, leader, "range")
    assert {m: g.members[m].assignment for m in g.members} == {leader: b"A", follower: b"B"}
    result, code = fresh.heartbeat("g", gen, follower)
    assert code == 0
    h.clock.advance(SESSION + 1)
    out = fresh.tick()
    g = fresh.groups["g"]
    assert (g.state, g.generation, g.members) == (S.EMPTY, gen + 1, {})  # both sessions expired
    assert out.records  # the Empty group is written


def test_group_max_size_is_bounded_by_default():
    """group.max.size defaults to 1000, not Kafka's 2^31-1 (a deliberate deviation)."""
    from spool.broker.config import BrokerConfig
    from spool.broker.group_runtime import coordinator_config

    config = coordinator_config(BrokerConfig.load(None, []))
    assert config.max_size == CoordinatorConfig().max_size == 1000
    h = Harness(max_size=config.max_size)
    for _ in range(1000):
        h.join(require_known=False)  # parked in the rebalance: no answer yet
    assert h.join(require_known=False)[0].error == Errors.GROUP_MAX_SIZE_REACHED
    assert len(h.coord.groups["g"].members) == 1000
