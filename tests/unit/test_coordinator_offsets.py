"""Committed offsets, admin operations, retention and replay: fake clock, no sockets."""

from __future__ import annotations

from spool.coordinator import GroupState, partition_for
from spool.coordinator.admin import (
    OffsetToCommit,
    commit_offsets,
    delete_groups,
    delete_offsets,
    fetch_offsets,
    list_groups,
)
from spool.coordinator.schema import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    subscribed_topics,
)
from spool.protocol.errors import Errors
from tests.unit.test_coordinator_groups import SESSION, Harness

S = GroupState
MINUTE = 60_000


def commit(h, group="g", gen=-1, member="", offsets=(("t", 0, 5, "meta"),)):
    result, codes = commit_offsets(
        h.coord, group, gen, member, None, [OffsetToCommit(t, p, o, 3, m) for t, p, o, m in offsets]
    )
    h._run(result)
    return codes


def fetched(h, group="g", parts=None):
    return {tp: (c.offset, c.metadata) if c else None for tp, c in fetch_offsets(h.coord, group, parts).items()}


def test_schema_round_trips_and_kafka_layout():
    k = OffsetKey("g", "t", 7)
    raw = encode_offset_key(k)
    assert raw == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x07"
    assert decode_key(raw) == k
    v = OffsetValue(42, 3, "m\u00e9ta", 1234)
    assert decode_offset_value(encode_offset_value(v)) == v
    assert decode_key(encode_group_key(GroupKey("grp"))) == GroupKey("grp")
    gv = GroupValue("consumer", 4, "range", "m1", 99,
                    [MemberValue("m1", "i1", "c", "/h", 300, 100, b"\x00\x00\x00\x00\x00\x01\x00\x01t", b"A")])
    assert decode_group_value(encode_group_value(gv)) == gv
    assert subscribed_topics(gv.members[0].subscription) == {"t"}


def test_partition_for_is_java_string_hash():
    # "" hashes to 0; "a" to 97; a long name wraps past 2**31 and is masked non-negative.
    assert partition_for("", 50) == 0
    assert partition_for("a", 50) == 97 % 50
    assert 0 <= partition_for("a-rather-long-group-name-that-overflows", 50) < 50


def test_simple_commit_creates_empty_group_and_round_trips_metadata():
    h = Harness()
    assert commit(h, offsets=(("t", 0, 5, "meta"), ("t", 1, 9, None))) == [0, 0]
    assert fetched(h) == {("t", 0): (5, "meta"), ("t", 1): (9, "")}
    assert fetched(h, parts=[("t", 0), ("u", 3)]) == {("t", 0): (5, "meta"), ("u", 3): None}
    assert h.state() == S.EMPTY
    assert [r.key for r in h.records] and all(r.value for r in h.records)


def test_commit_by_group_member_checks_generation_and_member():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert commit(h, gen=gen, member=leader) == [0]
    assert commit(h, gen=gen - 1, member=leader) == [Errors.ILLEGAL_GENERATION]
    assert commit(h, gen=gen, member="ghost") == [Errors.UNKNOWN_MEMBER_ID]
    assert commit(h) == [Errors.UNKNOWN_MEMBER_ID]  # a non-empty group refuses simple commits
    assert commit(h, group="nogroup", gen=3, member="x") == [Errors.ILLEGAL_GENERATION]
    h.join(member_id=leader, protocols=(("range", b"new"),))
    assert commit(h, gen=gen, member=follower) == [0]  # eager members commit before rejoining
    h.join(member_id=follower)
    assert h.state() == S.COMPLETING_REBALANCE
    assert commit(h, gen=gen + 1, member=follower) == [Errors.REBALANCE_IN_PROGRESS]


def test_metadata_too_large():
    h = Harness(max_metadata_bytes=4)
    assert commit(h, offsets=(("t", 0, 1, "12345"), ("t", 1, 1, "1234"))) == [
        Errors.OFFSET_METADATA_TOO_LARGE, 0]


