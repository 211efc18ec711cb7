"""Partition ownership histories of consumer-group members, and their checker.

Members report what their rebalance callbacks saw, each event stamped with
``time.monotonic()`` (one clock for every process of the machine):

- ``assign``: partitions added, stamped when the callback *starts* (before the
  client may fetch them: ownership begins no later than this);
- ``revoke`` / ``lost``: partitions removed, stamped when the callback *ends*
  (after the client stopped fetching them and before it tells the coordinator);
- ``dead``: the process is gone (kill -9 or exit), stamped after ``wait()``:
  whatever it still owned ends here;
- ``msg``: a record consumed from one partition.

``check(events)`` returns the violations (empty when the history is sound):

- a partition owned by two members over overlapping intervals ("owned twice");
- a member assigned a partition it already owns, or revoking one it does not own;
- a record consumed by a member outside its ownership of that partition;
- ``after_death``: an event of a member after its ``dead``.

``owners_at(events, t)`` and ``gaps(events, member, start, end)`` answer the
questions the tests ask (who owns what at a time; the longest pause between
consumed records of one member over a window).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

TP = tuple[str, int]


@dataclass(frozen=True)
class Event:
    member: str
    kind: str  # assign | revoke | lost | dead | msg | other
    t: float
    parts: frozenset[TP] = frozenset()
    offset: int = -1

    @staticmethod
    def parse(member: str, line: str | bytes) -> Event:
        """An event from a member's JSON line: {"ev", "t", "parts": [[topic, p], ...], ...}."""
        d = json.loads(line)
        parts = frozenset((t, p) for t, p in d.get("parts", ()))
        if d["ev"] == "msg":
            parts = frozenset({(d["topic"], d["p"])})
        return Event(member, d["ev"], d["t"], parts, d.get("o", -1))


@dataclass(frozen=True)
class Interval:
    member: str
    tp: TP
    start: float
    end: float  # inf: still owned


def intervals(events: Iterable[Event]) -> tuple[list[Interval], list[str]]:
    """Ownership intervals from the events (in time order) and the inconsistencies met."""
    open_: dict[tuple[str, TP], float] = {}
    out: list[Interval] = []
    problems: list[str] = []
    dead: dict[str, float] = {}
    for e in sorted(events, key=lambda e: e.t):
        if e.member in dead and e.kind != "dead":
            problems.append(
                f"after_death: {e.member} {e.kind} at {e.t:.3f} (dead {dead[e.member]:.3f})"
            )
            continue
        if e.kind == "assign":
            for tp in sorted(e.parts):
                if (e.member, tp) in open_:
                    problems.append(f"{e.member} assigned {tp} it already owns at {e.t:.3f}")
                else:
                    open_[(e.member, tp)] = e.t
        elif e.kind in ("revoke", "lost"):
            for tp in sorted(e.parts):
                start = open_.pop((e.member, tp), None)
                if start is None:
                    problems.append(f"{e.member} {e.kind} {tp} it does not own at {e.t:.3f}")
                else:
                    out.append(Interval(e.member, tp, start, e.t))
        elif e.kind == "dead":
            dead[e.member] = e.t
            for (m, tp), start in list(open_.items()):
                if m == e.member:
                    out.append(Interval(m, tp, start, e.t))
                    del open_[(m, tp)]
    out += [Interval(m, tp, start, float("inf")) for (m, tp), start in open_.items()]
    return out, problems


def check(events: Iterable[Event]) -> list[str]:
    """Every violation of exclusive ownership and consistency in the history (module doc)."""
    events = list(events)
    spans, problems = intervals(events)
    by_tp: dict[TP, list[Interval]] = {}
    for s in spans:
        by_tp.setdefault(s.tp, []).append(s)
    for tp, ss in sorted(by_tp.items()):
        ss.sort(key=lambda s: s.start)
        for i, a in enumerate(ss):
            for b in ss[i + 1 :]:
                if b.start >= a.end:
                    break
                if a.member != b.member:
                    problems.append(
                        f"{tp} owned twice: {a.member} [{a.start:.3f}, {a.end:.3f}] and "
                        f"{b.member} [{b.start:.3f}, {b.end:.3f}]"
                    )
    for e in events:
        if e.kind != "msg":
            continue
        (tp,) = e.parts
        if not any(s.member == e.member and s.start <= e.t <= s.end for s in by_tp.get(tp, ())):
            problems.append(f"{e.member} consumed {tp}@{e.offset} at {e.t:.3f} without owning it")
    return problems


def owners_at(events: Iterable[Event], t: float) -> dict[TP, set[str]]:
    """Who owned each partition at time ``t``."""
    spans, _ = intervals(events)
    out: dict[TP, set[str]] = {}
    for s in spans:
        if s.start <= t < s.end:
            out.setdefault(s.tp, set()).add(s.member)
    return out


def owned_by(events: Iterable[Event], t: float) -> dict[str, set[TP]]:
    """Each member's partitions at time ``t``."""
    out: dict[str, set[TP]] = {}
    for tp, members in owners_at(events, t).items():
        for m in members:
            out.setdefault(m, set()).add(tp)
    return out


def longest_pause(events: Iterable[Event], member: str, start: float, end: float) -> float:
    """The longest time ``member`` consumed nothing within [start, end] (the edges count)."""
    times = sorted(
        e.t for e in events if e.member == member and e.kind == "msg" and start <= e.t <= end
    )
    marks = [start, *times, end]
    return max(b - a for a, b in zip(marks, marks[1:], strict=False))
