"""LeaderEpochCache (Kafka's LeaderEpochFileCache semantics, its checkpoint file) and its use
by PartitionLog: appends assign, truncation and log start moves cut, load rebuilds."""

from __future__ import annotations

import os

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader, iter_batches, patch_partition_leader_epoch
from spool.storage.config import LogConfig
from spool.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCache,
    read_entries,
)
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

SMALL = LogConfig(internal_segment_bytes=1500, index_interval_bytes=150, segment_index_bytes=4096,
                  file_delete_delay_ms=0)


def cache_of(tmp_path, *pairs):
    c = LeaderEpochCache(tmp_path)
    for epoch, start in pairs:
        c.assign(epoch, start)
    return c


def entries(c):
    return [tuple(e) for e in c.entries()]


# -- the file ----------------------------------------------------------------------------


def test_checkpoint_file_is_kafkas_text_format(tmp_path):
    c = cache_of(tmp_path, (0, 0), (3, 1042))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 1042\n"
    assert read_entries(tmp_path / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(0, 0),
                                                                EpochEntry(3, 1042)]
    c.clear()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n0\n"
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()


@pytest.mark.parametrize("text", [
    "", "1\n1\n0 0\n", "0\n2\n0 0\n", "0\n1\nx 0\n", "0\n2\n3 10\n2 20\n", "0\n2\n1 10\n2 5\n",
    "0\n1\n0 0 0\n",
])
def test_malformed_checkpoint_reads_as_none(tmp_path, text):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    assert read_entries(tmp_path / LEADER_EPOCH_CHECKPOINT) is None


def test_missing_checkpoint_reads_as_none(tmp_path):
    assert read_entries(tmp_path / LEADER_EPOCH_CHECKPOINT) is None


# -- assign -------------------------------------------------------------------------------


def test_assign_same_epoch_at_a_later_offset_changes_nothing(tmp_path):
    c = cache_of(tmp_path, (2, 10))
    assert not c.assign(2, 15)
    assert entries(c) == [(2, 10)]
    assert c.latest_epoch() == 2


def test_assign_same_epoch_at_an_earlier_offset_moves_its_start(tmp_path):
    c = cache_of(tmp_path, (1, 0), (2, 10))
    assert c.assign(2, 7)
    assert entries(c) == [(1, 0), (2, 7)]


def test_assign_an_older_epoch_removes_the_conflicting_newer_entries(tmp_path):
    c = cache_of(tmp_path, (1, 0), (2, 10), (4, 20))
    assert c.assign(3, 15)
    assert entries(c) == [(1, 0), (2, 10), (3, 15)]
    assert c.assign(2, 12)  # epoch 2 exists with a smaller start: epochs >= 2 go
    assert entries(c) == [(1, 0), (2, 12)]


def test_assign_a_newer_epoch_at_a_lower_offset_removes_entries_starting_after(tmp_path):
    c = cache_of(tmp_path, (1, 0), (2, 10))
    assert c.assign(5, 5)
    assert entries(c) == [(1, 0), (5, 5)]
    assert read_entries(tmp_path / LEADER_EPOCH_CHECKPOINT) == [(1, 0), (5, 5)]


def test_assign_rejects_negative_entries(tmp_path):
    c = LeaderEpochCache(tmp_path)
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(0, -1)
    assert c.latest_epoch() == -1 and c.entries() == ()


# -- lookups ------------------------------------------------------------------------------


def test_end_offset_for_follows_kafka(tmp_path):
    c = cache_of(tmp_path, (2, 5), (4, 10), (7, 20))
    leo = 30
    assert c.end_offset_for(-1, leo) == (-1, -1)  # undefined epoch
    assert c.end_offset_for(7, leo) == (7, 30)  # the latest epoch ends at the log end
    assert c.end_offset_for(4, leo) == (4, 20)  # ends where the next epoch starts
    assert c.end_offset_for(5, leo) == (4, 20)  # unknown: the largest epoch below it
    assert c.end_offset_for(1, leo) == (1, 5)  # below every epoch: the first start
    assert c.end_offset_for(8, leo) == (-1, -1)  # above every epoch
    assert LeaderEpochCache(tmp_path / "x").end_offset_for(3, leo) == (-1, -1)


