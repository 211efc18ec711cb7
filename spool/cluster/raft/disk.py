"""The metadata log on disk: ``__cluster_metadata-0`` for the Raft core (KafkaMetadataLog).

Directory ``<metadata.log.dir>/__cluster_metadata-0/`` (``metadata.log.dir``
defaults to the first of ``log.dirs``)::

    00000000000000000000.log / .index / .timeindex   segments (spool.storage's PartitionLog)
    00000000000000000412-0000000003.checkpoint       snapshots (``spool.cluster.raft.snapshots``)
    quorum-state                                     the vote (``quorum_state_file``)
    recovery-point-offset-checkpoint,
    log-start-offset-checkpoint                      this log's own checkpoints (kept here,
                                                     not in the log dir root: a controller-only
                                                     node has no LogManager to share them with)

The log holds RecordBatch v2 batches as Kafka writes them: a leader's
append of metadata records is ONE batch (so a controller operation applies
atomically) whose ``partitionLeaderEpoch`` is the Raft epoch, each record
value a metadata record framed by ``metadata_records.encode_record`` (null
key); a new leader's LeaderChangeMessage is a control batch (control bit,
not transactional, no producer) with one record whose key is the control key
and whose value is the message at version 0.

Epochs: an in-memory epoch cache ``[(epoch, start_offset), ...]`` (Kafka's
LeaderEpochFileCache) is rebuilt at open from the batch headers, so no
``leader-epoch-checkpoint`` file is needed; it answers
``end_offset_for_epoch`` (a follower's divergence check).

Durability: every append (leader or follower) is fsynced before the call
returns, so an offset this node reports in a Fetch or counts towards the
high watermark survives a power loss. A torn tail (kill -9 mid-write) is cut
by the loader's recovery at open. Snapshots are frozen atomically (tmp,
fsync, rename, fsync dir); ``delete_before_snapshot`` moves the log start
offset to a snapshot's end offset and drops the segments wholly below it,
and the older snapshots. At open, a snapshot past the log end (a follower
that installed it and crashed before appending) restarts the log at the
snapshot.

Concurrency: the Raft core runs one step at a time; its driver calls this
object from one executor thread at a time (blocking: fsync). A lock makes
the few calls from elsewhere (DescribeQuorum's offsets) safe anyway.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from spool.cluster.raft import quorum_state_file, snapshots
from spool.cluster.raft.messages import OffsetAndEpoch, SnapshotId
from spool.cluster.raft.snapshots import SnapshotReader, SnapshotWriter
from spool.cluster.raft.store import ElectionState, LeaderChange, LogEntry
from spool.protocol._generated import LeaderChangeMessage
from spool.protocol._generated.leader_change_message import Voter as LeaderChangeVoter
from spool.protocol.metadata_records import (
    ControlRecordType,
    control_record_type,
    decode_control_record,
    encode_control_record,
)
from spool.records.batch import check_batch, iter_batches
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from spool.storage.checkpoint import DirCheckpoints
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import Clock, as_clock

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
METADATA_LOG_CONFIG = LogConfig(
    retention_ms=-1, retention_bytes=-1, segment_bytes=64 << 20, segment_ms=2**63 - 1,
    segment_index_bytes=1 << 20, file_delete_delay_ms=0)


class EpochCache:
    """(epoch, start offset) pairs, both strictly increasing (Kafka's LeaderEpochFileCache)."""

    def __init__(self) -> None:
        self.epochs: list[int] = []
        self.starts: list[int] = []

    def assign(self, epoch: int, start_offset: int) -> None:
        if self.epochs and epoch <= self.epochs[-1]:
            return
        self.epochs.append(epoch)
        self.starts.append(start_offset)

    @property
    def latest(self) -> int | None:
        return self.epochs[-1] if self.epochs else None

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was truncated there)."""
        i = bisect.bisect_left(self.starts, end_offset)
        del self.epochs[i:], self.starts[i:]

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it starts there."""
        i = bisect.bisect_right(self.starts, start_offset) - 1
        if i < 0:
            return
        del self.epochs[:i], self.starts[:i]
        self.starts[0] = start_offset

    def epoch_at(self, offset: int) -> int:
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0:
            raise IndexError(f"offset {offset} is before the first epoch's start")
        return self.epochs[i]

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int] | None:
        """(largest epoch <= ``epoch``, the offset where it ends), None if below them all."""
        i = bisect.bisect_right(self.epochs, epoch) - 1
        if i < 0:
            return None
        end = self.starts[i + 1] if i + 1 < len(self.starts) else log_end_offset
        return self.epochs[i], end


