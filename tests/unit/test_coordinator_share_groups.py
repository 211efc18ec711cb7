"""Share groups (KIP-932) in the group coordinator: heartbeats, epochs, assignment, state
initialization bookkeeping, session timeouts, deletion, and replay equal to the live state."""

from __future__ import annotations

import uuid

from spool.coordinator import CoordinatorConfig, GroupCoordinator, JoinRequest
from spool.coordinator.admin import OffsetToCommit, commit_offsets, delete_groups, list_groups
from spool.coordinator.consumer_group import TopicMetadata
from spool.coordinator.share_group import ShareGroup
from spool.coordinator.share_ops import (
    INITIALIZE_RETRY_MS,
    ShareHeartbeat,
    ShareLimits,
    heartbeat,
    initialized,
    share_partitions,
)
from spool.protocol.errors import Errors
from spool.util.clock import FakeClock

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"orders": TopicMetadata(T1, "orders", 1),
          "audit": TopicMetadata(T2, "audit", 3)}
LIMITS = ShareLimits(session_timeout_ms=45_000, heartbeat_interval_ms=5_000, max_size=5,
                     max_groups=2)


class Harness:
    """A coordinator and what the runtime does: records kept (and replayed live, a no-op for
    share records), replies ignored; the persister's answers are given by the test."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.coord = GroupCoordinator(self.clock, CoordinatorConfig())
        self.records: list = []
        self.topics = dict(TOPICS)

    def run(self, result_and_answer):
        result, answer = result_and_answer
        self.records += result.records
        for rec in result.records:
            self.coord.replay(rec)
        return answer

    def hb(self, member, epoch, topics=None, group="g", rack=None):
        req = ShareHeartbeat(group, member, epoch, rack, topics, "client", "/127.0.0.1")
        return self.run(heartbeat(self.coord, req, LIMITS, self.topics))

    def join(self, member, topics=("orders",), group="g"):
        return self.hb(member, 0, list(topics), group)

    def init_all(self, answer, group="g", ok=True):
        """The persister initialized every partition the heartbeat asked for."""
        return self.run(initialized(self.coord, group, [(t.topic_id, t.partition, ok)
                                                        for t in answer.initialize]))

    def group(self, group="g") -> ShareGroup:
        g = self.coord.groups[group]
        assert isinstance(g, ShareGroup)
        return g


def snapshot(coord: GroupCoordinator) -> dict:
    """What a load must rebuild: every share group's durable state."""
    out = {}
    for gid, g in coord.groups.items():
        if isinstance(g, ShareGroup):
            out[gid] = (g.group_epoch, g.assignment_epoch, sorted(
                (m.member_id, m.member_epoch, m.previous_member_epoch, m.rack_id, m.client_id,
                 m.client_host, m.subscribed_topic_names, sorted(m.assigned.items()))
                for m in g.members.values()), sorted(g.target.items()),
                sorted(g.subscription.items()),
                sorted((t, i.name, sorted(i.partitions)) for t, i in g.initialized.items()),
                sorted((t, i.name, sorted(i.partitions), i.create_timestamp)
                       for t, i in g.initializing.items()))
    return out


def loaded_from(records) -> GroupCoordinator:
    coord = GroupCoordinator(FakeClock(), CoordinatorConfig())
    for rec in records:
        coord.load(rec.key, rec.value)
    coord.loaded()
    return coord


