"""The high watermark checkpoint ``replication-offset-checkpoint``: its format, what a log
opened with ``hw_follows_leo=False`` starts from, and when the log manager writes it."""

from __future__ import annotations

from spool.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, DirCheckpoints
from spool.storage.log import PartitionLog
from spool.storage.manager import LogManager
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch


def test_file_is_kafkas_format_beside_the_other_checkpoints(tmp_path):
    cps = DirCheckpoints(tmp_path)
    cps.update(("orders", 1), high_watermark=998)
    cps.update(("orders", 0), high_watermark=1042)
    assert cps.write()
    assert (tmp_path / REPLICATION_OFFSET_CHECKPOINT).read_text() == \
        "0\n2\norders 0 1042\norders 1 998\n"
    assert DirCheckpoints(tmp_path).high_watermark(("orders", 0)) == 1042
    assert not cps.write()  # unchanged: not rewritten
    cps.remove(("orders", 1))
    assert cps.write(recovery_points=False, log_starts=False)
    assert DirCheckpoints(tmp_path).high_watermarks == {("orders", 0): 1042}


def fill(log, n):
    for i in range(n):
        log.append(make_batch(2, tag=i))


def test_replica_log_opens_at_min_of_checkpoint_and_log_end(tmp_path):
    cps = DirCheckpoints(tmp_path)
    log = PartitionLog(tmp_path / "t-0", clock=FakeClock(), checkpoints=cps, hw_follows_leo=False)
    assert log.high_watermark == 0
    fill(log, 5)
    assert log.high_watermark == 0  # a replica's HW moves only when told
    log.update_high_watermark(6)
    log.close()
    assert cps.high_watermark(("t", 0)) == 6  # recorded at close
    log = PartitionLog(tmp_path / "t-0", clock=FakeClock(), checkpoints=cps, hw_follows_leo=False)
    assert log.high_watermark == 6
    log.close()
    cps.update(("t", 0), high_watermark=50)  # a checkpoint past the log end (a truncation)
    log = PartitionLog(tmp_path / "t-0", clock=FakeClock(), checkpoints=cps, hw_follows_leo=False)
    assert (log.high_watermark, log.log_end_offset) == (10, 10)
    log.delete_records_before(4)
    log.close()
    cps.update(("t", 0), high_watermark=2)  # below the log start: the log start
    log = PartitionLog(tmp_path / "t-0", clock=FakeClock(), checkpoints=cps, hw_follows_leo=False)
    assert log.high_watermark == 4
    log.close()


def test_single_node_log_ignores_the_checkpoint(tmp_path):
    cps = DirCheckpoints(tmp_path)
    cps.update(("t", 0), high_watermark=3)
    log = PartitionLog(tmp_path / "t-0", clock=FakeClock(), checkpoints=cps)
    fill(log, 4)
    assert log.high_watermark == log.log_end_offset == 8
    log.close()


def test_manager_writes_the_hws_on_their_interval_and_at_shutdown(tmp_path):
    clock = FakeClock(1_000_000)
    props = {"replica.high.watermark.checkpoint.interval.ms": "5000"}
    mgr = LogManager([str(tmp_path)], props, clock, hw_follows_leo=False)
    logs = [mgr.create_partition("t", p) for p in range(2)]
    mgr.run_background_once()
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT

    def on_disk():
        return DirCheckpoints(tmp_path).high_watermarks

    assert not path.exists()  # not due yet
    fill(logs[0], 3)
    logs[0].update_high_watermark(4)
    clock.advance(4_999)
    mgr.run_background_once()
    assert not path.exists()
    clock.advance(1)
    mgr.run_background_once()
    assert on_disk() == {("t", 0): 4, ("t", 1): 0}
    logs[0].update_high_watermark(6)
    mgr.delete_partition("t", 1)
    assert on_disk() == {("t", 0): 4}  # the deletion writes the files at once
    mgr.shutdown()
    assert on_disk() == {("t", 0): 6}
    mgr = LogManager([str(tmp_path)], props, clock, hw_follows_leo=False)
    assert mgr.get("t", 0).high_watermark == 6
    mgr.shutdown()
