"""One log segment: a ``.log`` file of whole RecordBatch v2 batches plus its indexes.

Files, named by the segment's base offset (the first offset it may hold)::

    00000000000000000000.log        batches, byte for byte as appended (only
                                    baseOffset / partitionLeaderEpoch / for
                                    LogAppendTime maxTimestamp+CRC rewritten)
    00000000000000000000.index      sparse offset index   (spool.storage.index)
    00000000000000000000.timeindex  sparse time index
    00000000000000000000.txnindex   aborted transactions (not written yet)

    suffixes in a file's life:  (none) live  ->  .deleted  ->  unlinked
                                .cleaned -> .swap -> live  (compaction: a segment
                                built with ``file_suffix=".cleaned"`` is moved
                                with ``change_file_suffix``; spool.storage.cleaner)

Offsets inside a segment are ``base .. base + 2**31 - 1`` (relative offsets
are int32) and positions fit an int32 too (``segment.bytes`` is an int).

Lifecycle: ``create`` (new active segment; or a ``spare`` empty ``.log``
prepared ahead, renamed into place) or ``open`` (existing files, indexes
opened lazily) -> ``append``* while active -> ``on_become_inactive`` (final
time-index entry, indexes sealed; their files written then or by
``write_indexes`` later) -> reads -> ``rename_to_deleted``
-> ``delete_files``. ``recover`` rescans the log (CRC and sane lengths),
truncates at the first invalid or torn batch, and rebuilds the indexes.

Descriptors: the active segment keeps its ``.log`` open. An inactive
segment opens it on use and stays in ``OPEN_FILES``, an LRU of at most
``DEFAULT_MAX_OPEN_FILES`` (256) inactive segments; the least recently used
is closed, once no reader holds it (``pinned``: every read, scan and write
holds the descriptor for its duration, so eviction never closes one in use
and a number is never reused under a reader). ``dup_fd`` gives a fetch its
own descriptor for sendfile. Indexes hold none (``spool.storage.index``).

Concurrency: appends, truncation and recovery are serialised by the owning
``PartitionLog``'s lock; reads (``read_header``, ``translate_offset``) run
without it and see a prefix of ``size`` bytes that is always whole batches.
Durability: ``append`` returns once the bytes are in the page cache
(survives kill -9); ``flush`` fsyncs log and indexes (survives power loss).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, compute_crc
from spool.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from spool.util.fileio import write_all

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
MAX_RELATIVE_OFFSET = 0x7FFFFFFF
_SCAN_CHUNK = 4 << 20
DEFAULT_MAX_OPEN_FILES = 256


class OpenFiles:
    """LRU of the inactive segments whose ``.log`` is open: at most ``max_open``; the
    least recently used is closed (after its last reader lets go) and reopened on use."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES) -> None:
        self.max_open = max_open
        self._lru: OrderedDict[int, LogSegment] = OrderedDict()
        self._lock = threading.Lock()

    def touch(self, seg: LogSegment) -> None:
        with self._lock:
            key = id(seg)
            if key in self._lru:
                self._lru.move_to_end(key)
                return
            self._lru[key] = seg
            evicted = []
            while len(self._lru) > self.max_open:
                evicted.append(self._lru.popitem(last=False)[1])
        for old in evicted:
            old._evict_file()

    def forget(self, seg: LogSegment) -> None:
        with self._lock:
            self._lru.pop(id(seg), None)

    def __len__(self) -> int:
        return len(self._lru)