def test_epoch_for_offset(tmp_path):
    c = cache_of(tmp_path, (2, 5), (4, 10))
    assert [c.epoch_for(o) for o in (0, 4, 5, 9, 10, 99)] == [-1, -1, 2, 2, 4, 4]


# -- truncation ---------------------------------------------------------------------------


def test_truncate_from_end_removes_entries_starting_at_or_after(tmp_path):
    c = cache_of(tmp_path, (2, 5), (4, 10), (7, 20))
    assert not c.truncate_from_end(21)
    assert c.truncate_from_end(10)
    assert entries(c) == [(2, 5)]
    assert not c.truncate_from_end(-1)
    assert read_entries(tmp_path / LEADER_EPOCH_CHECKPOINT) == [(2, 5)]


def test_truncate_from_start_rewrites_the_first_kept_entry(tmp_path):
    c = cache_of(tmp_path, (2, 5), (4, 10), (7, 20))
    assert not c.truncate_from_start(4)
    assert not c.truncate_from_start(5)
    assert c.truncate_from_start(12)
    assert entries(c) == [(4, 12), (7, 20)]
    assert c.truncate_from_start(20)
    assert entries(c) == [(7, 20)]
    assert c.truncate_from_start(25)
    assert entries(c) == [(7, 25)]
    assert read_entries(tmp_path / LEADER_EPOCH_CHECKPOINT) == [(7, 25)]


# -- PartitionLog -------------------------------------------------------------------------


def open_log(tmp_path, **kw):
    return PartitionLog(tmp_path / "t-0", SMALL, clock=FakeClock(), **kw)


def follower_batch(base, count, epoch, tag=0):
    b = make_batch(count, base_offset=base, tag=tag)
    patch_partition_leader_epoch(b, 0, epoch)
    return b


def test_leader_appends_assign_only_when_the_epoch_changes(tmp_path):
    log = open_log(tmp_path)
    assert not (log.dir / LEADER_EPOCH_CHECKPOINT).exists()  # empty log, nothing yet
    log.append(make_batch(3), leader_epoch=0)
    written = os.stat(log.dir / LEADER_EPOCH_CHECKPOINT).st_ino
    log.append(make_batch(2), leader_epoch=0)
    assert os.stat(log.dir / LEADER_EPOCH_CHECKPOINT).st_ino == written  # not rewritten
    log.append(make_batch(2), leader_epoch=3)
    assert entries(log.leader_epochs) == [(0, 0), (3, 5)]
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == [(0, 0), (3, 5)]
    log.close()


def test_follower_appends_assign_from_each_batchs_epoch(tmp_path):
    log = open_log(tmp_path)
    data = follower_batch(0, 2, 1) + follower_batch(2, 3, 1) + follower_batch(5, 1, 4)
    log.append(data, assign_offsets=False)
    log.append(follower_batch(6, 2, 6), assign_offsets=False)
    assert entries(log.leader_epochs) == [(1, 0), (4, 5), (6, 6)]
    hs = [h for _, h in iter_batches(log.read_bytes(0, 100_000))]
    assert [h.partition_leader_epoch for h in hs] == [1, 1, 4, 6]  # kept as the leader wrote
    assert log.leader_epochs.end_offset_for(4, log.log_end_offset) == (4, 6)
    log.close()


def test_rejected_follower_append_assigns_nothing(tmp_path):
    log = open_log(tmp_path)
    log.append(follower_batch(0, 5, 1), assign_offsets=False)
    with pytest.raises(KafkaError) as e:  # the second batch goes below the first's end
        log.append(follower_batch(5, 1, 2) + follower_batch(3, 1, 3), assign_offsets=False)
    assert e.value.code == Errors.OFFSET_OUT_OF_RANGE
    assert log.log_end_offset == 5
    assert entries(log.leader_epochs) == [(1, 0)]
    log.close()