class DiskRaftLog:
    """``__cluster_metadata-0`` as the Raft core's ``RaftLog`` (see the module docstring)."""

    def __init__(self, metadata_log_dir: str | Path, *, clock: Clock | None = None,
                 config: LogConfig = METADATA_LOG_CONFIG) -> None:
        self.dir = Path(metadata_log_dir) / METADATA_PARTITION_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.clock = as_clock(clock)
        self._lock = threading.RLock()
        self._checkpoints = DirCheckpoints(self.dir)
        self._snapshots: list[SnapshotId] = snapshots.list_snapshots(self.dir)
        self.plog = PartitionLog(self.dir, config, clock=self.clock,
                                 checkpoints=self._checkpoints)
        self.epochs = EpochCache()
        self._load()

    def _load(self) -> None:
        for seg in self.plog.segments:
            for _, h in seg.batches(0):
                self.epochs.assign(h.partition_leader_epoch, h.base_offset)
        self.epochs.truncate_from_start(self.log_start_offset)  # (a segment may start below)
        latest = self.latest_snapshot_id
        if latest is not None and self._behind(latest):
            log.info("%s: snapshot %s is past the log end %d: the log restarts there",
                     self.dir, latest, self.end_offset)
            self._restart_at(latest)
        elif latest is not None and latest.end_offset > self.log_start_offset:
            self._advance_start(latest.end_offset)
        self.plog.flush()
        self._checkpoints.write()
        log.info("%s: metadata log [%d, %d), last epochs %s, snapshots %s", self.dir,
                 self.log_start_offset, self.end_offset,
                 list(zip(self.epochs.epochs, self.epochs.starts, strict=True))[-3:],
                 self._snapshots[-2:])

    def _behind(self, sid: SnapshotId) -> bool:
        """Whether snapshot ``sid`` is ahead of the log (Kafka's truncateToLatestSnapshot)."""
        last = self.epochs.latest if self.epochs.latest is not None else 0
        return sid.epoch > last or (sid.epoch == last and sid.end_offset > self.end_offset)

    # ---- offsets and epochs

    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.plog.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        if self.epochs.latest is not None:
            return self.epochs.latest
        latest = self.latest_snapshot_id
        return latest.epoch if latest is not None else 0

    def epoch_at(self, offset: int) -> int:
        snap = self.latest_snapshot_id
        start = self.log_start_offset
        if offset == start - 1 and snap is not None and snap.end_offset == start:
            return snap.epoch
        if not start <= offset < self.end_offset:
            raise IndexError(f"offset {offset} outside [{start}, {self.end_offset})")
        return self.epochs.epoch_at(offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self.epochs.end_offset_for(epoch, self.end_offset)
        if found is not None:
            return OffsetAndEpoch(found[1], found[0])
        snap = self.latest_snapshot_id
        start = self.log_start_offset
        if snap is not None and snap.end_offset == start and snap.epoch <= epoch:
            return OffsetAndEpoch(start, snap.epoch)
        if start == 0:
            return OffsetAndEpoch(0, 0)
        return OffsetAndEpoch(-1, -1)

    # ---- appends

    def append_as_leader(self, values: Sequence[bytes], epoch: int) -> int:
        """One batch of metadata record values (null keys) in ``epoch``, fsynced; returns
        the last offset."""
        b = BatchBuilder(partition_leader_epoch=epoch)
        now = self.clock.now_ms()
        for v in values:
            b.append(None, bytes(v), timestamp=now)
        return self._append_leader_batch(b, epoch)

    def append_control_as_leader(self, record: LeaderChange, epoch: int) -> int:
        """A control batch holding Kafka's LeaderChangeMessage, fsynced."""
        key, value = encode_control_record(LeaderChangeMessage(
            version=0, leader_id=record.leader_id,
            voters=[LeaderChangeVoter(voter_id=v) for v in record.voters],
            granting_voters=[LeaderChangeVoter(voter_id=v) for v in record.granting_voters]))
        b = BatchBuilder(partition_leader_epoch=epoch, is_control=True)
        b.append(key, value, timestamp=self.clock.now_ms())
        return self._append_leader_batch(b, epoch)

    def _append_leader_batch(self, b: BatchBuilder, epoch: int) -> int:
        if not len(b):
            raise ValueError("an empty append")
        with self._lock:
            if epoch < self.last_fetched_epoch:
                raise ValueError(f"epoch {epoch} below the log's last epoch "
                                 f"{self.last_fetched_epoch}")
            info = self.plog.append(bytearray(b.build()), leader_epoch=epoch, flush=False)
            self.epochs.assign(epoch, info.first_offset)
            self.plog.flush()
            return info.last_offset

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> None:
        """A leader's batches at their own offsets (those wholly below the log end are
        skipped), CRC-checked, fsynced. CORRUPT_MESSAGE for a damaged batch, ValueError for
        one that does not start at the log end: nothing is appended then."""
        data = bytearray(records)
        with self._lock:
            leo = self.end_offset
            first = end = None
            found = []
            for pos, h in iter_batches(data):
                check_batch(data, pos)
                if h.next_offset <= leo:
                    continue
                if first is None:
                    if h.base_offset != leo:
                        raise ValueError(f"records at {h.base_offset}, log ends at {leo}")
                    first = pos
                if h.partition_leader_epoch < (self.epochs.latest or 0):
                    raise ValueError(f"epoch {h.partition_leader_epoch} below the log's last "
                                     f"epoch {self.epochs.latest}")
                found.append(h)
                end = pos + h.size
            if first is None:
                return
            self.plog.append(memoryview(data)[first:end], assign_offsets=False, flush=False)
            for h in found:
                self.epochs.assign(h.partition_leader_epoch, h.base_offset)
            self.plog.flush()

    # ---- reads

    def read(self, offset: int, max_bytes: int) -> bytes | None:
        """Whole batches from the one holding ``offset``, at least one; None at the end."""
        start, leo = self.log_start_offset, self.end_offset
        if not start <= offset <= leo:
            raise IndexError(f"offset {offset} outside [{start}, {leo}]")
        if offset == leo:
            return None
        data = self.plog.read_bytes(offset, max(1, max_bytes))
        return data or None

    def entries(self, start: int, end: int) -> Iterator[LogEntry]:
        """Decoded entries ``[start, end)``: a value per metadata record, a ``LeaderChange``
        per LeaderChangeMessage; other control records are skipped."""
        if start < self.log_start_offset:
            raise IndexError(f"offset {start} below the log start {self.log_start_offset}")
        offset = start
        end = min(end, self.end_offset)
        while offset < end:
            data = self.plog.read_bytes(offset, 1 << 20)
            if not data:
                return
            for pos, h in iter_batches(data):
                for rec in iter_records(data, pos):
                    if rec.offset < offset or rec.offset >= end:
                        continue
                    epoch = h.partition_leader_epoch
                    if h.is_control:
                        control = _leader_change(rec.key, rec.value)
                        if control is not None:
                            yield LogEntry(rec.offset, epoch, None, control)
                    else:
                        yield LogEntry(rec.offset, epoch, bytes(rec.value or b""))
                offset = max(offset, h.next_offset)
                if offset >= end:
                    return

    # ---- truncation

    def truncate_to(self, offset: int) -> None:
        with self._lock:
            if offset < self.log_start_offset:
                raise ValueError(f"truncate to {offset} below the log start "
                                 f"{self.log_start_offset}")
            self.plog.truncate_to(offset)  # (a whole batch goes: Kafka's truncateTo too)
            self.plog.delete_expired_files(force=True)
            self.epochs.truncate_from_end(self.end_offset)
            self.plog.flush()

    # ---- snapshots

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    def snapshot_ids(self) -> list[SnapshotId]:
        return list(self._snapshots)

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Freeze ``data`` (a snapshot file's bytes, ``snapshots.build_snapshot``) as
        ``<id>.checkpoint``; the log is unchanged."""
        with self._lock:
            if snapshot_id in self._snapshots:
                return
            w = SnapshotWriter(self.dir, snapshot_id)
            try:
                w.append(data)
                w.freeze()
            except BaseException:
                w.abort()
                raise
            bisect.insort(self._snapshots, snapshot_id)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int,
                      max_bytes: int) -> tuple[bytes, int] | None:
        if snapshot_id not in self._snapshots:
            return None
        try:
            with SnapshotReader(self.dir, snapshot_id) as r:
                return r.read(position, max_bytes), r.size
        except FileNotFoundError:
            return None

    def delete_before(self, offset: int) -> None:
        """Move the log start up to ``offset`` (at most the latest snapshot's end offset),
        dropping the segments wholly below it and the older snapshots."""
        with self._lock:
            latest = self.latest_snapshot_id
            if latest is None or offset > latest.end_offset:
                raise ValueError(f"no snapshot covers offsets below {offset}")
            if offset > self.log_start_offset:
                self._advance_start(offset)

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A snapshot fetched from the leader: stored, then the log restarts empty at its
        end offset."""
        with self._lock:
            self.store_snapshot(snapshot_id, data)
            self._restart_at(snapshot_id)

    def _restart_at(self, sid: SnapshotId) -> None:
        self.plog.truncate_fully(sid.end_offset)
        self.plog.delete_expired_files(force=True)
        self.epochs = EpochCache()
        self._forget_snapshots_before(sid)
        self.plog.flush()
        self._checkpoints.write()

    def _advance_start(self, offset: int) -> None:
        self.plog.advance_log_start_offset(min(offset, self.end_offset))
        self.plog.delete_expired_files(force=True)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.epochs.truncate_from_end(self.end_offset)
        latest = self.latest_snapshot_id
        if latest is not None:
            self._forget_snapshots_before(latest)

    def _forget_snapshots_before(self, sid: SnapshotId) -> None:
        for old in [s for s in self._snapshots if s < sid]:
            snapshots.delete_snapshot(self.dir, old)
            self._snapshots.remove(old)

    # ---- lifecycle

    def close(self) -> None:
        with self._lock:
            self.plog.close()
            self._checkpoints.write()


def _leader_change(key: bytes | None, value: bytes | None) -> LeaderChange | None:
    if key is None or control_record_type(key) != ControlRecordType.LEADER_CHANGE:
        return None
    msg = decode_control_record(key, value or b"")
    return LeaderChange(leader_id=msg.leader_id,
                        voters=tuple(v.voter_id for v in msg.voters),
                        granting_voters=tuple(v.voter_id for v in msg.granting_voters))


class FileQuorumStateStore:
    """The ``QuorumStateStore`` over the ``quorum-state`` file (``quorum_state_file``)."""

    def __init__(self, metadata_log_dir: str | Path) -> None:
        directory = Path(metadata_log_dir) / METADATA_PARTITION_DIR
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / quorum_state_file.FILE_NAME
        quorum_state_file.remove_leftover(self.path)

    def read(self) -> ElectionState | None:
        stored = quorum_state_file.read_quorum_state(self.path)
        if stored is None:
            return None
        return ElectionState(epoch=max(0, stored.leader_epoch), voted_id=stored.voted_id,
                             leader_id=stored.leader_id)

    def write(self, state: ElectionState) -> None:
        quorum_state_file.write_quorum_state(self.path, quorum_state_file.StoredElection(
            leader_epoch=state.epoch, leader_id=state.leader_id, voted_id=state.voted_id))
