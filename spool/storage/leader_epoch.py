"""The leader epoch cache of one partition: which leader epoch wrote which offsets.

Kafka's ``LeaderEpochFileCache``. An entry ``(epoch, start_offset)`` says the
records from ``start_offset`` up to the next entry's start offset (or the log
end) were written by the leader of ``epoch``. Entries are ordered by epoch
and by start offset alike (both strictly increasing). Followers use it to
find where their log diverges from a new leader's (OffsetForLeaderEpoch,
KIP-101/KIP-279): the leader answers ``end_offset_for(epoch)``, the follower
truncates there.

File ``<partition dir>/leader-epoch-checkpoint``, Kafka's text format::

    0          version
    2          number of entries
    0 0        epoch start_offset
    3 1042

written with ``spool.util.fileio.atomic_write`` (tmp, fsync, rename, fsync
dir) whenever the entries change, so a crash leaves the old or the new file.
``assign(..., durable=False)`` (an append's new epoch, on the event loop) writes and
renames at once but leaves both fsyncs to the file-work thread
(``spool.storage.file_work``): a killed process loses nothing (the page cache keeps
the new file). Power lost before the job runs may leave the old file: Kafka's
``assign`` fsyncs at once instead (KAFKA-16541), on one of its many request threads,
where Spool's one event loop would stall every connection. What keeps the entries
complete here: the log's ``flush`` calls ``sync_if_unsynced`` before it moves the
recovery point, and an unclean load rescans the batches above the recovery point for
epochs the file lacks (``PartitionLog._load_leader_epochs``, as Kafka's
``LogSegment.recover``). Truncations and ``clear`` stay synchronous.
A file that is missing or does not parse loads as ``None`` from
``read_entries``: ``PartitionLog`` then rebuilds the entries from its batch
headers (each batch carries the partitionLeaderEpoch that wrote it).

Semantics (Kafka's):

* ``assign(epoch, start)`` changes nothing when ``epoch`` is the latest
  epoch and ``start`` is not below its start offset; otherwise every entry
  whose epoch >= ``epoch`` or whose start offset >= ``start`` is removed from
  the end, and the new entry added.
* ``truncate_from_end(end)`` removes the entries starting at or after ``end``
  (the log was truncated to ``end``).
* ``truncate_from_start(start)`` removes the entries starting at or before
  ``start`` and puts the last of them back starting at ``start`` (the log
  start moved to ``start``).
* ``end_offset_for(epoch, leo)``: ``(-1, -1)`` for an undefined epoch (-1)
  or one above every known epoch; ``(epoch, leo)`` for the latest epoch;
  otherwise the largest known epoch <= ``epoch`` (or ``epoch`` itself when
  none is known below it) and the start offset of the first epoch above it.

Concurrency: mutations take one lock; readers take none (the entries are a
tuple swapped whole). ``PartitionLog`` mutates under its own lock too.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from pathlib import Path
from typing import NamedTuple

from spool.storage import file_work
from spool.util.fileio import atomic_write, fsync_dir

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def read_entries(path: Path) -> list[EpochEntry] | None:
    """Parse a checkpoint; None when it is missing or malformed (with a warning)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        lines = text.splitlines()
        if int(lines[0]) != VERSION:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        entries = []
        for line in lines[2 : 2 + count]:
            epoch, start = line.split()
            entries.append(EpochEntry(int(epoch), int(start)))
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, header says {count}")
        for a, b in zip(entries, entries[1:], strict=False):
            if not (a.epoch < b.epoch and a.start_offset < b.start_offset):
                raise ValueError(f"entries out of order: {a} then {b}")
        if entries and (entries[0].epoch < 0 or entries[0].start_offset < 0):
            raise ValueError(f"negative entry {entries[0]}")
        return entries
    except (ValueError, IndexError) as e:
        log.warning("ignoring malformed leader epoch checkpoint %s: %s", path, e)
        return None


def format_entries(entries: tuple[EpochEntry, ...] | list[EpochEntry]) -> bytes:
    lines = [str(VERSION), str(len(entries))] + [f"{e} {s}" for e, s in entries]
    return ("\n".join(lines) + "\n").encode()


