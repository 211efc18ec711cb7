"""What the simulators here share: a seeded event queue on simulated time, the trace, and
the network partitions they draw.

``EventQueue(rng, trace)``: ``now`` (simulated ms), ``_at(t, kind, *payload)`` to schedule,
``_every(mean_ms)`` for the next time of a fault or workload drawn uniformly around
``mean_ms``, ``_log(msg)`` to the trace (None: silent). ``draw_cut(rng, ids)``: the links a
network partition cuts (two sides; in three of ten, one way only). Every draw comes from the
one seeded ``rng`` in a fixed order, so a seed replays exactly."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable


class Violation(AssertionError):
    pass


class EventQueue:
    def __init__(self, rng: random.Random, trace: Callable[[str], None] | None) -> None:
        self.rng = rng
        self.trace = trace
        self.now = 0
        self.seq = 0
        self.queue: list = []

    def _at(self, t: int, kind: str, *payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, kind, payload))

    def _every(self, mean_ms: int) -> int:
        return self.now + 1 + self.rng.randrange(2 * mean_ms)

    def _log(self, msg: str) -> None:
        if self.trace:
            self.trace(f"{self.now:6d} {msg}")


def draw_cut(rng: random.Random, nodes: Iterable[int]) -> tuple[set[int], set[tuple[int, int]]]:
    """(one side, the (from, to) links cut) of a partition of ``nodes``."""
    ids = list(nodes)
    rng.shuffle(ids)
    k = 1 + rng.randrange(len(ids) - 1)
    side = set(ids[:k])
    cut = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
    if rng.random() < 0.3:  # one-way: only side -> rest is cut
        cut = {(a, b) for a, b in cut if a in side}
    return side, cut
