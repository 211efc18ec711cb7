"""The arithmetic of ``spool perf``: Kafka's ProducerPerformance and ConsumerPerformance
accounting, free of clients and clocks (every method takes the time it is given).

Contract:

- :class:`ProducerStats` counts acknowledged records as Kafka's producer perf test does:
  a record counts once its delivery succeeded, with its latency (milliseconds from
  ``produce()`` to the acknowledgement) and its value's size. It keeps totals, a
  reporting window (count, bytes, latency sum and max) and a sample of latencies for the
  percentiles: every ``n // min(n, 500000)``-th acknowledged record, so at most about
  500,000 values whatever ``n`` is. A percentile ``p`` is the sample's sorted value at
  index ``int(p * size)`` (Kafka's rule). Failed deliveries are counted apart and never
  enter the figures.
- :class:`Throttler` is Kafka's ThroughputThrottler: a negative target never throttles;
  otherwise, once the records sent so far exceed ``target * elapsed``, each further
  record owes ``1/target`` seconds, paid in sleeps of at least 2 ms. ``0`` means 'send
  nothing more' and is refused by the command instead (it would wait forever).
- :class:`ConsumerStats` counts consumed records and bytes (key + value), the time spent
  joining the group (assignment time minus the subscription or revocation time), and
  the per-interval figures of ``--show-detailed-stats``.
- Rates divide by elapsed milliseconds; an elapsed time of 0 gives a rate of 0.0 rather
  than a division by zero. ``MB`` is 1024 * 1024 bytes, as in Kafka's tools.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

MB = 1024 * 1024
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
MAX_SAMPLES = 500_000
_MIN_SLEEP = 0.002


def rate(amount: float, elapsed_ms: float) -> float:
    """``amount`` per second over ``elapsed_ms`` (0.0 when no time passed)."""
    return 1000.0 * amount / elapsed_ms if elapsed_ms > 0 else 0.0


def percentiles(sample: array, ps: tuple[float, ...] = PERCENTILES) -> list[float]:
    """Kafka's percentiles of ``sample``: the sorted value at index ``int(p * size)``."""
    values = sorted(sample)
    if not values:
        return [0.0 for _ in ps]
    return [values[min(int(p * len(values)), len(values) - 1)] for p in ps]