def test_replay_rebuilds_offsets_latest_wins_and_tombstones_delete():
    h = Harness()
    commit(h, offsets=(("t", 0, 1, "a"),))
    commit(h, offsets=(("t", 0, 2, "b"), ("t", 1, 7, "c")))
    result, top, codes = delete_offsets(h.coord, "g", [("t", 1)])
    h._run(result)
    assert (top, codes) == (0, [0])
    fresh = Harness()
    fresh.clock = h.clock
    for rec in h.records:
        fresh.coord.load(rec.key, rec.value)
    fresh.coord.loaded()
    assert fetched(fresh) == {("t", 0): (2, "b")} == fetched(h)


def test_offset_delete_refuses_subscribed_topics():
    h = Harness()
    sub = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
    a = h.join_new(protocols=(("range", sub),))[0]
    h.sync(a.member_id, a.generation, {})
    commit(h, gen=a.generation, member=a.member_id, offsets=(("t", 0, 1, ""), ("u", 0, 1, "")))
    result, top, codes = delete_offsets(h.coord, "g", [("t", 0), ("u", 0)])
    assert (top, codes) == (0, [Errors.GROUP_SUBSCRIBED_TO_TOPIC, 0])
    assert delete_offsets(h.coord, "nope", [("t", 0)])[1] == Errors.GROUP_ID_NOT_FOUND


def test_list_and_delete_groups():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    commit(h, group="simple")
    assert list_groups(h.coord) == [("g", "consumer", "Stable", "classic"),
                                    ("simple", "", "Empty", "classic")]
    assert list_groups(h.coord, states=["empty"]) == [("simple", "", "Empty", "classic")]
    assert list_groups(h.coord, types=["consumer"]) == []
    result, codes = delete_groups(h.coord, ["g", "simple", "nope", ""])
    h._run(result)
    assert codes == [Errors.NON_EMPTY_GROUP, 0, Errors.GROUP_ID_NOT_FOUND, Errors.INVALID_GROUP_ID]
    assert "simple" not in h.coord.groups and fetched(h, "simple") == {}
    assert h.records[-1].value is None  # the group tombstone


def test_retention_expires_offsets_of_groups_empty_for_too_long():
    h = Harness(offsets_retention_ms=10 * MINUTE, retention_check_interval_ms=MINUTE)
    a = h.join_new()[0]
    h.sync(a.member_id, a.generation, {})
    commit(h, gen=a.generation, member=a.member_id)
    commit(h, group="simple", offsets=(("t", 0, 1, ""),))

    def wait(ms):  # the member stays Stable by heartbeating: its offsets never expire
        for _ in range(ms // 5000):
            h.advance(5000)
            assert h.heartbeat(a.member_id, a.generation) == 0

    wait(5 * MINUTE)
    commit(h, group="simple", offsets=(("t", 1, 1, ""),))
    wait(6 * MINUTE)
    assert fetched(h) == {("t", 0): (5, "meta")}
    assert fetched(h, "simple") == {("t", 1): (1, "")}  # t-0 was committed 10+ minutes ago
    h.leave((a.member_id, None))
    h.advance(9 * MINUTE)
    assert fetched(h) != {}
    h.advance(2 * MINUTE)
    assert fetched(h) == {} and "g" not in h.coord.groups
    assert "simple" not in h.coord.groups


def test_timer_of_removed_group_does_not_resurrect_it():
    h = Harness()
    first = h.join()
    h.leave((first[0].member_id, None))
    h.advance(SESSION + 1)  # the pending member's timer was cancelled: nothing fires for it
    assert h.state() == S.EMPTY and not h.coord.groups["g"].pending_members
    h.advance(60 * MINUTE)
    assert "g" not in h.coord.groups  # retention deleted the empty group; nothing brings it back


def test_retention_spares_a_group_whose_member_is_between_join_round_trips():
    h = Harness(retention_check_interval_ms=1000, min_session_timeout_ms=1000)
    first = h.join(session=30_000)
    assert first[0].error == Errors.MEMBER_ID_REQUIRED
    h.advance(1500)  # a retention pass runs while the member id is pending
    second = h.join(member_id=first[0].member_id, session=30_000)
    assert second[0].error == 0 and second[0].generation == 1
