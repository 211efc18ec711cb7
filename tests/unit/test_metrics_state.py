"""The storage figures the broker's state collectors export (spool.broker.metrics_state):
the background flush histogram and the log cleaner's gauges, from a real LogManager."""

from __future__ import annotations

import pytest
from prometheus_client.core import Metric

from spool.broker.metrics_state import cleaner_gauges, flush_histogram
from spool.storage.cleaner_manager import LogCleaner
from spool.storage.manager import LogManager
from spool.storage.offset_map import OffsetMap
from spool.util.clock import FakeClock
from tests.unit.test_cleaner import COMPACT, fill


class SteppingClock(FakeClock):
    """A fake clock whose monotonic time moves 3 ms at every reading: each timed flush
    takes exactly 3 ms."""

    def __init__(self) -> None:
        super().__init__()
        self._mono = 0.0

    def monotonic(self) -> float:
        self._mono += 0.003
        return self._mono


def samples(metric: Metric) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in metric.samples}


def test_background_flushes_are_timed_into_the_histogram(tmp_path):
    clock = SteppingClock()
    mgr = LogManager([str(tmp_path / "d")], {"log.flush.interval.ms": "500"}, clock)
    try:
        for p in range(3):
            plog = mgr.create_partition("t", p)
            if p < 2:  # the third has nothing to flush
                fill(plog, 10, 5)
        mgr.flush_once()  # flush.ms has not passed: nothing flushed, nothing observed
        clock.advance(501)
        assert mgr.flush_once() == 2
        got = samples(flush_histogram(mgr.flush_stats.snapshot()))
    finally:
        mgr.shutdown()
    name = "kafka_log_logflushstats_logflushrateandtimems"
    assert got[(name + "_count", ())] == 2
    assert abs(got[(name + "_sum", ())] - 6.0) < 1e-6
    assert got[(name + "_bucket", (("le", "2.5"),))] == 0
    assert got[(name + "_bucket", (("le", "5.0"),))] == 2
    assert got[(name + "_bucket", (("le", "+Inf"),))] == 2


def test_cleaner_gauges_after_a_cleaning(tmp_path):
    mgr = LogManager([str(tmp_path / "d")], {"log.cleaner.backoff.ms": "10"}, FakeClock())
    try:
        cleaner = LogCleaner(mgr)
        plog = mgr.create_partition("tbl", 0, COMPACT)
        fill(plog, 400, 20)
        before = {m.name: m for m in cleaner_gauges(cleaner, mgr)}
        assert cleaner.clean_once()
        stats = cleaner.last_result.stats
        got = {m.name: samples(m) for m in cleaner_gauges(cleaner, mgr)}
        cleaner.uncleanable.add(("tbl", 0))  # what a failed cleaning does
        failed = {m.name: samples(m) for m in cleaner_gauges(cleaner, mgr)}
    finally:
        mgr.shutdown()
    assert samples(before["kafka_log_logcleaner_max_clean_time_secs"]) == {
        ("kafka_log_logcleaner_max_clean_time_secs", ()): 0.0}

    def value(name: str) -> float:
        (v,) = got[name].values()
        return v

    capacity = OffsetMap.for_buffer(134_217_728, 0.9).capacity
    # the map held the 20 keys of the dirty range
    assert value("kafka_log_logcleaner_max_buffer_utilization_percent") == pytest.approx(
        100.0 * 20 / capacity)
    assert value("kafka_log_logcleaner_cleaner_recopy_percent") == int(
        100 * stats.bytes_written / stats.bytes_read)
    assert 0 < value("kafka_log_logcleaner_cleaner_recopy_percent") < 100
    assert value("kafka_log_logcleaner_max_clean_time_secs") == stats.elapsed_s
    # the log was all dirty when picked: nothing below the first dirty offset yet
    assert value("kafka_log_logcleanermanager_max_dirty_percent") == 100
    assert value("kafka_log_logcleaner_deadthreadcount") == 0
    assert got["kafka_log_logcleanermanager_uncleanable_partitions_count"] == {
        ("kafka_log_logcleanermanager_uncleanable_partitions_count",
         (("logDirectory", str(tmp_path / "d")),)): 0}
    assert failed["kafka_log_logcleanermanager_uncleanable_partitions_count"] == {
        ("kafka_log_logcleanermanager_uncleanable_partitions_count",
         (("logDirectory", str(tmp_path / "d")),)): 1}
