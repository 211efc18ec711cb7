"""The partition log: an ordered list of segments with Kafka's offsets.

Directory ``<log dir>/<topic>-<partition>/`` holds the segments (see
``spool.storage.segment``); the offsets that describe it::

    log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset
    (first readable)    (read_committed end)  (consumers' end)  (next to assign)

checked in one place, ``_check_offsets``. Single node: the high watermark
follows the log end offset after each append (``hw_follows_leo``); with
replication the broker moves it with ``update_high_watermark``. The last
stable offset equals the high watermark until transactions set a first
unstable offset (``set_first_unstable_offset``).

Lifecycle: ``PartitionLog(dir, config, ...)`` loads/recovers the directory
(``spool.storage.loader``) -> ``append``/``read``/... -> ``close()`` (flush,
trim indexes) or ``delete()`` (rename to ``<topic>-<partition>.<uuid>-delete``;
``destroy()`` removes it later).

Concurrency: one ``threading.RLock`` per log serialises every mutation
(append, roll, retention, truncation, DeleteRecords, close). Appends and
reads come from the broker's event loop, retention/flush from a background
thread. Reads take no lock: they work on an immutable snapshot of the
segment tuple and a segment's ``size`` only ever covers whole batches. A
deleted segment is renamed ``.deleted`` and its files stay open for
``file.delete.delay.ms`` so a FetchSlice handed out just before still works.
fsync runs outside the lock.

Durability: ``append`` returns after ``os.pwrite`` into the page cache, so
every acknowledged batch survives a crash of the process (kill -9) and is
found again by recovery. Power loss keeps what was fsynced: everything below
the recovery point (``flush`` - by ``flush.messages``, ``flush.ms``, on
roll for the rolled segment, on close). Kafka's defaults leave fsync to the OS.

Aborted transactions (``spool.storage.txn_index``): appending an ABORT
marker records its transaction in the segment's ``.txnindex``. If that write
fails (a full disk) the marker's append still succeeds (it is in the log)
and the entry stays pending in memory, per segment, in marker order:
``aborted_transactions`` lists file and pending entries alike, and the
pending ones are written again at the next ABORT marker, ``flush``,
``flush_if_due`` (the background flush), before a producer snapshot and at
``close``. Rule that keeps a restart complete: no producer snapshot is
written while an entry whose marker lies below the snapshot's offset is
still pending (the snapshot is skipped, as a failed one is), so the newest
snapshot on disk predates every pending marker and the replay at load
(``_load_producer_state``, which rewrites the tail's entries) rebuilds it.
Pending entries of a segment that leaves the log (retention, truncation,
compaction) are dropped with it.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
import random
import shutil
import struct
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import (
    _HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    patch_log_append_time,
)
from spool.records.batch import (
    iter_batches as iter_batch_headers,
)
from spool.storage import file_work, timestamps, txn_index
from spool.storage.checkpoint import DirCheckpoints
from spool.storage.cleaner_txn import control_marker
from spool.storage.config import LogConfig
from spool.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from spool.storage.leader_epoch import read_entries as read_leader_epochs
from spool.storage.loader import load_segments, new_segment
from spool.storage.producer_state import ActiveProducer, ProducerStateManager
from spool.storage.retention import deletable_prefix
from spool.storage.segment import MAX_RELATIVE_OFFSET, SWAP_SUFFIX, LogSegment
from spool.storage.txn_index import AbortedTxn
from spool.util.clock import Clock, as_clock
from spool.util.fileio import TMP_SUFFIX, fsync_dir
from spool.util.logs import fields

log = logging.getLogger(__name__)

_OFFSET_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength (unchanged), leader epoch
DELETE_DIR_SUFFIX = "-delete"
SPARE_NAME = "spare.log" + TMP_SUFFIX  # the next segment's .log, prepared (a leftover is removed)


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the batches were stamped with LogAppendTime
    log_start_offset: int
    num_records: int  # offsets taken (lastOffsetDelta + 1 summed over batches)
    size: int


class FetchSlice(NamedTuple):
    """A region of one segment's ``.log`` holding whole batches: give it to sendfile.

    ``dup_fd()`` gives a descriptor of the caller's own (the segment's may be
    closed by the open-file cache once the segment is inactive); it works at
    least ``file.delete.delay.ms`` after the segment is deleted.
    """

    segment: LogSegment
    position: int
    length: int
    first_offset: int  # base offset of the first batch (may be below the fetch offset)
    segment_base_offset: int

    def dup_fd(self) -> int:
        return self.segment.dup_fd()

    def fileno(self) -> int:
        """The segment's current descriptor (tests and tools; prefer ``dup_fd``)."""
        return self.segment.fileno()

    def read(self) -> bytes:
        return self.segment.pread(self.length, self.position)


def parse_dir_name(name: str) -> tuple[str, int]:
    """``orders-3`` -> ("orders", 3); ValueError if it is not a partition directory."""
    topic, _, partition = name.rpartition("-")
    if not topic or not partition.isdigit():
        raise ValueError(f"not a partition directory: {name}")
    return topic, int(partition)


