"""Which log to clean next, and the cleaner thread (Kafka's LogCleanerManager + LogCleaner).

For every log whose ``cleanup.policy`` contains ``compact``::

    first dirty        the offset the last cleaning reached (cleaner-offset-checkpoint
                       in the log dir; the log start offset when absent or invalid)
    first uncleanable  the lowest of: the active segment's base, the base of the
                       segment holding the last stable offset, and the base of the
                       first dirty segment with a timestamp newer than
                       now - min.compaction.lag.ms
    clean bytes        segments wholly below first dirty
    cleanable bytes    segments from the one holding first dirty to first uncleanable
    dirty ratio        cleanable / (clean + cleanable)
    compaction delay   how far the oldest dirty segment's first batch is past
                       max.compaction.lag.ms (> 0: clean now, whatever the ratio)

The cleaner picks, among logs with cleanable bytes whose ratio exceeds
``min.cleanable.dirty.ratio`` or whose compaction delay is positive, the one
with the highest ratio. With none, a log whose earliest kept tombstone or
marker has passed its delete horizon is cleaned so that it goes (the
horizon is learnt from each cleaning; after a restart, from one walk of
the batch headers). Nothing to do: the thread sleeps ``log.cleaner.backoff.ms``.

``cleaner-offset-checkpoint`` (Kafka's file and text format,
``spool.storage.checkpoint``) is written after each cleaning's swaps, so a
crash can only make the next cleaning redo work, never skip any.

Concurrency: one daemon thread (``log.cleaner.threads`` = 1) started by
``LogManager.start_cleaner`` when ``log.cleaner.enable``; ``stop`` aborts a
cleaning in progress between batches. A log whose cleaning fails (corrupt
batch, I/O error) is marked uncleanable until the broker restarts, as Kafka
does; the others go on.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spool.protocol.errors import KafkaError
from spool.storage.checkpoint import format_checkpoint, read_checkpoint
from spool.storage.cleaner import CleaningAborted, CleanResult, LogCleanerPass
from spool.storage.log import PartitionLog
from spool.storage.offset_map import OffsetMap
from spool.util.clock import Clock
from spool.util.fileio import atomic_write

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
TopicPartition = tuple[str, int]


@dataclass
class LogToClean:
    tp: TopicPartition
    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int = 0

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0


def log_to_clean(tp: TopicPartition, plog: PartitionLog, checkpoint: int | None,
                 now_ms: int) -> LogToClean:
    """The cleanable range of ``plog`` and its sizes (see the module docstring)."""
    cfg = plog.config
    segs = plog.segments
    start, leo = plog.log_start_offset, plog.log_end_offset
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= leo else start
    nexts = [s.base_offset for s in segs[1:]] + [leo]
    lso = plog.last_stable_offset
    bounds = [segs[-1].base_offset]
    bounds += [s.base_offset for s, n in zip(segs, nexts, strict=True) if s.base_offset <= lso < n]
    dirty = [(s, n) for s, n in zip(segs[:-1], nexts, strict=False) if n > first_dirty]
    if cfg.min_compaction_lag_ms > 0:
        bounds += [s.base_offset for s, _ in dirty
                   if s.largest_timestamp() > now_ms - cfg.min_compaction_lag_ms][:1]
    first_uncleanable = min(bounds)
    first_dirty = min(first_dirty, first_uncleanable)
    clean = sum(s.size for s, n in zip(segs, nexts, strict=True) if n <= first_dirty)
    cleanable = sum(s.size for s, _ in dirty if s.base_offset < first_uncleanable)
    delay = 0
    if cfg.max_compaction_lag_ms < now_ms:
        until = now_ms - cfg.max_compaction_lag_ms
        stamps = [t for s, _ in dirty if (t := s.first_batch_timestamp() or -1) > 0]
        if stamps and min(stamps) < until:
            delay = until - min(stamps)
    return LogToClean(tp, plog, first_dirty, first_uncleanable, clean, cleanable, delay)


def pending_horizon(plog: PartitionLog) -> int | None:
    """The earliest delete horizon among non-active batches that carry one (header walk)."""
    best = None
    for seg in plog.segments[:-1]:
        for _, h in seg.batches():
            if h.has_delete_horizon and h.records_count and (best is None or h.base_timestamp < best):
                best = h.base_timestamp
    return best


class CleanerCheckpoints:
    """The first dirty offset of every compacted log, one file per log dir."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self._lock = threading.Lock()
        self._offsets = {Path(d): read_checkpoint(Path(d) / CLEANER_CHECKPOINT) for d in log_dirs}

    def get(self, plog: PartitionLog) -> int | None:
        return self._offsets.get(plog.dir.parent, {}).get(plog.tp)

    def set(self, plog: PartitionLog, offset: int, live: set[TopicPartition]) -> None:
        d = plog.dir.parent
        with self._lock:
            entries = self._offsets.setdefault(d, {})
            entries[plog.tp] = offset
            for tp in [tp for tp in entries if tp not in live]:
                del entries[tp]
            atomic_write(d / CLEANER_CHECKPOINT, format_checkpoint(entries))


