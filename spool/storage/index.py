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

Lifecycle: the active segment's indexes are mapped writable and
preallocated to ``segment.index.bytes`` (a sparse file); when the segment
rolls or closes they are trimmed to their entries. Inactive segments' indexes
are opened read-only and lazily on first use. ``TimeIndex.is_full`` keeps one
slot free for the entry written when the segment becomes inactive.

Durability: entries go to the shared mapping (the page cache), so they
survive a process crash; ``flush`` msyncs them. Indexes are caches: a
missing one, or one that fails ``sanity_check``, is rebuilt from the log.
Not thread-safe on their own; the owning ``PartitionLog`` serialises
mutations, and lookups only see fully written entries.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path


class CorruptIndexError(Exception):
    """An index file failed its sanity check; rebuild it from the log."""


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.entries = 0
        self.writable = False
        self._last: tuple[int, int] | None = None
        self._fd: int | None = None
        self._mm: mmap.mmap | None = None
        self._max_entries = 0
        self._open()

    # -- file handling -----------------------------------------------------------

    def _open(self) -> None:
        if not self.path.exists():
            self.path.touch()
        size = self.path.stat().st_size
        self.entries = size // self.ENTRY.size
        self._last = None
        self._max_entries = self.entries
        if size:
            self._fd = os.open(self.path, os.O_RDONLY)
            self._mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def make_writable(self) -> None:
        """Map read-write and preallocate to ``max_index_size`` (the active segment)."""
        if self.writable:
            return
        self._unmap()
        n = self.ENTRY.size
        length = max(self.max_index_size // n * n, (self.entries + 1) * n)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, length)
        self._mm = mmap.mmap(self._fd, length, access=mmap.ACCESS_WRITE)
        self._max_entries = length // n
        self.writable = True

    def trim(self, *, reopen: bool = True) -> None:
        """Shrink the file to its entries and remap read-only (segment became inactive)."""
        if not self.writable:
            return
        assert self._mm is not None and self._fd is not None
        self._mm.flush()
        self._mm.close()
        self._mm = None
        os.ftruncate(self._fd, self.entries * self.ENTRY.size)
        os.close(self._fd)
        self._fd = None
        self.writable = False
        if reopen:
            self._open()

    def flush(self) -> None:
        if self.writable and self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        self.trim(reopen=False)
        self._unmap()

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
        assert self._mm is not None
        return self.ENTRY.unpack_from(self._mm, i * self.ENTRY.size)

    def _write(self, a: int, b: int) -> None:
        if not self.writable:
            raise ValueError(f"index {self.path.name} is not writable")
        if self.entries >= self._max_entries:
            raise ValueError(f"index {self.path.name} is full")
        assert self._mm is not None
        self.ENTRY.pack_into(self._mm, self.entries * self.ENTRY.size, a, b)
        self.entries += 1
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
        found = -1
        while lo <= hi:
            mid = (lo + hi) >> 1
            k = self.entry(mid)[key_index]
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
            assert self._mm is not None
            start = n * self.ENTRY.size
            self._mm[start : self.entries * self.ENTRY.size] = bytes(
                (self.entries - n) * self.ENTRY.size
            )
            self.entries = n
            self._last = None

    def reset(self) -> None:
        """Drop every entry (before a rebuild): truncate the file and map it afresh."""
        self._unmap()
        self.writable = False
        os.truncate(self.path, 0)
        self.entries = 0
        self._last = None
        self.make_writable()

    def all_entries(self) -> list[tuple[int, int]]:
        if not self.entries:
            return []
        assert self._mm is not None
        return list(self.ENTRY.iter_unpack(self._mm[: self.entries * self.ENTRY.size]))


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
