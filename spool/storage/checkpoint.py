"""Per-log-dir offset checkpoint files (Kafka's text format), written atomically.

In each log dir root::

    recovery-point-offset-checkpoint   offsets up to which each partition is fsynced
    log-start-offset-checkpoint        each partition's log start offset
    replication-offset-checkpoint      each partition's high watermark

All three read::

    0                    version
    2                    number of entries
    orders 0 1042        topic partition offset
    orders 1 998

A write goes to ``<name>.tmp``, is fsynced, renamed over the file and the
directory is fsynced (``spool.util.fileio.atomic_write``), so a crash leaves
the old or the new file, never a torn one. A file that does not parse is
treated as empty (recovery then scans every segment, which is always safe).

``DirCheckpoints`` is the in-memory view shared by every ``PartitionLog`` of
one log dir; it is thread-safe (one lock) and writes each file when it
changed: on ``write()`` (all; DeleteRecords, partition deletion, shutdown)
or with some of ``recovery_points`` / ``log_starts`` / ``high_watermarks``
False (the log manager's background thread, each on its own interval:
``log.flush.offset.checkpoint.interval.ms``,
``log.flush.start.offset.checkpoint.interval.ms`` and
``replica.high.watermark.checkpoint.interval.ms``).
A failed write leaves the file marked changed, so the next one retries.

High watermarks are not pushed on every move (that would cost each append):
the log manager collects every log's ``high_watermark`` into ``update`` just
before writing, and ``PartitionLog`` records it at load and close. A log opened
with ``hw_follows_leo=False`` (replication) starts from min(checkpoint, LEO),
so a checkpoint older than the log is safe: the HW only starts lower (Kafka's
rule; the leader's fetches move it again).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from spool.util.fileio import atomic_write

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
VERSION = 0

TopicPartition = tuple[str, int]


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Parse a checkpoint file; missing -> {}; malformed -> {} with a warning."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        lines = text.splitlines()
        if int(lines[0]) != VERSION:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, header says {count}")
        return entries
    except (ValueError, IndexError) as e:
        log.warning("ignoring malformed checkpoint %s: %s", path, e)
        return {}


def format_checkpoint(entries: dict[TopicPartition, int]) -> bytes:
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    return ("\n".join(lines) + "\n").encode()


class DirCheckpoints:
    """Recovery points, log start offsets and high watermarks of one log dir (see module
    docstring)."""

    def __init__(self, log_dir: str | Path) -> None:
        self.dir = Path(log_dir)
        self._lock = threading.Lock()
        self.recovery_points = read_checkpoint(self.dir / RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = read_checkpoint(self.dir / LOG_START_OFFSET_CHECKPOINT)
        self.high_watermarks = read_checkpoint(self.dir / REPLICATION_OFFSET_CHECKPOINT)
        self._dirty_rp = self._dirty_ls = self._dirty_hw = False

    def recovery_point(self, tp: TopicPartition) -> int:
        return self.recovery_points.get(tp, 0)

    def log_start_offset(self, tp: TopicPartition) -> int:
        return self.log_start_offsets.get(tp, 0)

    def high_watermark(self, tp: TopicPartition) -> int:
        return self.high_watermarks.get(tp, 0)

    def update(
        self, tp: TopicPartition, *, recovery_point: int | None = None,
        log_start: int | None = None, high_watermark: int | None = None,
    ) -> None:
        with self._lock:
            if high_watermark is not None and self.high_watermarks.get(tp) != high_watermark:
                self.high_watermarks[tp] = high_watermark
                self._dirty_hw = True
            if recovery_point is not None and self.recovery_points.get(tp) != recovery_point:
                self.recovery_points[tp] = recovery_point
                self._dirty_rp = True
            if log_start is not None and self.log_start_offsets.get(tp) != log_start:
                self.log_start_offsets[tp] = log_start
                self._dirty_ls = True

    def remove(self, tp: TopicPartition) -> None:
        with self._lock:
            self._dirty_rp |= self.recovery_points.pop(tp, None) is not None
            self._dirty_ls |= self.log_start_offsets.pop(tp, None) is not None
            self._dirty_hw |= self.high_watermarks.pop(tp, None) is not None

    def write(
        self, *, force: bool = False, recovery_points: bool = True, log_starts: bool = True,
        high_watermarks: bool = True,
    ) -> bool:
        """Write the files that changed (or all with ``force``), all unless told which;
        returns whether it wrote any."""
        with self._lock:
            do_rp = recovery_points and (self._dirty_rp or force)
            do_ls = log_starts and (self._dirty_ls or force)
            do_hw = high_watermarks and (self._dirty_hw or force)
            if do_rp:
                atomic_write(self.dir / RECOVERY_POINT_CHECKPOINT,
                             format_checkpoint(self.recovery_points))
                self._dirty_rp = False
            if do_ls:
                atomic_write(self.dir / LOG_START_OFFSET_CHECKPOINT,
                             format_checkpoint(self.log_start_offsets))
                self._dirty_ls = False
            if do_hw:
                atomic_write(self.dir / REPLICATION_OFFSET_CHECKPOINT,
                             format_checkpoint(self.high_watermarks))
                self._dirty_hw = False
            return do_rp or do_ls or do_hw