class LogCleaner:
    """The cleaner of one ``LogManager`` (duck-typed: ``logs()``, ``setting()``, ``clock``,
    ``log_dirs``); see the module docstring."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.clock: Clock = manager.clock
        self.checkpoints = CleanerCheckpoints(manager.log_dirs)
        self.uncleanable: set[TopicPartition] = set()
        self._horizons: dict[TopicPartition, int | None] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_result: CleanResult | None = None
        # what the last grab_filthiest saw over the compacted logs (Kafka's
        # LogCleanerManager max-dirty-percent, PreCleanStats' max compaction delay)
        self.max_dirty_ratio = 0.0
        self.max_compaction_delay_ms = 0

    def _setting(self, name: str) -> Any:
        return self.manager.setting(name)

    def _compacted(self) -> dict[TopicPartition, PartitionLog]:
        return {tp: p for tp, p in self.manager.logs().items()
                if p.config.compact_enabled and not p.closed and tp not in self.uncleanable}

    def grab_filthiest(self, now_ms: int) -> LogToClean | None:
        """The log to clean now, or None (see the module docstring)."""
        cands = [log_to_clean(tp, p, self.checkpoints.get(p), now_ms)
                 for tp, p in self._compacted().items()]
        self.max_dirty_ratio = max((c.ratio for c in cands), default=0.0)
        self.max_compaction_delay_ms = max((c.compaction_delay_ms for c in cands), default=0)
        ready = [c for c in cands if c.cleanable_bytes > 0 and (
            c.needs_compaction_now or c.ratio > c.log.config.min_cleanable_dirty_ratio)]
        if ready:
            return max(ready, key=lambda c: (c.needs_compaction_now, c.ratio))
        for c in cands:
            if c.tp not in self._horizons:
                self._horizons[c.tp] = pending_horizon(c.log)
            h = self._horizons[c.tp]
            if h is not None and h <= now_ms and len(c.log.segments) > 1:
                return c
        return None

    def clean(self, ltc: LogToClean, now_ms: int) -> CleanResult:
        """Clean one log now (also what tests and the benchmark call)."""
        buf = int(self._setting("log.cleaner.dedupe.buffer.size"))
        factor = float(self._setting("log.cleaner.io.buffer.load.factor"))
        offset_map = OffsetMap.for_buffer(buf, factor)
        cleaning = LogCleanerPass(ltc.log, now_ms=now_ms, offset_map=offset_map, abort=self._stop)
        result = cleaning.run(ltc.first_dirty, ltc.first_uncleanable)
        result.stats.buffer_utilization = len(offset_map) / offset_map.capacity
        self.checkpoints.set(ltc.log, result.end_offset, set(self.manager.logs()))
        self._horizons[ltc.tp] = result.min_pending_horizon
        ltc.log.delete_expired_files()
        s = result.stats
        log.info("cleaned %s-%d up to %d: %d groups, %.1f MB read, %.1f MB written, "
                 "%d of %d records kept, %.1f MB/s", ltc.tp[0], ltc.tp[1], result.end_offset,
                 s.groups, s.bytes_read / 1e6, s.bytes_written / 1e6, s.records_kept,
                 s.records_read, s.bytes_read / 1e6 / s.elapsed_s)
        return result

    def clean_once(self, now_ms: int | None = None) -> bool:
        """Clean the filthiest log, if any; True if one was cleaned."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        for plog in self._compacted().values():
            plog.delete_expired_files(now)
        ltc = self.grab_filthiest(now)
        if ltc is None:
            return False
        try:
            self.last_result = self.clean(ltc, now)
        except CleaningAborted:
            return False
        except (KafkaError, OSError, ValueError) as e:
            if ltc.log.closed or self._stop.is_set():
                return False
            log.error("cleaning %s failed; it is uncleanable until restart: %s", ltc.tp, e)
            self.uncleanable.add(ltc.tp)
            return False
        return True

    def start(self) -> threading.Thread:
        if self._thread is not None:
            return self._thread
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    cleaned = self.clean_once()
                except Exception:  # keep the thread alive; the next round retries
                    log.exception("log cleaner round failed")
                    cleaned = False
                if not cleaned:
                    self._stop.wait(int(self._setting("log.cleaner.backoff.ms")) / 1000.0)

        self._thread = threading.Thread(target=loop, name="spool-log-cleaner", daemon=True)
        self._thread.start()
        return self._thread

    @property
    def dead_thread_count(self) -> int:
        """1 when the cleaner thread was started and has died (Kafka's DeadThreadCount)."""
        thread = self._thread
        return int(thread is not None and not thread.is_alive() and not self._stop.is_set())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
