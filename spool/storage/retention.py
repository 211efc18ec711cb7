"""Retention policy: how many of a log's oldest segments may go (Kafka's deleteOldSegments).

A pure decision over a snapshot of the segments; ``PartitionLog.run_retention``
applies it (rename ``.deleted``, unlink after ``file.delete.delay.ms``). The
rules, applied in order, each extending the same prefix of segments::

    retention.ms     segment's newest timestamp older than now - retention.ms
                     (-1: never; the file's mtime when it has no timestamps)
    retention.bytes  while the log minus the segment is still >= retention.bytes
                     (-1: never)
    log start        the segment lies wholly below the log start offset
                     (DeleteRecords)

The first two apply only with ``cleanup.policy`` containing ``delete``. Only
whole segments go, never the active (last) one, and never one holding
offsets at or above the high watermark (not yet committed).
"""

from __future__ import annotations

from collections.abc import Sequence

from spool.storage.config import LogConfig
from spool.storage.segment import LogSegment


def deletable_prefix(
    segments: Sequence[LogSegment],
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
    config: LogConfig,
    now_ms: int,
    why: list[str] | None = None,
) -> int:
    """How many of the oldest segments retention removes (0 .. len(segments) - 1);
    ``why`` gets the rules that removed some (``retention.ms=604800000``...)."""
    last = len(segments) - 1  # the active segment never goes

    def next_base(i: int) -> int:
        return segments[i + 1].base_offset if i < last else log_end_offset

    n = 0
    if config.delete_enabled and config.retention_ms >= 0:
        while n < last and next_base(n) <= high_watermark and (
            now_ms - segments[n].largest_timestamp() > config.retention_ms
        ):
            n += 1
    if n and why is not None:
        why.append(f"retention.ms={config.retention_ms}")
    before = n
    if config.delete_enabled and config.retention_bytes >= 0:
        diff = sum(s.size for s in segments[n:]) - config.retention_bytes
        while n < last and next_base(n) <= high_watermark and diff - segments[n].size >= 0:
            diff -= segments[n].size
            n += 1
    if n > before and why is not None:
        why.append(f"retention.bytes={config.retention_bytes}")
    before = n
    while n < last and next_base(n) <= log_start_offset:
        n += 1
    if n > before and why is not None:
        why.append(f"log start offset {log_start_offset}")
    return n
