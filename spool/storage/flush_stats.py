"""Log flush latency: Kafka's ``LogFlushStats.LogFlushRateAndTimeMs``, as plain counters.

``FlushStats.observe(ms)`` is called by whoever times a log flush: the log manager's
background thread after each flush it runs (``LogManager.flush_once``: ``flush.ms``
and rolled segments), never the produce path. It adds to fixed cumulative buckets
(``BUCKETS_MS``, upper bounds in milliseconds) under a lock. ``snapshot()`` is what a
reader takes (the broker's metrics collector, at scrape time): the bounds, the
cumulative count of each, the number of flushes and their total milliseconds.
Storage knows no exporter: turning this into a histogram is the broker's business.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
              1000.0, 2500.0, 5000.0, 10000.0)


@dataclass(frozen=True)
class FlushSnapshot:
    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]  # flushes at or under each bound, then the +Inf bucket
    count: int
    sum_ms: float


class FlushStats:
    """Flush times, bucketed (module doc). Thread-safe."""

    def __init__(self, bounds: tuple[float, ...] = BUCKETS_MS) -> None:
        self.bounds = tuple(bounds)
        self._counts = [0] * (len(self.bounds) + 1)  # per bucket; the last is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, ms: float) -> None:
        i = bisect.bisect_left(self.bounds, ms)
        with self._lock:
            self._counts[i] += 1
            self._sum += ms

    def snapshot(self) -> FlushSnapshot:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for c in counts:
            running += c
            cumulative.append(running)
        return FlushSnapshot(self.bounds, tuple(cumulative), running, total)
