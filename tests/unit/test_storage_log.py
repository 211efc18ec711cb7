"""PartitionLog: appends, offsets, reads (KIP-74, max_offset, segments), timestamps, DeleteRecords,
truncation, flush/checkpoints, reopen, delete."""

from __future__ import annotations

import os

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader, crc_is_valid, iter_batches
from spool.records.builder import BatchBuilder
from spool.records.compression import GZIP, LZ4, ZSTD
from spool.storage.checkpoint import read_checkpoint
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

SMALL = LogConfig(internal_segment_bytes=1500, index_interval_bytes=150, segment_index_bytes=4096)


@pytest.fixture
def clock():
    return FakeClock(1_700_000_000_000)


def open_log(tmp_path, config=SMALL, clock=None, **kw):
    return PartitionLog(tmp_path / "topic-0", config, clock=clock or FakeClock(), **kw)


def fill(log, n, clock, records=3, value_size=40):
    infos = []
    for i in range(n):
        infos.append(log.append(make_batch(records, timestamp=clock.now_ms(),
                                           value_size=value_size, tag=i)))
        clock.advance(10)
    return infos


def headers(data):
    return [h for _, h in iter_batches(data)]


def test_append_assigns_contiguous_offsets_and_patches(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    buf = make_batch(3, base_offset=777)
    info = log.append(buf, leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 2, 3)
    assert BatchHeader.parse(buf).base_offset == 0  # patched in place
    info = log.append(bytes(make_batch(2)))  # read-only input is copied
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 5
    assert log.log_start_offset == 0
    hs = headers(log.read_bytes(0, 10_000))
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 4), (3, 0)]


def test_append_several_batches_at_once_and_log_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    buf = make_batch(2, timestamp=5) + make_batch(3, timestamp=7)
    info = log.append(buf, log_append_time_ms=clock.now_ms())
    assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 4, clock.now_ms())
    data = log.read_bytes(0, 10_000)
    hs = headers(data)
    assert [h.base_offset for h in hs] == [0, 2]
    assert all(h.is_log_append_time and h.max_timestamp == clock.now_ms() for h in hs)
    assert all(crc_is_valid(data, p) for p, _ in iter_batches(data))


def test_append_rejects_malformed_input(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(KafkaError) as e:
        log.append(make_batch(1)[:-3])
    assert e.value.code == Errors.CORRUPT_MESSAGE
    with pytest.raises(KafkaError):
        log.append(b"")
    assert log.log_end_offset == 0


def test_append_keeping_offsets(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(2, base_offset=10), assign_offsets=False)
    assert log.log_end_offset == 12
    with pytest.raises(KafkaError):
        log.append(make_batch(1, base_offset=11), assign_offsets=False)


def test_rolls_by_size_and_reads_stay_in_one_segment(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    fill(log, 40, clock)
    assert len(log.segments) > 3
    for seg in log.segments[:-1]:
        assert seg.size <= SMALL.segment_size
    # a read that reaches the end of a segment stops there
    seg0 = log.segments[0]
    sl = log.read(0, 10**9)
    assert sl.segment_base_offset == 0 and sl.length == seg0.size
    nxt = log.read(log.segments[1].base_offset, 10**9)
    assert nxt.first_offset == log.segments[1].base_offset
    # every offset reads back from the batch that holds it
    for off in range(0, log.log_end_offset, 7):
        h = headers(log.read_bytes(off, 1))[0]
        assert h.base_offset <= off <= h.last_offset


def test_read_max_bytes_whole_batches_and_kip74(tmp_path, clock):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=100), clock=clock)
    infos = fill(log, 20, clock, records=2, value_size=30)
    size = infos[0].size
    sl = log.read(0, size * 3 + size // 2)
    assert sl.length == size * 3  # whole batches only
    sl = log.read(0, 10)  # first batch larger than max_bytes
    assert sl.length == size
    assert log.read(0, 10, min_one_batch=False) is None
    sl = log.read(5, size * 2)
    assert sl.first_offset == 4 and sl.length == size * 2


def test_read_respects_max_offset_and_offset_range(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    fill(log, 5, clock, records=2)
    sl = log.read(0, 10**6, max_offset=6)
    assert [h.last_offset for h in headers(sl.read())] == [1, 3, 5]
    assert log.read(6, 10**6, max_offset=6) is None
    assert log.read(10, 10**6) is None  # at the log end: empty
    with pytest.raises(KafkaError) as e:
        log.read(11, 100)
    assert e.value.code == Errors.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError):
        log.read(-1, 100)


def test_fetch_slice_works_with_sendfile(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    fill(log, 3, clock)
    sl = log.read(0, 10**6)
    r, w = os.pipe()
    try:
        sent = os.sendfile(w, sl.fileno(), sl.position, sl.length)
        assert os.read(r, sent) == sl.read()
    finally:
        os.close(r)
        os.close(w)


def test_offset_for_timestamp_uncompressed_and_compressed(tmp_path, clock):
    cfg = LogConfig(internal_segment_bytes=600, index_interval_bytes=100)
    log = open_log(tmp_path, cfg, clock=clock)
    t0 = clock.now_ms()
    expected = {}
    offset = 0
    for i, codec in enumerate([0, GZIP, LZ4, ZSTD] * 5):
        b = BatchBuilder(0, compression=codec)
        for j in range(4):
            ts = t0 + i * 100 + j * 10
            b.append(None, b"v%d-%d" % (i, j), timestamp=ts)
            expected.setdefault(ts, offset)
            offset += 1
        log.append(bytearray(b.build()))
    assert len(log.segments) > 2
    stamps = sorted(expected)
    for target in [t0 - 5, t0, t0 + 1, t0 + 35, t0 + 36, t0 + 999, t0 + 1005, stamps[-1]]:
        hit = next((expected[s] for s in stamps if s >= target), None)
        got = log.offset_for_timestamp(target)
        if hit is None:
            assert got is None
        else:
            assert got[0] == hit and got[1] >= target
    assert log.offset_for_timestamp(stamps[-1] + 1) is None
    assert log.offset_for_timestamp(t0, max_offset=0) is None
    assert log.max_timestamp_offset() == (offset - 1, stamps[-1])


def test_offset_for_timestamp_out_of_order_timestamps(tmp_path, clock):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0), clock=clock)
    log.append(make_batch(3, timestamps=[100, 500, 200]))
    log.append(make_batch(2, timestamps=[300, 400]))
    assert log.offset_for_timestamp(150) == (1, 500)
    assert log.offset_for_timestamp(450) == (1, 500)
    assert log.offset_for_timestamp(501) is None
    assert log.max_timestamp_offset() == (1, 500)


