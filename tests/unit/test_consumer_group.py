"""KIP-848 consumer groups in the coordinator: the heartbeat state machine with a fake clock.

The target assignment comes from a tiny local range assignor (a test double of
``spool.coordinator.assignors.assign``: members sorted by id take contiguous ranges of each
topic), so these tests check the coordinator's part: epochs, revocation before assignment,
static members, timeouts, metadata changes, and that replaying the records rebuilds the state.
"""

from __future__ import annotations

import sys
import types
import uuid
from dataclasses import dataclass

import pytest

from spool.coordinator import CoordinatorConfig, GroupCoordinator, consumer_ops
from spool.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    MemberState,
    StaticTopics,
)
from spool.coordinator.consumer_ops import HeartbeatRequest
from spool.protocol.errors import Errors
from spool.util.clock import FakeClock

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)
SESSION = 45_000
REBALANCE = 30_000


def range_double(name, members, topics):
    out = {mid: {} for mid in members}
    for tid, spec in topics.items():
        subs = sorted(mid for mid, m in members.items() if tid in m.subscribed)
        if not subs:
            continue
        n, k = divmod(spec.partitions, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            size = n + (1 if i < k else 0)
            if size:
                out[mid][tid] = frozenset(range(start, start + size))
            start += size
    return out


class Harness:
    def __init__(self, topics=None, **cfg) -> None:
        self.clock = FakeClock()
        self.coord = GroupCoordinator(self.clock, CoordinatorConfig(**cfg))
        self.coord.topics = StaticTopics(topics if topics is not None else {"t": (T1, 6)})
        self.records: list = []

    def run(self, result):
        self.records += result.records
        for rec in result.records:
            self.coord.replay(rec)
        for fn, value in result.replies:
            fn(value)

    def hb(self, member_id, epoch, owned=(), group="g", topics=("t",), instance=None,
           regex=None, full=False, assignor=None):
        join = epoch == 0
        req = HeartbeatRequest(
            group, member_id, epoch, instance_id=instance,
            rebalance_timeout_ms=REBALANCE if join or full else -1,
            subscribed_topic_names=tuple(topics) if (join or full) and topics is not None
            else None,
            subscribed_topic_regex=regex, server_assignor=assignor,
            owned=None if owned is None else tuple((t, tuple(sorted(ps))) for t, ps in owned),
            client_id="c", client_host="/127.0.0.1")
        result, answer = consumer_ops.heartbeat(self.coord, req)
        self.run(result)
        return answer

    def group(self, gid="g") -> ConsumerGroup:
        return self.coord.groups[gid]

    def tick(self, ms):
        self.clock.advance(ms)
        self.run(self.coord.tick())


@dataclass(frozen=True)
class _MemberSpec:  # ISSUE17's interface, used until spool.coordinator.assignors lands
    member_id: str
    instance_id: str | None
    rack: str | None
    subscribed: frozenset
    current: dict


@dataclass(frozen=True)
class _TopicSpec:
    topic_id: uuid.UUID
    name: str
    partitions: int
    partition_racks: dict


@pytest.fixture(autouse=True)
def _double(monkeypatch):
    try:
        from spool.coordinator import assignors
    except ImportError:
        assignors = types.ModuleType("spool.coordinator.assignors")
        assignors.MemberSpec, assignors.TopicSpec = _MemberSpec, _TopicSpec
        monkeypatch.setitem(sys.modules, "spool.coordinator.assignors", assignors)
        monkeypatch.setattr("spool.coordinator.assignors", assignors, raising=False)
    monkeypatch.setattr(assignors, "assign", range_double, raising=False)


def owned_of(answer_or_parts):
    return [(t, ps) for t, ps in answer_or_parts.items()]


def no_partition_twice(group: ConsumerGroup) -> None:
    seen: dict = {}
    for m in group.members.values():
        for parts in (m.assigned, m.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} held by {seen[(t, p)]} and {m.member_id}"
                    seen[(t, p)] = m.member_id


def test_first_member_gets_everything_at_epoch_1():
    h = Harness()
    a = h.hb("m1", 0)
    assert (a.error, a.member_id, a.member_epoch) == (0, "m1", 1)
    assert a.assignment == {T1: frozenset(range(6))}
    assert a.heartbeat_interval_ms == 5000
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    # a heartbeat with nothing changed: same epoch, no assignment sent
    a = h.hb("m1", 1, owned=[(T1, range(6))])
    assert (a.error, a.member_epoch, a.assignment) == (0, 1, None)


def test_revocation_before_assignment():
    h = Harness()
    h.hb("m1", 0)
    a2 = h.hb("m2", 0)
    g = h.group()
    assert g.group_epoch == 2
    # m2's target partitions are still m1's: it is at epoch 2 but gets nothing yet
    assert (a2.member_epoch, a2.assignment) == (2, {})
    assert g.members["m2"].state == MemberState.UNRELEASED_PARTITIONS
    no_partition_twice(g)
    # m1 learns it must revoke 3-5: it keeps 0-2, its epoch stays 1
    a1 = h.hb("m1", 1, owned=[(T1, range(6))])
    assert (a1.member_epoch, a1.assignment) == (1, {T1: frozenset(range(3))})
    assert g.members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    assert g.state == ConsumerGroupState.RECONCILING
    # m2 still gets nothing: m1 has not acknowledged the revocation
    a2 = h.hb("m2", 2, owned=[])
    assert a2.assignment is None and g.members["m2"].assigned == {}
    no_partition_twice(g)
    # m1 acknowledges (owns 0-2 only): epoch 2, stable
    a1 = h.hb("m1", 1, owned=[(T1, range(3))])
    assert (a1.member_epoch, a1.assignment) == (2, None)
    assert g.members["m1"].state == MemberState.STABLE
    a2 = h.hb("m2", 2, owned=[])
    assert (a2.member_epoch, a2.assignment) == (2, {T1: frozenset(range(3, 6))})
    assert g.state == ConsumerGroupState.STABLE
    no_partition_twice(g)


def test_a_second_revocation_moves_the_member_to_the_next_epoch():
    h = Harness()
    h.hb("m1", 0)
    h.hb("m2", 0)
    a1 = h.hb("m1", 1, owned=[(T1, range(6))])  # must revoke 3 of 6 at epoch 1
    assert a1.member_epoch == 1
    kept = a1.assignment[T1]
    h.hb("m3", 0)  # the group epoch moves to 3: m1's new target is 2 partitions
    # m1 revoked the first three; it still owns one too many: it moves to epoch 2 (the
    # epoch after the one it revoked at, as Kafka's CurrentAssignmentBuilder), revoking
    a1 = h.hb("m1", 1, owned=[(T1, kept)])
    m1 = h.group().members["m1"]
    assert (a1.error, a1.member_epoch, m1.state) == (0, 2, MemberState.UNREVOKED_PARTITIONS)
    assert len(a1.assignment[T1]) == 2 and a1.assignment[T1] < kept
    no_partition_twice(h.group())

def test_fenced_and_unknown_members():
    h = Harness()
    h.hb("m1", 0)
    assert h.hb("m1", 5, owned=[]).error == Errors.FENCED_MEMBER_EPOCH
    assert h.hb("m1", 2, owned=[]).error == Errors.FENCED_MEMBER_EPOCH  # just one above
    assert h.hb("nobody", 1, owned=[]).error == Errors.UNKNOWN_MEMBER_ID
    assert h.hb("m1", 1, group="other", owned=[]).error == Errors.GROUP_ID_NOT_FOUND
    h.hb("m2", 0)
    h.hb("m1", 1, owned=[(T1, range(6))])
    h.hb("m1", 1, owned=[(T1, range(3))])  # epoch 2 now, previous 1
    # the previous epoch is accepted while it owns no more than its assignment (lost reply)
    assert h.hb("m1", 1, owned=[(T1, range(3))]).error == 0
    assert h.hb("m1", 1, owned=[(T1, range(6))]).error == Errors.FENCED_MEMBER_EPOCH
    assert h.hb("m1", 0, owned=None).error == Errors.INVALID_REQUEST


def test_invalid_requests():
    h = Harness()
    req = HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=-1, subscribed_topic_names=("t",),
                           owned=())
    _, a = consumer_ops.heartbeat(h.coord, req)
    assert (a.error, a.message) == (Errors.INVALID_REQUEST,
                                    "RebalanceTimeoutMs must be provided in first request.")
    _, a = consumer_ops.heartbeat(h.coord, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1,
                                                            subscribed_topic_names=("t",),
                                                            owned=()))
    assert (a.error, a.message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")
    assert h.hb("m", 0, assignor="nope").error == Errors.UNSUPPORTED_ASSIGNOR
    a = h.hb("m", -3, owned=[])
    assert (a.error, a.message) == (Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
    a = h.hb("m", 0, topics=None, regex="(a")
    assert (a.error, a.message) == (Errors.INVALID_REGULAR_EXPRESSION,
                                    "SubscribedTopicRegex `(a` is not a valid regular expression: "
                                    "missing closing ).")
    assert "g" not in h.coord.groups


def test_leave_bumps_the_epoch_and_frees_partitions():
    h = Harness()
    h.hb("m1", 0)
    h.hb("m2", 0)
    a = h.hb("m2", -1, owned=None)
    assert (a.error, a.member_epoch) == (0, -1)
    g = h.group()
    assert set(g.members) == {"m1"} and g.group_epoch == 3
    a = h.hb("m1", 1, owned=[(T1, range(6))])
    assert (a.member_epoch, a.assignment) == (3, None)  # keeps all 6: nothing moved
    assert h.hb("m1", -1, owned=None).error == 0
    assert g.state == ConsumerGroupState.EMPTY


def test_session_timeout_fences_and_reassigns():
    h = Harness()
    h.hb("m1", 0)
    h.hb("m2", 0)
    h.hb("m1", 1, owned=[(T1, range(6))])
    h.hb("m1", 1, owned=[(T1, range(3))])
    h.hb("m2", 2, owned=[])
    for _ in range(4):  # m1 keeps heartbeating, m2 goes silent
        h.clock.advance(10_000)
        h.run(h.coord.tick())
        h.hb("m1", 2, owned=[(T1, range(3))])
    h.tick(10_000)
    g = h.group()
    assert set(g.members) == {"m1"}
    a = h.hb("m1", 2, owned=[(T1, range(3))])
    assert (a.member_epoch, a.assignment) == (3, {T1: frozenset(range(6))})


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = Harness()
    h.hb("m1", 0)
    h.hb("m2", 0)
    h.hb("m1", 1, owned=[(T1, range(6))])  # must revoke 3-5 within REBALANCE
    h.clock.advance(REBALANCE - 1)
    h.hb("m1", 1, owned=[(T1, range(6))])  # still owns them (heartbeats, does not revoke)
    h.hb("m2", 2, owned=[])
    h.tick(1)
    assert set(h.group().members) == {"m2"}
    a = h.hb("m2", 2, owned=[])
    assert a.assignment == {T1: frozenset(range(6))}


def test_static_member_rejoins_with_its_assignment():
    h = Harness()
    h.hb("a1", 0, instance="i1")
    h.hb("b", 0)
    h.hb("a1", 1, owned=[(T1, range(6))], instance="i1")
    h.hb("a1", 1, owned=[(T1, range(3))], instance="i1")
    h.hb("b", 2, owned=[])
    g = h.group()
    epoch = g.group_epoch
    # another process with the same instance id while a1 is alive
    assert h.hb("a2", 0, instance="i1").error == Errors.UNRELEASED_INSTANCE_ID
    a = h.hb("a1", -2, owned=None, instance="i1")
    assert (a.error, a.member_epoch) == (0, -2)
    assert g.group_epoch == epoch  # a static leave is no rebalance
    a = h.hb("a2", 0, instance="i1")
    assert (a.error, a.assignment) == (0, {T1: frozenset(range(3))})
    assert set(g.members) == {"a2", "b"} and g.group_epoch == epoch
    assert h.hb("a1", 2, owned=[], instance="i1").error == Errors.FENCED_INSTANCE_ID
    no_partition_twice(g)


def test_static_member_session_expires_after_leave():
    h = Harness()
    h.hb("a1", 0, instance="i1")
    h.hb("a1", -2, owned=None, instance="i1")
    h.tick(SESSION)
    assert h.group().members == {}


def test_a_static_member_leaving_while_revoking_releases_what_it_revokes():
    h = Harness()
    h.hb("a1", 0, instance="i1")
    h.hb("b", 0)
    h.hb("a1", 1, owned=[(T1, range(6))], instance="i1")  # must revoke 3-5
    assert h.group().members["a1"].state == MemberState.UNREVOKED_PARTITIONS
    assert h.hb("a1", -2, instance="i1").error == 0  # gone for now, keeps 0-2
    a = h.hb("b", 2, owned=[])
    assert a.assignment == {T1: frozenset(range(3, 6))}
    no_partition_twice(h.group())


def test_a_regex_change_bumps_the_epoch_and_moves_the_member():
    h = Harness(topics={"t": (T1, 2), "u": (T2, 2)})
    h.hb("m1", 0, topics=None, regex="t")
    h.hb("m2", 0, topics=None, regex="u")
    h.hb("m3", 0, topics=None, regex="t")
    epoch = h.group().group_epoch
    member = h.group().members["m1"]
    owned = list(member.assigned.items())
    # both regexes stay in use (m2, m3), the topics too: only m1's own change moves it
    a = h.hb("m1", member.member_epoch, owned=owned, topics=None, regex="u")
    assert a.error == 0 and h.group().group_epoch == epoch + 1
    assert set(h.group().target["m1"]) == {T2}

def test_metadata_changes_bump_the_epoch_on_the_next_heartbeat():
    h = Harness()
    h.hb("m1", 0, topics=("t", "u"))
    g = h.group()
    assert g.group_epoch == 1 and set(g.subscription_metadata) == {"t"}
    h.coord.topics.topics["u"] = (T2, 2)  # created
    a = h.hb("m1", 1, owned=[(T1, range(6))])
    assert (a.member_epoch, a.assignment) == (2, {T1: frozenset(range(6)), T2: frozenset({0, 1})})
    h.coord.topics.topics["t"] = (T1, 8)  # partitions added
    a = h.hb("m1", 2, owned=[(T1, range(6)), (T2, range(2))])
    assert a.member_epoch == 3 and a.assignment[T1] == frozenset(range(8))
    del h.coord.topics.topics["t"]  # deleted: its partitions must be revoked first
    a = h.hb("m1", 3, owned=[(T1, range(8)), (T2, range(2))])
    assert a.member_epoch == 3 and g.members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    a = h.hb("m1", 3, owned=[(T2, range(2))])
    assert (a.member_epoch, a.assignment) == (4, None)


def test_regex_subscription_resolved_by_the_broker():
    h = Harness(topics={"orders-1": (T1, 2), "orders-2": (T2, 2), "x-orders-3": (T3, 1)})
    a = h.hb("m1", 0, topics=None, regex="orders-.*")  # a full match: not x-orders-3
    assert a.assignment == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    g = h.group()
    assert g.regexes["orders-.*"].topics == {"orders-1", "orders-2"}
    h.coord.topics.topics["orders-4"] = (uuid.UUID(int=4), 1)  # created: the regex gets it
    a = h.hb("m1", 1, owned=[(T1, range(2)), (T2, range(2))])
    assert a.member_epoch == 2 and uuid.UUID(int=4) in a.assignment


def test_max_size_and_other_group_types():
    h = Harness(consumer_max_size=1)
    h.hb("m1", 0)
    assert h.hb("m2", 0).error == Errors.GROUP_MAX_SIZE_REACHED


def test_replaying_the_records_gives_the_same_state():
    h = Harness()
    h.hb("m1", 0, instance="i1")
    h.hb("m2", 0, topics=None, regex="t")
    h.hb("m1", 1, owned=[(T1, range(6))], instance="i1")
    h.hb("m1", -2, owned=None, instance="i1")
    h.hb("m3", 0, instance="i1")
    h.hb("m2", 2, owned=[])
    h.hb("m4", 0)
    h.hb("m4", -1, owned=None)
    h.tick(SESSION)  # everyone expires
    h.coord.topics.topics["u"] = (T2, 2)
    a = h.hb("m5", 0, topics=("t", "u"))  # two topics in the subscription metadata
    epoch = h.group().group_epoch
    # nothing changed: a heartbeat keeps the epochs
    b = h.hb("m5", a.member_epoch, owned=list(a.assignment.items()))
    assert (b.member_epoch, h.group().group_epoch) == (a.member_epoch, epoch)
    fresh = GroupCoordinator(FakeClock(), CoordinatorConfig())
    for rec in h.records:
        fresh.load(rec.key, rec.value)
    assert fresh.groups["g"].snapshot() == h.group().snapshot()


def test_failed_append_reverts_the_group():
    h = Harness()
    h.hb("m1", 0)
    before = h.group().snapshot()
    cp = h.coord.checkpoint(["g"])
    result, answer = consumer_ops.heartbeat(h.coord, HeartbeatRequest(
        "g", "m2", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned=()))
    assert answer.error == 0 and "m2" in h.group().members
    h.coord.revert(cp, [])
    assert h.group().snapshot() == before
    assert ("cg-session", "g", "m2") not in h.coord.timers


def test_a_classic_group_of_another_protocol_type_is_not_upgraded():
    from spool.coordinator import ClassicGroup, JoinRequest

    h = Harness(initial_rebalance_delay_ms=0)
    box: list = []
    h.run(h.coord.join_group(JoinRequest("g", "", None, "connect", [("v0", b"x")], 10_000,
                                         10_000, "c", "/127.0.0.1",
                                         require_known_member_id=False), box.append))
    assert box[-1].error == 0
    a = h.hb("c1", 0)
    assert (a.error, a.message) == (Errors.GROUP_ID_NOT_FOUND, "Group g is not a consumer group")
    assert isinstance(h.coord.groups["g"], ClassicGroup)

def test_a_failed_append_of_an_upgrade_gives_the_classic_group_back():
    from spool.coordinator import ClassicGroup

    h = Harness(initial_rebalance_delay_ms=0)
    a = classic_join(h, "")
    mid = a[-1].member_id
    h.run(h.coord.sync_group("g", a[-1].generation, mid, None, None, None, {}, [].append))
    cp = h.coord.checkpoint(["g"])
    result, answer = consumer_ops.heartbeat(h.coord, HeartbeatRequest(
        "g", "c1", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned=()))
    assert answer.error == 0 and isinstance(h.coord.groups["g"], ConsumerGroup)
    h.coord.revert(cp, [])
    group = h.coord.groups["g"]
    assert isinstance(group, ClassicGroup) and set(group.members) == {mid}

def test_offset_commits_and_fetches_check_member_epochs():
    from spool.coordinator.admin import (
        OffsetToCommit,
        _check_commit,
        check_offset_fetch,
        commit_offsets,
    )

    h = Harness()
    o = [OffsetToCommit("t", 0, 5)]
    # no member yet: the admin client's commit (-1) is fine, and makes no classic group
    h.hb("m1", 0)
    assert commit_offsets(h.coord, "g", 1, "m1", None, o, version=9)[1] == [0]
    assert commit_offsets(h.coord, "g", 0, "m1", None, o, version=9)[1] == \
        [Errors.STALE_MEMBER_EPOCH]
    assert commit_offsets(h.coord, "g", 1, "nobody", None, o, version=9)[1] == \
        [Errors.UNKNOWN_MEMBER_ID]
    assert commit_offsets(h.coord, "g", -1, "", None, o, version=9)[1] == \
        [Errors.UNKNOWN_MEMBER_ID]  # an admin commit while the group has members
    assert commit_offsets(h.coord, "g", 1, "m1", None, o, version=8)[1] == \
        [Errors.UNSUPPORTED_VERSION]
    assert _check_commit(h.coord, "g", 0, "m1", None, transactional=True) == \
        Errors.ILLEGAL_GENERATION
    assert _check_commit(h.coord, "g", 1, "m1", None, transactional=True) == 0
    assert check_offset_fetch(h.coord, "g", None, -1) == 0
    assert check_offset_fetch(h.coord, "g", "m1", 1) == 0
    assert check_offset_fetch(h.coord, "g", "m1", 0) == Errors.STALE_MEMBER_EPOCH
    assert check_offset_fetch(h.coord, "g", "m2", 1) == Errors.UNKNOWN_MEMBER_ID
    h.hb("m1", -1, owned=None)
    assert commit_offsets(h.coord, "g", -1, "", None, o, version=9)[1] == [0]


def test_admin_apis_on_a_consumer_group():
    from spool.coordinator import JoinRequest
    from spool.coordinator.admin import delete_groups, describe_group, list_groups

    h = Harness()
    h.hb("m1", 0)
    assert list_groups(h.coord) == [("g", "consumer", "Stable", "consumer")]
    assert list_groups(h.coord, types=["classic"]) == []
    assert list_groups(h.coord, states=["stable"], types=["Consumer"]) == \
        [("g", "consumer", "Stable", "consumer")]
    assert describe_group(h.coord, "g").state == "Dead"  # DescribeGroups is for classic groups
    # classic requests on a consumer group
    box: list = []
    req = JoinRequest("g", "", None, "consumer", [("range", b"")], 10_000, 10_000)
    h.run(h.coord.join_group(req, box.append))
    assert box[0].error == Errors.MEMBER_ID_REQUIRED  # it may join as a classic member
    box.clear()
    bad = JoinRequest("g", "", None, "consumer", [("range", b"")], 10_000, 10_000,
                      require_known_member_id=False)  # no consumer protocol subscription
    h.run(h.coord.join_group(bad, box.append))
    assert box[0].error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.coord.heartbeat("g", 1, "m1")[1] == Errors.UNKNOWN_MEMBER_ID  # not classic
    assert h.coord.leave_group("g", [("m1", None)])[1] == [Errors.UNKNOWN_MEMBER_ID]
    # DeleteGroups: refused while it has members, then every record is tombstoned
    result, codes = delete_groups(h.coord, ["g"])
    assert codes == [Errors.NON_EMPTY_GROUP] and not result.records
    h.hb("m1", -1, owned=None)
    result, codes = delete_groups(h.coord, ["g"])
    assert codes == [0] and "g" not in h.coord.groups
    h.run(result)
    fresh = GroupCoordinator(FakeClock(), CoordinatorConfig())
    for rec in h.records:
        fresh.load(rec.key, rec.value)
    assert "g" not in fresh.groups
    # an empty consumer group is replaced by a classic group that joins
    h.hb("m2", 0)
    h.hb("m2", -1, owned=None)
    box.clear()
    h.run(h.coord.join_group(req, box.append))
    assert box[0].error == Errors.MEMBER_ID_REQUIRED
    assert h.coord.groups["g"].type == "classic"


def test_regex_gets_only_the_topics_the_member_may_describe():
    h = Harness(topics={"orders-1": (T1, 2), "orders-2": (T2, 2)})
    req = HeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=REBALANCE,
                           subscribed_topic_regex="orders-.*", owned=(),
                           describable=lambda names: [n for n in names if n != "orders-2"])
    result, a = consumer_ops.heartbeat(h.coord, req)
    h.run(result)
    assert a.assignment == {T1: frozenset({0, 1})}
    assert h.group().regexes["orders-.*"].topics == {"orders-1"}


def subscription(topics, owned=()) -> bytes:
    from spool.protocol._generated import DATA_SCHEMAS
    from spool.protocol._generated.consumer_protocol_subscription import TopicPartition

    msg = DATA_SCHEMAS["ConsumerProtocolSubscription"](
        topics=list(topics), user_data=None,
        owned_partitions=[TopicPartition(topic=t, partitions=list(ps)) for t, ps in owned])
    return (1).to_bytes(2, "big") + msg.to_bytes(1)


def classic_join(h, member_id, owned=(), generation_wait=True):
    from spool.coordinator import JoinRequest

    box: list = []
    req = JoinRequest("g", member_id, None, "consumer",
                      [("range", subscription(["t"], owned))], 10_000, 10_000, "c",
                      "/127.0.0.1", require_known_member_id=False)
    h.run(h.coord.join_group(req, box.append))
    return box


def test_online_upgrade_and_downgrade():
    from spool.coordinator import ClassicGroup
    from spool.coordinator.consumer_classic import decode_assignment

    h = Harness(initial_rebalance_delay_ms=0)
    # a classic group of two members, stable, leader assigns 0-2 and 3-5
    a, b = classic_join(h, ""), []
    h.clock.advance(1)
    b = classic_join(h, "")
    a = classic_join(h, a[0].member_id)
    leader = a[-1].leader
    ids = sorted([a[-1].member_id, b[-1].member_id])
    from spool.coordinator.consumer_classic import encode_assignment
    assignments = {ids[0]: encode_assignment({T1: frozenset({0, 1, 2})}, {T1: "t"}, 1),
                   ids[1]: encode_assignment({T1: frozenset({3, 4, 5})}, {T1: "t"}, 1)}
    box: list = []
    gen = a[-1].generation
    for mid in ids:
        h.run(h.coord.sync_group("g", gen, mid, None, None, None,
                                 assignments if mid == leader else {}, box.append))
    assert isinstance(h.coord.groups["g"], ClassicGroup)
    # ConsumerGroupDescribe of a classic group: not found (clients fall back to DescribeGroups)
    from spool.broker.handlers.consumer_groups import describe

    d = describe(h.coord, "g", lambda t: "t")
    assert (d.error_code, d.error_message) == (Errors.GROUP_ID_NOT_FOUND,
                                               "Group g is not a consumer group.")
    # a consumer-protocol member joins: the group is upgraded, classic members keep 0-5
    c = h.hb("c1", 0)
    g = h.group()
    assert c.error == 0 and c.assignment == {}  # its share is still held by classic members
    assert {mid for mid, m in g.members.items() if m.classic is not None} == set(ids)
    no_partition_twice(g)
    # ConsumerGroupDescribe: each member's type, its assignment and its target
    from spool.broker.handlers.consumer_groups import MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER

    def flat(a) -> set[int]:
        return {p for tp in a.topic_partitions for p in tp.partitions}

    d = {m.member_id: m for m in describe(h.coord, "g", lambda t: "t").members}
    assert {mid: m.member_type for mid, m in d.items()} == {
        ids[0]: MEMBER_TYPE_CLASSIC, ids[1]: MEMBER_TYPE_CLASSIC, "c1": MEMBER_TYPE_CONSUMER}
    assert (flat(d["c1"].assignment), len(flat(d["c1"].target_assignment))) == (set(), 2)
    assert flat(d[ids[0]].assignment) | flat(d[ids[1]].assignment) == set(range(6))
    assert set().union(*(flat(m.target_assignment) for m in d.values())) == set(range(6))
    # classic members learn of the rebalance by heartbeat, rejoin with what they own
    assert h.coord.heartbeat("g", gen, ids[0])[1] == Errors.REBALANCE_IN_PROGRESS
    for mid, owned in ((ids[0], range(3)), (ids[1], range(3, 6))):
        j = classic_join(h, mid, owned=[("t", owned)])[-1]
        assert j.error == 0 and j.generation == g.members[mid].member_epoch
    for mid in ids:  # each revoked what it must give up: rejoin again owning the rest
        m = g.members[mid]
        if m.state == MemberState.UNREVOKED_PARTITIONS:
            keep = sorted(m.assigned.get(T1, ()))
            classic_join(h, mid, owned=[("t", keep)])
    for mid in ids:
        m = g.members[mid]
        box.clear()
        h.run(h.coord.sync_group("g", m.member_epoch, mid, None, "consumer", "range",
                                 {}, box.append))
        assert box[0].error == 0
        assert dict(decode_assignment(box[0].assignment)) == {
            "t": sorted(m.assigned[T1])} if m.assigned else True
    c = h.hb("c1", g.group_epoch, owned=[])
    no_partition_twice(g)
    assert sum(len(m.assigned.get(T1, ())) for m in g.members.values()) == 6
    # the consumer member leaves: only classic members are left, the group goes back
    h.hb("c1", -1, owned=None)
    classic = h.coord.groups["g"]
    assert isinstance(classic, ClassicGroup) and set(classic.members) == set(ids)
    assert classic.state.value == "PreparingRebalance"
    fresh = GroupCoordinator(FakeClock(), CoordinatorConfig())
    for rec in h.records:
        fresh.load(rec.key, rec.value)
    assert isinstance(fresh.groups["g"], ClassicGroup)
    assert set(fresh.groups["g"].members) == set(ids)


def test_migration_policy_disabled():
    h = Harness(initial_rebalance_delay_ms=0, consumer_migration_policy="disabled")
    classic_join(h, "")
    assert h.hb("c1", 0).error == Errors.GROUP_ID_NOT_FOUND


def test_a_retention_pass_that_fails_to_append_keeps_the_empty_group():
    """The retention timer names no group; the consumer group it deletes is saved in the
    checkpoint when first touched, so a failed append brings it back."""
    h = Harness(offsets_retention_ms=1000, retention_check_interval_ms=1000)
    h.hb("m1", 0)
    h.hb("m1", -1, owned=None)
    before = h.group().snapshot()
    cp = h.coord.checkpoint([])
    h.clock.advance(1000)
    result = h.coord.tick()
    assert "g" not in h.coord.groups and result.records  # deleted: tombstones written
    h.coord.revert(cp, [])
    assert h.coord.groups["g"].snapshot() == before


def test_a_classic_member_that_does_not_rejoin_is_fenced():
    h = Harness(initial_rebalance_delay_ms=0)
    a = classic_join(h, "")
    mid = a[-1].member_id
    box: list = []
    h.run(h.coord.sync_group("g", a[-1].generation, mid, None, None, None, {}, box.append))
    h.hb("c1", 0)  # upgrade
    gen = h.group().members[mid].member_epoch
    assert h.coord.heartbeat("g", gen, mid)[1] == Errors.REBALANCE_IN_PROGRESS
    h.clock.advance(9_999)  # its rebalance timeout is 10 s; it heartbeats but never rejoins
    assert h.coord.heartbeat("g", gen, mid)[1] == Errors.REBALANCE_IN_PROGRESS
    h.run(h.coord.tick())
    assert mid in h.group().members
    h.tick(1)
    assert set(h.group().members) == {"c1"}


def test_a_classic_member_of_a_consumer_group_that_heartbeats_stays():
    h = Harness(initial_rebalance_delay_ms=0)
    a = classic_join(h, "")
    mid = a[-1].member_id
    box: list = []
    h.run(h.coord.sync_group("g", a[-1].generation, mid, None, None, None, {}, box.append))
    h.hb("c1", 0)  # upgrade

    def heartbeat(generation):
        result, code = h.coord.heartbeat("g", generation, mid)
        h.run(result)
        return code

    j = classic_join(h, mid, owned=[("t", range(6))])[-1]
    box.clear()
    h.run(h.coord.sync_group("g", j.generation, mid, None, "consumer", "range", {}, box.append))
    assert box[0].error == 0 and heartbeat(j.generation) == 0
    assert heartbeat(j.generation - 1) == Errors.ILLEGAL_GENERATION
    # it heartbeats (session timeout 10 s) past its session and rebalance timeouts: it stays
    for _ in range(4):
        h.tick(5000)
        assert heartbeat(j.generation) == 0
        c1 = h.group().members["c1"]
        h.hb("c1", c1.member_epoch, owned=list(c1.assigned.items()))
    assert set(h.group().members) == {mid, "c1"}
    # another member joins: the classic member's sync at its old generation is refused
    h.hb("c2", 0)
    box.clear()
    h.run(h.coord.sync_group("g", j.generation, mid, None, "consumer", "range", {}, box.append))
    assert box[0].error == Errors.REBALANCE_IN_PROGRESS

def test_upgrade_during_a_classic_rebalance_answers_the_parked_join():
    h = Harness(initial_rebalance_delay_ms=3000)
    box = classic_join(h, "")  # parked: the initial rebalance delay
    assert box == []
    mid = next(iter(h.coord.groups["g"].members))
    assert h.hb("c1", 0).error == 0
    assert box[0].error == Errors.REBALANCE_IN_PROGRESS
    m = h.group().members[mid]
    assert m.classic is not None and m.subscribed_topic_names == ("t",)


def test_upgrade_answers_a_parked_sync_group():
    h = Harness(initial_rebalance_delay_ms=0)
    a = classic_join(h, "")
    h.clock.advance(1)
    b = classic_join(h, "")
    a = classic_join(h, a[0].member_id)
    follower = next(r for r in (a[-1], b[-1]) if r.member_id != r.leader)
    box: list = []  # the follower's SyncGroup waits for the leader's assignments
    h.run(h.coord.sync_group("g", follower.generation, follower.member_id, None, None, None,
                             {}, box.append))
    assert box == []
    assert h.hb("c1", 0).error == 0  # upgrade
    assert [r.error for r in box] == [Errors.REBALANCE_IN_PROGRESS]
