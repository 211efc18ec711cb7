"""The leader's eager assignment (Kafka's EagerAssignor): connectors, then tasks, round
robin over the members sorted by id, the iterator carrying on from connectors to tasks."""

from __future__ import annotations

from collections import Counter

from spool.connect.assignor import assign
from spool.connect.herder import TaskId


def test_connectors_then_tasks_round_robin_over_sorted_members():
    out = assign(["b", "a", "c"], ["y", "x"], {"x": 3, "y": 2})
    assert out == {
        "a": (["x"], [TaskId("x", 1), TaskId("y", 1)]),
        "b": (["y"], [TaskId("x", 2)]),
        "c": ([], [TaskId("x", 0), TaskId("y", 0)]),
    }


def test_every_unit_once_and_balanced():
    members = [f"m{i}" for i in range(3)]
    counts = {"a": 6, "b": 0, "c": 4, "stopped": 0}
    out = assign(members, counts, counts)
    units = [u for cs, ts in out.values() for u in (*cs, *ts)]
    assert len(units) == len(set(units)) == 4 + 10
    load = Counter({m: len(cs) + len(ts) for m, (cs, ts) in out.items()})
    assert max(load.values()) - min(load.values()) <= 1


def test_edges():
    assert assign([], ["x"], {"x": 1}) == {}
    assert assign(["a"], [], {}) == {"a": ([], [])}
    assert assign(["b", "a"], ["x"], {}) == {"a": (["x"], []), "b": ([], [])}
    # more members than work: the later ones get empty assignments
    out = assign(["m1", "m2", "m3", "m4"], ["x"], {"x": 1})
    assert out == {"m1": (["x"], []), "m2": ([], [TaskId("x", 0)]), "m3": ([], []),
                   "m4": ([], [])}
