"""The Raft RPCs as plain values, named after Kafka's messages (KIP-595, KIP-996).

One dataclass per Kafka request/response body, for the single partition the quorum
replicates (``__cluster_metadata``, partition 0). Kafka's wire messages nest that
partition inside ``topics[0].partitions[0]``; these classes flatten it: a field here is
the same-named field of that partition (or of the top level), in snake_case. The shell
translates 1:1 to the generated codec: fill topic_name ``__cluster_metadata`` and
partition index 0, and copy ``error_code`` into both the partition and (where the
message has one) the top-level error code.

Wire mapping (Kafka JSON name -> here):

- ``VoteRequest`` (api 52): ClusterId, VoterId, CandidateEpoch, CandidateId,
  LastOffsetEpoch, LastOffset, PreVote (v2+, KIP-996).
- ``VoteResponse``: ErrorCode, LeaderId, LeaderEpoch, VoteGranted.
- ``BeginQuorumEpochRequest`` (api 53): ClusterId, VoterId, LeaderId, LeaderEpoch.
- ``BeginQuorumEpochResponse``: ErrorCode, LeaderId, LeaderEpoch.
- ``EndQuorumEpochRequest`` (api 54): ClusterId, LeaderId, LeaderEpoch,
  PreferredSuccessors (v0; v1 spells it PreferredCandidates[].CandidateId).
- ``EndQuorumEpochResponse``: ErrorCode, LeaderId, LeaderEpoch.
- ``FetchRequest`` (api 1, v13+ on ``__cluster_metadata``): ClusterId,
  ReplicaState.ReplicaId (ReplicaId before v15), MaxWaitMs, MaxBytes,
  CurrentLeaderEpoch, FetchOffset, LastFetchedEpoch, LogStartOffset.
- ``FetchResponse``: ErrorCode, HighWatermark, LogStartOffset, DivergingEpoch
  {Epoch, EndOffset}, CurrentLeader {LeaderId, LeaderEpoch}, SnapshotId {EndOffset,
  Epoch}, Records.
- ``FetchSnapshotRequest`` (api 59): ClusterId, ReplicaId, MaxBytes, CurrentLeaderEpoch,
  SnapshotId {EndOffset, Epoch}, Position.
- ``FetchSnapshotResponse``: ErrorCode, SnapshotId, CurrentLeader, Size, Position,
  UnalignedRecords.

``records`` in a FetchResponse is opaque to the Raft core: whatever the node's
``RaftLog.read`` returned (RecordBatch v2 bytes for the disk log, a tuple for the
in-memory one), handed to the fetching node's ``RaftLog.append_as_follower``.
Error codes are Kafka's (``spool.protocol.errors.Errors``). Every class is immutable;
the core keeps the request objects it sent and expects the very same object back with
its response (``RaftNode.handle_response(src, request, response, now_ms)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class OffsetAndEpoch(NamedTuple):
    """A log position and the epoch of the entry just before it (Kafka's OffsetAndEpoch)."""

    offset: int
    epoch: int


class SnapshotId(NamedTuple):
    """A snapshot covers offsets ``[0, end_offset)``; ``epoch`` is the epoch of the entry at
    ``end_offset - 1`` (Kafka's SnapshotId {EndOffset, Epoch})."""

    end_offset: int
    epoch: int


class EpochEndOffset(NamedTuple):
    """FetchResponse.DivergingEpoch: the leader's largest epoch <= the fetcher's
    last_fetched_epoch, and the offset where that epoch ends in the leader's log."""

    epoch: int
    end_offset: int


class LeaderIdAndEpoch(NamedTuple):
    """CurrentLeader as the responding node knows it (leader_id -1: unknown)."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False
    voter_id: int = -1


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    voter_id: int = -1


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    max_wait_ms: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int = -1
    max_bytes: int = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    current_leader: LeaderIdAndEpoch
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None
    records: Any = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    current_leader: LeaderIdAndEpoch
    snapshot_id: SnapshotId | None = None
    size: int = -1
    position: int = -1
    unaligned_records: bytes = field(default=b"", repr=False)


Request = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
           | FetchSnapshotRequest)
Response = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
            | FetchSnapshotResponse)