def _batch_chain(buf: memoryview) -> list[tuple[int, int, int, int, int, int, int]]:
    """(pos, last_offset_delta, max_timestamp, size, base_offset, partition_leader_epoch,
    producer_id) per batch; must tile ``buf``."""
    out = []
    pos, end = 0, len(buf)
    unpack = _HEADER.unpack_from
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "trailing bytes after the last batch")
        base, length, epoch, magic, _, _, lod, _, max_ts, pid = unpack(buf, pos)[:10]
        size = LOG_OVERHEAD + length
        if magic != 2 or length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end or lod < 0:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"malformed batch at {pos}")
        out.append((pos, lod, max_ts, size, base, epoch, pid))
        pos += size
    if not out:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "no record batch to append")
    return out


class PartitionLog:
    """One topic-partition's log on disk (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        clock: Clock | Callable[[], int] | None = None,
        checkpoints: DirCheckpoints | None = None,
        had_clean_shutdown: bool = False,
        hw_follows_leo: bool = True,
    ) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_dir_name(self.dir.name)
        self.tp = (self.topic, self.partition)
        self._config = config or LogConfig()
        self.clock = as_clock(clock)
        self._owns_checkpoints = checkpoints is None
        self.checkpoints = checkpoints or DirCheckpoints(self.dir.parent)
        self.hw_follows_leo = hw_follows_leo
        self._lock = threading.RLock()
        self.closed = False
        self.dir.mkdir(parents=True, exist_ok=True)
        file_work.drain()  # nothing deferred by an earlier instance runs under this load
        res = load_segments(
            self.dir,
            self._config,
            self.clock.now_ms(),
            recovery_point=self.checkpoints.recovery_point(self.tp),
            log_start_offset=self.checkpoints.log_start_offset(self.tp),
            had_clean_shutdown=had_clean_shutdown,
        )
        self.load_result = res
        self._set_segments(res.segments)
        self._log_start = res.log_start_offset
        self._leo = res.log_end_offset
        # replication: the checkpointed HW, never past what the log holds (Kafka's rule)
        self._hw = self._leo if hw_follows_leo else min(
            max(self.checkpoints.high_watermark(self.tp), self._log_start), self._leo)
        self._first_unstable: int | None = None
        self._recovery_point = res.recovery_point
        self._dir_dirty = True
        self._last_flush_ms = self.clock.now_ms()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._file_work: deque = deque()  # futures of this log's deferred file work
        self._spare: Path | None = None  # the next segment's .log, created ahead (empty)
        self._roll_jitter = self._new_jitter()
        self.producers = ProducerStateManager(self.dir)
        self.txn_reader = txn_index.TxnIndexReader()
        # segment base -> aborted transactions not yet in its .txnindex, in marker order;
        # replaced whole (lock-free readers keep the one they took)
        self._txn_pending: dict[int, tuple[AbortedTxn, ...]] = {}
        self._load_producer_state()
        self.leader_epochs = self._load_leader_epochs()
        self.checkpoints.update(self.tp, recovery_point=self._recovery_point,
                                log_start=self._log_start, high_watermark=self._hw)
        self._check_offsets()

    # -- offsets -------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """Swap the configuration (AlterConfigs); applies to the next append/roll."""
        with self._lock:
            self._config = config
            active = self._segments[-1]
            active.index_interval_bytes = config.index_interval_bytes
            self._roll_jitter = self._new_jitter()

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.update_high_watermark(offset)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]."""
        with self._lock:
            self._hw = min(max(offset, self._log_start), self._leo)
            self._check_offsets()
            return self._hw

    @property
    def last_stable_offset(self) -> int:
        if self._first_unstable is None:
            return self._hw
        return max(self._log_start, min(self._first_unstable, self._hw))

    def set_first_unstable_offset(self, offset: int | None) -> None:
        """Hook for transactions: the first offset of the oldest open transaction."""
        self._first_unstable = offset
        self._check_offsets()

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def _check_offsets(self) -> None:
        """The one place ``log_start <= lso <= hw <= leo`` is enforced."""
        ls, hw, leo = self._log_start, self._hw, self._leo
        lso = hw if self._first_unstable is None else self.last_stable_offset
        if not ls <= lso <= hw <= leo:
            raise AssertionError(
                f"{self.tp}: offsets out of order: log_start={ls} lso={lso} hw={hw} leo={leo}"
            )

    def earliest(self) -> int:
        return self._log_start

    def latest(self) -> int:
        """What ListOffsets(LATEST) gives a read_uncommitted consumer: the high watermark."""
        return self._hw

    # -- segments ------------------------------------------------------------------

    def _set_segments(self, segments: list[LogSegment]) -> None:
        # one attribute, swapped whole: lock-free readers never see segments and bases disagree
        self._state: tuple[tuple[LogSegment, ...], list[int]] = (
            tuple(segments),
            [s.base_offset for s in segments],
        )

    @property
    def _segments(self) -> tuple[LogSegment, ...]:
        return self._state[0]

    @property
    def _bases(self) -> list[int]:
        return self._state[1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def _new_jitter(self) -> int:
        j = self._config.segment_jitter_ms
        return random.randrange(j) if j > 0 else 0

    def _should_roll(self, seg: LogSegment, size: int, max_ts: int, last: int,
                     now: int | None = None) -> bool:
        """Kafka's rule: size, segment.ms (record time since the first batch; at most
        max.compaction.lag.ms on a compacted log, KIP-354), full
        indexes, or offsets that no longer fit the segment's int32 relative range.
        ``now``: the clock's time, read here when needed if not given."""
        if last - seg.base_offset > MAX_RELATIVE_OFFSET:
            return True
        seg_size = seg.size
        if seg_size == 0:
            return False
        cfg = self._config
        if seg_size > cfg.segment_size - size or seg.indexes_full():
            return True
        first_ts = seg.first_batch_timestamp()
        if first_ts is not None and first_ts >= 0:
            waited = max_ts - first_ts
        else:
            waited = (self.clock.now_ms() if now is None else now) - seg.created_ms
        return waited > cfg.max_segment_ms - self._roll_jitter

    def roll(self, new_base: int | None = None) -> LogSegment:
        """Close the active segment for appends and start a new one at ``new_base`` (LEO).

        The new segment's files are created first: if that fails (a full disk)
        the old segment stays active and KAFKA_STORAGE_ERROR is raised, so the
        next append tries again. What the caller's thread does is small: rename
        the ``.log`` prepared ahead into place and seal the old indexes in
        memory; writing them, the producer snapshot and preparing the next
        ``.log`` are file work (``spool.storage.file_work``), all caches or
        preparations, none failing the roll."""
        with self._lock:
            self._ensure_open()
            base = self._leo if new_base is None else new_base
            old = self._segments[-1]
            if old.size == 0 and old.base_offset == base:
                return old
            seg = self._create_segment(base)
            writer = self.producers.snapshot_writer(base, even_empty=True)
            if writer is not None:
                self._defer(functools.partial(self._write_snapshot, writer, base))
            segs = list(self._segments)
            if old.size == 0:
                old.delete_files()
                segs.pop()
            else:
                old.on_become_inactive(write_now=False)
                self._defer(old.write_indexes)
            segs.append(seg)
            self._set_segments(segs)
            self._dir_dirty = True
            self._roll_jitter = self._new_jitter()
            self._defer(self._prepare_spare)
        log.info("%s-%d: rolled a new segment at offset %d (the previous one, at %d, holds %d "
                 "bytes)", self.topic, self.partition, base, old.base_offset, old.size,
                 extra=fields(topic=self.topic, partition=self.partition, base_offset=base,
                              previous_base_offset=old.base_offset, previous_bytes=old.size))
        return seg

    def _create_segment(self, base: int) -> LogSegment:
        """A new active segment at ``base``; KAFKA_STORAGE_ERROR (nothing left behind) if
        its files cannot be created."""
        seg = None
        spare, self._spare = self._spare, None
        try:
            try:
                seg = new_segment(self.dir, base, self._config, self.clock.now_ms(), spare)
            except OSError:
                if spare is None:
                    raise
                seg = new_segment(self.dir, base, self._config, self.clock.now_ms())
            seg.make_active()
            return seg
        except OSError as e:
            if seg is not None:
                seg.delete_files()
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                             f"{self.tp}: cannot create segment {base}: {e}") from e

    # -- deferred file work (spool.storage.file_work) --------------------------------

    def _defer(self, fn: Callable[[], object]) -> None:
        pending = self._file_work
        while pending and pending[0].done():  # one worker: jobs finish in order
            pending.popleft()
        pending.append(file_work.submit(fn))

    def wait_file_work(self) -> None:
        """Wait until this log's deferred file work has run."""
        pending, self._file_work = self._file_work, deque()
        file_work.wait(list(pending))

    def _prepare_spare(self) -> None:
        """File work: an empty, open ``.log`` for the next roll (creating a file is what
        costs; renaming it into place at the roll does not)."""
        if self._spare is not None or self.closed:
            return
        path = self.dir / SPARE_NAME
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))  # no fd kept
        with self._lock:
            if self._spare is None and not self.closed:
                self._spare = path

    def _drop_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.unlink(missing_ok=True)

    # -- append --------------------------------------------------------------------

    def append(
        self,
        records: bytearray | memoryview | bytes,
        *,
        leader_epoch: int = 0,
        log_append_time_ms: int | None = None,
        assign_offsets: bool = True,
        flush: bool = True,
        verification_guard: object | None = None,
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Append whole, already validated v2 batches; patches them in place when writable.

        Assigns offsets from the log end offset (rewriting baseOffset and
        partitionLeaderEpoch in the caller's buffer when it is writable; a
        read-only one is copied first), or with ``assign_offsets=False`` keeps
        the batches' offsets (replication), which must not go below the log
        end, and writes a read-only buffer as it is (nothing to patch: no copy).
        For LogAppendTime topics (``config.uses_log_append_time``) the
        broker passes ``log_append_time_ms=clock.now_ms()``: maxTimestamp and
        the CRC are rewritten. The caller has validated the batches
        (``validate_batch``); only their framing is checked here
        (CORRUPT_MESSAGE). Returns once the bytes are in the page cache, after
        an fsync too when ``flush.messages`` is reached -- unless ``flush=False``:
        then the caller runs ``flush()`` (off its event loop) when ``flush_due()``.
        ``verification_guard``: a client's produce, its transactional batches checked
        against their transaction's verification (``ProducerStateManager.check``).
        ``transaction_version``: of a coordinator's marker (2: its epoch must be above the
        producer's).
        """
        view = memoryview(records)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        if view.readonly and (assign_offsets or log_append_time_ms is not None):
            view = memoryview(bytearray(view))
        chain = _batch_chain(view)
        with self._lock:
            if self.closed:
                self._ensure_open()
            first = next_off = self._leo
            batches = []
            max_ts, off_max_ts, n = -1, first, 0
            producer_batches = [b[0] for b in chain if b[6] >= 0]
            if producer_batches and assign_offsets:
                dup = self._check_producers(view, producer_batches, verification_guard,
                                            transaction_version)
                if dup is not None:
                    return AppendInfo(dup[0], dup[1], -1, -1, -1, self._log_start, 0, 0)
            latest = self.leader_epochs.latest
            new_epochs = []  # (epoch, start offset) where the batches' leader epoch changes
            if assign_offsets and leader_epoch != latest and leader_epoch >= 0:
                new_epochs.append((leader_epoch, next_off))
            for pos, lod, ts, size, base, epoch, _ in chain:
                if assign_offsets:
                    _OFFSET_EPOCH.pack_into(view, pos, next_off, size - LOG_OVERHEAD,
                                            leader_epoch)
                    base = next_off
                elif base < next_off:
                    raise KafkaError(
                        Errors.OFFSET_OUT_OF_RANGE, f"batch offset {base} below log end {next_off}"
                    )
                elif epoch != latest and epoch >= 0:
                    new_epochs.append((epoch, base))
                    latest = epoch
                if pos == 0:
                    first = base
                if log_append_time_ms is not None:
                    patch_log_append_time(view, pos, log_append_time_ms)
                    ts = log_append_time_ms
                last = base + lod
                if ts > max_ts:
                    max_ts, off_max_ts = ts, last
                batches.append((pos, last, ts, size))
                n += lod + 1
                next_off = last + 1
            seg = self._state[0][-1]
            if self._should_roll(seg, len(view), max_ts, next_off - 1):
                seg = self.roll(first)
            for epoch, start in new_epochs:
                self._assign_epoch(epoch, start)
            seg.append(view, batches)
            self._leo = next_off
            if self.hw_follows_leo:
                self._hw = next_off
            if producer_batches:
                self._update_producers(view, producer_batches, seg)
            if self._first_unstable is not None or not (
                    self._log_start <= self._hw <= next_off):
                self._check_offsets()
            info = AppendInfo(first, next_off - 1, max_ts, off_max_ts,
                              -1 if log_append_time_ms is None else log_append_time_ms,
                              self._log_start, n, len(view))
        if flush and self.flush_due():
            try:
                self.flush()
            except OSError as e:
                raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"{self.tp}: flush failed: {e}") from e
        return info

    def _assign_epoch(self, epoch: int, start: int) -> None:
        """Under the lock, before the batches starting ``epoch`` are written: record it in
        the leader epoch cache (KAFKA_STORAGE_ERROR, nothing appended, if its file cannot be
        written; the entry stays in memory and holds for the next append)."""
        try:
            self.leader_epochs.assign(epoch, start, durable=False)  # fsyncs off the loop
        except OSError as e:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                             f"{self.tp}: leader epoch checkpoint not written: {e}") from e

    def flush_due(self) -> bool:
        """``flush.messages`` offsets or more were appended since the recovery point."""
        return self._leo - self._recovery_point >= self._config.flush_messages

    # -- leader epochs (spool.storage.leader_epoch) ----------------------------------

    def _load_leader_epochs(self) -> LeaderEpochCache:
        """The checkpoint, or (missing or malformed, on a non-empty log) the entries rebuilt
        from the batch headers and written; then cut to [log start, log end) as Kafka's
        LogLoader does (recovery may have truncated the log below an entry)."""
        entries = read_leader_epochs(self.dir / LEADER_EPOCH_CHECKPOINT)
        cache = LeaderEpochCache(self.dir, entries or ())
        if entries is None and self._leo > self._log_start:
            found: list[tuple[int, int]] = []
            latest = -1
            for seg in self._segments:
                for _, h in seg.batches():
                    epoch = h.partition_leader_epoch
                    if epoch >= 0 and epoch != latest and h.last_offset >= self._log_start:
                        found.append((epoch, max(h.base_offset, self._log_start)))
                        latest = epoch
            if not cache.assign_all(found):
                cache.write()  # no epoch in any batch: the empty file, so no rescan next time
            log.info("%s: leader epoch cache rebuilt from the batches: %s", self.tp,
                     list(cache.entries()))
        elif entries is not None and self.load_result.recovered_segments:
            # an append's checkpoint is fsynced later (leader_epoch: durable=False): power
            # lost first may leave an older file; the recovered tail's batches name the
            # epochs it lacks (Kafka's LogSegment.recover: epochs above the latest only)
            found = []
            latest = cache.latest
            for seg in self._segments[-self.load_result.recovered_segments:]:
                for _, h in seg.batches():
                    if h.partition_leader_epoch > latest:
                        latest = h.partition_leader_epoch
                        found.append((latest, h.base_offset))
            if found and cache.assign_all(found):
                log.info("%s: leader epochs %s found in the recovered tail", self.tp, found)
        self._cut_leader_epochs(cache, self._log_start, self._leo)
        return cache

    def _cut_leader_epochs(self, cache: LeaderEpochCache, start: int | None,
                           end: int | None) -> None:
        """Truncate the cache from the start and/or end; a failed file write is logged, not
        raised (the entries in memory are right; the next load cuts a stale file again)."""
        try:
            if end is not None:
                cache.truncate_from_end(end)
            if start is not None:
                cache.truncate_from_start(start)
        except OSError as e:
            log.error("%s: leader epoch checkpoint not written: %s", self.tp, e)

    # -- producer state (spool.storage.producer_state) -----------------------------

    def start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                       now_ms: int) -> object:
        """``ProducerStateManager.start_verification`` under the lock (KIP-890)."""
        with self._lock:
            return self.producers.start_verification(producer_id, sequence, epoch, now_ms)

    def _check_producers(self, view: memoryview, positions: list[int],
                         guard: object | None = None,
                         transaction_version: int = 0) -> tuple[int, int] | None:
        dup = None
        for pos in positions:
            dup = self.producers.check(BatchHeader.parse(view, pos), guard,
                                       transaction_version) or dup
        return dup

    def _update_producers(self, view, positions: list[int], seg: LogSegment) -> None:
        for pos in positions:
            h = BatchHeader.parse(view, pos)
            ctype, cepoch = control_marker(view, pos) if h.is_control else (None, -1)
            aborted = self.producers.update(h, ctype, cepoch)
            if aborted is not None:
                self._index_aborted(seg.base_offset, aborted)
        self._first_unstable = self.producers.first_unstable_offset()

    # -- aborted transactions (.txnindex; see the module docstring) ------------------

    def _index_aborted(self, base: int, aborted: AbortedTxn) -> None:
        """Under the lock: put ``aborted`` in segment ``base``'s ``.txnindex``, after the
        entries pending there; kept pending if the write fails (the marker's append
        does not fail: the marker is in the log)."""
        if base not in self._txn_pending:
            try:
                txn_index.append(txn_index.path_of(self.dir, base), aborted)
                return
            except OSError as e:
                error: object = e
        else:
            error = "earlier entries still pending"
        pending = dict(self._txn_pending)
        pending[base] = pending.get(base, ()) + (aborted,)
        self._txn_pending = pending
        if isinstance(error, OSError) or not self._write_pending_txns():
            log.error("%s: aborted transaction %s not in the .txnindex yet (%s): kept in "
                      "memory and retried; no producer snapshot past it meanwhile",
                      self.tp, aborted, error)

    def _write_pending_txns(self) -> bool:
        """Under the lock: write the pending entries, in order, stopping at the first
        failure; True when none is left."""
        pending = self._txn_pending
        if not pending:
            return True
        live = set(self._bases)
        left: dict[int, tuple[AbortedTxn, ...]] = {}
        failed, written = False, 0
        for base, entries in pending.items():
            if base not in live:
                continue  # the segment left the log: its entries went with it
            done = 0
            if not failed:
                path = txn_index.path_of(self.dir, base)
                for t in entries:
                    try:
                        txn_index.append(path, t)
                    except OSError as e:
                        log.debug("%s: .txnindex %s still not writable: %s", self.tp, path, e)
                        failed = True
                        break
                    done += 1
            written += done
            if done < len(entries):
                left[base] = entries[done:]
        self._txn_pending = left  # after the writes: a reader sees each entry at least once
        if written and not left:
            log.info("%s: pending aborted transactions written to the .txnindex", self.tp)
        return not left

    def _snapshot_allowed(self, offset: int) -> bool:
        """Under the lock: no pending entry's marker is below ``offset`` (after a retry)."""
        self._write_pending_txns()
        return not any(t.last_offset < offset
                       for entries in self._txn_pending.values() for t in entries)

    def _write_snapshot(self, writer: Callable[[], None], offset: int) -> None:
        """File work: the producer snapshot at ``offset`` taken at a roll, unless an entry
        below it is only pending (then the replay at load must reach its marker)."""
        with self._lock:
            if self.closed:
                return
            if not self._snapshot_allowed(offset):
                log.warning("%s: producer snapshot at %d skipped: an aborted transaction "
                            "below it is not in the .txnindex yet", self.tp, offset)
                return
        writer()

    def retry_txn_index(self) -> bool:
        """Write the pending ``.txnindex`` entries now; True when none is left."""
        with self._lock:
            return self.closed or self._write_pending_txns()

    def _load_producer_state(self) -> None:
        """Newest snapshot, then the log from there; rewrites the tail's ``.txnindex`` entries."""
        start = self.producers.load_snapshot(self._leo)
        start = self._log_start if start is None else max(start, self._log_start)
        self._txn_pending = {b: kept for b, entries in self._txn_pending.items()  # rewritten below
                             if (kept := tuple(t for t in entries if t.last_offset < start))}
        segs = self._segments
        for i, seg in enumerate(segs):
            next_base = segs[i + 1].base_offset if i + 1 < len(segs) else self._leo
            if next_base <= start and i + 1 < len(segs):
                continue
            txn_index.truncate_from(txn_index.path_of(self.dir, seg.base_offset), start)
            first = 0
            if start > seg.base_offset:  # skip to the batch holding ``start`` (the index)
                found = seg.translate_offset(start)
                if found is None:
                    continue
                first = found[0]
            for pos, h in seg.batches(first):
                if h.last_offset < start or not h.has_producer_id:
                    continue
                ctype, cepoch = None, -1
                if h.is_control:
                    ctype, cepoch = control_marker(seg.pread(h.size, pos))
                aborted = self.producers.update(h, ctype, cepoch)
                if aborted is not None:
                    self._index_aborted(seg.base_offset, aborted)
        self._first_unstable = self.producers.first_unstable_offset()

    def active_producers(self) -> list[ActiveProducer]:
        """The producers this log keeps (``ProducerStateManager.active_producers``), a copy
        taken under the lock (appends and expiry change them from other threads)."""
        with self._lock:
            return self.producers.active_producers()

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, upper)."""
        segs, bases = self._state
        pending = self._txn_pending  # before the files: an entry written meanwhile is in one
        out = []
        for seg in segs[max(0, bisect.bisect_right(bases, start) - 1):]:
            entries = self.txn_reader.entries(txn_index.path_of(self.dir, seg.base_offset))
            extra = pending.get(seg.base_offset)
            if extra:
                entries = entries + [t for t in extra if t not in entries]
            for t in entries:
                if t.last_offset >= start and t.first_offset < upper:
                    out.append((t.producer_id, t.first_offset))
        return out

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        with self._lock:
            return self.producers.remove_expired(now_ms, expiration_ms)

    # -- reads ---------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchSlice | None:
        """Whole batches from the batch holding ``fetch_offset``, from one segment.

        At most ``max_bytes`` unless the first batch alone is larger and
        ``min_one_batch`` (KIP-74); no batch reaching ``max_offset`` (exclusive:
        the high watermark or LSO). None when there is nothing to return.
        OFFSET_OUT_OF_RANGE below the log start or above the log end offset.
        """
        segs, bases = self._state
        active_size = segs[-1].size  # before the LEO: never covers more than the LEO says
        leo, start = self._leo, self._log_start
        if fetch_offset < start or fetch_offset > leo:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"{self.tp}: offset {fetch_offset} not in [{start}, {leo}]",
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset >= limit:
            return None
        last = len(segs) - 1
        for i in range(max(0, bisect.bisect_right(bases, fetch_offset) - 1), last + 1):
            seg = segs[i]
            found = seg.translate_offset(fetch_offset)
            if found is None:
                continue  # the offset falls in a gap at this segment's end
            pos, first = found
            size = active_size if i == last else seg.size
            if not first.records_count and pos + first.size == size and i < last:
                continue  # only an emptied batch left (compaction): librdkafka wants records
            if pos >= size or first.last_offset >= limit:
                return None
            end = size
            if limit < (leo if i == last else bases[i + 1]):
                stop = seg.translate_offset(limit, pos)
                if stop is not None and stop[0] < end:
                    end = stop[0]
            if end - pos > max_bytes:
                end, _ = seg.boundary_at_or_before(pos, pos + max_bytes)
                if end == pos:
                    if not min_one_batch:
                        return None
                    end = pos + first.size
            return FetchSlice(seg, pos, end - pos, first.base_offset, seg.base_offset)
        return None

    def read_bytes(
        self,
        fetch_offset: int,
        max_bytes: int = 1 << 20,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        """``read`` as bytes (b"" for nothing): for tests and tools."""
        sl = self.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        return b"" if sl is None else sl.read()

    def iter_batches(self, from_offset: int | None = None) -> Iterator[bytes]:
        """Every whole batch from ``from_offset`` (default: log start) to the log end."""
        offset = self._log_start if from_offset is None else from_offset
        while offset < self._leo:
            sl = self.read(offset, 1 << 20)
            if sl is None:
                return
            data = sl.read()
            for pos, h in iter_batch_headers(data):
                yield data[pos : pos + h.size]
                offset = h.next_offset

    # -- timestamps ----------------------------------------------------------------

    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` (and
        below ``max_offset`` if given), or None. See ``spool.storage.timestamps``."""
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        return timestamps.offset_for_timestamp(self._segments, timestamp, self._log_start, limit)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp (KIP-734)."""
        return timestamps.max_timestamp_offset(self._segments)

    # -- flush ---------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to`` (default: all), then move the
        recovery point there. The fsync itself runs outside the lock."""
        with self._lock:
            if self.closed:
                return
            self._write_pending_txns()
            target = self._leo if up_to is None else min(up_to, self._leo)
            if target <= self._recovery_point and not self._dir_dirty:
                return
            segs, bases = self._segments, self._bases
            first = max(0, bisect.bisect_right(bases, self._recovery_point) - 1)
            todo = [s for s in segs[first:] if s.base_offset < target or s is segs[first]]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        for seg in todo:
            try:
                seg.flush()
            except (OSError, ValueError):
                if not seg.deleted:
                    raise
        if dir_dirty:
            fsync_dir(self.dir)
        # an epoch entry the recovery point is about to pass must be durable first: the
        # load rescans only what lies above the recovery point (_load_leader_epochs)
        self.leader_epochs.sync_if_unsynced()
        with self._lock:
            self._last_flush_ms = self.clock.now_ms()
            if target > self._recovery_point:
                self._recovery_point = target
                self.checkpoints.update(self.tp, recovery_point=target)

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Background hook: flush rolled segments, and everything when ``flush.ms`` passed."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        if self._txn_pending:
            self.retry_txn_index()
        if self._leo > self._recovery_point and now - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
            return True
        active_base = self._segments[-1].base_offset
        if self._recovery_point < active_base:
            self.flush(active_base)
            return True
        return False

    # -- compaction swap -------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Put the cleaner's ``new`` segment (``.cleaned``, flushed, spanning exactly the
        offsets of the consecutive non-active segments ``old``) in their place.

        Kafka's replaceSegments: ``.cleaned -> .swap`` (the commit point; dir
        fsynced), every old segment -> ``.deleted`` (unlinked after
        ``file.delete.delay.ms``), ``.swap -> live``, dir fsynced. Recovery of a
        crash at any step is ``spool.storage.loader.complete_swaps``. Returns
        False, changing nothing, when ``old`` is no longer part of the log
        (retention, truncation or deletion got there first).
        """
        with self._lock:
            segs = list(self._segments)
            i = next((k for k, s in enumerate(segs) if s is old[0]), -1) if old else -1
            if self.closed or i < 0 or i + len(old) >= len(segs) or any(
                a is not b for a, b in zip(segs[i : i + len(old)], old, strict=True)
            ):
                return False
            new.change_file_suffix(SWAP_SUFFIX)
            fsync_dir(self.dir)
            due = self.clock.now_ms() + self._config.file_delete_delay_ms
            for seg in old:
                seg.rename_to_deleted()
                self._pending_deletes.append((due, seg))
            new.change_file_suffix("")
            self._set_segments(segs[:i] + [new] + segs[i + len(old) :])
            self._dir_dirty = True
        fsync_dir(self.dir)
        return True

    # -- retention, DeleteRecords, truncation --------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete whole non-active segments past retention.ms / retention.bytes or wholly
        below the log start offset (``spool.storage.retention``); returns how many."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            if self.closed:
                return 0
            why: list[str] = []
            n = deletable_prefix(
                self._segments, self._leo, self._hw, self._log_start, self._config, now, why
            )
            if n:
                self._delete_segments(n, now, ", ".join(why))
        self.delete_expired_files(now)
        return n

    def _next_base(self, i: int) -> int:
        return self._bases[i + 1] if i + 1 < len(self._bases) else self._leo

    def _delete_segments(self, n: int, now: int, why: str) -> None:
        """Drop the first ``n`` segments: rename ``.deleted`` now, unlink after the delay."""
        segs = list(self._segments)
        doomed, rest = segs[:n], segs[n:]
        size = sum(s.size for s in doomed)
        log.info("%s-%d: deleting %d segment(s), offsets [%d, %d), %d bytes: %s", self.topic,
                 self.partition, n, doomed[0].base_offset, rest[0].base_offset, size, why,
                 extra=fields(topic=self.topic, partition=self.partition, segments=n,
                              base_offsets=[s.base_offset for s in doomed], bytes=size,
                              reason=why))
        self._set_segments(rest)
        for seg in doomed:
            seg.rename_to_deleted()
            self._pending_deletes.append((now + self._config.file_delete_delay_ms, seg))
        self._dir_dirty = True
        if rest[0].base_offset > self._log_start:
            self._log_start = rest[0].base_offset
            self.checkpoints.update(self.tp, log_start=self._log_start)
            self._cut_leader_epochs(self.leader_epochs, self._log_start, None)
        if self._log_start > self._recovery_point:  # nothing below the log start to recover
            self._recovery_point = self._log_start
            self.checkpoints.update(self.tp, recovery_point=self._recovery_point)
        self._check_offsets()

    def delete_expired_files(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Close and unlink ``.deleted`` segments whose delay has passed."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [
                (t, s) for t, s in self._pending_deletes if not (force or t <= now)
            ]
        for seg in due:
            seg.delete_files()
        return len(due)

    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the first readable offset (at most the high
        watermark); whole segments below it go; returns the new log start offset.
        Blocking (the checkpoint is fsynced before it returns, outside the log lock):
        the broker calls it in its executor. KAFKA_STORAGE_ERROR if the checkpoint
        cannot be written; the new log start holds meanwhile and is checkpointed
        with the next successful write."""
        with self._lock:
            self._ensure_open()
            if offset > self._hw:
                raise KafkaError(
                    Errors.OFFSET_OUT_OF_RANGE, f"{self.tp}: {offset} is past the high watermark"
                )
            moved = offset > self._log_start
            if moved:
                self._log_start = offset
                self._recovery_point = max(self._recovery_point, offset)
                self.checkpoints.update(self.tp, log_start=offset,
                                        recovery_point=self._recovery_point)
                self._cut_leader_epochs(self.leader_epochs, offset, None)
                self._check_offsets()
            self.run_retention_for_log_start()
            start = self._log_start
        if moved:  # durable before the answer; the fsyncs run without the log lock
            try:
                self.checkpoints.write()
            except OSError as e:
                raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                                 f"{self.tp}: log start offset not checkpointed: {e}") from e
        return start

    delete_records_before = advance_log_start_offset

    def run_retention_for_log_start(self) -> int:
        with self._lock:
            n = 0
            while n < len(self._segments) - 1 and self._next_base(n) <= self._log_start:
                n += 1
            if n:
                self._delete_segments(n, self.clock.now_ms(), f"log start offset {self._log_start}")
        self.delete_expired_files()
        return n

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower diverging from its leader).

        At or past the log end nothing goes but the leader epoch entries starting at the
        log end (Kafka's truncateTo: this replica, once leader, recorded an epoch's start
        and appended nothing in it before another was elected; kept, that entry would
        conflict with the new leader's)."""
        self.wait_file_work()
        with self._lock:
            self._ensure_open()
            if offset >= self._leo:
                self._cut_leader_epochs(self.leader_epochs, None, self._leo)
                return
            now = self.clock.now_ms()
            if offset < self._log_start or offset <= self._bases[0]:
                self._truncate_fully(offset, now)
            else:
                i = bisect.bisect_right(self._bases, offset) - 1
                segs = list(self._segments)
                for seg in segs[i + 1 :]:
                    seg.rename_to_deleted()
                    self._pending_deletes.append((now + self._config.file_delete_delay_ms, seg))
                seg = segs[i]
                seg.truncate_to(offset)
                seg.make_active()
                self._set_segments(segs[: i + 1])
                assert seg.next_offset is not None
                self._leo = seg.next_offset
            self._hw = min(self._hw, self._leo)
            self._cut_leader_epochs(self.leader_epochs, None, self._leo)
            self._first_unstable = None
            self._load_producer_state()
            self._recovery_point = min(self._recovery_point, self._leo)
            self.checkpoints.update(self.tp, recovery_point=self._recovery_point,
                                    log_start=self._log_start)
            self._dir_dirty = True
            self._check_offsets()

    def truncate_fully(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``offset`` (which may lie
        past the log end: a Raft follower that installed a snapshot beyond its log)."""
        self.wait_file_work()
        with self._lock:
            self._ensure_open()
            self._truncate_fully(offset, self.clock.now_ms())
            self._first_unstable = None
            self._load_producer_state()
            self.checkpoints.update(self.tp, recovery_point=self._recovery_point,
                                    log_start=self._log_start)
            self._dir_dirty = True
            self._check_offsets()

    def _truncate_fully(self, offset: int, now: int) -> None:
        for seg in self._segments:
            seg.rename_to_deleted()
            self._pending_deletes.append((now + self._config.file_delete_delay_ms, seg))
        fresh = new_segment(self.dir, offset, self._config, now)
        fresh.make_active()
        self._set_segments([fresh])
        self._log_start = self._leo = self._hw = offset
        self._recovery_point = offset
        try:
            self.leader_epochs.clear()
        except OSError as e:
            log.error("%s: leader epoch checkpoint not written: %s", self.tp, e)

    # -- close / delete ------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self.closed:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"{self.tp}: log is closed")

    def close(self) -> None:
        """Flush, trim the active segment's indexes, close every file."""
        if self.closed:
            return
        self.wait_file_work()
        self.flush()
        with self._lock:
            if self._snapshot_allowed(self._leo):
                self.producers.take_snapshot(self._leo, even_empty=self._leo > self._log_start)
            else:
                log.warning("%s: no producer snapshot at close: an aborted transaction is not "
                            "in the .txnindex yet (the next load replays its marker)", self.tp)
            self.closed = True
            self._drop_spare()
            self._segments[-1].on_become_inactive()
            for seg in self._segments:
                seg.close()
        self.delete_expired_files(force=True)
        self.checkpoints.update(self.tp, recovery_point=self._recovery_point,
                                log_start=self._log_start, high_watermark=self._hw)
        if self._owns_checkpoints:
            self.checkpoints.write()

    def delete(self) -> Path:
        """Rename the directory to ``<topic>-<partition>.<uuid>-delete`` and stop serving.

        Files stay open (in-flight reads finish); ``destroy()`` closes and removes them.
        """
        self.wait_file_work()
        with self._lock:
            self.closed = True
            self._drop_spare()
            target = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            os.rename(self.dir, target)
            self.dir = target
            for seg in self._segments:  # lazy opens and index writes follow the rename
                seg.move_dir(target)
            self.producers.dir = target
            self.leader_epochs.dir = target
        fsync_dir(target.parent)
        self.checkpoints.remove(self.tp)
        self.checkpoints.write()
        return target

    def destroy(self) -> None:
        """Close every file and remove the (renamed) directory."""
        self.wait_file_work()
        with self._lock:
            self.closed = True
            self._drop_spare()
            for seg in self._segments:
                seg.close()
            self._segments[-1].active = False
        self.delete_expired_files(force=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start}, "
            f"hw={self._hw}, leo={self._leo}, segments={len(self._segments)})"
        )