def test_truncate_to_cuts_the_epochs_from_the_end(tmp_path):
    log = open_log(tmp_path)
    log.append(follower_batch(0, 5, 1), assign_offsets=False)
    log.append(follower_batch(5, 5, 2), assign_offsets=False)
    log.append(follower_batch(10, 5, 3), assign_offsets=False)
    log.truncate_to(5)
    assert log.log_end_offset == 5
    assert entries(log.leader_epochs) == [(1, 0)]
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == [(1, 0)]
    log.append(follower_batch(5, 2, 4), assign_offsets=False)
    assert entries(log.leader_epochs) == [(1, 0), (4, 5)]
    log.truncate_fully(100)
    assert entries(log.leader_epochs) == []
    log.close()


def test_log_start_moves_cut_the_epochs_from_the_start(tmp_path):
    log = open_log(tmp_path)
    for i in range(12):  # several segments
        log.append(make_batch(4, value_size=100, tag=i), leader_epoch=i // 4)
    assert entries(log.leader_epochs) == [(0, 0), (1, 16), (2, 32)]
    log.delete_records_before(20)
    assert entries(log.leader_epochs) == [(1, 20), (2, 32)]
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == [(1, 20), (2, 32)]
    log.close()


def test_retention_moves_the_first_epoch_start(tmp_path):
    cfg = LogConfig(internal_segment_bytes=1500, index_interval_bytes=150,
                    file_delete_delay_ms=0, retention_bytes=1500)
    clock = FakeClock()
    log = PartitionLog(tmp_path / "t-0", cfg, clock=clock)
    for i in range(12):
        log.append(make_batch(4, value_size=100, tag=i), leader_epoch=i // 4)
    assert log.run_retention() > 0
    start = log.log_start_offset
    assert start > 0
    first = log.leader_epochs.earliest_entry()
    assert first is not None and first.start_offset == start
    assert first.epoch == BatchHeader.parse(log.read_bytes(start, 1000)).partition_leader_epoch
    log.close()


def test_reopen_loads_the_checkpoint_and_a_missing_one_is_rebuilt(tmp_path):
    log = open_log(tmp_path)
    for i in range(9):
        log.append(make_batch(3, value_size=100, tag=i), leader_epoch=[0, 0, 2, 2, 2, 5, 5, 7, 7][i])
    log.delete_records_before(4)
    expected = [(0, 4), (2, 6), (5, 15), (7, 21)]
    assert entries(log.leader_epochs) == expected
    log.close()
    log = open_log(tmp_path, had_clean_shutdown=True)
    assert entries(log.leader_epochs) == expected
    log.close()
    (log.dir / LEADER_EPOCH_CHECKPOINT).unlink()
    log = open_log(tmp_path)
    assert entries(log.leader_epochs) == expected
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == expected  # and written back
    log.close()
    (log.dir / LEADER_EPOCH_CHECKPOINT).write_text("garbage")
    log = open_log(tmp_path)
    assert entries(log.leader_epochs) == expected
    log.close()


def test_load_cuts_entries_past_a_torn_tail(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(3), leader_epoch=1)
    log.append(make_batch(3), leader_epoch=2)
    path, size = log.active_segment.log_path, log.active_segment.size
    log.close()
    os.truncate(path, size - 5)  # the epoch 2 batch is torn
    log = open_log(tmp_path)  # unclean: recovery drops it
    assert log.log_end_offset == 3
    assert entries(log.leader_epochs) == [(1, 0)]
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == [(1, 0)]
    log.close()


def test_deleting_the_partition_removes_the_checkpoint_with_the_dir(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(3), leader_epoch=1)
    moved = log.delete()
    assert (moved / LEADER_EPOCH_CHECKPOINT).exists()
    assert log.leader_epochs.path == moved / LEADER_EPOCH_CHECKPOINT
    log.destroy()
    assert not moved.exists() and not (tmp_path / "t-0").exists()


def test_truncate_at_the_log_end_drops_an_epoch_started_there(tmp_path):
    """A replica once leader of epoch 3 that appended nothing in it: truncating to its log
    end (a new leader says its epoch ends there) drops the entry, as Kafka's truncateTo."""
    log = open_log(tmp_path)
    log.append(follower_batch(0, 4, 1), assign_offsets=False)
    log.leader_epochs.assign(3, 4)  # make_leader at LEO 4, then no append
    log.truncate_to(9)
    assert entries(log.leader_epochs) == [(1, 0)]
    assert log.log_end_offset == 4
    log.append(follower_batch(4, 2, 1), assign_offsets=False)  # more of epoch 1, from the leader
    assert entries(log.leader_epochs) == [(1, 0)]
    log.close()


def test_an_appends_new_epoch_is_written_at_once_and_fsynced_off_the_callers_thread(
        tmp_path, monkeypatch):
    """The file is there for a reopen at once (a killed process loses nothing); its fsyncs
    (file and directory) run on the file-work thread, not on the event loop's."""
    import threading

    from spool.storage import file_work

    log = open_log(tmp_path)
    file_work.drain()
    real_fsync = os.fsync
    synced_on: list[str] = []

    def spy(fd: int) -> None:  # records where each fsync runs; the real one still runs
        synced_on.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    log.append(make_batch(3), leader_epoch=0)
    log.append(make_batch(2), leader_epoch=4)
    caller = threading.current_thread().name
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == [(0, 0), (4, 3)]
    file_work.drain()
    assert synced_on and caller not in synced_on
    assert all(name.startswith("spool-file-work") for name in synced_on)
    monkeypatch.undo()
    log.close()
    reopened = open_log(tmp_path)
    assert entries(reopened.leader_epochs) == [(0, 0), (4, 3)]
    reopened.close()


def test_a_stale_checkpoint_gets_the_epochs_of_the_recovered_tail(tmp_path):
    """Power lost before an append's deferred fsync may leave the previous checkpoint: the
    unclean load's recovery finds the newer epochs in the tail's batches (as Kafka's
    LogSegment.recover); epochs not above the file's latest change nothing."""
    log = open_log(tmp_path)
    log.append(make_batch(3), leader_epoch=1)
    old = (log.dir / LEADER_EPOCH_CHECKPOINT).read_text()  # [(1, 0)]
    log.append(make_batch(2), leader_epoch=2)
    log.append(make_batch(2), leader_epoch=4)
    log.close()
    (log.dir / LEADER_EPOCH_CHECKPOINT).write_text(old)  # the old file came back
    log = open_log(tmp_path)  # unclean (no clean-shutdown marker): the tail is recovered
    assert log.load_result.recovered_segments >= 1
    assert entries(log.leader_epochs) == [(1, 0), (2, 3), (4, 5)]
    assert read_entries(log.dir / LEADER_EPOCH_CHECKPOINT) == [(1, 0), (2, 3), (4, 5)]
    log.close()


def test_a_flush_makes_the_epoch_checkpoint_durable_before_moving_the_recovery_point(
        tmp_path, monkeypatch):
    """While the file-work thread is busy, the log's flush (which moves the recovery point
    past the new epoch's batches, so a later load would not rescan them) fsyncs the
    checkpoint itself, on the flushing thread."""
    import threading

    from spool.storage import file_work

    log = open_log(tmp_path)
    file_work.drain()
    release = threading.Event()
    busy = file_work.submit(lambda: release.wait(10))  # holds the worker
    real_fsync = os.fsync
    synced: list[str] = []

    def spy(fd: int) -> None:  # records which file each fsync is for; the real one runs
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    try:
        monkeypatch.setattr(os, "fsync", spy)
        log.append(make_batch(3), leader_epoch=2)
        assert not any(p.endswith(LEADER_EPOCH_CHECKPOINT) for p in synced)  # deferred
        log.flush()
        assert any(p.endswith(LEADER_EPOCH_CHECKPOINT) for p in synced)
        assert log.recovery_point == 3
    finally:
        release.set()
        busy.result(10)
        monkeypatch.undo()
    log.close()
