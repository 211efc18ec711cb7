"""The server-side assignors: Kafka's documented examples and Hypothesis properties.

Properties (both assignors): every subscribed partition assigned exactly once,
only to a subscriber; every member answered; the answer does not depend on the
members' order. ``uniform``: balanced among members sharing a subscribed topic
(homogeneous: counts differ by at most 1) and sticky (a member's new assignment
only grows or only shrinks from what it held; a balanced answer is a fixed point).
``range``: contiguous per topic, per-topic counts differ by at most 1.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spool.coordinator.assignors import (
    ASSIGNORS,
    AssignorError,
    MemberSpec,
    TopicSpec,
    assign,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (11, 22, 33))


def topics(*specs: tuple[uuid.UUID, str, int]) -> dict[uuid.UUID, TopicSpec]:
    return {t: TopicSpec(t, name, n, {}) for t, name, n in specs}


def member(mid: str, subs, current=None, instance: str | None = None) -> MemberSpec:
    cur = {t: frozenset(ps) for t, ps in (current or {}).items()}
    return MemberSpec(mid, instance, None, frozenset(subs), cur)


def members(*ms: MemberSpec) -> dict[str, MemberSpec]:
    return {m.member_id: m for m in ms}


def a(**by_topic) -> dict[uuid.UUID, frozenset[int]]:
    names = {"t1": T1, "t2": T2, "t3": T3}
    return {names[k]: frozenset(v) for k, v in by_topic.items()}


# ---- names ---------------------------------------------------------------------------------


def test_names_and_kafka_class_names_resolve():
    prefix = "org.apache.kafka.coordinator.group.assignor."
    assert ASSIGNORS["uniform"] is ASSIGNORS[prefix + "UniformAssignor"]
    assert ASSIGNORS["range"] is ASSIGNORS[prefix + "RangeAssignor"]
    with pytest.raises(AssignorError, match="sticky"):
        assign("sticky", {}, {})


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_no_members_and_no_topics(name):
    assert assign(name, {}, {}) == {}
    tps = topics((T1, "t1", 3))
    assert assign(name, members(member("A", [])), tps) == {"A": {}}
    # A topic missing from the metadata is ignored, and a current assignment of it dropped.
    gone = members(member("A", [T2], {T2: [0]}))
    assert assign(name, gone, tps) == {"A": {}}


# ---- uniform: Kafka's examples (OptimizedUniformAssignmentBuilderTest) ---------------------


def test_uniform_member_added_moves_only_what_balance_needs():
    tps = topics((T1, "t1", 3), (T2, "t2", 3))
    ms = members(
        member("A", [T1, T2], {T1: [0, 2], T2: [0]}),
        member("B", [T1, T2], {T1: [1], T2: [1, 2]}),
        member("C", [T1, T2]),
    )
    assert assign("uniform", ms, tps) == {
        "A": a(t1=[0, 2]),
        "B": a(t1=[1], t2=[1]),
        "C": a(t2=[0, 2]),
    }


def test_uniform_unbalanced_previous_assignment():
    tps = topics((T1, "t1", 3), (T2, "t2", 3))
    ms = members(
        member("A", [T1, T2], {T1: [0, 1], T2: [0, 1]}),
        member("B", [T1, T2], {T1: [2], T2: [2]}),
    )
    assert assign("uniform", ms, tps) == {
        "A": a(t1=[0, 1], t2=[0]),
        "B": a(t1=[2], t2=[1, 2]),
    }


def test_uniform_balanced_assignment_is_kept_whoever_holds_the_extra_partition():
    # 7 partitions over 3 members: b holds the extra one; nothing has to move
    ms = members(member("a", [T1], {T1: {0, 1}}), member("b", [T1], {T1: {2, 3, 4}}),
                 member("c", [T1], {T1: {5, 6}}))
    got = assign("uniform", ms, topics((T1, "t1", 7)))
    assert got == {"a": a(t1={0, 1}), "b": a(t1={2, 3, 4}), "c": a(t1={5, 6})}

def test_uniform_partitions_added_stay_sticky():
    tps = topics((T1, "t1", 6), (T2, "t2", 5))
    ms = members(
        member("A", [T1, T2], {T1: [0, 2], T2: [0]}),
        member("B", [T1, T2], {T1: [1], T2: [1, 2]}),
    )
    out = assign("uniform", ms, tps)
    assert out["A"][T1] >= {0, 2} and out["A"][T2] >= {0}
    assert out["B"][T1] >= {1} and out["B"][T2] >= {1, 2}
    assert sorted(sum(len(ps) for ps in out[m].values()) for m in "AB") == [5, 6]


def test_uniform_member_removed_its_partitions_spread():
    tps = topics((T1, "t1", 3), (T2, "t2", 3))
    ms = members(
        member("A", [T1, T2], {T1: [0], T2: [0]}),
        member("B", [T1, T2], {T1: [1], T2: [1]}),
    )
    out = assign("uniform", ms, tps)
    assert out["A"][T1] >= {0} and out["A"][T2] >= {0}
    assert out["B"][T1] >= {1} and out["B"][T2] >= {1}
    assert [sum(len(ps) for ps in out[m].values()) for m in "AB"] == [3, 3]


def test_uniform_subscription_removed():
    tps = topics((T1, "t1", 2), (T2, "t2", 2))
    ms = members(
        member("A", [T2], {T1: [0], T2: [0]}),
        member("B", [T2], {T1: [1], T2: [1]}),
    )
    assert assign("uniform", ms, tps) == {"A": a(t2=[0]), "B": a(t2=[1])}


def test_uniform_more_members_than_partitions():
    tps = topics((T3, "t3", 2))
    ms = members(member("A", [T3]), member("B", [T3]), member("C", [T3]))
    out = assign("uniform", ms, tps)
    assert sorted(len(out[m].get(T3, ())) for m in "ABC") == [0, 1, 1]


def test_uniform_heterogeneous_constrained_member_gets_its_topic():
    # B only reads t3: t3 goes to B first; A and C share the rest evenly.
    tps = topics((T1, "t1", 3), (T2, "t2", 3), (T3, "t3", 2))
    ms = members(member("A", [T1, T2]), member("B", [T3]), member("C", [T1, T2, T3]))
    out = assign("uniform", ms, tps)
    counts = {m: sum(len(ps) for ps in out[m].values()) for m in "ABC"}
    assert counts["A"] == 3 and counts["C"] == 3 and counts["B"] == 2
    assert out["B"] == a(t3=[0, 1])


# ---- range: Kafka's examples (RangeAssignor's javadoc, RangeAssignorTest) -------------------


def test_range_co_partitioned():
    tps = topics((T1, "t1", 3), (T2, "t2", 3))
    ms = members(member("M0", [T1, T2]), member("M1", [T1, T2]))
    assert assign("range", ms, tps) == {
        "M0": a(t1=[0, 1], t2=[0, 1]),
        "M1": a(t1=[2], t2=[2]),
    }


def test_range_different_subscriptions():
    tps = topics((T1, "t1", 3), (T2, "t2", 3), (T3, "t3", 2))
    ms = members(member("A", [T1, T2]), member("B", [T3]), member("C", [T2, T3]))
    assert assign("range", ms, tps) == {
        "A": a(t1=[0, 1, 2], t2=[0, 1]),
        "B": a(t3=[0]),
        "C": a(t2=[2], t3=[1]),
    }


def test_range_more_members_than_partitions():
    tps = topics((T1, "t1", 3), (T3, "t3", 2))
    ms = members(*(member(m, [T1, T3]) for m in "ABC"))
    assert assign("range", ms, tps) == {
        "A": a(t1=[0], t3=[0]),
        "B": a(t1=[1], t3=[1]),
        "C": a(t1=[2]),
    }


def test_range_static_members_keep_their_ranges_under_new_member_ids():
    # Kafka's javadoc: a rolling bounce gives new member ids; instance ids keep the order.
    tps = topics((T1, "t1", 3), (T2, "t2", 3))
    before = members(member("M0", [T1, T2], instance="I0"), member("M1", [T1, T2], instance="I1"))
    after = members(member("M3", [T1, T2], instance="I0"), member("M2", [T1, T2], instance="I1"))
    b, c = assign("range", before, tps), assign("range", after, tps)
    assert c["M3"] == b["M0"] == a(t1=[0, 1], t2=[0, 1])
    assert c["M2"] == b["M1"]


def test_range_static_members_first():
    tps = topics((T1, "t1", 5))
    ms = members(
        member("A", [T1], instance="instanceA"),
        member("C", [T1], instance="instanceC"),
        member("B", [T1]),
    )
    assert assign("range", ms, tps) == {
        "A": a(t1=[0, 1]),
        "C": a(t1=[2, 3]),
        "B": a(t1=[4]),
    }


# ---- properties ----------------------------------------------------------------------------

TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(5)]


@st.composite
def groups(draw, homogeneous: bool | None = None):
    n_topics = draw(st.integers(1, 4))
    tids = TOPIC_IDS[:n_topics]
    tps = {t: TopicSpec(t, f"topic-{i}", draw(st.integers(0, 9)), {}) for i, t in enumerate(tids)}
    n = draw(st.integers(1, 7))
    mids = draw(
        st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=n, max_size=n, unique=True)
    )
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    common = frozenset(draw(st.sets(st.sampled_from(tids + [uuid.UUID(int=99)]))))
    ms = {}
    for mid in mids:
        subs = common if homogeneous else frozenset(draw(st.sets(st.sampled_from(tids))))
        # Current assignments: any partitions (even duplicated, unsubscribed or out of range).
        cur = draw(
            st.dictionaries(st.sampled_from(tids), st.frozensets(st.integers(0, 10)), max_size=3)
        )
        instance = draw(st.one_of(st.none(), st.sampled_from(["i1", "i2", "i3"])))
        ms[mid] = MemberSpec(mid, instance, None, subs, cur)
    return ms, tps


def counts(out) -> dict[str, int]:
    return {m: sum(len(ps) for ps in by_topic.values()) for m, by_topic in out.items()}


def check_valid(ms, tps, out):
    assert set(out) == set(ms)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for m, by_topic in out.items():
        for t, ps in by_topic.items():
            assert ps, "empty partition sets are left out"
            assert t in ms[m].subscribed, f"{m} got {t} without subscribing"
            for p in ps:
                assert 0 <= p < tps[t].partitions
                assert (t, p) not in owner, f"{(t, p)} owned by {owner[(t, p)]} and {m}"
                owner[(t, p)] = m
    wanted = {
        (t, p)
        for s in ms.values()
        for t in s.subscribed
        if t in tps
        for p in range(tps[t].partitions)
    }
    assert set(owner) == wanted


def check_order_independent(name, ms, tps, out):
    reversed_ms = dict(reversed(list(ms.items())))
    assert assign(name, reversed_ms, tps) == out


@pytest.mark.parametrize("name", ["uniform", "range"])
@settings(max_examples=300, deadline=None)
@given(g=groups())
def test_valid_and_deterministic(name, g):
    ms, tps = g
    out = assign(name, ms, tps)
    check_valid(ms, tps, out)
    check_order_independent(name, ms, tps, out)


@settings(max_examples=300, deadline=None)
@given(g=groups())
def test_uniform_balanced(g):
    ms, tps = g
    out = assign("uniform", ms, tps)
    n = counts(out)
    subscribers = {t: [m for m in ms if t in ms[m].subscribed] for t in tps}
    for m, by_topic in out.items():
        for t in by_topic:
            for other in subscribers[t]:
                assert n[m] <= n[other] + 1, (m, other, t, out)
    same: dict[frozenset, list[int]] = {}
    for m, spec in ms.items():
        same.setdefault(spec.subscribed & set(tps), []).append(n[m])
    for group_counts in same.values():
        assert max(group_counts) - min(group_counts) <= 1


@settings(max_examples=300, deadline=None)
@given(g=groups(homogeneous=True))
def test_uniform_homogeneous_sticky(g):
    # What a member still validly holds either contains its new assignment or is contained in it.
    ms, tps = g
    out = assign("uniform", ms, tps)
    claimed: set[tuple[uuid.UUID, int]] = set()
    for m in sorted(ms):
        held = {
            (t, p)
            for t, ps in ms[m].current.items()
            if t in ms[m].subscribed and t in tps
            for p in ps
            if p < tps[t].partitions
        } - claimed
        claimed |= held
        new = {(t, p) for t, ps in out[m].items() for p in ps}
        assert held <= new or new <= held, (m, held, new)


@pytest.mark.parametrize("name", ["uniform", "range"])
@settings(max_examples=200, deadline=None)
@given(g=groups())
def test_an_answer_is_a_fixed_point(name, g):
    # Reassigning a group with its own target assignment as current moves nothing.
    ms, tps = g
    out = assign(name, ms, tps)
    again = {
        m: MemberSpec(s.member_id, s.instance_id, s.rack, s.subscribed, out[m])
        for m, s in ms.items()
    }
    assert assign(name, again, tps) == out


@settings(max_examples=200, deadline=None)
@given(g=groups(homogeneous=True), joiner=st.text("xyz", min_size=4, max_size=4))
def test_uniform_member_joining_moves_only_what_it_must(g, joiner):
    ms, tps = g
    settled = assign("uniform", ms, tps)
    spec = next(iter(ms.values()))
    grown = {
        m: MemberSpec(s.member_id, s.instance_id, s.rack, s.subscribed, settled[m])
        for m, s in ms.items()
    }
    grown[joiner] = MemberSpec(joiner, None, None, spec.subscribed, {})
    out = assign("uniform", grown, tps)
    moved = sum(len(ps) for ps in out[joiner].values())
    total = sum(tps[t].partitions for t in spec.subscribed if t in tps)
    assert moved == total // len(grown)  # exactly its quota, taken from the others
    for m in ms:
        for t, ps in out[m].items():
            assert ps <= settled[m].get(t, frozenset())  # the others only lose


@settings(max_examples=200, deadline=None)
@given(g=groups())
def test_range_contiguous_and_balanced_per_topic(g):
    ms, tps = g
    out = assign("range", ms, tps)
    for t in tps:
        sizes = [len(out[m].get(t, ())) for m in ms if t in ms[m].subscribed]
        if sizes:
            assert max(sizes) - min(sizes) <= 1
        for m in ms:
            ps = sorted(out[m].get(t, ()))
            assert ps == list(range(ps[0], ps[0] + len(ps))) if ps else True
