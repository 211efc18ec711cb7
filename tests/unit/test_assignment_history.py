"""The ownership-history checker the consumer-protocol tests rely on: it must catch overlaps."""

from __future__ import annotations

from tests.helpers.assignment_history import Event, check, longest_pause, owned_by

A = ("t", 0)
B = ("t", 1)


def ev(member, kind, t, *parts, offset=-1):
    return Event(member, kind, t, frozenset(parts), offset)


def test_a_clean_handover_passes():
    h = [
        ev("m1", "assign", 0.0, A, B),
        ev("m1", "msg", 0.5, A, offset=0),
        ev("m1", "revoke", 1.0, B),
        ev("m2", "assign", 1.1, B),
        ev("m2", "msg", 1.2, B),
    ]
    assert check(h) == []
    assert owned_by(h, 1.05) == {"m1": {A}}
    assert owned_by(h, 2.0) == {"m1": {A}, "m2": {B}}


def test_owned_twice_is_caught():
    h = [ev("m1", "assign", 0.0, A), ev("m2", "assign", 0.9, A), ev("m1", "revoke", 1.0, A)]
    (problem,) = check(h)
    assert "owned twice" in problem and "m1" in problem and "m2" in problem


def test_a_dead_member_owns_until_it_dies():
    h = [ev("m1", "assign", 0.0, A), ev("m1", "dead", 5.0), ev("m2", "assign", 4.0, A)]
    assert "owned twice" in check(h)[0]
    ok = [ev("m1", "assign", 0.0, A), ev("m1", "dead", 5.0), ev("m2", "assign", 11.0, A)]
    assert check(ok) == []


def test_inconsistent_callbacks_and_stray_records_are_caught():
    h = [
        ev("m1", "assign", 0.0, A),
        ev("m1", "assign", 1.0, A),
        ev("m1", "revoke", 2.0, B),
        ev("m1", "msg", 3.0, B, offset=7),
        ev("m1", "dead", 4.0),
        ev("m1", "msg", 5.0, A),
    ]
    problems = check(h)
    assert any("already owns" in p for p in problems)
    assert any("does not own" in p for p in problems)
    assert any("consumed ('t', 1)@7" in p for p in problems)
    assert any("after_death" in p for p in problems)


def test_longest_pause_counts_the_window_edges():
    h = [ev("m1", "msg", t, A) for t in (1.0, 1.2, 2.5, 2.6)]
    assert abs(longest_pause(h, "m1", 0.9, 3.0) - 1.3) < 1e-9
    assert abs(longest_pause(h, "m1", 0.0, 1.1) - 1.0) < 1e-9
    assert longest_pause(h, "m2", 0.0, 2.0) == 2.0
