"""Retention with an injected clock: retention.ms, retention.bytes, the active segment, log start."""

from __future__ import annotations

from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

HOUR = 3_600_000


def make_log(tmp_path, clock, **cfg):
    base = dict(internal_segment_bytes=1000, index_interval_bytes=100, file_delete_delay_ms=0)
    return PartitionLog(tmp_path / "t-0", LogConfig(**{**base, **cfg}), clock=clock)


def append_segments(log, clock, n_segments, step_ms=0):
    """Append until there are ``n_segments``; each batch stamped with the clock's time."""
    while len(log.segments) < n_segments:
        log.append(make_batch(2, timestamp=clock.now_ms(), value_size=100))
        clock.advance(step_ms)


def test_retention_ms_deletes_expired_segments_but_never_the_active_one(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_ms=HOUR)
    append_segments(log, clock, 4)
    first_bases = [s.base_offset for s in log.segments]
    clock.advance(HOUR)
    assert log.run_retention() == 0  # exactly at the limit: kept
    clock.advance(1)
    assert log.run_retention() == 3
    assert [s.base_offset for s in log.segments] == first_bases[-1:]
    assert log.log_start_offset == first_bases[-1]
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert len(list((tmp_path / "t-0").glob("*.log"))) == 1
    clock.advance(10 * HOUR)
    assert log.run_retention() == 0  # only the active segment is left


def test_retention_ms_uses_each_segments_newest_timestamp(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_ms=10 * HOUR)
    append_segments(log, clock, 3)  # old data
    clock.advance(5 * HOUR)
    append_segments(log, clock, 5)  # newer data
    clock.advance(6 * HOUR)  # old: 11h, newer: 6h
    deleted = log.run_retention()
    assert deleted == 2
    assert log.log_start_offset == log.segments[0].base_offset
    assert all(clock.now_ms() - s.largest_timestamp() <= 10 * HOUR for s in log.segments)


def test_retention_ms_minus_one_keeps_everything(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_ms=-1)
    append_segments(log, clock, 4)
    clock.advance(10**6 * HOUR)
    assert log.run_retention() == 0


def test_retention_bytes_whole_segments_oldest_first(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_bytes=2500, retention_ms=-1)
    append_segments(log, clock, 6)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    deleted = log.run_retention()
    # delete from the oldest while what remains is still >= retention.bytes
    expect, diff = 0, total - 2500
    for s in sizes[:-1]:
        if diff - s < 0:
            break
        diff -= s
        expect += 1
    assert deleted == expect > 0
    assert log.size_in_bytes >= 2500 - max(sizes)
    assert log.segments[-1].size == sizes[-1]


def test_retention_bytes_never_deletes_the_active_segment(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_bytes=0, retention_ms=-1)
    append_segments(log, clock, 3)
    assert log.run_retention() == 2
    assert len(log.segments) == 1 and log.size_in_bytes > 0


def test_compact_only_policy_skips_time_and_size_retention(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_ms=1, retention_bytes=0, cleanup_policy=("compact",))
    append_segments(log, clock, 3)
    clock.advance(HOUR)
    assert log.run_retention() == 0


def test_retention_stops_at_the_high_watermark(tmp_path):
    clock = FakeClock()
    log = PartitionLog(
        tmp_path / "t-0",
        LogConfig(internal_segment_bytes=1000, retention_ms=1, file_delete_delay_ms=0),
        clock=clock,
        hw_follows_leo=False,
    )
    append_segments(log, clock, 4)
    log.update_high_watermark(log.segments[1].base_offset)
    clock.advance(HOUR)
    assert log.run_retention() == 1


def test_file_delete_delay_keeps_renamed_files_until_due(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_ms=HOUR, file_delete_delay_ms=60_000)
    append_segments(log, clock, 3)
    old_slice = log.read(0, 10**6)
    clock.advance(HOUR + 1)
    assert log.run_retention() == 2
    assert len(list((tmp_path / "t-0").glob("*.log.deleted"))) == 2
    assert len(old_slice.read()) == old_slice.length  # a fetch in flight still reads
    clock.advance(59_999)
    assert log.delete_expired_files() == 0
    clock.advance(1)
    assert log.delete_expired_files() == 2
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_retention_survives_restart_via_log_start_checkpoint(tmp_path):
    clock = FakeClock()
    log = make_log(tmp_path, clock, retention_ms=HOUR)
    append_segments(log, clock, 4)
    clock.advance(HOUR + 1)
    log.run_retention()
    start = log.log_start_offset
    log.close()
    again = make_log(tmp_path, clock, retention_ms=HOUR)
    assert again.log_start_offset == start
    again.close()
