"""In-memory ``RaftLog`` and ``QuorumStateStore``: for tests, the simulator and a
single-process quorum. Contract: ``spool.cluster.raft.store``.

"Durable" here means "kept in this object": a simulated crash discards the ``RaftNode``
and keeps its stores, which is what a disk store that fsyncs every call gives.
``MemoryRecords`` is the opaque ``Records`` value: a base offset and a tuple of
``(epoch, value, control)`` entries; its size in bytes is the sum of its values' lengths
plus a 16-byte overhead per entry (enough for ``max_bytes`` to mean something).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from spool.cluster.raft.messages import OffsetAndEpoch, SnapshotId
from spool.cluster.raft.store import ElectionState, LeaderChange, LogEntry

ENTRY_OVERHEAD = 16

_Entry = tuple[int, bytes | None, LeaderChange | None]  # (epoch, value, control)


@dataclass(frozen=True, slots=True)
class MemoryRecords:
    base_offset: int
    entries: tuple[_Entry, ...]


class MemoryQuorumStateStore:
    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


class MemoryRaftLog:
    def __init__(self) -> None:
        self._start = 0
        self._entries: list[_Entry] = []
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._latest: SnapshotId | None = None

    # -- positions ---------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        if self._entries:
            return self._entries[-1][0]
        return self._latest.epoch if self._latest else 0

    def epoch_at(self, offset: int) -> int:
        snap = self._latest
        if offset == self._start - 1 and snap is not None and snap.end_offset == self._start:
            return snap.epoch
        if not self._start <= offset < self.end_offset:
            raise IndexError(f"offset {offset} outside [{self._start}, {self.end_offset})")
        return self._entries[offset - self._start][0]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        # Epochs never decrease along the log, so the last entry (walking back from the
        # end) whose epoch is <= `epoch` is the last entry of the epoch we answer.
        for i in range(len(self._entries) - 1, -1, -1):
            e = self._entries[i][0]
            if e <= epoch:
                return OffsetAndEpoch(self._start + i + 1, e)
        snap = self._latest
        if snap is not None and snap.end_offset == self._start and snap.epoch <= epoch:
            return OffsetAndEpoch(self._start, snap.epoch)
        if self._start == 0:
            return OffsetAndEpoch(0, 0)
        return OffsetAndEpoch(-1, -1)

    # -- appends -----------------------------------------------------------------------------
    def append_as_leader(self, values: Sequence[bytes], epoch: int) -> int:
        self._check_epoch(epoch)
        for v in values:
            self._entries.append((epoch, bytes(v), None))
        return self.end_offset - 1

    def append_control_as_leader(self, record: LeaderChange, epoch: int) -> int:
        self._check_epoch(epoch)
        self._entries.append((epoch, None, record))
        return self.end_offset - 1

    def append_as_follower(self, records: MemoryRecords) -> None:
        if records.base_offset != self.end_offset:
            raise ValueError(f"records at {records.base_offset}, log ends at {self.end_offset}")
        for entry in records.entries:
            self._check_epoch(entry[0])
            self._entries.append(entry)

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.last_fetched_epoch:
            raise ValueError(f"epoch {epoch} below the log's last epoch {self.last_fetched_epoch}")

    # -- reads -------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> MemoryRecords | None:
        if not self._start <= offset <= self.end_offset:
            raise IndexError(f"offset {offset} outside [{self._start}, {self.end_offset}]")
        if offset == self.end_offset:
            return None
        out: list[_Entry] = []
        size = 0
        for entry in self._entries[offset - self._start:]:
            n = ENTRY_OVERHEAD + len(entry[1] or b"")
            if out and size + n > max_bytes:
                break
            out.append(entry)
            size += n
        return MemoryRecords(offset, tuple(out))

    def entries(self, start: int, end: int) -> Iterator[LogEntry]:
        if start < self._start:
            raise IndexError(f"offset {start} below the log start {self._start}")
        for off in range(start, min(end, self.end_offset)):
            epoch, value, control = self._entries[off - self._start]
            yield LogEntry(off, epoch, value, control)

    # -- truncation and snapshots ------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"truncate to {offset} below the log start {self._start}")
        del self._entries[offset - self._start:]

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._latest

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots[snapshot_id] = bytes(data)
        if self._latest is None or snapshot_id.end_offset > self._latest.end_offset:
            self._latest = snapshot_id

    def read_snapshot(self, snapshot_id: SnapshotId, position: int,
                      max_bytes: int) -> tuple[bytes, int] | None:
        data = self._snapshots.get(snapshot_id)
        if data is None:
            return None
        return data[position:position + max_bytes], len(data)

    def delete_before(self, offset: int) -> None:
        if self._latest is None or offset > self._latest.end_offset:
            raise ValueError(f"no snapshot covers offsets below {offset}")
        if offset <= self._start:
            return
        del self._entries[:offset - self._start]
        self._start = offset
        self._snapshots = {s: d for s, d in self._snapshots.items() if s == self._latest}

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots = {snapshot_id: bytes(data)}
        self._latest = snapshot_id
        self._entries = []
        self._start = snapshot_id.end_offset
