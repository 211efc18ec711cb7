"""Log compaction of one partition log: keep the latest record of every key (Kafka's Cleaner).

One cleaning of ``[log start, end_offset)`` (``clean_log``; which log and
which range is ``spool.storage.cleaner_manager``'s choice)::

    1. offset map   walk the dirty section [first_dirty, first_uncleanable)
                    and map key -> latest offset (``OffsetMap``; aborted
                    transactional batches and control batches add nothing).
                    A full map stops the walk: end_offset = its last offset + 1.
    2. groups       the non-active segments below end_offset, grouped while
                    their sizes fit segment.bytes, their indexes
                    segment.index.bytes and their offsets an int32 range.
    3. per group    rewrite into <base>.log.cleaned (+ indexes), fsync, then
                    ``PartitionLog.replace_segments``:
                    .cleaned -> .swap -> live, the old segments -> .deleted.
    4. checkpoint   first dirty offset := end_offset (cleaner-offset-checkpoint).

What a batch becomes (Kafka 3.x rules; ``now`` is the cleaner's clock)::

    record kept     offset > map.latest_offset, or it has a key and
                    offset >= map[key], and it has a value or its batch's
                    delete horizon has not passed (none set, or now < horizon).
                    A record without a key is dropped.
    tombstone       kept with its batch's delete horizon set: a batch that
                    keeps a tombstone and has none gets attribute bit 6
                    (hasDeleteHorizonMs) with baseTimestamp = now +
                    delete.retention.ms; the next cleaning after that drops it.
    aborted txn     every record of a transactional batch of an aborted
                    transaction goes (``cleaner_txn``).
    marker          a COMMIT/ABORT marker with no data of its transaction
                    left gets a delete horizon, and goes after it.
    batch           unchanged records -> the original bytes; some records ->
                    rebuilt with the same baseOffset, lastOffsetDelta,
                    producer fields and codec (offsets keep their gaps);
                    none -> the batch goes, except an active producer's last
                    batch (its sequence/epoch state) and the last batch of a
                    group, which stay as an empty batch (header only, Kafka's
                    RETAIN_EMPTY form). The latter makes a cleaned segment
                    always end at its group's last offset, which is what lets
                    recovery tell exactly which old segments a .swap replaces.

Concurrency: runs on the cleaner thread, reading non-active segments
(immutable) without the log lock; only the swap takes it, and it refuses
(``replace_segments`` -> False) if retention or truncation changed those
segments meanwhile. ``abort`` (an Event) stops a cleaning between batches;
leftover .cleaned files are removed. Durability: the cleaned segment is
fsynced before the swap; a crash at any step leaves either the old or the
new segments (``spool.storage.loader.complete_swaps``).

(The produce-side rule, a compacted topic refuses records without a key, is
``spool.storage.record_checks``.)
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import (
    _HEADER,
    _UINT32,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    compute_crc,
    iter_batches,
    patch_log_append_time,
)
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from spool.storage.cleaner_txn import (
    AbortedTxn,
    LastBatch,
    TxnCleaningState,
    control_type,
    is_last_batch_of_producer,
    scan_producers,
)
from spool.storage.log import PartitionLog
from spool.storage.offset_map import OffsetMap
from spool.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    LogSegment,
    file_name,
)

log = logging.getLogger(__name__)

READ_CHUNK = 4 << 20
WRITE_CHUNK = 4 << 20


class CleaningAborted(Exception):
    """The cleaning was stopped (shutdown, or the log went away)."""


@dataclass
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats, the figures it logs)."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    batches_rebuilt: int = 0
    groups: int = 0
    swapped: int = 0
    buffer_utilization: float = 0.0  # the offset map's fill at the end (entries / capacity)
    start: float = field(default_factory=time.monotonic)
    end: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(1e-9, (self.end or time.monotonic()) - self.start)


@dataclass
class CleanResult:
    end_offset: int  # the new first dirty offset
    stats: CleanerStats
    min_pending_horizon: int | None  # earliest delete horizon of what was kept


def empty_batch(h: BatchHeader) -> bytes:
    """The header-only form of a batch whose records all went (Kafka's writeEmptyHeader)."""
    attrs = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(out, 0, h.base_offset, HEADER_SIZE - LOG_OVERHEAD,
                      h.partition_leader_epoch, 2, 0, attrs, h.last_offset_delta,
                      h.max_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
                      h.base_sequence, 0)
    _UINT32.pack_into(out, 17, compute_crc(out, 0, HEADER_SIZE))
    return bytes(out)


def read_batches(
    seg: LogSegment, start: int = 0
) -> Iterator[tuple[memoryview, int, BatchHeader, int]]:
    """(buffer, position in it, header, position in the file) for every batch of a
    non-active segment, read in chunks of ``READ_CHUNK``."""
    pos, size = start, seg.size
    while pos < size:
        data = memoryview(seg.pread(min(READ_CHUNK, size - pos), pos))
        got = 0
        for p, h in iter_batches(data):
            yield data, p, h, pos + p
            got = p + h.size
        if got == 0:  # one batch larger than the chunk
            h = BatchHeader.parse(data)
            if h.size <= len(data):
                raise KafkaError(Errors.CORRUPT_MESSAGE, f"{seg}: unreadable batch at {pos}")
            data = memoryview(seg.pread(h.size, pos))
            if len(data) < h.size:
                raise KafkaError(Errors.CORRUPT_MESSAGE, f"{seg}: batch at {pos} is torn")
            yield data, 0, h, pos
            got = h.size
        pos += got


class LogCleanerPass:
    """One cleaning of one log (see the module docstring)."""

    def __init__(
        self,
        plog: PartitionLog,
        *,
        now_ms: int,
        offset_map: OffsetMap,
        abort: threading.Event | None = None,
    ) -> None:
        self.log = plog
        self.cfg = plog.config
        self.now = now_ms
        self.map = offset_map
        self.abort = abort or threading.Event()
        self.stats = CleanerStats()
        self.min_horizon: int | None = None

    def _check(self) -> None:
        if self.abort.is_set() or self.log.closed:
            raise CleaningAborted(str(self.log.tp))

    # -- 1. the offset map -----------------------------------------------------

    def build_offset_map(self, first_dirty: int, first_uncleanable: int,
                         aborted: list[AbortedTxn]) -> int:
        """Map the dirty section; returns the end offset of what the map covers."""
        m = self.map
        m.clear()
        segs = [s for s in self.log.segments[:-1] if s.base_offset < first_uncleanable]
        txn = TxnCleaningState([t for t in aborted if t.last_offset >= first_dirty])
        mapped_one = False  # the first segment with dirty records is always mapped whole
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else first_uncleanable
            if nxt <= first_dirty:
                continue
            progressed = False
            for data, p, h, _ in read_batches(seg):
                if h.last_offset < first_dirty:
                    continue
                progressed = True
                self._check()
                self.stats.map_bytes_read += h.size
                if h.is_control:
                    txn.on_control_batch_read(h, control_type(data, p))
                elif not txn.on_batch_read(h):
                    for rec in iter_records(data, p):
                        key = rec.key
                        if key is None or rec.offset < first_dirty:
                            continue
                        if mapped_one and m.full and m.get(key) < 0:
                            return m.latest_offset + 1
                        m.put(key, rec.offset)
                        self.stats.map_records += 1
                m.update_latest_offset(h.last_offset)
            mapped_one = mapped_one or progressed
        m.update_latest_offset(first_uncleanable - 1)
        return first_uncleanable

    # -- 2. groups -------------------------------------------------------------

    def groups(self, end_offset: int) -> list[list[LogSegment]]:
        """Non-active segments holding offsets below ``end_offset``, grouped by size."""
        all_segs = self.log.segments
        segs = [s for s in all_segs[:-1] if s.base_offset < end_offset]
        next_base = {a.base_offset: b.base_offset for a, b in pairwise(all_segs)}
        cfg, out = self.cfg, []
        while segs:
            group = [segs.pop(0)]
            size = group[0].size
            oidx, tidx = group[0].offset_index.entries, group[0].time_index.entries
            while segs:
                s = segs[0]
                nxt = next_base[s.base_offset]
                if (size + s.size > cfg.segment_size
                        or (oidx + s.offset_index.entries) * 8 > cfg.segment_index_bytes
                        or (tidx + s.time_index.entries + 1) * 12 > cfg.segment_index_bytes
                        or nxt - 1 - group[0].base_offset > MAX_RELATIVE_OFFSET):
                    break
                group.append(segs.pop(0))
                size += s.size
                oidx += s.offset_index.entries
                tidx += s.time_index.entries
            out.append(group)
        return out

    # -- 3. cleaning a group ---------------------------------------------------

    def clean_group(self, group: list[LogSegment], txn: TxnCleaningState,
                    last: dict[int, LastBatch]) -> bool:
        """Rewrite ``group`` into one segment and swap it in; False if the swap was refused."""
        base = group[0].base_offset
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            (self.log.dir / (file_name(base, suffix) + CLEANED_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment(self.log.dir, base, index_interval_bytes=self.cfg.index_interval_bytes,
                             max_index_size=self.cfg.segment_index_bytes,
                             created_ms=self.now, file_suffix=CLEANED_SUFFIX)
        try:
            cleaned.make_active()
            out = _Output(cleaned)
            for k, seg in enumerate(group):
                end = seg.size if k == len(group) - 1 else -1
                for data, p, h, at in read_batches(seg):
                    self._check()
                    self.stats.bytes_read += h.size
                    out.add(self._filter(data, p, h, txn, last, at + h.size == end), h)
            out.flush()
            cleaned.on_become_inactive()
            cleaned.flush()
            mtime = os.stat(group[-1].log_path).st_mtime_ns
            os.utime(cleaned.log_path, ns=(mtime, mtime))
            self.stats.bytes_written += cleaned.size
            self.stats.groups += 1
            self._check()
            if self.log.replace_segments(group, cleaned):
                self.stats.swapped += 1
                return True
        except BaseException:
            if cleaned.file_suffix == CLEANED_SUFFIX:  # past the commit point recovery decides
                cleaned.delete_files()
            raise
        cleaned.delete_files()
        return False

    def _filter(self, data: memoryview, p: int, h: BatchHeader, txn: TxnCleaningState,
                last: dict[int, LastBatch], group_last: bool) -> bytes | memoryview | None:
        """What batch ``h`` at ``data[p:]`` becomes: bytes, or None when it goes."""
        keep_empty = group_last or is_last_batch_of_producer(h, last)
        horizon_passed = h.has_delete_horizon and h.base_timestamp <= self.now
        if h.is_control:
            can_discard = txn.on_control_batch_read(h, control_type(data, p))
            self.stats.records_read += h.records_count
            if can_discard and horizon_passed:
                return empty_batch(h) if keep_empty else None
            self.stats.records_kept += h.records_count
            if can_discard and h.records_count and not h.has_delete_horizon:
                horizon = self.now + self.cfg.delete_retention_ms
                self._note_horizon(horizon)
                return self._rebuild(h, list(iter_records(data, p)), horizon)
            if can_discard and h.has_delete_horizon and h.records_count:
                self._note_horizon(h.base_timestamp)
            return data[p : p + h.size]
        if txn.on_batch_read(h):
            self.stats.records_read += h.records_count
            return empty_batch(h) if keep_empty else None
        m = self.map
        latest = m.latest_offset
        retain_deletes = not horizon_passed
        kept, n, tombstone = [], 0, False
        for rec in iter_records(data, p):
            n += 1
            off = rec.offset
            if off > latest or (
                rec.key is not None and off >= m.get(rec.key)
                and (rec.value is not None or retain_deletes)
            ):
                kept.append(rec)
                if rec.value is None:
                    tombstone = True
        self.stats.records_read += n
        self.stats.records_kept += len(kept)
        if not kept:
            return empty_batch(h) if keep_empty else None
        horizon = h.base_timestamp if h.has_delete_horizon else None
        if tombstone and horizon is None:
            horizon = self.now + self.cfg.delete_retention_ms
        if tombstone:
            self._note_horizon(horizon)
        if len(kept) == n and (horizon is None or h.has_delete_horizon):
            return data[p : p + h.size]
        return self._rebuild(h, kept, horizon)

    def _note_horizon(self, horizon: int | None) -> None:
        if horizon is not None and (self.min_horizon is None or horizon < self.min_horizon):
            self.min_horizon = horizon

    def _rebuild(self, h: BatchHeader, records: list, horizon: int | None) -> bytes:
        self.stats.batches_rebuilt += 1
        b = BatchBuilder(
            h.base_offset, compression=h.compression, producer_id=h.producer_id,
            producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
            is_transactional=h.is_transactional, is_control=h.is_control,
            partition_leader_epoch=h.partition_leader_epoch, delete_horizon_ms=horizon,
            last_offset_delta=h.last_offset_delta,
        )
        for rec in records:
            b.append_record(rec)
        out = b.build()
        if h.is_log_append_time:
            buf = bytearray(out)
            patch_log_append_time(buf, 0, h.max_timestamp)
            out = bytes(buf)
        return out

    # -- all of it -------------------------------------------------------------

    def run(self, first_dirty: int, first_uncleanable: int) -> CleanResult:
        aborted, last = scan_producers(self.log.segments, self.now)
        end = self.build_offset_map(first_dirty, first_uncleanable, aborted)
        txn = TxnCleaningState(aborted)
        for group in self.groups(end):
            self.clean_group(group, txn, last)
        self.stats.end = time.monotonic()
        return CleanResult(end, self.stats, self.min_horizon)


class _Output:
    """Buffers the cleaned batches and appends them to the new segment in chunks."""

    def __init__(self, seg: LogSegment) -> None:
        self.seg = seg
        self.buf = bytearray()
        self.meta: list[tuple[int, int, int, int]] = []

    def add(self, batch: bytes | memoryview | None, h: BatchHeader) -> None:
        if batch is None:
            return
        nh = BatchHeader.parse(batch)
        self.meta.append((len(self.buf), h.last_offset, nh.max_timestamp, len(batch)))
        self.buf += batch
        if len(self.buf) >= WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.meta:
            self.seg.append(memoryview(self.buf), self.meta)
        self.buf = bytearray()
        self.meta = []
