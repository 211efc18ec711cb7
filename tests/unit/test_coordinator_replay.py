"""The coordinators change state only by replaying appended records; a failed append is undone.

The runtime (``spool.broker.coordinator_log``) replays a ``Result``'s records
only after appending them, and reverts to the operation's checkpoint if the
append fails. These tests play that runtime by hand: "append failed" is
simply not replaying and calling ``revert``.
"""

from __future__ import annotations

import itertools

import pytest

from spool.coordinator import GroupState
from spool.coordinator.admin import OffsetToCommit, commit_offsets, delete_groups, fetch_offsets
from spool.coordinator.transaction import TransactionCoordinator, TxnState
from spool.protocol.errors import Errors, KafkaError
from tests.unit.test_coordinator_groups import SESSION, Harness

S = GroupState


def offsets(h, group="g"):
    return {tp: c.offset for tp, c in fetch_offsets(h.coord, group, None).items()}


def failed(h, group_ids, op):
    """Run ``op`` as the runtime does when the append fails: checkpoint, no replay, revert,
    every reply gets the error. Returns the replies' boxes' contents as answered."""
    cp = h.coord.checkpoint(group_ids)
    result = op()
    h.coord.revert(cp, [fn for fn, _ in result.replies])
    for fn, _ in result.replies:
        fn("COORDINATOR_NOT_AVAILABLE")
    return result


def test_an_offset_commit_changes_nothing_until_its_record_is_replayed():
    h = Harness()
    h._run(commit_offsets(h.coord, "g", -1, "", None, [OffsetToCommit("t", 0, 5)])[0])
    result, codes = commit_offsets(h.coord, "g", -1, "", None, [OffsetToCommit("t", 0, 7)])
    assert codes == [0] and len(result.records) == 1
    assert offsets(h) == {("t", 0): 5}  # not appended yet, or the append failed
    h.coord.replay(result.records[0])
    assert offsets(h) == {("t", 0): 7}


def test_a_first_commit_that_fails_leaves_no_group_behind():
    h = Harness()
    failed(h, ["new"], lambda: commit_offsets(h.coord, "new", -1, "", None,
                                              [OffsetToCommit("t", 0, 1)])[0])
    assert "new" not in h.coord.groups and offsets(h, "new") == {}


def test_a_group_is_deleted_only_when_its_tombstones_are_replayed():
    h = Harness()
    h._run(commit_offsets(h.coord, "g", -1, "", None, [OffsetToCommit("t", 0, 5)])[0])
    result, codes = delete_groups(h.coord, ["g", "g"])
    assert codes == [0, Errors.GROUP_ID_NOT_FOUND]
    assert h.state() == S.EMPTY and offsets(h) == {("t", 0): 5}  # the append failed: still there
    h._run(result)
    assert "g" not in h.coord.groups and offsets(h) == {}


def test_a_leader_sync_whose_record_fails_is_undone():
    h = Harness()
    a = h.join_new()  # the leader of generation 1
    b_first = h.join()  # MEMBER_ID_REQUIRED: b comes back with its id
    leader, gen = a[0].member_id, a[0].generation
    h.sync(leader, gen, {leader: b"A"})
    # b joins: generation 2 with both, CompletingRebalance
    b = h.join(member_id=b_first[0].member_id)
    a2 = h.join(member_id=leader)
    assert a2[0].generation == b[0].generation == gen + 1 and h.state() == S.COMPLETING_REBALANCE
    follower_box = h.sync(b[0].member_id, gen + 1)
    assert follower_box == []  # parked until the leader's assignment
    leader_box: list = []
    failed(h, ["g"], lambda: h.coord.sync_group(
        "g", gen + 1, leader, None, None, None, {leader: b"A2", b[0].member_id: b"B2"},
        leader_box.append))
    assert leader_box == follower_box == ["COORDINATOR_NOT_AVAILABLE"]
    g = h.coord.groups["g"]
    assert g.state == S.COMPLETING_REBALANCE and g.generation == gen + 1
    assert {m.member_id: (m.assignment, m.sync_reply) for m in g.members.values()} == {
        leader: (b"A", None), b[0].member_id: (b"", None)}  # the answered sync is forgotten
    # the clients retry: the same generation completes
    follower_box = h.sync(b[0].member_id, gen + 1)
    leader_box = h.sync(leader, gen + 1, {leader: b"A2", b[0].member_id: b"B2"})
    assert (leader_box[0].error, leader_box[0].assignment) == (0, b"A2")
    assert (follower_box[0].error, follower_box[0].assignment) == (0, b"B2")
    assert h.state() == S.STABLE


def test_a_reverted_operation_leaves_the_timers_as_they_were():
    h = Harness()
    a = h.join_new()
    h.sync(a[0].member_id, a[0].generation, {a[0].member_id: b"A"})
    h.advance(SESSION - 1000)
    deadline = h.coord.next_deadline()
    failed(h, ["g"], lambda: h.coord.leave_group("g", [(a[0].member_id, None)])[0])
    assert h.coord.next_deadline() == deadline
    assert h.state() == S.STABLE and a[0].member_id in h.coord.groups["g"].members
    h.advance(1001)  # its session timer survived the revert: it expires as it would have
    assert h.state() == S.EMPTY and h.coord.groups["g"].members == {}


def test_member_ids_come_from_the_injected_source():
    h = Harness()
    counter = itertools.count(1)
    h.coord.new_id = lambda: f"id{next(counter)}"
    assert h.join()[0].member_id == "client-id1"
    assert h.join()[0].member_id == "client-id2"


def test_a_retried_end_txn_while_markers_are_written_is_concurrent():
    coord = TransactionCoordinator(max_timeout_ms=60_000)
    pids = itertools.count(1)
    _, m = coord.init_producer_id("tx", 1000, -1, -1, 0, lambda: next(pids))
    coord.replay("tx", m)
    coord.replay("tx", coord.add_partitions("tx", m.producer_id, 0, {("t", 0)}, 1))
    prepare = coord.end_txn("tx", m.producer_id, 0, True, 2)
    assert coord.txns["tx"].state == TxnState.ONGOING  # nothing changes before the replay
    coord.replay("tx", prepare)
    for commit, code in ((True, Errors.CONCURRENT_TRANSACTIONS), (False, Errors.INVALID_TXN_STATE)):
        with pytest.raises(KafkaError) as e:
            coord.end_txn("tx", m.producer_id, 0, commit, 3)
        assert e.value.code == code


def test_timers_roll_back_every_change_of_a_failed_operation():
    from spool.coordinator.timers import Timers

    t = Timers()
    t.schedule("a", 100, "fire-a")
    t.schedule("b", 200, "fire-b")
    t.begin()
    t.schedule("a", 50, "fire-a2")  # moved
    t.cancel("b")
    t.schedule("c", 10, "fire-c")  # new
    assert t.expired(60) == [("c", "fire-c"), ("a", "fire-a2")]
    t.rollback()
    assert (t.deadline("a"), t.deadline("b"), "c" in t) == (100, 200, False)
    assert t.expired(1000) == [("a", "fire-a"), ("b", "fire-b")]
    t.begin()
    t.schedule("d", 5, "fire-d")
    t.commit()
    t.rollback()  # nothing open: nothing undone
    assert t.expired(5) == [("d", "fire-d")]
