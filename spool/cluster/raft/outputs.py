"""What a ``RaftNode`` asks its shell to do, returned as lists from its methods.

- ``Send(dst, request)``: send ``request`` to node ``dst``. When (if) its response comes
  back, pass both to ``RaftNode.handle_response(dst, request, response, now_ms)`` -- the
  very request object, so the shell keeps ``correlation id -> request``. A lost request
  needs no report: the core times out and retries on its own.
- ``Respond(dst, request, response)``: the deferred answer to a request that
  ``handle_request`` parked (it returned None for it): a Fetch the leader held until
  there was something new, or ``fetch_max_wait_ms`` passed, or leadership moved.
- ``HighWatermarkAdvanced(high_watermark)``: entries below it are committed; read them
  with ``RaftNode.committed_entries``. Never goes backwards within a node's life.
- ``LeaderChanged(leader_id, epoch)``: the node learnt a new epoch or leader
  (``leader_id`` -1: none known yet; the node's own id: it is the leader now and its
  writes commit once the high watermark passes ``RaftNode.epoch_start_offset``).
- ``SnapshotInstalled(snapshot_id)``: the follower replaced its log by the leader's
  snapshot; the state machine reloads from ``RaftLog.read_snapshot`` and goes on from
  ``snapshot_id.end_offset``.
"""

from __future__ import annotations

from dataclasses import dataclass

from spool.cluster.raft.messages import Request, Response, SnapshotId


@dataclass(frozen=True, slots=True)
class Send:
    dst: int
    request: Request


@dataclass(frozen=True, slots=True)
class Respond:
    dst: int
    request: Request
    response: Response


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    leader_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotInstalled:
    snapshot_id: SnapshotId


Output = Send | Respond | HighWatermarkAdvanced | LeaderChanged | SnapshotInstalled
