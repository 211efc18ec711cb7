"""Share-partition state batches and how the share coordinator combines them.

A ``StateBatch`` is one range of offsets of a share-partition with one delivery state
and delivery count, Kafka's ``PersisterStateBatch``::

    first_offset .. last_offset (inclusive) | delivery_state | delivery_count

``delivery_state`` is Kafka's ``RecordState``: 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED
(1 ACQUIRED is never persisted; an acquired record is stored as AVAILABLE).

``combine(so_far, new, start_offset)`` is Kafka's ``PersisterStateBatchCombiner``: the
batches below ``start_offset`` are dropped (a batch across it is cut at it; -1: no
start offset, nothing dropped), every offset covered by several batches takes the
batch of highest priority, priority being (delivery count, delivery state) (a record's
count and state only grow, so the newer write wins), and touching ranges of equal count
and state are joined. The result is sorted and non-overlapping: the canonical form, so
merging in any order of writes of equal priority gives the same batches.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4


@dataclass(frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int

    def priority(self) -> tuple[int, int]:
        return self.delivery_count, self.delivery_state


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch],
            start_offset: int) -> tuple[StateBatch, ...]:
    """The merged, sorted, non-overlapping batches (module doc)."""
    batches = []
    for b in (*so_far, *new):
        if start_offset >= 0:
            if b.last_offset < start_offset:
                continue
            if b.first_offset < start_offset:
                b = StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        if b.first_offset <= b.last_offset:
            batches.append(b)
    if len(batches) < 2:
        return tuple(batches)
    # sweep the offset line: at each boundary the covering batch of highest priority wins
    batches.sort(key=lambda b: b.first_offset)
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    out: list[StateBatch] = []
    active: list[tuple[int, int, int, int]] = []  # (-count, -state, -last, index)
    i = 0
    for lo, hi in itertools.pairwise(bounds):
        while i < len(batches) and batches[i].first_offset <= lo:
            b = batches[i]
            heapq.heappush(active, (-b.delivery_count, -b.delivery_state, -b.last_offset, i))
            i += 1
        while active and -active[0][2] < lo:
            heapq.heappop(active)
        if not active:
            continue
        count, state = -active[0][0], -active[0][1]
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == lo
                and (prev.delivery_count, prev.delivery_state) == (count, state)):
            out[-1] = StateBatch(prev.first_offset, hi - 1, state, count)
        else:
            out.append(StateBatch(lo, hi - 1, state, count))
    return tuple(out)
