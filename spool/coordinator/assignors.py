"""Server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

The group coordinator computes a group's *target assignment* with one of
these (``group.consumer.assignors``; a member picks one with the client's
``group.remote.assignor``). Pure functions, no I/O, no clock::

    assign(name, members, topics) -> Assignment   # member id -> topic id -> partitions

- ``members``: every member of the group as a ``MemberSpec``: its subscribed
  topic ids (regular expressions already resolved) and its current target
  assignment (``current``, what stickiness keeps).
- ``topics``: a ``TopicSpec`` per topic id the group may be assigned. A
  subscribed topic id absent from ``topics`` (deleted, not yet in the
  metadata) is ignored: its partitions are assigned to nobody, and a
  current assignment of them is dropped (Kafka's assignors raise there; the
  coordinator resolves subscriptions against the same metadata it passes).
- The answer has an entry for every member (``{}`` when it gets nothing)
  and only non-empty partition sets.

Guarantees of both assignors (the Hypothesis tests check them):

- every partition of every topic some member subscribes to is assigned to
  exactly one member, and only to a member subscribed to its topic;
- deterministic: the answer depends on the members' ids, instance ids,
  subscriptions and current assignments, never on the mapping's order.

``uniform`` (Kafka's UniformAssignor) balances the *total* partition count:

- all members subscribed to the same topics (homogeneous): counts differ by
  at most 1; each member keeps as much of ``current`` as its quota allows,
  and the members holding the most get the ``P mod N`` larger quotas, so no
  partition moves that balance does not require;
- heterogeneous subscriptions: a member never holds 2 partitions more than
  another member subscribed to one of its partitions' topics (so members
  with the same subscriptions differ by at most 1); current partitions are
  kept, unassigned ones (fewest subscribers first) go to the least loaded
  subscriber, then partitions move one at a time from a member to a less
  loaded subscriber while that difference is 2 or more.

``range`` (Kafka's RangeAssignor): per topic, its subscribers in order (static
members first by ``group.instance.id``, then the others by member id) take
contiguous ranges, the first ``P mod N`` one partition more. Topics with the
same partition count and subscribers are thus co-partitioned (a member gets
the same partition numbers of each). It balances each topic, not the total,
and is sticky only through instance ids, as Kafka's: ``current`` is unused.

Racks (``MemberSpec.rack``, ``TopicSpec.partition_racks``) are accepted and
unused, as Kafka 4.0's assignors.

Names: ``uniform``, ``range`` and Kafka's class names
(``org.apache.kafka.coordinator.group.assignor.UniformAssignor``, ...); any
other raises ``AssignorError``.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "AssignorError",
    "MemberSpec",
    "TopicSpec",
    "assign",
    "range_assign",
    "uniform_assign",
]


@dataclass(frozen=True)
class MemberSpec:
    """One member as the assignor sees it."""

    member_id: str
    instance_id: str | None
    rack: str | None
    subscribed: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicSpec:
    """One topic the group may be assigned."""

    topic_id: uuid.UUID
    name: str
    partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]
AssignorFn = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, TopicSpec]], Assignment]

TopicPartition = tuple[uuid.UUID, int]


class AssignorError(ValueError):
    """An assignor name that is not one of ``ASSIGNORS``."""


def assign(
    assignor: str, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]
) -> Assignment:
    """The target assignment computed by the assignor named ``assignor``."""
    fn = ASSIGNORS.get(assignor)
    if fn is None:
        raise AssignorError(f"Unknown assignor {assignor!r}; known: uniform, range")
    return fn(members, topics)


def _subscriptions(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]
) -> dict[str, frozenset[uuid.UUID]]:
    return {m: frozenset(t for t in spec.subscribed if t in topics) for m, spec in members.items()}


def _kept(
    order: list[str],
    members: Mapping[str, MemberSpec],
    subs: Mapping[str, frozenset[uuid.UUID]],
    topics: Mapping[uuid.UUID, TopicSpec],
) -> dict[str, list[TopicPartition]]:
    """Each member's current partitions that still exist and that it still subscribes to.

    A partition two members claim (never in a coordinator's own target) stays with
    the first of ``order``.
    """
    taken: set[TopicPartition] = set()
    kept: dict[str, list[TopicPartition]] = {}
    for m in order:
        own: list[TopicPartition] = []
        for t, parts in members[m].current.items():
            if t not in subs[m]:
                continue
            for p in parts:
                if 0 <= p < topics[t].partitions and (t, p) not in taken:
                    taken.add((t, p))
                    own.append((t, p))
        own.sort(key=lambda tp: (topics[tp[0]].name, tp[0], tp[1]))
        kept[m] = own
    return kept


def _result(order: list[str], owned: Mapping[str, list[TopicPartition]]) -> Assignment:
    out: Assignment = {}
    for m in order:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in owned[m]:
            by_topic.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform_assign(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]
) -> Assignment:
    """Kafka's ``uniform``: balanced total counts, sticky (module docstring)."""
    order = sorted(members)
    if not order:
        return {}
    subs = _subscriptions(members, topics)
    kept = _kept(order, members, subs, topics)
    if len(set(subs.values())) == 1:
        owned = _uniform_homogeneous(order, subs[order[0]], kept, topics)
    else:
        owned = _uniform_heterogeneous(order, subs, kept, topics)
    return _result(order, owned)


def _uniform_homogeneous(
    order: list[str],
    subscribed: frozenset[uuid.UUID],
    kept: dict[str, list[TopicPartition]],
    topics: Mapping[uuid.UUID, TopicSpec],
) -> dict[str, list[TopicPartition]]:
    total = sum(topics[t].partitions for t in subscribed)
    minimum, extra = divmod(total, len(order))
    # The members holding the most keep the larger quotas: the fewest moves.
    by_holding = sorted(order, key=lambda m: (-len(kept[m]), m))
    quota = {m: minimum + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    owned: dict[str, list[TopicPartition]] = {}
    assigned: set[TopicPartition] = set()
    for m in order:
        owned[m] = kept[m][: quota[m]]
        assigned.update(owned[m])
    free = [
        (t, p)
        for t in sorted(subscribed, key=lambda t: (topics[t].name, t))
        for p in range(topics[t].partitions)
        if (t, p) not in assigned
    ]
    i = 0
    for m in order:
        need = quota[m] - len(owned[m])
        owned[m].extend(free[i : i + need])
        i += need
    return owned


def _uniform_heterogeneous(
    order: list[str],
    subs: Mapping[str, frozenset[uuid.UUID]],
    kept: dict[str, list[TopicPartition]],
    topics: Mapping[uuid.UUID, TopicSpec],
) -> dict[str, list[TopicPartition]]:
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in order:
        for t in subs[m]:
            subscribers.setdefault(t, []).append(m)
    owned: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in order}
    count = {m: len(kept[m]) for m in order}
    assigned: set[TopicPartition] = set()
    for m in order:
        for t, p in kept[m]:
            owned[m].setdefault(t, []).append(p)
            assigned.add((t, p))
    # Unassigned partitions, the most constrained first, to their least loaded subscriber
    # (while one topic is handed out only its subscribers' counts change: one heap each).
    free_topics = sorted(subscribers, key=lambda t: (len(subscribers[t]), topics[t].name, t))
    for t in free_topics:
        heap = [(count[m], m) for m in subscribers[t]]
        heapq.heapify(heap)
        for p in range(topics[t].partitions):
            if (t, p) in assigned:
                continue
            _, m = heapq.heappop(heap)
            owned[m].setdefault(t, []).append(p)
            count[m] += 1
            heapq.heappush(heap, (count[m], m))
    _balance(subs, subscribers, owned, count, topics)
    return {m: [(t, p) for t, ps in owned[m].items() for p in ps] for m in order}


def _balance(
    subs: Mapping[str, frozenset[uuid.UUID]],
    subscribers: Mapping[uuid.UUID, list[str]],
    owned: dict[str, dict[uuid.UUID, list[int]]],
    count: dict[str, int],
    topics: Mapping[uuid.UUID, TopicSpec],
) -> None:
    """Move single partitions from a member to a subscriber of their topic holding 2 or more
    fewer, the most loaded members first, until none can. Each move lowers the sum of squared
    counts, so this ends. The least loaded subscriber of a topic comes from a heap per topic
    whose entries are stale when the member's count has changed since (a new one was pushed).
    """
    least: dict[uuid.UUID, list[tuple[int, str]]] = {
        t: [(count[m], m) for m in ms] for t, ms in subscribers.items()
    }
    for heap in least.values():
        heapq.heapify(heap)

    def lightest(t: uuid.UUID) -> str:
        heap = least[t]
        while heap[0][0] != count[heap[0][1]]:
            heapq.heappop(heap)
        return heap[0][1]

    def recount(m: str, delta: int) -> None:
        count[m] += delta
        for t in subs[m]:
            heapq.heappush(least[t], (count[m], m))

    moved = True
    while moved:
        moved = False
        for m in sorted(count, key=lambda m: (-count[m], m)):
            for t in sorted(owned[m], key=lambda t: (topics[t].name, t)):
                while t in owned[m]:
                    target = lightest(t)
                    if count[m] - count[target] < 2:
                        break
                    parts = owned[m][t]
                    p = parts.pop()  # the last handed out first: what it held stays longest
                    if not parts:
                        del owned[m][t]
                    owned[target].setdefault(t, []).append(p)
                    recount(m, -1)
                    recount(target, +1)
                    moved = True


def _range_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Static members first by instance id, then the others by member id (Kafka's order)."""

    def key(m: str) -> tuple[int, str, str]:
        instance = members[m].instance_id
        return (0, instance, m) if instance is not None else (1, m, m)

    return sorted(members, key=key)


def range_assign(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]
) -> Assignment:
    """Kafka's ``range``: contiguous ranges per topic, co-partitioned (module docstring)."""
    order = _range_order(members)
    subs = _subscriptions(members, topics)
    out: Assignment = {m: {} for m in sorted(members)}
    for t in sorted({t for s in subs.values() for t in s}, key=lambda t: (topics[t].name, t)):
        takers = [m for m in order if t in subs[m]]
        minimum, extra = divmod(topics[t].partitions, len(takers))
        start = 0
        for i, m in enumerate(takers):
            end = start + minimum + (1 if i < extra else 0)
            if end > start:
                out[m][t] = frozenset(range(start, end))
            start = end
    return out


_UNIFORM = "org.apache.kafka.coordinator.group.assignor.UniformAssignor"
_RANGE = "org.apache.kafka.coordinator.group.assignor.RangeAssignor"

ASSIGNORS: dict[str, AssignorFn] = {
    "uniform": uniform_assign,
    "range": range_assign,
    _UNIFORM: uniform_assign,
    _RANGE: range_assign,
}
