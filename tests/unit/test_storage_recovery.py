"""Recovery after crashes and corruption: every valid batch before the damage is kept, the log
ends at a batch boundary, indexes are rebuilt."""

from __future__ import annotations

import os

from spool.records.batch import crc_is_valid, iter_batches
from spool.storage.checkpoint import CLEAN_SHUTDOWN_MARKER
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.log_crash import crash
from tests.helpers.storage_batches import make_batch

CFG = LogConfig(internal_segment_bytes=2000, index_interval_bytes=120, segment_index_bytes=4096)


def build(tmp_path, n=40, records=2):
    clock = FakeClock()
    log = PartitionLog(tmp_path / "t-0", CFG, clock=clock)
    batches = []
    for i in range(n):
        b = make_batch(records, timestamp=clock.now_ms(), value_size=30 + i % 7, tag=i)
        log.append(b)
        batches.append(bytes(b))
        clock.advance(5)
    return log, batches


def reopen(tmp_path, clean=False):
    return PartitionLog(tmp_path / "t-0", CFG, clock=FakeClock(), had_clean_shutdown=clean)


def check_prefix(log: PartitionLog, batches: list[bytes]) -> int:
    """The log holds exactly a prefix of ``batches``, each intact; returns its length."""
    got = list(log.iter_batches())
    assert got == batches[: len(got)]
    assert all(crc_is_valid(b) for b in got)
    expected_leo = sum(_count(b) for b in got)
    assert log.log_end_offset == expected_leo
    return len(got)


def _count(batch: bytes) -> int:
    return int.from_bytes(batch[23:27], "big") + 1


def active_file(tmp_path, log):
    return tmp_path / "t-0" / f"{log.active_segment.base_offset:020d}.log"


def test_crash_without_damage_keeps_everything(tmp_path):
    log, batches = build(tmp_path)
    crash(log)
    again = reopen(tmp_path)
    assert check_prefix(again, batches) == len(batches)
    assert again.load_result.truncated_bytes == 0
    again.close()


def test_random_bytes_in_the_tail_of_the_active_segment(tmp_path):
    log, batches = build(tmp_path)
    path = active_file(tmp_path, log)
    seg_batches = log.active_segment.size
    crash(log)
    size = path.stat().st_size
    assert size == seg_batches
    with open(path, "r+b") as f:
        f.seek(size - 25)
        f.write(os.urandom(10))
    again = reopen(tmp_path)
    kept = check_prefix(again, batches)
    assert kept == len(batches) - 1  # only the damaged last batch goes
    assert again.load_result.truncated_bytes == len(batches[-1])
    again.append(make_batch(1))
    again.close()


def test_torn_write_and_garbage_after_the_last_batch(tmp_path):
    log, batches = build(tmp_path)
    path = active_file(tmp_path, log)
    crash(log)
    with open(path, "ab") as f:
        f.write(make_batch(3)[:50])  # a torn header
    again = reopen(tmp_path)
    assert check_prefix(again, batches) == len(batches)
    again.close()
    with open(path, "ab") as f:
        f.write(bytes(300))  # a zero-filled (preallocated) tail
    again = reopen(tmp_path)
    assert check_prefix(again, batches) == len(batches)
    again.close()


def test_truncated_file_cuts_at_the_last_whole_batch(tmp_path):
    log, batches = build(tmp_path)
    path = active_file(tmp_path, log)
    crash(log)
    os.truncate(path, path.stat().st_size - 7)
    again = reopen(tmp_path)
    assert check_prefix(again, batches) == len(batches) - 1
    info = again.append(make_batch(1))
    assert info.first_offset == sum(_count(b) for b in batches[:-1])
    again.close()


def test_damage_in_a_middle_segment_drops_everything_after_it(tmp_path):
    log, batches = build(tmp_path, n=60)
    assert len(log.segments) >= 4
    victim = log.segments[1]
    path = victim.log_path
    crash(log)
    with open(path, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 4)
    again = reopen(tmp_path)
    kept = check_prefix(again, batches)
    assert again.active_segment.base_offset == victim.base_offset
    assert again.log_end_offset <= victim.base_offset + 200
    assert kept < len(batches)
    assert len(list((tmp_path / "t-0").glob("*.log"))) == 2
    again.close()


def test_deleted_indexes_are_rebuilt(tmp_path):
    log, batches = build(tmp_path, n=60)
    log.close()
    for p in (tmp_path / "t-0").glob("*index"):
        p.unlink()
    again = reopen(tmp_path, clean=True)
    assert check_prefix(again, batches) == len(batches)
    assert all(s.offset_index.entries > 0 for s in again.segments[:-1])
    for off in range(0, again.log_end_offset, 5):
        data = again.read_bytes(off, 1)
        h = next(iter_batches(data))[1]
        assert h.base_offset <= off <= h.last_offset
    again.close()


def test_garbage_indexes_never_break_reads(tmp_path):
    log, batches = build(tmp_path, n=60)
    leo = log.log_end_offset
    log.close()
    for p in sorted((tmp_path / "t-0").glob("*index")):
        size = p.stat().st_size
        p.write_bytes(os.urandom(max(size, 24)))
    for clean in (True, False):
        again = reopen(tmp_path, clean=clean)
        assert again.log_end_offset == leo
        assert check_prefix(again, batches) == len(batches)
        for off in range(0, leo, 3):
            h = next(iter_batches(again.read_bytes(off, 1)))[1]
            assert h.base_offset <= off <= h.last_offset
        again.close()


def test_clean_shutdown_skips_the_scan_but_a_damaged_tail_is_still_caught(tmp_path):
    log, batches = build(tmp_path)
    path = active_file(tmp_path, log)
    log.close()
    (tmp_path / CLEAN_SHUTDOWN_MARKER).touch()
    again = reopen(tmp_path, clean=True)
    assert check_prefix(again, batches) == len(batches)
    assert again.recovery_point == again.log_end_offset
    again.close()
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x01\x00" + bytes(40))
    again = reopen(tmp_path, clean=True)
    assert check_prefix(again, batches) == len(batches)
    again.close()


def test_recovery_point_limits_the_scan(tmp_path):
    log, batches = build(tmp_path, n=60)
    log.flush()
    log.checkpoints.write()
    first_path = log.segments[0].log_path
    crash(log)
    # Below the recovery point the data is trusted: a flipped payload byte is not rescanned.
    with open(first_path, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    again = reopen(tmp_path)
    assert again.log_end_offset == sum(_count(b) for b in batches)
    again.close()


def test_stray_files_are_cleaned_up(tmp_path):
    log, batches = build(tmp_path, n=30)
    log.close()
    d = tmp_path / "t-0"
    (d / "00000000000000000000.log.deleted").write_bytes(b"x")
    (d / "00000000000000099999.index").write_bytes(b"")  # an index without its log
    (d / "00000000000000000000.log.cleaned").write_bytes(b"x")
    again = reopen(tmp_path)
    names = os.listdir(d)
    assert not [n for n in names if n.endswith((".deleted", ".cleaned"))]
    assert "00000000000000099999.index" not in names
    assert check_prefix(again, batches) == len(batches)
    again.close()
