"""What the Raft core needs from storage: the replicated log and the quorum state.

The core (``RaftNode``) performs no I/O of its own; it calls these two protocols. The
in-memory implementations are in ``spool.cluster.raft.memory``; a disk one keeps the
log as Kafka segment files of RecordBatch v2 (``__cluster_metadata-0``), snapshots as
``{end_offset:020d}-{epoch:010d}.checkpoint`` files and the quorum state as Kafka's
``quorum-state`` JSON file.

Durability contract: every mutating call (``append_*``, ``truncate_to``,
``store_snapshot``, ``install_snapshot``, ``delete_before``, ``write``) has made its
effect durable when it returns -- the core relies on it: it sends a vote or an
acknowledgement of appended entries right after the call. A store that batches fsyncs
weakens Raft's guarantee exactly as far as it batches.

Offsets: the log holds entries ``[log_start_offset, end_offset)``, one entry per offset.
Every entry carries the leader epoch that appended it; epochs never decrease along the
log. Before ``log_start_offset`` lies the latest snapshot (``log_start_offset`` equals
its ``end_offset``; 0 and no snapshot for a new log). ``last_fetched_epoch`` is the
epoch of the entry at ``end_offset - 1``, or the snapshot's epoch if the log is empty,
or 0 for an empty log with no snapshot.

Records: ``read`` returns an opaque value (``Records``) that travels in a FetchResponse
to another node's ``append_as_follower``; ``None`` when there is nothing to read. The
two ends of one cluster use the same store type. ``entries`` decodes committed entries
for the state machine above Raft (values are the bytes given to ``append_as_leader``;
the core's own ``LeaderChange`` entries come back as control entries).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from spool.cluster.raft.messages import OffsetAndEpoch, SnapshotId

Records = Any  # opaque: produced by RaftLog.read, consumed by RaftLog.append_as_follower


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """Kafka's LeaderChangeMessage control record: a new leader appends it first thing in
    its epoch, so it can commit an entry of its own epoch (the high watermark rule)."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry as the state machine sees it: ``value`` for a data entry, ``control``
    (a ``LeaderChange``) for the core's own entries."""

    offset: int
    epoch: int
    value: bytes | None
    control: LeaderChange | None = None


class ElectionState(NamedTuple):
    """The persisted quorum state (Kafka's quorum-state file): the latest epoch this node
    knows, whom it voted for in it (-1: nobody) and its leader if known (-1)."""

    epoch: int
    voted_id: int = -1
    leader_id: int = -1


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None:
        """The last state written, or None for a new node (epoch 0, no vote, no leader)."""

    def write(self, state: ElectionState) -> None:
        """Replace the state durably (write a temporary file, fsync, rename, fsync dir)."""


class RaftLog(Protocol):
    @property
    def log_start_offset(self) -> int:
        """First offset held in the log (the latest snapshot's end offset, or 0)."""

    @property
    def end_offset(self) -> int:
        """The log end offset: the offset the next appended entry gets."""

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last entry (the snapshot's epoch if the log is empty; else 0)."""

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at ``offset`` (``log_start_offset - 1`` answers the snapshot's
        epoch). Raises IndexError outside ``[log_start_offset - 1, end_offset)``."""

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's endOffsetForEpoch: the largest epoch ``e <= epoch`` known to this log
        (entries, or the snapshot's epoch) and the offset where ``e`` ends (the start of
        the next epoch, or ``end_offset`` if ``e`` is the last). ``(-1, -1)`` if no such
        epoch is known (below the snapshot)."""

    def append_as_leader(self, values: Sequence[bytes], epoch: int) -> int:
        """Append one entry per value at ``end_offset``, stamped ``epoch``; durable on
        return. Returns the offset of the last entry appended."""

    def append_control_as_leader(self, record: LeaderChange, epoch: int) -> int:
        """Append a control entry (Kafka: a control batch, type LEADER_CHANGE = 2)."""

    def append_as_follower(self, records: Records) -> None:
        """Append what a leader's ``read`` returned; it starts at ``end_offset`` (the core
        checks that before calling). Keeps the entries' epochs; durable on return."""

    def read(self, offset: int, max_bytes: int) -> Records | None:
        """Entries from ``offset`` (``log_start_offset <= offset <= end_offset``), about
        ``max_bytes`` of them but at least one whole entry (batch) if any; None if
        ``offset == end_offset``."""

    def entries(self, start: int, end: int) -> Iterator[LogEntry]:
        """Decoded entries ``[start, end)`` (``start >= log_start_offset``)."""

    def truncate_to(self, offset: int) -> None:
        """Drop entries at offsets ``>= offset`` (never below ``log_start_offset``)."""

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        """The newest snapshot stored, or None."""

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Keep ``data`` as the snapshot of offsets ``[0, snapshot_id.end_offset)`` (the
        entries must be in the log, committed); the log itself is unchanged."""

    def read_snapshot(self, snapshot_id: SnapshotId, position: int,
                      max_bytes: int) -> tuple[bytes, int] | None:
        """``(chunk, size)``: up to ``max_bytes`` of that snapshot from ``position`` and its
        total size; None if this store no longer (or never) held that snapshot."""

    def delete_before(self, offset: int) -> None:
        """Move ``log_start_offset`` up to ``offset`` (at most the latest snapshot's end
        offset), deleting the entries below it, and older snapshots."""

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A follower's snapshot fetched from the leader: store it and replace the whole
        log by an empty one starting at ``snapshot_id.end_offset``."""