class LeaderEpochCache:
    """The entries of one partition and their checkpoint file (see the module docstring).

    ``LeaderEpochCache(dir, entries)`` starts from ``entries`` (what
    ``read_entries`` gave, or a rebuild) without writing; ``write()`` writes
    them. Every later change writes the file before returning. A failed write
    raises OSError with the change made in memory (the next change rewrites
    the whole file).
    """

    def __init__(self, directory: Path, entries: list[EpochEntry] | tuple[EpochEntry, ...] = ()):
        self.dir = Path(directory)
        self._lock = threading.Lock()
        self._entries: tuple[EpochEntry, ...] = tuple(entries)
        self.latest: int = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH
        self._unsynced = False  # a durable=False write still waits for its fsyncs

    @property
    def path(self) -> Path:
        return self.dir / LEADER_EPOCH_CHECKPOINT

    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    def latest_epoch(self) -> int:
        """The latest epoch, -1 when there is none."""
        return self.latest

    def latest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    def earliest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0] if entries else None

    def epoch_for(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (-1 when it lies before every entry)."""
        entries = self._entries
        i = bisect.bisect_right(entries, offset, key=lambda e: e.start_offset)
        return entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers it (module docstring)."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(entries, requested_epoch, key=lambda e: e.epoch)
        if i == len(entries):  # above every known epoch
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = entries[i]
        if i == 0:  # below every known epoch: the data is gone, start from the first
            return requested_epoch, higher.start_offset
        return entries[i - 1].epoch, higher.start_offset

    # -- mutations ---------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the entries changed.
        ``durable=False``: the fsyncs are left to the file-work thread (module doc)."""
        return self.assign_all([(epoch, start_offset)], durable=durable)

    def assign_all(self, pairs: list[tuple[int, int]], *, durable: bool = True) -> bool:
        """``assign`` each (epoch, start offset) in turn, writing the file once."""
        with self._lock:
            entries = list(self._entries)
            changed = False
            for epoch, start in pairs:
                changed |= self._assign(entries, epoch, start)
            if changed:
                self._set(entries, durable=durable)
        return changed

    def _assign(self, entries: list[EpochEntry], epoch: int, start: int) -> bool:
        if epoch < 0 or start < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start})")
        if entries and entries[-1].epoch == epoch and start >= entries[-1].start_offset:
            return False
        removed = []
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start):
            removed.append(entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != start):
            log.warning("%s: epoch entry (%d, %d) truncated conflicting entries %s",
                        self.dir.name, epoch, start, removed[::-1])
        entries.append(EpochEntry(epoch, start))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove the entries starting at or after ``end_offset``; True if any went."""
        with self._lock:
            entries = list(self._entries)
            if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
                return False
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()
            self._set(entries)
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the entries starting at or before ``start_offset``, the last of them kept
        but starting at ``start_offset``; True if the entries changed."""
        with self._lock:
            entries = self._entries
            i = bisect.bisect_right(entries, start_offset, key=lambda e: e.start_offset)
            if i == 0 or (i == 1 and entries[0].start_offset == start_offset):
                return False
            self._set([EpochEntry(entries[i - 1].epoch, start_offset), *entries[i:]])
        return True

    def clear(self) -> None:
        """Forget every entry (the log restarts empty)."""
        with self._lock:
            if self._entries:
                self._set([])

    def write(self) -> None:
        with self._lock:
            atomic_write(self.path, format_entries(self._entries))

    def _set(self, entries: list[EpochEntry], *, durable: bool = True) -> None:
        """Under the lock: swap the entries in and write the file (its fsyncs deferred
        unless ``durable``)."""
        self._entries = tuple(entries)
        self.latest = entries[-1].epoch if entries else UNDEFINED_EPOCH
        atomic_write(self.path, format_entries(self._entries), durable=durable)
        self._unsynced = not durable
        if not durable:
            file_work.submit(self._sync)

    def sync_if_unsynced(self) -> None:
        """The deferred fsyncs now, if a write still waits for them (any thread)."""
        if self._unsynced:
            self._sync()

    def _sync(self) -> None:
        """The deferred fsyncs of the file as it is now and of its directory; gone
        meanwhile (the partition deleted or moved) is nothing to do."""
        self._unsynced = False  # (before the fsyncs: a write meanwhile sets it again)
        path = self.path
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            fsync_dir(path.parent)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.dir.name}, {list(self._entries)})"
