"""Injectable time: storage and coordinators never call ``time.time()`` themselves.

``Clock`` is the protocol: ``now_ms()`` is wall-clock milliseconds since the
epoch (what record timestamps, retention and ``segment.ms`` compare with),
``monotonic()`` is seconds from an arbitrary origin (for intervals that must
not jump when the wall clock does). ``SystemClock`` is the real one;
``FakeClock`` is driven by tests with ``advance``/``set``. ``as_clock`` also
accepts a bare callable returning milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that only moves when told to; thread-safe."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._ms = now_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return self._ms

    def monotonic(self) -> float:
        return self._ms / 1000.0

    def advance(self, ms: int) -> int:
        with self._lock:
            self._ms += ms
            return self._ms

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._ms = now_ms


class _CallableClock:
    def __init__(self, fn: Callable[[], int]) -> None:
        self._fn = fn

    def now_ms(self) -> int:
        return int(self._fn())

    def monotonic(self) -> float:
        return self._fn() / 1000.0


def as_clock(clock: Clock | Callable[[], int] | None) -> Clock:
    """A ``Clock`` from a clock, a callable returning ms, or None (the system clock)."""
    if clock is None:
        return SystemClock()
    if type(clock) in _CLOCKS:  # isinstance of a runtime Protocol is slow (a log each)
        return clock
    if isinstance(clock, Clock):
        return clock
    if callable(clock):
        return _CallableClock(clock)
    raise TypeError(f"not a clock: {clock!r}")


_CLOCKS = (SystemClock, FakeClock, _CallableClock)
