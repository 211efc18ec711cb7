"""The share groups' simple assignor (spool.coordinator.share_assignor) against its contract."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from spool.coordinator.share_assignor import assign

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


@st.composite
def groups(draw, homogeneous: bool | None = None):
    n_topics = draw(st.integers(1, len(TOPICS)))
    topics = TOPICS[:n_topics]
    assignable = {t: frozenset(range(draw(st.integers(0, 6)))) for t in topics}
    members = [f"m{i}" for i in range(draw(st.integers(0, 12)))]
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    if homogeneous:
        sub = frozenset(draw(st.sets(st.sampled_from(topics), min_size=1)))
        subs = {m: sub for m in members}
    else:
        subs = {m: frozenset(draw(st.sets(st.sampled_from(topics), min_size=1))) for m in members}
    current = {}
    for m in members:
        current[m] = {t: frozenset(draw(st.sets(st.integers(0, 7), max_size=4)))
                      for t in draw(st.sets(st.sampled_from(TOPICS), max_size=3))}
    return subs, assignable, current


def pairs(a):
    return {m: {(t, p) for t, ps in by.items() for p in ps} for m, by in a.items()}


@settings(max_examples=300, deadline=None)
@given(groups())
def test_only_subscribed_assignable_partitions_and_everyone_served(g):
    subs, assignable, current = g
    out = pairs(assign(subs, assignable, current))
    assert set(out) == set(subs)
    for m, tps in out.items():
        for t, p in tps:
            assert t in subs[m] and p in assignable[t]
    # every assignable partition some member subscribes to has at least one member
    for t, ps in assignable.items():
        if any(t in s for s in subs.values()):
            for p in ps:
                assert any((t, p) in tps for tps in out.values()), (t, p)
    # every member whose topics have partitions gets at least one
    for m, s in subs.items():
        if any(assignable[t] for t in s):
            assert out[m], m


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_homogeneous_is_balanced_and_shares_evenly(g):
    subs, assignable, current = g
    out = pairs(assign(subs, assignable, current))
    if not subs:
        assert out == {}
        return
    counts = [len(tps) for tps in out.values()]
    assert max(counts) - min(counts) <= 1
    partitions = {(t, p) for t in next(iter(subs.values())) for p in assignable[t]}
    if partitions:
        sharing = -(-len(subs) // len(partitions))  # ceil(M / P)
        for tp in partitions:
            assert sum(tp in tps for tps in out.values()) == sharing
        assert sum(counts) == sharing * len(partitions)


@settings(max_examples=200, deadline=None)
@given(groups())
def test_stable_once_computed_and_deterministic(g):
    subs, assignable, current = g
    first = assign(subs, assignable, current)
    assert assign(subs, assignable, current) == first
    assert assign(subs, assignable, first) == first


def test_more_members_than_partitions_share_each_partition():
    t = TOPICS[0]
    subs = {f"m{i}": frozenset({t}) for i in range(4)}
    out = assign(subs, {t: frozenset({0})}, {})
    assert out == {m: {t: frozenset({0})} for m in subs}
    out = assign(subs, {t: frozenset({0, 1, 2})}, {})
    # 4 members on 3 partitions: each partition shared by ceil(4/3) = 2 members, the 6
    # assignments spread 2/2/1/1
    assert sorted(len(a[t]) for a in out.values()) == [1, 1, 2, 2]
    assert all(sum(p in a[t] for a in out.values()) == 2 for p in range(3))


def test_a_joining_member_moves_little():
    t = TOPICS[0]
    subs = {f"m{i}": frozenset({t}) for i in range(3)}
    before = assign(subs, {t: frozenset(range(6))}, {})
    subs["m3"] = frozenset({t})
    after = assign(subs, {t: frozenset(range(6))}, before)
    kept = sum(len(after[m][t] & before[m][t]) for m in before)
    assert kept == 5  # 6 partitions over 4 members (2/2/1/1): one moves to the newcomer
    assert sorted(len(a.get(t, ())) for a in after.values()) == [1, 1, 2, 2]
