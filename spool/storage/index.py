"""Sparse, fixed-width, memory-mapped segment indexes (Kafka's ``.index`` / ``.timeindex``).

Both map something to a batch of the segment whose base offset is
``base`` (entries hold offsets relative to it, as int32)::

    .index      8-byte entries   relative_offset int32 | position int32
                  relative_offset = lastOffset of the batch - base,
                  position = byte position of that batch in the .log
    .timeindex 12-byte entries   timestamp int64 | relative_offset int32
                  the largest batch maxTimestamp seen so far and the
                  lastOffset of the batch that carried it

One entry is added per ``index.interval.bytes`` of appended batches, so both
are sparse: a lookup is a *floor* search (binary search on the mmap) and the
caller scans batch headers forward from the position it returns. Keys are
strictly increasing (offsets, positions, timestamps) so the first batch of a
segment is never indexed (position 0 is implicit).

Lifecycle: an index is held in memory, not mapped, and keeps no file
descriptor open (an mmap in Python dups its descriptor, and a mapped sparse
file turns a full disk into SIGBUS on a page fault). The active segment's
index (``make_writable``) is a ``bytearray`` of its entries, capped at
``segment.index.bytes``; a missing file is an empty index. When the segment
rolls or closes the index is ``seal``ed (read-only, in memory) and
``write_out`` makes the file exactly its entries -- on a roll that runs as
deferred file work (``spool.storage.file_work``), off the event loop.
``flush`` writes and fsyncs. An inactive segment's index is read from its
file on first use and kept in ``INDEX_CACHE``, an LRU bounded by bytes
(``DEFAULT_CACHE_BYTES``; an index not yet written is never evicted); an
evicted index is read again when next needed. ``TimeIndex.is_full`` keeps
one slot free for the entry written when the segment becomes inactive.

Durability: the entries are in the file after ``write_out`` or ``flush``
only; after a crash the loader rebuilds the indexes of every segment from
the recovery point on, the active one included. Indexes are caches: a
missing one, or one that fails ``sanity_check``, is rebuilt from the log,
and a failed index write (a full disk) is logged and never fails an append:
the file keeps a valid prefix of the entries or is rebuilt.
Not thread-safe on their own; the owning ``PartitionLog`` serialises
mutations; lookups see only fully written entries (``entries`` grows after
the bytes are in place), a sealed buffer is never mutated, and
``write_out`` may run on another thread (it takes the index's file lock).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import OrderedDict
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 64 << 20


class CorruptIndexError(Exception):
    """An index file failed its sanity check; rebuild it from the log."""


class IndexCache:
    """LRU of the loaded read-only index buffers, bounded by their total bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lru: OrderedDict[int, _Index] = OrderedDict()
        self._lock = threading.Lock()

    def touch(self, idx: _Index, size: int) -> None:
        """``idx`` was used (or loaded with ``size`` bytes): newest; evict beyond the bound."""
        with self._lock:
            key = id(idx)
            if key in self._lru:
                self._lru.move_to_end(key)
                return
            self._lru[key] = idx
            self.bytes += size
            while self.bytes > self.max_bytes and len(self._lru) > 1:
                _, old = self._lru.popitem(last=False)
                self.bytes -= old._drop_buffer()

    def forget(self, idx: _Index) -> None:
        with self._lock:
            if self._lru.pop(id(idx), None) is not None:
                self.bytes -= idx._drop_buffer()

    def __len__(self) -> int:
        return len(self._lru)


