"""Opening a partition directory: leftovers, segments, recovery (Kafka's LogLoader).

Steps, in order::

    1. finish or undo an interrupted compaction swap (``complete_swaps``,
       Kafka's rule): if any *.cleaned file exists the swap had not reached
       its commit point, so every *.cleaned and every *.swap at or above the
       lowest .cleaned base offset goes (the old segments are intact);
       the remaining *.swap files are committed: live files whose base
       offset lies in [lowest .swap base, highest .swap next offset) are
       deleted and the .swap files renamed live.
       Then delete leftovers: *.deleted, *.tmp, index files whose .log is gone
    2. open every <base>.log as a LogSegment, sorted by base offset;
       rebuild any missing index (a header walk; indexes are caches)
    3. unclean shutdown: every segment from the one holding the recovery
       point on is rescanned with CRCs (``LogSegment.recover``); the first
       invalid or torn batch truncates that segment there and every later
       segment is deleted.
       clean shutdown: only the active segment's tail is walked from its last
       index entry; if that walk does not end exactly at end-of-file the
       segment is recovered as above.
    4. the last segment becomes active (indexes writable); an empty
       directory gets a fresh segment at the checkpointed log start offset
    5. log start = max(checkpoint, first base offset); if it is past the
       log end (data lost in a power failure), the log restarts empty there.

Recovery is what makes "everything appended before a kill -9 is still
there" true: those bytes are in the page cache, so the rescan finds them;
whatever a power loss tore off after the recovery point is cut cleanly.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from spool.storage.config import LogConfig
from spool.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    Scan,
)
from spool.util.fileio import TMP_SUFFIX

log = logging.getLogger(__name__)


@dataclass
class LoadResult:
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    truncated_bytes: int = 0
    deleted_segments: list[int] = field(default_factory=list)
    recovered_segments: int = 0  # rescanned with CRCs (step 3)
    recovered_bytes: int = 0  # what they held once rescanned


def new_segment(
    directory: Path, base: int, config: LogConfig, now_ms: int,
    spare: Path | None = None,
) -> LogSegment:
    """A segment at ``base``; ``spare`` is an empty file prepared ahead
    (``PartitionLog``'s roll) that is renamed into place."""
    return LogSegment(
        directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        created_ms=now_ms,
        spare=spare,
    )


def _base_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def complete_swaps(directory: Path) -> tuple[list[str], list[str]]:
    """Finish or undo an interrupted ``.cleaned -> .swap -> live`` (step 1 above);
    returns (files removed, files renamed live)."""
    names = os.listdir(directory)
    cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX)]
    swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
    removed, renamed = [], []
    min_cleaned = min((b for n in cleaned if (b := _base_of(n)) is not None), default=None)
    for name in cleaned + [
        n for n in swaps if min_cleaned is not None and (_base_of(n) or 0) >= min_cleaned
    ]:
        (directory / name).unlink(missing_ok=True)
        removed.append(name)
    swaps = [n for n in swaps if n not in removed]
    lo, hi = None, None
    for name in swaps:
        base = _base_of(name)
        if base is None or not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        fd = os.open(directory / name, os.O_RDONLY)
        try:
            scan = Scan(fd, base, 0, os.fstat(fd).st_size, base, verify=True)
            for _ in scan:
                pass
        finally:
            os.close(fd)
        lo = base if lo is None else min(lo, base)
        hi = scan.next_offset if hi is None else max(hi, scan.next_offset)
    if lo is not None and hi is not None:
        for name in os.listdir(directory):
            base = _base_of(name)
            if name.endswith(SWAP_SUFFIX) or base is None or not lo <= base < max(hi, lo + 1):
                continue
            if name.endswith((LOG_SUFFIX, *INDEX_SUFFIXES, DELETED_SUFFIX)):
                (directory / name).unlink(missing_ok=True)
                removed.append(name)
    for name in swaps:
        os.rename(directory / name, directory / name[: -len(SWAP_SUFFIX)])
        renamed.append(name)
    if removed or renamed:
        log.warning("%s: interrupted compaction swap: removed %s, renamed live %s",
                    directory, removed, renamed)
    return removed, renamed