OPEN_FILES = OpenFiles()


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class Scan:
    """Walk the batch headers of a file region; ``end`` is where the walk stopped.

    With ``verify`` each batch must also pass CRC-32C and sanity checks
    (magic 2, plausible length, known codec, offsets increasing and inside the
    segment); the walk stops at the first batch that does not, or that is torn.
    """

    def __init__(
        self, fd: int, segment_base: int, start: int, end: int, next_offset: int, verify: bool
    ) -> None:
        self.fd, self.base, self.end, self.limit = fd, segment_base, start, end
        self.next_offset = next_offset
        self.verify = verify
        self.stopped_early = False

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        buf, buf_start = b"", self.end
        pos = self.end
        while pos < self.limit:
            if pos + HEADER_SIZE > buf_start + len(buf):
                buf_start = pos
                want = HEADER_SIZE if not self.verify else _SCAN_CHUNK
                buf = os.pread(self.fd, min(want, self.limit - pos), pos)
            if pos + HEADER_SIZE > buf_start + len(buf):
                break  # torn header
            h = BatchHeader.parse(buf, pos - buf_start)
            if not self._sane(h, pos):
                break
            if self.verify:
                if pos + h.size > buf_start + len(buf):
                    buf_start = pos
                    buf = os.pread(self.fd, max(_SCAN_CHUNK, h.size), pos)
                if compute_crc(buf, pos - buf_start, h.size) != h.crc:
                    break
            yield pos, h
            pos += h.size
            self.end = pos
            self.next_offset = h.next_offset
        self.stopped_early = self.end < self.limit

    def _sane(self, h: BatchHeader, pos: int) -> bool:
        if h.magic != 2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return False
        if pos + h.size > self.limit or h.last_offset_delta < 0:
            return False
        return (
            h.base_offset >= self.next_offset
            and h.last_offset - self.base <= MAX_RELATIVE_OFFSET
            and (h.compression <= 4 or not self.verify)
        )