INDEX_CACHE = IndexCache()


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.entries = 0
        self.writable = False
        self._last: tuple[int, int] | None = None
        self._buf: bytes | bytearray | None = None  # None: not loaded (read-only) or evicted
        self._persisted = 0  # entries known to be in the file
        self._version = 0  # bumped by every change of the entries
        self._written = 0  # the version the file holds
        self._synced = 0  # the version last fsynced
        self._closed = False
        self._max_entries = 0
        self._file_lock = threading.Lock()
        self._open()

    # -- file handling -----------------------------------------------------------

    def _open(self) -> None:
        """Read-only: learn the entry count from the file size; the bytes load lazily.
        A missing file is an empty index (created when first written)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        self.entries = size // self.ENTRY.size
        self._last = None
        self._max_entries = self.entries
        self._buf = None

    def _read_file(self) -> bytes:
        n = self.entries * self.ENTRY.size
        if not n:
            return b""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, n, 0)
        finally:
            os.close(fd)
        if len(data) < n:  # the file shrank under us: keep the whole entries that are left
            self.entries = len(data) // self.ENTRY.size
            data = data[: self.entries * self.ENTRY.size]
        return data

    def _buffer(self) -> bytes | bytearray:
        """The entries' bytes, loading them (and registering in the cache) if needed."""
        buf = self._buf
        if buf is None:
            buf = self._buf = self._read_file()
            if buf:
                INDEX_CACHE.touch(self, len(buf))
        return buf

    @property
    def dirty(self) -> bool:
        """The file does not hold the entries yet (``write_out`` will)."""
        return self._written != self._version

    def _drop_buffer(self) -> int:
        """Cache eviction: forget the loaded bytes (read-only, written); returns their size."""
        buf = self._buf
        if buf is None or self.writable or self.dirty:
            return 0 if buf is None else len(buf)
        self._buf = None
        return len(buf)

    def make_writable(self) -> None:
        """Hold the entries in a growable buffer (the active segment)."""
        if self.writable:
            return
        data = bytes(self._buffer())
        INDEX_CACHE.forget(self)
        n = self.ENTRY.size
        self._buf = bytearray(data)
        self._persisted = self.entries
        self._max_entries = max(self.max_index_size // n, self.entries + 1)
        self.writable = True
        self._version += 1  # written out (exactly its entries) when sealed

    def _write_out(self, *, sync: bool) -> None:
        """Make the file exactly the entries (write the new ones, cut the rest); fsync too
        with ``sync``. A failure is logged: an index is a cache the loader checks and
        rebuilds."""
        with self._file_lock:
            version, entries = self._version, self.entries
            if self._closed or (self._written == version and (not sync or self._synced == version)):
                return
            n = self.ENTRY.size
            persisted = min(self._persisted, entries)
            buf = self._buf
            if buf is None:
                return
            tail = bytes(buf[persisted * n : entries * n])
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    if tail:
                        os.pwrite(fd, tail, persisted * n)
                    os.ftruncate(fd, entries * n)
                    if sync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                log.warning("%s: index write failed (%s); it will be rebuilt if damaged",
                            self.path, e)
                return
            self._persisted = entries
            self._written = version
            if sync:
                self._synced = version

    def seal(self) -> None:
        """Read-only from now on (the segment became inactive); the file is written by
        ``write_out`` (which the caller may run on another thread)."""
        if not self.writable:
            return
        data = bytes(self._buf or b"")
        self._max_entries = self.entries
        self._buf = data
        self.writable = False
        self._version += 1
        if data:
            INDEX_CACHE.touch(self, len(data))

    def write_out(self) -> None:
        self._write_out(sync=False)

    def trim(self, *, reopen: bool = True) -> None:
        """``seal`` and ``write_out`` now."""
        self.seal()
        self.write_out()
        if not reopen:
            INDEX_CACHE.forget(self)
            self._buf = None

    def flush(self) -> None:
        self._write_out(sync=True)

    def close(self) -> None:
        self.seal()
        self.write_out()
        self._closed = True
        INDEX_CACHE.forget(self)
        self._buf = None

    def discard(self) -> None:
        """Drop the in-memory entries without writing them (what a kill -9 leaves; tests)."""
        self._closed = True
        INDEX_CACHE.forget(self)
        self._buf = None
        self.writable = False

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = Path(path)

    # -- entries -----------------------------------------------------------------

    @property
    def max_entries(self) -> int:
        return self._max_entries if self.writable else self.entries

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def entry(self, i: int) -> tuple[int, int]:
        return self.ENTRY.unpack_from(self._buffer(), i * self.ENTRY.size)

    def _write(self, a: int, b: int) -> None:
        if not self.writable:
            raise ValueError(f"index {self.path.name} is not writable")
        if self.entries >= self._max_entries:
            raise ValueError(f"index {self.path.name} is full")
        buf = self._buf
        assert isinstance(buf, bytearray)
        buf += self.ENTRY.pack(a, b)
        self.entries += 1
        self._version += 1
        self._last = (a, b)

    def _last_raw(self) -> tuple[int, int] | None:
        """The last entry as stored (cached after a write)."""
        if not self.entries:
            return None
        if self._last is None:
            self._last = self.entry(self.entries - 1)
        return self._last

    def _floor(self, key_index: int, target: int, strict: bool = False) -> int:
        """Index of the last entry whose field ``key_index`` is <= target (< if strict); -1 if none."""
        lo, hi = 0, self.entries - 1
        if hi < 0:
            return -1
        buf = self._buffer()
        if not self.writable:
            INDEX_CACHE.touch(self, len(buf))
        unpack, n = self.ENTRY.unpack_from, self.ENTRY.size
        found = -1
        while lo <= hi:
            mid = (lo + hi) >> 1
            k = unpack(buf, mid * n)[key_index]
            if k < target or (k == target and not strict):
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def _truncate_entries(self, n: int) -> None:
        if n < self.entries:
            if not self.writable:
                self.make_writable()
            buf = self._buf
            assert isinstance(buf, bytearray)
            self.entries = n
            self._last = None
            del buf[n * self.ENTRY.size :]
            self._persisted = min(self._persisted, n)
            self._version += 1

    def reset(self) -> None:
        """Drop every entry (before a rebuild): an empty, writable index (the file is cut
        when next written)."""
        INDEX_CACHE.forget(self)
        self.entries = 0
        self._last = None
        self._buf = b""
        self.writable = False
        self._persisted = 0
        self.make_writable()

    def all_entries(self) -> list[tuple[int, int]]:
        if not self.entries:
            return []
        buf = self._buffer()
        return list(self.ENTRY.iter_unpack(bytes(buf[: self.entries * self.ENTRY.size])))
class OffsetIndex(_Index):
    """``.index``: offset -> byte position of the batch holding it (floor lookup)."""

    ENTRY = struct.Struct(">ii")

    def lookup(self, offset: int) -> tuple[int, int]:
        """(absolute offset, position) of the last entry with offset <= ``offset``, else (base, 0)."""
        i = self._floor(0, offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(absolute offset, position) of the last entry at or before byte ``position``."""
        i = self._floor(1, position)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self.entries:
            return self.base_offset, 0
        rel, pos = self.entry(self.entries - 1)
        return self.base_offset + rel, pos

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")
        last = self._last_raw()
        if last is not None:
            last_rel, last_pos = last
            if rel <= last_rel or position <= last_pos:
                raise ValueError(f"index entry ({offset}, {position}) is not increasing")
        self._write(rel, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for ``offset`` and above."""
        self._truncate_entries(self._floor(0, offset - self.base_offset, strict=True) + 1)

    def sanity_check(self, log_size: int) -> None:
        prev_rel, prev_pos = -1, 0
        for rel, pos in self.all_entries():
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size:
                raise CorruptIndexError(f"{self.path.name}: bad entry ({rel}, {pos})")
            prev_rel, prev_pos = rel, pos


class TimeIndex(_Index):
    """``.timeindex``: timestamp -> offset; entries strictly increase in timestamp."""

    ENTRY = struct.Struct(">qi")

    @property
    def is_full(self) -> bool:
        # One slot stays free for the entry appended when the segment becomes inactive.
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, else (-1, base)."""
        if not self.entries:
            return -1, self.base_offset
        ts, rel = self.entry(self.entries - 1)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int, *, strict: bool = False) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= (< if strict) ``timestamp``."""
        i = self._floor(0, timestamp, strict)
        if i < 0:
            return -1, self.base_offset
        ts, rel = self.entry(i)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append when ``timestamp`` exceeds the last entry's; returns whether it did."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"index {self.path.name} is full")
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")
        last = self._last_raw()
        if last is not None:
            last_ts, last_rel = last
            if timestamp <= last_ts:
                return False
            if rel < last_rel:
                raise ValueError(f"time index offset {offset} goes backwards")
        self._write(timestamp, rel)
        return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``offset`` or above."""
        rel = offset - self.base_offset
        n = self.entries
        while n and self.entry(n - 1)[1] >= rel:
            n -= 1
        self._truncate_entries(n)

    def sanity_check(self, log_size: int) -> None:
        prev_ts, prev_rel = None, 0
        for ts, rel in self.all_entries():
            if rel < prev_rel or (prev_ts is not None and ts <= prev_ts):
                raise CorruptIndexError(f"{self.path.name}: bad entry ({ts}, {rel})")
            prev_ts, prev_rel = ts, rel
