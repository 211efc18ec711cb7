"""Deadlines for the coordinator, fired only when the owner asks (no threads).

``schedule(key, deadline_ms, fn)`` replaces any timer with the same key;
``cancel(key)`` drops it; ``expired(now_ms)`` removes and returns the due
callbacks in deadline order; ``next_deadline()`` tells the owner when to
come back. Keys are tuples such as ``("heartbeat", group, member)``.

``begin()`` starts a journal of every change; ``rollback()`` undoes them
(an operation whose records failed to append leaves its timers as they
were), ``commit()`` drops the journal.
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
        self._journal: list[tuple[Hashable, tuple | None]] | None = None

    def _note(self, key: Hashable) -> None:
        if self._journal is not None:
            self._journal.append((key, self._live.get(key)))

    def begin(self) -> None:
        self._journal = []

    def commit(self) -> None:
        self._journal = None

    def rollback(self) -> None:
        journal, self._journal = self._journal or [], None
        for key, entry in reversed(journal):
            if entry is None:
                self._live.pop(key, None)
            else:
                self._live[key] = entry
                heapq.heappush(self._heap, (entry[0], entry[1], key))

    def schedule(self, key: Hashable, deadline_ms: int, fn: Callable[[], None]) -> None:
        self._note(key)
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, fn)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._note(key)
        self._live.pop(key, None)

    def cancel_where(self, pred: Callable[[Hashable], bool]) -> int:
        """Cancel every timer whose key satisfies ``pred`` (a coordinator partition unloaded);
        how many. Not journaled: call it outside an operation."""
        keys = [k for k in self._live if pred(k)]
        for k in keys:
            del self._live[k]
        return len(keys)

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

    def expired(self, now_ms: int) -> list[tuple[Hashable, Callable[[], None]]]:
        """Remove and return the due ``(key, fn)`` pairs, in deadline order."""
        due = []
        while True:
            self._prune()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, _, key = heapq.heappop(self._heap)
            self._note(key)
            due.append((key, self._live.pop(key)[2]))