class ProducerStats:
    """Acknowledged records of a producer run (module docstring).

    :meth:`record` runs once per acknowledged record, so it only adds: a window is the
    difference between the totals now and at its start, plus its own maximum."""

    def __init__(self, num_records: int, now: float) -> None:
        self.start = now
        self.sampling = max(1, num_records // max(1, min(num_records, MAX_SAMPLES)))
        self.samples = array("d")
        self.next_sample = 1  # the count whose latency is sampled next (Kafka: the 1st, ...)
        self.count = self.bytes = self.failed = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0  # of the windows taken so far
        self.window_max = 0.0
        self.window_start = now
        self.window_base = (0, 0, 0.0)  # count, bytes, latency_sum at the window's start

    def record(self, latency_ms: float, size: int) -> None:
        """One acknowledged record: ``latency_ms`` from produce() to the ack, ``size`` bytes."""
        self.count += 1
        self.bytes += size
        self.latency_sum += latency_ms
        if latency_ms > self.window_max:
            self.window_max = latency_ms
        if self.count == self.next_sample:
            self.samples.append(latency_ms)
            self.next_sample += self.sampling

    def window_due(self, now: float, interval: float) -> bool:
        return now - self.window_start >= interval

    def take_window(self, now: float) -> dict[str, float]:
        """The current window's figures; a new window starts at ``now``."""
        count0, bytes0, sum0 = self.window_base
        count, elapsed_ms = self.count - count0, (now - self.window_start) * 1000.0
        w = {
            "records": count,
            "records_per_sec": rate(count, elapsed_ms),
            "mb_per_sec": rate((self.bytes - bytes0) / MB, elapsed_ms),
            "latency_avg_ms": (self.latency_sum - sum0) / count if count else 0.0,
            "latency_max_ms": self.window_max,
        }
        self.latency_max = max(self.latency_max, self.window_max)
        self.window_max, self.window_start = 0.0, now
        self.window_base = (self.count, self.bytes, self.latency_sum)
        return w

    def total(self, now: float) -> dict[str, float]:
        """The whole run's figures (Kafka's final line), ``now`` being its end."""
        elapsed_ms = (now - self.start) * 1000.0
        p50, p95, p99, p999 = percentiles(self.samples)
        return {
            "records": self.count,
            "failed": self.failed,
            "bytes": self.bytes,
            "elapsed_ms": round(elapsed_ms, 3),
            "records_per_sec": rate(self.count, elapsed_ms),
            "mb_per_sec": rate(self.bytes / MB, elapsed_ms),
            "latency_avg_ms": self.latency_sum / self.count if self.count else 0.0,
            "latency_max_ms": max(self.latency_max, self.window_max),
            "latency_p50_ms": p50,
            "latency_p95_ms": p95,
            "latency_p99_ms": p99,
            "latency_p999_ms": p999,
        }


def window_line(w: dict[str, float], verb: str = "sent") -> str:
    """Kafka's progress line for one window."""
    return (f"{w['records']} records {verb}, {w['records_per_sec']:.1f} records/sec "
            f"({w['mb_per_sec']:.2f} MB/sec), {w['latency_avg_ms']:.1f} ms avg latency, "
            f"{w['latency_max_ms']:.1f} ms max latency.")


def total_line(t: dict[str, float]) -> str:
    """Kafka's final line (percentiles as whole milliseconds, as Kafka prints them)."""
    return (f"{t['records']} records sent, {t['records_per_sec']:.1f} records/sec "
            f"({t['mb_per_sec']:.2f} MB/sec), {t['latency_avg_ms']:.2f} ms avg latency, "
            f"{t['latency_max_ms']:.2f} ms max latency, {int(t['latency_p50_ms'])} ms 50th, "
            f"{int(t['latency_p95_ms'])} ms 95th, {int(t['latency_p99_ms'])} ms 99th, "
            f"{int(t['latency_p999_ms'])} ms 99.9th.")


class Throttler:
    """Kafka's ThroughputThrottler (module docstring); ``sleep`` is the caller's wait."""

    def __init__(self, target: float, start: float) -> None:
        self.target = target
        self.start = start
        self.per_record = 1.0 / target if target > 0 else 0.0
        self.deficit = 0.0

    def should_throttle(self, sent: int, now: float) -> bool:
        if self.target < 0:
            return False
        elapsed = now - self.start
        return elapsed > 0 and sent / elapsed > self.target

    def owed(self) -> float:
        """Add one record's debt; the seconds to wait now (0.0 below the 2 ms minimum)."""
        self.deficit += self.per_record
        if self.deficit < _MIN_SLEEP:
            return 0.0
        owed, self.deficit = self.deficit, 0.0
        return owed


@dataclass
class ConsumerStats:
    """Consumed records, bytes and join time of a consumer run (module docstring)."""

    start: float
    records: int = 0
    bytes: int = 0
    join_ms: float = 0.0
    join_started: float | None = None
    # the last report, for --show-detailed-stats
    last_report: float = 0.0
    last_records: int = 0
    last_bytes: int = 0
    join_ms_in_interval: float = 0.0
    intervals: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.join_started = self.start
        self.last_report = self.start

    def joining(self, now: float) -> None:
        """Partitions revoked (or the subscription made): a join starts."""
        self.join_started = now

    def joined(self, now: float) -> None:
        """Partitions assigned: the join that started last has ended."""
        if self.join_started is not None:
            ms = (now - self.join_started) * 1000.0
            self.join_ms += ms
            self.join_ms_in_interval += ms
            self.join_started = None

    def interval(self, now: float) -> dict[str, float]:
        """Kafka's detailed-stats row since the last one; the next interval starts."""
        elapsed_ms = (now - self.last_report) * 1000.0
        fetch_ms = elapsed_ms - self.join_ms_in_interval
        d_records = self.records - self.last_records
        d_mb = (self.bytes - self.last_bytes) / MB
        row = {
            "time_ms": int(now * 1000),
            "data_consumed_mb": self.bytes / MB,
            "mb_per_sec": rate(d_mb, elapsed_ms),
            "data_consumed_records": self.records,
            "records_per_sec": rate(d_records, elapsed_ms),
            "rebalance_time_ms": int(self.join_ms_in_interval),
            "fetch_time_ms": int(fetch_ms),
            "fetch_mb_per_sec": rate(d_mb, fetch_ms),
            "fetch_records_per_sec": rate(d_records, fetch_ms),
        }
        self.last_report, self.last_records, self.last_bytes = now, self.records, self.bytes
        self.join_ms_in_interval = 0.0
        self.intervals.append(row)
        return row

    def total(self, end: float) -> dict[str, float]:
        """The whole run's figures (Kafka's summary row), ``end`` being its end."""
        elapsed_ms = (end - self.start) * 1000.0
        fetch_ms = elapsed_ms - self.join_ms
        mb = self.bytes / MB
        return {
            "start_time_ms": int(self.start * 1000),
            "end_time_ms": int(end * 1000),
            "data_consumed_mb": mb,
            "data_consumed_bytes": self.bytes,
            "mb_per_sec": rate(mb, elapsed_ms),
            "data_consumed_records": self.records,
            "records_per_sec": rate(self.records, elapsed_ms),
            "rebalance_time_ms": int(self.join_ms),
            "fetch_time_ms": int(fetch_ms),
            "fetch_mb_per_sec": rate(mb, fetch_ms),
            "fetch_records_per_sec": rate(self.records, fetch_ms),
        }