class LogSegment:
    """A ``.log`` file and its indexes; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        file_suffix: str = "",
        spare: Path | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.file_suffix = file_suffix  # "" live, ".cleaned"/".swap" while the cleaner swaps
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.created_ms = created_ms
        self.log_path = self.dir / (file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self._fd: int | None = None  # open while active, pinned, or in OPEN_FILES
        self._pins = 0
        self._close_pending = False
        self._fd_lock = threading.Lock()
        self.active = False
        if spare is not None:  # an empty file prepared ahead: rename and open, no creation
            os.rename(spare, self.log_path)
            self._fd, self.size = os.open(self.log_path, os.O_RDWR), 0
            OPEN_FILES.touch(self)
        else:
            try:
                self.size = os.stat(self.log_path).st_size
            except FileNotFoundError:
                self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
                self.size = 0
                OPEN_FILES.touch(self)
        self.next_offset: int | None = base_offset if self.size == 0 else None
        self.max_timestamp = -1  # largest batch maxTimestamp (-1: none or not loaded)
        self.offset_of_max_timestamp = base_offset
        self._max_ts_loaded = self.size == 0
        self._first_batch_ts: int | None = None
        self.bytes_since_last_index_entry = 0
        self.deleted = False
        self.tail_damaged = False
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._index_lock = threading.RLock()

    # -- the .log descriptor (lazy for inactive segments) ---------------------------

    def _pin(self) -> int:
        """The open descriptor of the ``.log``, held until ``_unpin`` (eviction waits)."""
        with self._fd_lock:
            fd = self._fd
            if fd is None:
                fd = self._fd = self._open_fd()
            self._pins += 1
            self._close_pending = False
        if not self.active:
            OPEN_FILES.touch(self)
        return fd

    def _open_fd(self) -> int:
        try:
            return os.open(self.log_path, os.O_RDWR)
        except FileNotFoundError:  # renamed (.deleted, .swap) while we looked: once more
            return os.open(self.log_path, os.O_RDWR)

    def _unpin(self) -> None:
        with self._fd_lock:
            self._pins -= 1
            if self._pins == 0 and self._close_pending:
                self._close_fd_locked()

    @contextmanager
    def pinned(self) -> Iterator[int]:
        fd = self._pin()
        try:
            yield fd
        finally:
            self._unpin()

    def _close_fd_locked(self) -> None:
        fd, self._fd, self._close_pending = self._fd, None, False
        if fd is not None:
            os.close(fd)

    def _evict_file(self) -> None:
        """OPEN_FILES let this segment go: close now, or when the last reader unpins."""
        with self._fd_lock:
            if not self.active:
                self._close_when_unpinned_locked()

    def close_file(self) -> None:
        """Close the ``.log`` descriptor (once unpinned); the next use reopens it."""
        OPEN_FILES.forget(self)
        with self._fd_lock:
            self._close_when_unpinned_locked()

    def _close_when_unpinned_locked(self) -> None:
        if self._pins:
            self._close_pending = True
        else:
            self._close_fd_locked()

    @property
    def file_open(self) -> bool:
        return self._fd is not None

    def pread(self, size: int, pos: int) -> bytes:
        with self.pinned() as fd:
            return os.pread(fd, size, pos)

    def dup_fd(self) -> int:
        """A descriptor of the ``.log`` of the caller's own (for sendfile; close it)."""
        with self.pinned() as fd:
            return os.dup(fd)

    def fileno(self) -> int:
        """The current descriptor (tests and tools: it may be closed by eviction later)."""
        with self.pinned() as fd:
            return fd

    # -- indexes (lazy) ------------------------------------------------------------

    def _index_path(self, suffix: str) -> Path:
        return self.dir / (file_name(self.base_offset, suffix) + self.file_suffix)

    def _load_indexes(self) -> None:
        with self._index_lock:
            if self._offset_index is not None:
                return
            oi = OffsetIndex(self._index_path(INDEX_SUFFIX), self.base_offset, self.max_index_size)
            ti = TimeIndex(self._index_path(TIME_INDEX_SUFFIX), self.base_offset, self.max_index_size)
            try:
                oi.sanity_check(self.size)
                ti.sanity_check(self.size)
            except CorruptIndexError:
                self._offset_index, self._time_index = oi, ti
                self._rebuild_indexes(verify=False)
                self._finish_rebuild()
                return
            self._offset_index, self._time_index = oi, ti

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        assert self._time_index is not None
        return self._time_index

    def indexes_missing(self) -> bool:
        return not (
            self._index_path(INDEX_SUFFIX).exists() and self._index_path(TIME_INDEX_SUFFIX).exists()
        )

    def _rebuild_indexes(self, *, verify: bool) -> Scan:
        """Reset both indexes and re-add entries from a scan of the log; returns the scan."""
        oi, ti = self._offset_index, self._time_index
        assert oi is not None and ti is not None
        oi.make_writable()
        ti.make_writable()
        oi.reset()
        ti.reset()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        with self.pinned() as fd:
            scan = Scan(fd, self.base_offset, 0, self.size, self.base_offset, verify)
            for pos, h in scan:
                self._index_batch(pos, h.last_offset, h.max_timestamp, h.size)
        self._max_ts_loaded = True
        return scan

    def _finish_rebuild(self) -> None:
        if not self.active:
            assert self._time_index is not None and self._offset_index is not None
            if self.max_timestamp >= 0:
                self._time_index.maybe_append(
                    self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
                )
            self._offset_index.trim()
            self._time_index.trim()

    def _index_batch(self, pos: int, last_offset: int, max_ts: int, size: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            oi, ti = self.offset_index, self.time_index
            if oi.entries < oi.max_entries and ti.entries < ti.max_entries - 1:
                oi.append(last_offset, pos)
                ti.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    # -- lifecycle -----------------------------------------------------------------

    def make_active(self) -> None:
        """Make the indexes writable (this segment takes appends)."""
        self.active = True
        OPEN_FILES.forget(self)
        self._pin()
        self._unpin()
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self._ensure_tail_loaded()

    def on_become_inactive(self, *, write_now: bool = True) -> None:
        """Add the final time-index entry and seal the indexes (on roll or close); their
        files are written now, or by ``write_indexes`` later (a roll defers it)."""
        self._ensure_tail_loaded()
        self.active = False
        if self._fd is not None:
            OPEN_FILES.touch(self)
        ti = self.time_index
        if self.max_timestamp >= 0 and ti.writable:
            ti.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.seal()
        ti.seal()
        if write_now:
            self.write_indexes()

    def write_indexes(self) -> None:
        """Write the sealed indexes' files (no-op when they are written already)."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.write_out()

    def _open_indexes_unchecked(self) -> None:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(
                self._index_path(INDEX_SUFFIX), self.base_offset, self.max_index_size
            )
            self._time_index = TimeIndex(
                self._index_path(TIME_INDEX_SUFFIX), self.base_offset, self.max_index_size
            )

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from a header walk of the log (no truncation)."""
        with self._index_lock:
            self._open_indexes_unchecked()
            scan = self._rebuild_indexes(verify=False)
            self._finish_rebuild()
        self._tail_scanned(scan)

    def next_offset_or_base(self) -> int:
        self._ensure_tail_loaded()
        return self.base_offset if self.next_offset is None else self.next_offset

    def recover(self) -> int:
        """Rescan with CRCs, truncate at the first bad batch, rebuild indexes; bytes dropped."""
        with self._index_lock:
            self._open_indexes_unchecked()
            scan = self._rebuild_indexes(verify=True)
        dropped = self.size - scan.end
        if dropped:
            with self.pinned() as fd:
                os.ftruncate(fd, scan.end)
            self.size = scan.end
        self.next_offset = scan.next_offset
        return dropped

    def _ensure_tail_loaded(self) -> None:
        """Learn next_offset and max_timestamp by scanning from the last index entry.

        An index that points at no batch is rebuilt; a log whose tail does not
        parse sets ``tail_damaged`` (the loader then runs ``recover``).
        """
        if self.next_offset is not None and self._max_ts_loaded:
            return
        last_off, pos = self.offset_index.last_entry
        start_offset = self.base_offset
        if pos > 0:
            h = self.read_header(pos)
            if h is None or h.last_offset != last_off:
                with self._index_lock:
                    scan = self._rebuild_indexes(verify=False)
                    self._finish_rebuild()
                self._tail_scanned(scan)
                return
            start_offset = h.base_offset
        ts, ts_off = self.time_index.last_entry
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, ts_off
        with self.pinned() as fd:
            scan = Scan(fd, self.base_offset, pos, self.size, start_offset, verify=False)
            for _, h in scan:
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        self._tail_scanned(scan)

    def _tail_scanned(self, scan: Scan) -> None:
        self.tail_damaged = scan.stopped_early
        self.next_offset = scan.next_offset
        self._max_ts_loaded = True

    def load_tail(self) -> bool:
        """For a cleanly shut down segment: find next_offset; False if its tail is damaged."""
        self._ensure_tail_loaded()
        return not self.tail_damaged

    # -- append --------------------------------------------------------------------

    def append(self, data: memoryview, batches: list[tuple[int, int, int, int]]) -> int:
        """Write ``data`` (whole batches) at the end; ``batches`` = (rel pos, last offset,
        max timestamp, size) for each. Returns the position written at."""
        position = self.size
        fd = self._pin()  # (not ``pinned()``: no generator on the hot path)
        try:
            if os.pwrite(fd, data, position) != len(data):
                write_all(fd, data, position)  # a short write: the rest (or its OSError)
        except OSError as e:
            os.ftruncate(fd, position)
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"append failed: {e}") from e
        finally:
            self._unpin()
        for rel, last_offset, max_ts, size in batches:
            self._index_batch(position + rel, last_offset, max_ts, size)
        if self._first_batch_ts is None and position == 0 and batches:
            self._first_batch_ts = batches[0][2]
        self.size = position + len(data)
        self.next_offset = batches[-1][1] + 1
        return position

    def first_batch_timestamp(self) -> int | None:
        """maxTimestamp of the first batch (what ``segment.ms`` rolls on), None if empty."""
        if self._first_batch_ts is None and self.size:
            h = self.read_header(0)
            self._first_batch_ts = h.max_timestamp if h else None
        return self._first_batch_ts

    def can_hold(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    def indexes_full(self) -> bool:
        oi, ti = self._offset_index, self._time_index
        if oi is None or ti is None:
            oi, ti = self.offset_index, self.time_index
        return oi.entries >= oi.max_entries or ti.entries >= ti.max_entries - 1

    # -- reads ---------------------------------------------------------------------

    def read_header(self, pos: int) -> BatchHeader | None:
        """The header of the batch at ``pos``; None at/after the end or if implausible."""
        if pos + HEADER_SIZE > self.size:
            return None
        h = BatchHeader.parse(self.pread(HEADER_SIZE, pos))
        if h.magic != 2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return None
        return h

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Walk (position, header) from ``start`` (a batch boundary) to ``end``."""
        with self.pinned() as fd:
            yield from Scan(fd, self.base_offset, start, self.size if end is None else end,
                            self.base_offset, verify=False)

    def translate_offset(self, offset: int, start: int = 0) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch at/after ``start`` whose last offset >= offset."""
        limit = self.size
        pos = max(self._checked(*self.offset_index.lookup(offset)), start)
        with self.pinned() as fd:
            for p, h in Scan(fd, self.base_offset, pos, limit, self.base_offset, verify=False):
                if h.last_offset >= offset:
                    return p, h
        return None

    def _checked(self, indexed_offset: int, pos: int) -> int:
        """``pos`` if the batch there ends at the indexed offset, else 0 (damaged index)."""
        if pos > 0:
            h = self.read_header(pos)
            if h is None or h.last_offset != indexed_offset:
                return 0
        return pos

    def boundary_at_or_before(self, start: int, limit: int) -> tuple[int, int]:
        """Largest batch boundary <= ``limit`` reachable from ``start``, and the next batch's
        size there (0 at the end). Uses the index to skip most of the walk."""
        pos = max(self._checked(*self.offset_index.lookup_position(limit)), start)
        for p, h in self.batches(pos):
            if p + h.size > limit:
                return p, h.size
        return min(limit, self.size), 0

    def largest_timestamp(self) -> int:
        """The newest batch timestamp in the segment (file mtime when there is none)."""
        self._ensure_tail_loaded()
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # -- truncation, flush, deletion -----------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - pos
        with self.pinned() as fd:
            os.ftruncate(fd, pos)
        self.size = pos
        self.bytes_since_last_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.next_offset, self._max_ts_loaded = None, False
        if pos == 0:
            self._first_batch_ts = None
        self._ensure_tail_loaded()
        return removed

    def flush(self) -> None:
        with self.pinned() as fd:
            os.fsync(fd)
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()

    def close(self) -> None:
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()
        self.close_file()

    def rename_to_deleted(self) -> None:
        """First step of deletion: every file gets ``.deleted`` (open fds keep working)."""
        self.deleted = True
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            path = self._index_path(suffix)
            if path.exists():
                os.rename(path, path.with_name(path.name + DELETED_SUFFIX))
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.path = idx.path.with_name(idx.path.name + DELETED_SUFFIX)

    def move_dir(self, directory: Path) -> None:
        """The partition directory was renamed to ``directory`` (a topic deletion): every
        path follows it, so in-flight reads and the final close find the files."""
        self.dir = Path(directory)
        self.log_path = self.dir / self.log_path.name
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.path = self.dir / idx.path.name

    def change_file_suffix(self, new_suffix: str) -> None:
        """Rename every file from ``<name><file_suffix>`` to ``<name><new_suffix>``
        (indexes first, the .log last; open fds and maps keep working)."""
        for suffix in (*INDEX_SUFFIXES, LOG_SUFFIX):
            path = self._index_path(suffix)
            if path.exists():
                os.rename(path, self.dir / (file_name(self.base_offset, suffix) + new_suffix))
        self.file_suffix = new_suffix
        self.log_path = self._index_path(LOG_SUFFIX)
        for idx, suffix in ((self._offset_index, INDEX_SUFFIX), (self._time_index, TIME_INDEX_SUFFIX)):
            if idx is not None:
                idx.path = self._index_path(suffix)

    def delete_files(self) -> None:
        """Close and unlink (after ``rename_to_deleted``, or directly when unused)."""
        self.close()
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            name = file_name(self.base_offset, suffix) + self.file_suffix
            for path in (self.dir / name, self.dir / (name + DELETED_SUFFIX)):
                if self.deleted == path.name.endswith(DELETED_SUFFIX):
                    path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
