"""spool.cli.perf_stats: Kafka's perf-test accounting, driven with explicit times."""

from __future__ import annotations

from array import array

import pytest

from spool.cli.common import CliError
from spool.cli.perf_consume import date_formatter, detailed_row, kafka_time
from spool.cli.perf_stats import (
    MB,
    ConsumerStats,
    ProducerStats,
    Throttler,
    percentiles,
    total_line,
    window_line,
)


def test_percentiles_take_kafkas_index() -> None:
    sample = array("d", reversed(range(1, 1001)))  # 1..1000, unsorted
    # index int(p * size) of the sorted sample: 500 -> 501, 950 -> 951, 990 -> 991, 999 -> 1000
    assert percentiles(sample) == [501, 951, 991, 1000]
    assert percentiles(array("d", [7.0])) == [7.0, 7.0, 7.0, 7.0]
    assert percentiles(array("d")) == [0.0, 0.0, 0.0, 0.0]


def test_producer_totals_window_and_sampling() -> None:
    stats = ProducerStats(1_000_000, now=100.0)
    assert stats.sampling == 2  # at most ~500,000 latencies kept
    for i in range(10):
        stats.record(float(i), 100)
    assert len(stats.samples) == 5  # every second record
    w = stats.take_window(now=102.0)
    assert w == {"records": 10, "records_per_sec": 5.0, "mb_per_sec": 500 / MB,
                 "latency_avg_ms": 4.5, "latency_max_ms": 9.0}
    assert stats.take_window(now=103.0)["records"] == 0  # a new window started at 102.0
    stats.failed = 3
    t = stats.total(now=104.0)
    assert (t["records"], t["failed"], t["bytes"], t["elapsed_ms"]) == (10, 3, 1000, 4000.0)
    assert t["records_per_sec"] == 2.5
    assert t["latency_avg_ms"] == 4.5 and t["latency_max_ms"] == 9.0
    assert total_line(t).startswith("10 records sent, 2.5 records/sec (0.00 MB/sec), 4.50 ms avg "
                                    "latency, 9.00 ms max latency, ")
    assert window_line(w) == ("10 records sent, 5.0 records/sec (0.00 MB/sec), 4.5 ms avg "
                              "latency, 9.0 ms max latency.")


def test_small_runs_keep_every_latency() -> None:
    stats = ProducerStats(3, now=0.0)
    for lat in (3.0, 1.0, 2.0):
        stats.record(lat, 1)
    assert sorted(stats.samples) == [1.0, 2.0, 3.0]
    assert stats.total(now=0.0)["records_per_sec"] == 0.0  # no time passed: no division


def test_throttler() -> None:
    assert not Throttler(-1, 0.0).should_throttle(10**9, 1.0)
    t = Throttler(1000, start=0.0)
    assert not t.should_throttle(1000, 1.0)  # exactly on target
    assert t.should_throttle(1001, 1.0)
    # 1 ms owed per record, paid once at least 2 ms are owed
    assert [t.owed() for _ in range(4)] == [0.0, pytest.approx(0.002), 0.0,
                                            pytest.approx(0.002)]


def test_consumer_join_time_and_intervals() -> None:
    s = ConsumerStats(start=10.0)
    s.joined(12.0)  # subscribed at 10.0, assigned at 12.0
    s.records, s.bytes = 100, MB
    row = s.interval(14.0)
    assert row["rebalance_time_ms"] == 2000 and row["fetch_time_ms"] == 2000
    assert row["records_per_sec"] == 25.0 and row["fetch_records_per_sec"] == 50.0
    assert row["fetch_mb_per_sec"] == 0.5
    s.joining(15.0)
    s.joined(15.5)
    s.records += 100
    row = s.interval(16.0)
    assert row["rebalance_time_ms"] == 500 and row["data_consumed_records"] == 200
    t = s.total(20.0)
    assert (t["rebalance_time_ms"], t["fetch_time_ms"]) == (2500, 7500)
    assert t["data_consumed_bytes"] == MB and t["data_consumed_mb"] == 1.0
    assert t["records_per_sec"] == 20.0


def test_date_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        ms = 1_700_000_000_123  # 2023-11-14 22:13:20.123 UTC, a Tuesday
        assert kafka_time(ms) == "2023-11-14 22:13:20:123"
        assert date_formatter("dd/MM/yy h:mm a 'at' ''S''")(ms) == "14/11/23 10:13 PM at '123'"
        assert date_formatter("EEE, d MMM yyyy HH:mm:ss.SSS Z")(ms) == (
            "Tue, 14 Nov 2023 22:13:20.123 +0000")
        with pytest.raises(CliError, match="pattern letter 'Q' is not supported"):
            date_formatter("yyyy-QQ")
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_detailed_stats_row_is_kafkas() -> None:
    stats = ConsumerStats(start=100.0)
    stats.joined(100.5)  # half a second joining, in this interval
    stats.records, stats.bytes = 2048, 2 * MB
    row = stats.interval(102.5)
    assert detailed_row(row, when=lambda ms: f"<{ms}>") == (
        "<102500>, 0, 2.0000, 0.8000, 2048, 819.2000, 500, 2000, 1.0000, 1024.0000")
