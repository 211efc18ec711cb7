"""The console's memory of the recent past: throughput per topic and lag per group.

``Sampler(reader, interval)`` runs one daemon thread that, every ``interval`` seconds
(first at once), asks the cluster for every non-internal partition's high watermark
and every consumer group's committed offsets (at most ``MAX_GROUPS`` groups, by id),
and keeps, per series, the last ``KEEP`` points ``(epoch seconds, value)``:

- ``throughput(topic)``: records/s, the growth of the topic's summed high watermarks
  between two samples divided by the time between them (the first sample gives none);
- ``lag(group)``: the group's total lag, summed over its partitions with a committed
  offset (``high_watermark - committed``; partitions of internal or deleted topics
  left out).

A failed sample (the cluster away) is skipped and logged once per outage; the
series keep what they had. ``record_lag(group, total)`` adds a point from outside
(the group page adds the lag it just computed, so its chart is never empty).
Readers get copies; a lock guards the series. ``stop()`` ends the thread. Time comes
from ``clock`` (``time.time`` unless a test gives another).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("spool.console")

KEEP = 360  # points per series: 30 minutes at the default 5 s
MAX_GROUPS = 100

Point = tuple[float, float]


class Sampler:
    """Samples the cluster on a thread (module doc)."""

    def __init__(self, reader: Any, interval: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.reader = reader
        self.interval = interval
        self.clock = clock  # epoch seconds: the charts' time axis
        self._lock = threading.Lock()
        self._throughput: dict[str, deque[Point]] = {}
        self._lag: dict[str, deque[Point]] = {}
        self._last: tuple[float, dict[str, int]] | None = None  # (time, end offset sums)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-console-sampler",
                                        daemon=True)
        self._failing = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread; waits at most 2 s for a sample in flight (a daemon thread:
        one stuck on an absent cluster does not hold up the process's exit)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
                if self._failing:
                    log.info("console: the cluster answers again")
                self._failing = False
            except Exception as e:  # the cluster away, or a race with a deletion
                if not self._failing:
                    log.warning("console: sampling the cluster failed: %s", e)
                self._failing = True
            self._stop.wait(self.interval)

    def sample_once(self) -> None:
        """One sample of every series (the thread's body; tests may call it)."""
        partitions = self.reader.all_partitions()
        tps = [(t, p) for t, n in partitions.items() for p in range(n)]
        high = self.reader.high_watermarks(tps)
        now = self.clock()
        sums: dict[str, int] = {}
        for (t, _), off in high.items():
            sums[t] = sums.get(t, 0) + off
        lags: dict[str, float] = {}
        for g in self.reader.group_ids()[:MAX_GROUPS]:
            committed = self.reader.committed(g)  # partitions of deleted topics left out
            lags[g] = sum(high[tp] - off for tp, off in committed.items() if tp in high)
        with self._lock:
            if self._last is not None:
                then, before = self._last
                for t, total in sums.items():
                    if t in before and now > then:
                        rate = max(0, total - before[t]) / (now - then)
                        self._add(self._throughput, t, (now, rate))
            self._last = (now, sums)
            for g, total in lags.items():
                self._add(self._lag, g, (now, total))

    @staticmethod
    def _add(series: dict[str, deque[Point]], name: str, point: Point) -> None:
        series.setdefault(name, deque(maxlen=KEEP)).append(point)

    def record_lag(self, group: str, total: int) -> None:
        with self._lock:
            self._add(self._lag, group, (self.clock(), total))

    def throughput(self, topic: str | None = None) -> dict[str, list[Point]]:
        """Records/s per topic (one topic when named)."""
        with self._lock:
            return {t: list(s) for t, s in self._throughput.items()
                    if topic is None or t == topic}

    def lag(self, group: str) -> list[Point]:
        with self._lock:
            return list(self._lag.get(group, ()))

    def lags(self) -> dict[str, list[Point]]:
        """Total lag per group, every group sampled."""
        with self._lock:
            return {g: list(s) for g, s in self._lag.items()}