def test_join_initializes_state_then_assigns_after_initialization():
    h = Harness()
    a = h.join("m1", ["orders"])
    # joined at the bumped group epoch; nothing is assignable before the state exists
    assert (a.error, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (0, "m1", 1, 5000)
    assert a.assignment == {}
    assert [(t.topic_id, t.partition, t.start_offset) for t in a.initialize] == [(T1, 0, -1)]
    assert a.state_epoch == 1
    assert h.group().initializing[T1].partitions == {0}
    # a second heartbeat before the persister answers does not ask again
    assert h.hb("m1", 1).initialize == ()
    h.init_all(a)
    assert h.group().initialized[T1].partitions == {0} and not h.group().initializing
    b = h.hb("m1", 1)
    assert (b.member_epoch, b.assignment) == (2, {T1: frozenset({0})})
    c = h.hb("m1", 2)  # nothing changed: no assignment in the answer
    assert (c.error, c.member_epoch, c.assignment) == (0, 2, None)


def test_members_share_a_single_partition_and_a_failed_initialization_is_retried():
    h = Harness()
    a = h.join("m1")
    h.init_all(a, ok=False)
    g = h.group()
    assert not g.initialized and not g.initializing
    again = h.hb("m1", 1)
    assert [(t.partition, t.start_offset) for t in again.initialize] == [(0, -1)]
    h.init_all(again)
    b = h.join("m2")
    assert b.assignment == {T1: frozenset({0})}  # shared: no exclusivity
    assert h.hb("m1", 1).assignment == {T1: frozenset({0})}
    g = h.group()
    assert g.target == {"m1": {T1: frozenset({0})}, "m2": {T1: frozenset({0})}}
    assert g.members["m1"].member_epoch == g.members["m2"].member_epoch == g.assignment_epoch


def test_new_partition_of_a_known_topic_starts_at_zero():
    h = Harness()
    h.init_all(h.join("m1", ["orders"]))
    h.topics["orders"] = TopicMetadata(T1, "orders", 2)  # CreatePartitions
    a = h.hb("m1", 1)
    assert [(t.partition, t.start_offset) for t in a.initialize] == [(1, 0)]


def test_epochs_fencing_and_unknown_members():
    h = Harness()
    h.init_all(h.join("m1"))
    assert h.hb("m1", 1).member_epoch == 2
    # the previous epoch is accepted (the answer with the bump may have been lost)
    assert h.hb("m1", 1).error == 0
    fenced = h.hb("m1", 5)
    assert fenced.error == Errors.FENCED_MEMBER_EPOCH and "greater member epoch" in fenced.message
    assert h.hb("nobody", 3).error == Errors.UNKNOWN_MEMBER_ID
    assert h.hb("m1", 3, group="other").error == Errors.GROUP_ID_NOT_FOUND
    assert h.hb("m1", -1, group="other").error == Errors.GROUP_ID_NOT_FOUND
    assert h.hb("nobody", -1).error == Errors.UNKNOWN_MEMBER_ID


def test_invalid_requests():
    h = Harness()
    for member, epoch, topics, group, rack, text in [
        ("m", 0, ["orders"], "", None, "GroupId can't be empty."),
        ("", 0, ["orders"], "", None, "MemberId can't be empty."),
        ("m", 0, ["orders"], "g", "", "RackId can't be empty."),
        # blank is empty, as Kafka's throwIfEmptyString (trim)
        ("  ", 0, ["orders"], "g", None, "MemberId can't be empty."),
        ("m", 0, ["orders"], " ", None, "GroupId can't be empty."),
        ("m", 0, ["orders"], "g", " ", "RackId can't be empty."),
        ("m", 0, None, "g", None, "SubscribedTopicNames must be set in first request."),
        ("m", -2, None, "g", None, "MemberEpoch is invalid."),
    ]:
        a = h.hb(member, epoch, topics, group, rack)
        assert (a.error, a.message) == (Errors.INVALID_REQUEST, text)
    assert h.coord.groups == {} and h.records == []


def test_leave_and_session_timeout_fence_members():
    h = Harness()
    h.init_all(h.join("m1", ["audit"]))
    h.join("m2", ["audit"])
    h.hb("m1", 1)
    g = h.group()
    assert sorted(len(p[T2]) for p in g.target.values()) == [1, 2]
    left = h.hb("m2", -1)
    assert (left.error, left.member_epoch) == (0, -1)
    assert set(h.group().members) == {"m1"} and "m2" not in h.group().target
    epoch = h.group().group_epoch
    # the next heartbeat of m1 takes all three partitions at the new epoch
    a = h.hb("m1", h.group().members["m1"].member_epoch)
    assert (a.member_epoch, a.assignment) == (epoch, {T2: frozenset({0, 1, 2})})
    # m1 goes silent: its session ends after group.share.session.timeout.ms
    h.clock.advance(LIMITS.session_timeout_ms - 1)
    assert h.run((h.coord.tick(), None)) is None and "m1" in h.group().members
    h.clock.advance(1)
    h.run((h.coord.tick(), None))
    assert h.group().members == {} and h.group().state == "Empty"
    assert h.group().group_epoch == epoch + 1


def test_limits_and_groups_of_other_types():
    h = Harness()
    for i in range(LIMITS.max_size):
        assert h.join(f"m{i}").error == 0
    full = h.join("one-too-many")
    assert full.error == Errors.GROUP_MAX_SIZE_REACHED
    assert full.message == "The share group has reached its maximum capacity of 5 members."
    assert h.join("x", group="g2").error == 0
    assert h.join("x", group="g3").error == Errors.GROUP_MAX_SIZE_REACHED  # max.groups = 2
    # max.groups counts the share groups of one __consumer_offsets partition
    h.coord.partition_of = lambda group_id: 1 if group_id == "other" else 0
    assert h.join("x", group="other").error == 0
    # classic APIs on a share group's id
    box: list = []
    result = h.coord.join_group(JoinRequest("g", "", None, "consumer", [("range", b"")],
                                            10_000, 10_000), box.append)
    for fn, value in result.replies:
        fn(value)
    assert box[0].error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.coord.heartbeat("g", 1, "m0")[1] == Errors.UNKNOWN_MEMBER_ID
    assert h.coord.leave_group("g", [("m0", None)])[1] == [Errors.UNKNOWN_MEMBER_ID]
    _, codes = commit_offsets(h.coord, "g", 1, "m0", None, [OffsetToCommit("orders", 0, 5)])
    assert codes == [Errors.GROUP_ID_NOT_FOUND]
    assert "m0" in h.group().members


def test_share_heartbeat_on_a_classic_group_id_is_group_id_not_found():
    h = Harness()
    box: list = []
    h.run((h.coord.join_group(JoinRequest("c", "", None, "consumer", [("range", b"")],
                                          10_000, 10_000, require_known_member_id=False),
                              box.append), None))
    a = h.join("m1", group="c")
    assert (a.error, a.message) == (Errors.GROUP_ID_NOT_FOUND, "Group c is not a share group.")


def test_list_and_delete_share_groups():
    h = Harness()
    h.init_all(h.join("m1", ["orders", "audit"]))
    assert list_groups(h.coord) == [("g", "share", "Stable", "share")]
    assert list_groups(h.coord, types=["classic"]) == []
    assert list_groups(h.coord, types=["share"], states=["empty"]) == []
    result, codes = delete_groups(h.coord, ["g"])
    assert codes == [Errors.NON_EMPTY_GROUP] and result.records == []
    h.hb("m1", -1)
    assert list_groups(h.coord, states=["Empty"]) == [("g", "share", "Empty", "share")]
    assert share_partitions(h.group()) == [(T1, 0), (T2, 0), (T2, 1), (T2, 2)]
    result, codes = delete_groups(h.coord, ["g"])
    h.run((result, None))
    assert codes == [0] and "g" not in h.coord.groups
    assert "g" not in loaded_from(h.records).groups  # the tombstones delete it at load too


def test_replay_equals_live_and_load_restarts_sessions():
    h = Harness()
    h.init_all(h.join("m1", ["orders", "audit"]))
    h.join("m2", ["audit"])
    h.hb("m1", 1, rack="r1")
    h.join("m3", ["orders"])
    h.hb("m2", 3)
    h.hb("m3", -1)
    h.join("m4", ["orders"])  # its initialization left pending
    live = snapshot(h.coord)
    coord = loaded_from(h.records)
    assert snapshot(coord) == live
    g = coord.groups["g"]
    assert all(("share-session", "g", m) in coord.timers for m in g.members)
    # the sessions a load starts are of the group's share.session.timeout.ms
    configs = {"share.session.timeout.ms": 10_000}
    coord = GroupCoordinator(FakeClock(), CoordinatorConfig())
    coord.group_config = lambda group_id, name: configs[name]
    for rec in h.records:
        coord.load(rec.key, rec.value)
    coord.loaded()
    assert {coord.timers.deadline(("share-session", "g", m)) for m in g.members} == {
        coord.now() + 10_000}


def test_a_failed_append_reverts_the_heartbeat():
    h = Harness()
    h.init_all(h.join("m1"))
    before = snapshot(h.coord)
    cp = h.coord.checkpoint(["g"])
    result, _ = heartbeat(h.coord, ShareHeartbeat("g", "m2", 0, None, ["orders"]), LIMITS,
                          h.topics)
    assert result.records and "m2" in h.group().members
    h.coord.revert(cp, [])
    assert snapshot(h.coord) == before
    cp = h.coord.checkpoint(["new"])
    heartbeat(h.coord, ShareHeartbeat("new", "m", 0, None, ["orders"]), LIMITS, h.topics)
    h.coord.revert(cp, [])
    assert "new" not in h.coord.groups


def test_a_failed_append_of_an_operation_naming_no_group_reverts_it_too():
    """A timer's operation may name no group (the runtime's checkpoint is then empty): the
    group an emitted record changes is saved first (``touch``) and comes back."""
    h = Harness()
    h.init_all(h.join("m1"))
    before = snapshot(h.coord)
    cp = h.coord.checkpoint([])
    h.clock.advance(LIMITS.session_timeout_ms)
    result = h.coord.tick()
    assert result.records and h.group().members == {}
    h.coord.revert(cp, [])
    assert snapshot(h.coord) == before
    assert ("share-session", "g", "m1") in h.coord.timers


def test_epoch_edges_and_a_subscription_change_of_a_member():
    h = Harness()
    h.init_all(h.join("m1"))
    assert h.hb("m1", 1).member_epoch == 2
    # one above the member's epoch is as fenced as any greater epoch
    assert h.hb("m1", 3).error == Errors.FENCED_MEMBER_EPOCH
    # epoch 1 of a member the group never had is no join
    assert h.hb("nobody", 1).error == Errors.UNKNOWN_MEMBER_ID
    assert set(h.group().members) == {"m1"}
    h.init_all(h.join("m2", ["orders", "audit"]))
    epoch = h.hb("m1", 2).member_epoch
    # m1 moves to a topic the group already subscribes to: the group epoch still bumps
    moved = h.hb("m1", epoch, ["audit"])
    assert moved.error == 0 and moved.member_epoch > epoch
    assert set(moved.assignment) == {T2}  # orders is no longer its
    assert h.group().target["m2"][T1] == frozenset({0})


def test_an_unanswered_initialization_is_asked_again_after_the_retry_interval():
    h = Harness()
    a = h.join("m1")
    assert [(t.partition, t.start_offset) for t in a.initialize] == [(0, -1)]
    h.clock.advance(INITIALIZE_RETRY_MS - 1)
    assert h.hb("m1", 1).initialize == ()
    h.clock.advance(1)
    assert [(t.partition, t.start_offset) for t in h.hb("m1", 1).initialize] == [(0, -1)]
