"""LogManager: log dirs, loading, creating/deleting partitions, configs, background work,
clean-shutdown marker; a 1,000-partition startup (timed in bench/storage.py, not here)."""

from __future__ import annotations

import os
import shutil

from spool.storage.checkpoint import CLEAN_SHUTDOWN_MARKER, read_checkpoint
from spool.storage.manager import LogManager
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

SMALL = {"log.index.size.max.bytes": "4096", "log.segment.delete.delay.ms": "0"}
TINY = {"internal.segment.bytes": "2000"}  # topic override: segments roll at 2000 bytes


def dirs(tmp_path, n=2):
    return [str(tmp_path / f"d{i}") for i in range(n)]


def test_create_spreads_over_dirs_and_reloads(tmp_path):
    clock = FakeClock()
    mgr = LogManager(dirs(tmp_path), SMALL, clock)
    for p in range(4):
        log = mgr.create_partition("orders", p, TINY)
        log.append(make_batch(p + 1))
    assert mgr.create_partition("orders", 0) is mgr.get("orders", 0)
    assert mgr.partitions() == [("orders", p) for p in range(4)]
    per_dir = [sorted(os.listdir(d)) for d in dirs(tmp_path)]
    assert sum(n.startswith("orders-") for names in per_dir for n in names) == 4
    assert all(any(n.startswith("orders-") for n in names) for names in per_dir)
    mgr.shutdown()
    for d in dirs(tmp_path):
        assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER))
        cp = read_checkpoint(tmp_path / os.path.basename(d) / "recovery-point-offset-checkpoint")
        assert all(v > 0 for v in cp.values())
    again = LogManager(dirs(tmp_path), SMALL, clock)
    assert [again.get("orders", p).log_end_offset for p in range(4)] == [1, 2, 3, 4]
    assert all(again.had_clean_shutdown.values())
    for d in dirs(tmp_path):  # a crash from now on must look unclean
        assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER))
    again.shutdown()


def test_unclean_restart_recovers(tmp_path):
    clock = FakeClock()
    mgr = LogManager(dirs(tmp_path, 1), SMALL, clock)
    log = mgr.create_partition("t", 0, TINY)
    for _ in range(30):
        log.append(make_batch(2, value_size=50))
    leo = log.log_end_offset
    # no shutdown: the next manager sees no marker and rescans past the recovery points
    again = LogManager(dirs(tmp_path, 1), SMALL, clock)
    assert not any(again.had_clean_shutdown.values())
    assert again.get("t", 0).log_end_offset == leo
    again.shutdown()


def test_topic_overrides_and_dynamic_broker_config(tmp_path):
    mgr = LogManager(dirs(tmp_path, 1), {"log.retention.hours": "1"}, FakeClock())
    a = mgr.create_partition("a", 0, {"retention.ms": "1000"})
    b = mgr.create_partition("b", 0)
    assert a.config.retention_ms == 1000 and b.config.retention_ms == 3_600_000
    mgr.set_dynamic_broker_config({"log.retention.ms": "5000"})
    assert a.config.retention_ms == 1000 and b.config.retention_ms == 5000
    mgr.set_topic_overrides("a", {})
    assert a.config.retention_ms == 5000
    assert mgr.setting("num.partitions") == 1
    mgr.shutdown()


def test_delete_partition_renames_then_background_removes(tmp_path):
    clock = FakeClock()
    mgr = LogManager(dirs(tmp_path, 1), {"log.segment.delete.delay.ms": "1000"}, clock)
    mgr.create_partition("gone", 0).append(make_batch(1))
    mgr.create_partition("kept", 0)
    assert mgr.delete_partition("gone", 0)
    assert not mgr.delete_partition("gone", 0)
    root = tmp_path / "d0"
    assert [n for n in os.listdir(root) if n.endswith("-delete")]
    assert mgr.cleanup_once() == 0
    clock.advance(1000)
    assert mgr.cleanup_once() == 1
    assert not [n for n in os.listdir(root) if n.startswith("gone")]
    assert ("gone", 0) not in read_checkpoint(root / "recovery-point-offset-checkpoint")
    mgr.shutdown()


def test_leftover_delete_dirs_are_removed_and_ignored(tmp_path):
    root = tmp_path / "d0"
    ours = "x-0." + "0123abcd" * 4 + "-delete"
    (root / ours).mkdir(parents=True)
    (root / "not a partition").mkdir()
    (root / "backup-delete").mkdir()  # looks like ours, is not: stays
    mgr = LogManager([str(root)], {}, FakeClock())
    assert mgr.partitions() == []
    mgr.cleanup_once()
    assert not (root / ours).exists()
    assert (root / "backup-delete").exists() and (root / "not a partition").exists()
    mgr.shutdown()


def test_background_round_applies_retention_flush_and_checkpoints(tmp_path):
    clock = FakeClock()
    props = {**SMALL, "log.retention.ms": "1000", "log.flush.interval.ms": "500",
             "log.retention.check.interval.ms": "100",
             "log.flush.offset.checkpoint.interval.ms": "100",
             "log.flush.start.offset.checkpoint.interval.ms": "100"}
    mgr = LogManager(dirs(tmp_path, 1), props, clock)
    log = mgr.create_partition("t", 0, TINY)
    while len(log.segments) < 4:
        log.append(make_batch(2, timestamp=clock.now_ms(), value_size=100))
    clock.advance(1001)
    mgr.run_background_once()
    assert len(log.segments) == 1 and log.log_start_offset == log.active_segment.base_offset
    assert log.recovery_point == log.log_end_offset
    cp = read_checkpoint(tmp_path / "d0" / "log-start-offset-checkpoint")
    assert cp[("t", 0)] == log.log_start_offset
    thread = mgr.start_background(0.01)
    assert thread.is_alive()
    mgr.shutdown()
    assert not thread.is_alive()


def test_thousand_partitions_load(tmp_path):
    """1,000 partitions holding data load (timed in bench/storage.py, not asserted here)."""
    props = {"log.index.size.max.bytes": "4096"}
    mgr = LogManager(dirs(tmp_path, 1), props, FakeClock())
    log = mgr.create_partition("many", 0)
    for i in range(5):
        log.append(make_batch(3, value_size=20, tag=i))
    mgr.shutdown()
    root = tmp_path / "d0"
    for p in range(1, 1000):  # clone the partition directory (cheap: no fsyncs)
        shutil.copytree(root / "many-0", root / f"many-{p}")
    for clean in (True, False):
        if not clean:
            (root / CLEAN_SHUTDOWN_MARKER).unlink()
        again = LogManager(dirs(tmp_path, 1), props, FakeClock())
        assert len(again.partitions()) == 1000
        assert all(log.log_end_offset == 15 for log in again.logs().values())
        again.shutdown()  # (1,000 partitions' descriptors: the next tests need them)


def test_a_stored_override_this_version_refuses_is_logged_and_dropped(tmp_path, caplog):
    mgr = LogManager(dirs(tmp_path, 1), {}, FakeClock())
    mgr.set_topic_overrides("old", {"segment.bytes": "14", "retention.ms": "1000"})
    log = mgr.create_partition("old", 0)
    assert (log.config.segment_bytes, log.config.retention_ms) == (1_073_741_824, 1000)
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "topic old: ignoring a stored config value: "
        "segment.bytes=14: expected an integer >= 1048576"
    ]
    mgr.shutdown()
