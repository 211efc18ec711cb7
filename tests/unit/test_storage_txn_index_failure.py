"""An aborted transaction whose ``.txnindex`` write fails (a full disk) is still listed
by ``aborted_transactions``, written when the disk allows, and found after a restart."""

from __future__ import annotations

import errno

import pytest

from spool.records.builder import BatchBuilder, build_control_batch
from spool.storage import txn_index
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock

T0 = 1_700_000_000_000
SMALL = LogConfig(internal_segment_bytes=2000, index_interval_bytes=150, segment_index_bytes=4096)
ABORTED = txn_index.AbortedTxn(5, 2, 4, 5)  # pid 5's data at 2-3, its ABORT marker at 4


def batch(pid: int, seq: int, txn: bool = False) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                     base_sequence=seq, is_transactional=txn)
    for i in range(2):
        b.append(b"k%d" % i, b"v" * 50, timestamp=T0)
    return bytearray(b.build())


def open_log(tmp_path) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", SMALL, clock=FakeClock(T0))


class FullDisk:
    """``txn_index.append`` failing with ENOSPC (``times`` calls, or while ``full``)."""

    def __init__(self, monkeypatch, times: int | None = None) -> None:
        self.real = txn_index.append
        self.times = times
        self.full = times is None
        self.failed = 0
        monkeypatch.setattr(txn_index, "append", self)

    def __call__(self, path, txn) -> None:
        if self.full or (self.times is not None and self.failed < self.times):
            self.failed += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        self.real(path, txn)


def append_aborted_txn(log: PartitionLog) -> None:
    log.append(batch(-1, -1))                                      # 0-1
    log.append(batch(5, 0, txn=True))                              # 2-3
    log.append(bytearray(build_control_batch(5, 0, False, 0, 0, T0)))  # 4: ABORT
    assert log.last_stable_offset == log.high_watermark == 5


def index_file(log: PartitionLog, base: int = 0) -> list[txn_index.AbortedTxn]:
    return txn_index.read(txn_index.path_of(log.dir, base))


def test_a_failed_txnindex_write_is_listed_then_written_and_kept(tmp_path, monkeypatch):
    disk = FullDisk(monkeypatch, times=1)
    log = open_log(tmp_path)
    append_aborted_txn(log)  # acknowledged: the marker is in the log
    assert disk.failed == 1
    assert index_file(log) == []
    assert log.aborted_transactions(0, 5) == [(5, 2)]
    assert log.aborted_transactions(5, 6) == []

    log.flush_if_due()  # the background flush retries; the disk has room again
    assert index_file(log) == [ABORTED]
    assert log.aborted_transactions(0, 5) == [(5, 2)]  # exactly once

    log.close()
    log2 = open_log(tmp_path)
    assert index_file(log2) == [ABORTED]
    assert log2.aborted_transactions(0, 5) == [(5, 2)]
    log2.close()


@pytest.mark.parametrize("crash", [False, True])
def test_a_restart_rebuilds_an_entry_never_written(tmp_path, monkeypatch, crash):
    """The disk stays full across a roll (and a close): no producer snapshot may pass
    the marker, or the replay at load would start after it and never rebuild it."""
    disk = FullDisk(monkeypatch)
    log = open_log(tmp_path)
    append_aborted_txn(log)
    for i in range(20):  # rolls: each would take a producer snapshot past the marker
        log.append(batch(7, 2 * i))
    assert len(log.segments) >= 3
    log.wait_file_work()
    log.flush()
    assert log.aborted_transactions(0, log.log_end_offset) == [(5, 2)]
    assert all(not p.stat().st_size for p in log.dir.glob("*.txnindex"))
    if not crash:
        log.close()
    disk.full = False
    log2 = open_log(tmp_path)
    assert index_file(log2) == [ABORTED]
    assert log2.aborted_transactions(0, log2.log_end_offset) == [(5, 2)]
    log2.close()


def test_entries_keep_marker_order_while_one_is_pending(tmp_path, monkeypatch):
    disk = FullDisk(monkeypatch, times=1)
    log = open_log(tmp_path)
    append_aborted_txn(log)
    log.append(batch(6, 0, txn=True))                                  # 5-6
    log.append(bytearray(build_control_batch(6, 0, False, 0, 0, T0)))  # 7: ABORT
    assert disk.failed == 1
    assert [t.producer_id for t in index_file(log)] == [5, 6]  # written behind the pending one
    assert log.aborted_transactions(0, 8) == [(5, 2), (6, 5)]
    log.close()


def test_append_overwrites_a_torn_tail(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    txn_index.append(path, ABORTED)
    with open(path, "ab") as f:
        f.write(b"\x00" * 20)  # a write cut short
    other = txn_index.AbortedTxn(6, 5, 7, 8)
    txn_index.append(path, other)
    assert path.stat().st_size == 2 * txn_index.ENTRY_SIZE
    assert txn_index.read(path) == [ABORTED, other]
