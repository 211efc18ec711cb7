"""The share groups' ``simple`` assignor (KIP-932), with Kafka 4.2's SimpleAssignor semantics.

A share group assigns without exclusivity: a partition may go to several members
at once (each record is still acquired by one of them at a time). Principles, in
order of priority (Kafka's ``SimpleHomogeneousAssignmentBuilder`` /
``SimpleHeterogeneousAssignmentBuilder``):

1. **Every member gets partitions** and every assignable partition gets members.
   With P partitions and M members, each partition is shared by
   ``sharing = ceil(M / P)`` members (1 when P >= M); the ``sharing * P``
   assignments are spread so that member counts differ by at most one.
2. **Stickiness**: a member keeps what it has (its current target assignment)
   unless balance needs it elsewhere. Balance wins over stickiness.

When every member subscribes to the same topics (homogeneous) the balance is over
all their partitions together; otherwise (heterogeneous) it is done topic by topic
among the members subscribed to that topic, and each member's assignment is the
union. Only *assignable* partitions are assigned: in a share group, those whose
share-partition state is initialized (``ShareGroup.initialized``; Kafka's
``GroupSpec.isPartitionAssignable``).

``assign(subscriptions, assignable, current)`` is pure and deterministic (members
and partitions are visited in sorted order); every member of ``subscriptions`` has an
entry in the result, empty when it has nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

TopicPartition = tuple[uuid.UUID, int]
Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]

NAME = "simple"


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]],
           assignable: Mapping[uuid.UUID, frozenset[int]],
           current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]) -> Assignment:
    """The target assignment: member id -> topic id -> partitions (see the module doc).

    ``subscriptions``: each member's subscribed topic ids (topics that do not exist are
    simply absent from ``assignable``); ``assignable``: the partitions that may be
    assigned, per topic; ``current``: each member's current target assignment."""
    members = sorted(subscriptions)
    held: dict[str, set[TopicPartition]] = {
        m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members}
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if len({subscriptions[m] for m in members}) <= 1:
        topics = subscriptions[members[0]] if members else frozenset()
        partitions = sorted((t, p) for t in topics for p in assignable.get(t, ()))
        for m, tps in _balance(partitions, members, held).items():
            result[m] |= tps
    else:
        for t in sorted({t for m in members for t in subscriptions[m]}):
            subscribed = [m for m in members if t in subscriptions[m]]
            partitions = [(t, p) for p in sorted(assignable.get(t, ()))]
            mine = {m: {tp for tp in held[m] if tp[0] == t} for m in subscribed}
            for m, tps in _balance(partitions, subscribed, mine).items():
                result[m] |= tps
    out: Assignment = {}
    for m in members:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in result[m]:
            by_topic.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def _balance(partitions: list[TopicPartition], members: list[str],
             held: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """Spread ``partitions`` over ``members`` (sorted lists), keeping what ``held`` allows."""
    if not partitions or not members:
        return {m: set() for m in members}
    valid = set(partitions)
    sharing = -(-len(members) // len(partitions))
    kept = {m: sorted(held.get(m, set()) & valid) for m in members}
    # The sharing * P assignments, at most one apart: the members holding the most now
    # take the larger quotas (fewer moves).
    base, extra = divmod(sharing * len(partitions), len(members))
    by_holding = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    for m in members:
        for tp in kept[m]:
            holders[tp].append(m)
    # Over-shared partitions lose their most loaded holders first.
    for tp in partitions:
        excess = len(holders[tp]) - sharing
        if excess > 0:
            drop = sorted(holders[tp], key=lambda m: (quota[m] - len(kept[m]), m))[:excess]
            for m in drop:
                holders[tp].remove(m)
                kept[m].remove(tp)
    # Over-filled members give up their most shared partitions first.
    for m in members:
        while len(kept[m]) > quota[m]:
            tp = max(kept[m], key=lambda x: (len(holders[x]), x))
            kept[m].remove(tp)
            holders[tp].remove(m)
    out = {m: set(kept[m]) for m in members}
    # Fill: the least shared partitions first, each to the least filled member lacking it.
    for tp in sorted(partitions, key=lambda x: (len(holders[x]), x)):
        while len(holders[tp]) < sharing:
            room = [m for m in members if len(out[m]) < quota[m] and tp not in out[m]]
            if not room:
                break
            m = min(room, key=lambda x: (len(out[x]) - quota[x], len(out[x]), x))
            out[m].add(tp)
            holders[tp].append(m)
    _swap_to_fill(partitions, members, sharing, quota, out, holders)
    return out


def _swap_to_fill(partitions: list[TopicPartition], members: list[str], sharing: int,
                  quota: dict[str, int], out: dict[str, set[TopicPartition]],
                  holders: dict[TopicPartition, list[str]]) -> None:
    """The greedy fill can leave a member short while the only partition still short of
    members is one it has: another member then hands it a partition it lacks and takes
    the short one instead (Kafka tolerates the imbalance; one swap removes it)."""
    while True:
        short = [m for m in members if len(out[m]) < quota[m]]
        needy = [tp for tp in partitions if len(holders[tp]) < sharing]
        move = next(((m, tp, n, tp2) for m in short for tp in needy for n in members
                     if n != m and tp not in out[n]
                     for tp2 in sorted(out[n] - out[m])), None)
        if move is None:
            return
        m, tp, n, tp2 = move
        out[n].remove(tp2)
        out[n].add(tp)
        out[m].add(tp2)
        holders[tp2].remove(n)
        holders[tp2].append(m)
        holders[tp].append(n)
