"""The ``.txnindex`` of a segment: the aborted transactions whose ABORT marker it holds.

Kafka's format, fixed-width entries appended in marker order, no header::

    +---------------+-----------------+------------------+-----------------+-----------------------+
    | version int16 | producerId int64| firstOffset int64| lastOffset int64| lastStableOffset int64|
    +---------------+-----------------+------------------+-----------------+-----------------------+
      34 bytes per entry; version 0; lastOffset = the ABORT marker's offset;
      lastStableOffset = the partition's LSO once this transaction was complete

``<base:020d>.txnindex`` sits beside ``<base:020d>.log`` and follows it
through ``.deleted``/``.swap`` renames (``spool.storage.segment`` moves every
index suffix). It is a cache like the other indexes: the producer state
replay at load (``spool.storage.producer_state``) truncates the entries at
or after its start offset and rewrites them from the log. A torn tail (a
size that is not a multiple of 34, e.g. a write cut short by a full disk)
is ignored on read and cut off by the next ``append``.

An entry whose write fails is not lost: ``spool.storage.log.PartitionLog``
keeps it pending in memory (fetches see it), retries the write, and takes no
producer snapshot past it meanwhile, so a restart replays its marker.

Concurrency: written under the partition log's lock; read lock-free by
fetches through ``TxnIndexReader`` (a cache keyed by file size, so an append
or a truncation is seen at the next read).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from spool.storage.segment import TXN_INDEX_SUFFIX, file_name

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def path_of(directory: Path, base_offset: int) -> Path:
    return directory / file_name(base_offset, TXN_INDEX_SUFFIX)


def append(path: Path, txn: AbortedTxn) -> None:
    """Append one entry after the last whole one; OSError (nothing added) if it fails."""
    data = ENTRY.pack(VERSION, *txn)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        end = os.fstat(fd).st_size
        end -= end % ENTRY_SIZE  # a torn tail (shorter than an entry) is overwritten
        done = 0
        try:
            while done < len(data):
                done += os.pwrite(fd, data[done:], end + done)
        except OSError:
            try:
                os.ftruncate(fd, end)  # no torn entry left behind
            except OSError:
                pass
            raise
    finally:
        os.close(fd)


def read(path: Path) -> list[AbortedTxn]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    n = len(data) // ENTRY_SIZE
    return [AbortedTxn(*ENTRY.unpack_from(data, i * ENTRY_SIZE)[1:]) for i in range(n)]


def truncate_from(path: Path, offset: int) -> None:
    """Drop the entries whose marker is at or after ``offset`` (and any torn tail)."""
    entries = read(path)
    keep = [e for e in entries if e.last_offset < offset]
    if not path.exists() or (len(keep) == len(entries)
                             and path.stat().st_size == len(keep) * ENTRY_SIZE):
        return
    if not keep:
        path.unlink(missing_ok=True)
        return
    with open(path, "r+b") as f:
        f.truncate(len(keep) * ENTRY_SIZE)


class TxnIndexReader:
    """Aborted transactions of a log's segments, cached per file size."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[int, list[AbortedTxn]]] = {}

    def entries(self, path: Path) -> list[AbortedTxn]:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            self._cache.pop(path, None)
            return []
        hit = self._cache.get(path)
        if hit is not None and hit[0] == size:
            return hit[1]
        found = read(path)
        self._cache[path] = (size, found)
        return found