def _remove_leftovers(directory: Path) -> list[int]:
    """Step 1; the base offsets of the live ``.log`` files, sorted. One directory listing
    when no compaction swap was interrupted (the usual case: thousands of partitions)."""
    names = os.listdir(directory)
    if any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in names):
        complete_swaps(directory)
        names = os.listdir(directory)
    bases = []
    live_logs = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, TMP_SUFFIX)):
            (directory / name).unlink(missing_ok=True)
        elif name.endswith(LOG_SUFFIX):
            stem = name[: -len(LOG_SUFFIX)]
            if stem.isdigit():
                bases.append(int(stem))
        elif name.endswith(INDEX_SUFFIXES):
            if name.rsplit(".", 1)[0] not in live_logs:
                (directory / name).unlink(missing_ok=True)
    return sorted(bases)


def load_segments(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
) -> LoadResult:
    """Open and, when needed, recover the segments of one partition directory."""
    bases = _remove_leftovers(directory)
    segments = [new_segment(directory, b, config, now_ms) for b in bases]
    # segments from this index on are rescanned with CRCs (unclean shutdown only)
    first_unflushed = (
        len(segments) if had_clean_shutdown
        else max(0, sum(1 for b in bases if b <= recovery_point) - 1)
    )
    for seg in segments[:first_unflushed]:
        if seg.indexes_missing():
            seg.rebuild_indexes()
    result = LoadResult(segments, log_start_offset, 0, recovery_point)
    if had_clean_shutdown and segments:
        if not segments[-1].load_tail():
            log.warning("%s: damaged tail after a clean shutdown; recovering", segments[-1])
            _recover_from(result, len(segments) - 1)
    elif segments:
        _recover_from(result, first_unflushed)
    segments = result.segments
    if not segments:
        segments.append(new_segment(directory, log_start_offset, config, now_ms))
    active = segments[-1]
    active.make_active()
    assert active.next_offset is not None
    result.log_end_offset = active.next_offset
    result.log_start_offset = max(log_start_offset, segments[0].base_offset)
    if result.log_start_offset > result.log_end_offset:
        log.warning("%s: log start %d is past the log end %d; restarting the log there",
                    directory, result.log_start_offset, result.log_end_offset)
        for seg in segments:
            result.deleted_segments.append(seg.base_offset)
            seg.delete_files()
        fresh = new_segment(directory, result.log_start_offset, config, now_ms)
        fresh.make_active()
        result.segments = [fresh]
        result.log_end_offset = result.log_start_offset
    if had_clean_shutdown:
        result.recovery_point = result.log_end_offset
    result.recovery_point = max(
        result.log_start_offset, min(result.recovery_point, result.log_end_offset)
    )
    return result


def _recover_from(result: LoadResult, first: int) -> None:
    """Recover segments[first:]; the first one truncated ends the log."""
    segments = result.segments
    prev_next = segments[first - 1].next_offset_or_base() if first else -1
    for i in range(first, len(segments)):
        seg = segments[i]
        if seg.base_offset < prev_next:
            log.warning("%s overlaps the previous segment; dropping it and later ones", seg)
            _drop_from(result, i)
            return
        dropped = seg.recover()
        assert seg.next_offset is not None
        prev_next = seg.next_offset
        if seg.size:  # an empty one took no rescanning
            result.recovered_segments += 1
            result.recovered_bytes += seg.size
        if dropped:
            log.warning("%s: truncated %d invalid bytes at %d", seg, dropped, seg.size)
            result.truncated_bytes += dropped
            _drop_from(result, i + 1)
            return


def _drop_from(result: LoadResult, i: int) -> None:
    for seg in result.segments[i:]:
        result.truncated_bytes += seg.size
        result.deleted_segments.append(seg.base_offset)
        seg.delete_files()
    del result.segments[i:]