def test_delete_records_moves_log_start_and_drops_whole_segments(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    fill(log, 30, clock)
    second = log.segments[1].base_offset
    target = second + 2
    assert log.delete_records_before(target) == target
    assert log.log_start_offset == target
    assert log.segments[0].base_offset == second
    with pytest.raises(KafkaError):
        log.read(target - 1, 100)
    assert headers(log.read_bytes(target, 1))[0].last_offset >= target
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint")[("topic", 0)] == target
    with pytest.raises(KafkaError):
        log.delete_records_before(log.high_watermark + 1)
    log.close()
    again = open_log(tmp_path, clock=clock)
    assert again.log_start_offset == target
    assert not list((tmp_path / "topic-0").glob("*.deleted"))
    again.close()


def test_truncate_to_for_replication(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    infos = fill(log, 30, clock)
    cut = infos[17].first_offset
    log.truncate_to(cut)
    assert log.log_end_offset == log.high_watermark == cut
    assert log.active_segment.base_offset <= cut
    info = log.append(make_batch(1))
    assert info.first_offset == cut
    assert headers(log.read_bytes(cut, 1))[0].base_offset == cut
    log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    log.append(make_batch(2))
    log.close()
    again = open_log(tmp_path, clock=clock)
    assert again.log_end_offset == 2
    again.close()


def test_high_watermark_is_clamped_and_checked(tmp_path, clock):
    log = open_log(tmp_path, clock=clock, hw_follows_leo=False)
    fill(log, 3, clock)
    assert log.high_watermark == 0
    assert log.update_high_watermark(100) == log.log_end_offset
    log.high_watermark = 3
    assert log.high_watermark == log.last_stable_offset == 3
    log.set_first_unstable_offset(1)
    assert log.last_stable_offset == 1
    log.set_first_unstable_offset(None)
    assert log.read(3, 10**6, max_offset=log.high_watermark) is None


def test_flush_moves_recovery_point_and_flush_messages(tmp_path, clock):
    log = open_log(tmp_path, SMALL.with_overrides(flush_messages=5), clock=clock)
    fill(log, 1, clock, records=3)
    assert log.recovery_point == 0
    fill(log, 1, clock, records=3)
    assert log.recovery_point == 6
    log.checkpoints.write()
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint")[("topic", 0)] == 6


def test_flush_ms_and_rolled_segments(tmp_path, clock):
    log = open_log(tmp_path, SMALL.with_overrides(flush_ms=1000), clock=clock)
    fill(log, 2, clock)
    assert not log.flush_if_due()
    clock.advance(1000)
    assert log.flush_if_due() and log.recovery_point == log.log_end_offset
    log2 = PartitionLog(tmp_path / "other-0", SMALL, clock=clock)
    fill(log2, 20, clock)
    assert log2.flush_if_due()  # segments rolled: flushed up to the active segment
    assert log2.recovery_point == log2.active_segment.base_offset


def test_segment_ms_rolls_on_record_time(tmp_path, clock):
    log = open_log(tmp_path, LogConfig(segment_ms=1000), clock=clock)
    log.append(make_batch(1, timestamp=clock.now_ms()))
    log.append(make_batch(1, timestamp=clock.now_ms() + 500))
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=clock.now_ms() + 1001))
    assert len(log.segments) == 2 and log.active_segment.base_offset == 2


