"""Deadlines for the coordinator, fired only when the owner asks (no threads).

``schedule(key, deadline_ms, fn)`` replaces any timer with the same key;
``cancel(key)`` drops it; ``expired(now_ms)`` removes and returns the due
callbacks in deadline order; ``next_deadline()`` tells the owner when to
come back. Keys are tuples such as ``("heartbeat", group, member)``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable


class Timers:
    def __init__(self) -> None:
        self._live: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, fn: Callable[[], None]) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, fn)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def _prune(self) -> None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._prune()
        return self._heap[0][0] if self._heap else None

    def expired(self, now_ms: int) -> list[Callable[[], None]]:
        due = []
        while True:
            self._prune()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, _, key = heapq.heappop(self._heap)
            due.append(self._live.pop(key)[2])