def test_full_index_rolls(tmp_path, clock):
    cfg = LogConfig(segment_index_bytes=8 * 3, index_interval_bytes=0)
    log = open_log(tmp_path, cfg, clock=clock)
    fill(log, 12, clock, records=1)
    assert len(log.segments) >= 3
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert len(list(log.iter_batches())) == 12


def test_reopen_after_close_is_identical_and_indexes_trimmed(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    fill(log, 25, clock)
    before = list(log.iter_batches())
    leo, n = log.log_end_offset, len(log.segments)
    log.close()
    for idx in (tmp_path / "topic-0").glob("*.index"):
        assert idx.stat().st_size % 8 == 0 and idx.stat().st_size < SMALL.segment_index_bytes
    again = open_log(tmp_path, clock=clock)
    assert (again.log_end_offset, len(again.segments)) == (leo, n)
    assert list(again.iter_batches()) == before
    assert again.append(make_batch(1)).first_offset == leo
    again.close()


def test_delete_renames_then_destroy_removes(tmp_path, clock):
    log = open_log(tmp_path, clock=clock)
    fill(log, 3, clock)
    sl = log.read(0, 10**6)
    path = log.delete()
    assert path.name.startswith("topic-0.") and path.name.endswith("-delete")
    assert not (tmp_path / "topic-0").exists()
    assert len(sl.read()) == sl.length  # in-flight slices still read
    with pytest.raises(KafkaError):
        log.append(make_batch(1))
    log.destroy()
    assert not path.exists()


def test_a_deleted_log_still_reads_and_closes_from_its_renamed_directory(
        tmp_path, clock, monkeypatch, caplog):
    """A reader holding the log while DeleteTopics renames its directory (the fuzz found
    ListOffsets failing with FileNotFoundError) reads from the new place; closing writes
    the active segment's indexes there, not into the old path."""
    from spool.storage import segment as segment_mod

    monkeypatch.setattr(segment_mod, "OPEN_FILES", segment_mod.OpenFiles(max_open=1))
    log = open_log(tmp_path, clock=clock)
    infos = fill(log, 40, clock)
    log.close()
    log = open_log(tmp_path, clock=clock)
    assert not log.segments[0].file_open  # closed again by the bound: opened by path
    expected = log.read_bytes(infos[0].first_offset, 1 << 16)
    by_time = log.offset_for_timestamp(infos[1].max_timestamp)
    assert by_time is not None and by_time[0] == infos[1].first_offset
    log.segments[0].close_file()
    path = log.delete()
    assert log.read_bytes(infos[0].first_offset, 1 << 16) == expected
    assert log.offset_for_timestamp(infos[1].max_timestamp) == by_time
    assert all(s.dir == path for s in log.segments)
    log.active_segment.flush()  # the background flush of a log deleted meanwhile
    log.destroy()
    assert not path.exists() and not (tmp_path / "topic-0").exists()
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == []


def test_inactive_segment_files_are_opened_lazily_and_bounded(tmp_path, clock, monkeypatch):
    from spool.storage import segment as segment_mod

    cache = segment_mod.OpenFiles(max_open=3)
    monkeypatch.setattr(segment_mod, "OPEN_FILES", cache)
    log = open_log(tmp_path, clock=clock)
    infos = fill(log, 100, clock)
    assert len(log.segments) > 10
    assert sum(s.file_open for s in log.segments[:-1]) <= 3
    log.close()
    log = open_log(tmp_path, clock=clock)  # reopened (the producer-state replay reads them all)
    assert sum(s.file_open for s in log.segments[:-1]) <= 3 and log.active_segment.file_open
    for info in infos:  # every segment read once: never more than 3 open
        first = next(iter_batches(log.read_bytes(info.first_offset, 1 << 16)))[1]
        assert first.base_offset == info.first_offset
        assert sum(s.file_open for s in log.segments[:-1]) <= 3
    seg = log.segments[0]
    with seg.pinned() as fd:  # a reader holding a descriptor keeps it through eviction
        for other in log.segments[1:5]:
            other.read_header(0)
        assert seg.file_open and os.fstat(fd).st_size == seg.size
    assert not seg.file_open
    log.close()
