"""``Replication``: the part of ``RaftNode`` that moves the log (a mixin; the state it
works on is ``RaftNode``'s, documented there).

Leader side: a Fetch(fetch_offset, last_fetched_epoch) is validated against the log --
below the log start it gets the latest SnapshotId; if the fetcher's last epoch ends
earlier here (or is unknown) it gets a DivergingEpoch (that epoch's end offset here), or
a SnapshotId when that end is below the log start; otherwise its offset counts for the
high watermark and it gets entries, or waits parked up to max_wait_ms when there is no
entry and no high watermark it has not seen yet. FetchSnapshot serves snapshot chunks.

Follower side: one Fetch (or FetchSnapshot) in flight, to the leader (an observer with no
leader asks a random voter); an answer counts only for the request in flight and only
if the log has not moved since it was sent. A DivergingEpoch truncates to the smaller of
the two ends of that epoch (never below the high watermark: that raises); a SnapshotId
starts fetching that snapshot from position 0, resuming where a lost chunk left off,
and installs it whole. A successful answer resets the fetch timer.
"""

from __future__ import annotations

from spool.cluster.raft.messages import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
)
from spool.cluster.raft.outputs import HighWatermarkAdvanced, Respond, Send, SnapshotInstalled
from spool.cluster.raft.roles import FOLLOWER, LEADER, NEVER, UNATTACHED, RaftInvariantError
from spool.protocol.errors import Errors


class Replication:
    """Mixed into ``RaftNode`` (its state; see the module docstring)."""

    # -- fetching: the leader's side ---------------------------------------------------------
    def _current_leader(self) -> LeaderIdAndEpoch:
        return LeaderIdAndEpoch(self._leader_id, self._epoch)

    def _leader_only_error(self, epoch: int) -> int:
        if epoch < self._epoch:
            return Errors.FENCED_LEADER_EPOCH
        if epoch > self._epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        if self._role != LEADER:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def _fetch_error(self, req: FetchRequest) -> FetchResponse:
        error = self._leader_only_error(req.current_leader_epoch)
        return FetchResponse(error or Errors.NOT_LEADER_OR_FOLLOWER, self._current_leader())

    def _handle_fetch(self, src: int, req: FetchRequest, now_ms: int,
                      may_park: bool = True) -> FetchResponse | None:
        error = self._leader_only_error(req.current_leader_epoch)
        if error != Errors.NONE or self._leader is None:
            return FetchResponse(error, self._current_leader())
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0:
            return FetchResponse(Errors.INVALID_REQUEST, self._current_leader())
        ld = self._leader
        log = self.log
        replica = req.replica_id if req.replica_id >= 0 else src
        base = dict(error_code=Errors.NONE, current_leader=self._current_leader(),
                    log_start_offset=log.log_start_offset)
        snapshot = log.latest_snapshot_id
        if req.fetch_offset < log.log_start_offset:
            ld.update_fetch(replica, None, now_ms, log.end_offset)
            return FetchResponse(high_watermark=self._hw, snapshot_id=snapshot, **base)
        end = log.end_offset_for_epoch(req.last_fetched_epoch)
        if end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset:
            ld.update_fetch(replica, None, now_ms, log.end_offset)
            if end.offset < log.log_start_offset:
                return FetchResponse(high_watermark=self._hw, snapshot_id=snapshot, **base)
            return FetchResponse(high_watermark=self._hw,
                                 diverging_epoch=EpochEndOffset(end.epoch, end.offset), **base)
        ld.update_fetch(replica, req.fetch_offset, now_ms, log.end_offset)
        if replica in self.voters:
            self._maybe_advance_leader_hw(now_ms)
        records = log.read(req.fetch_offset, min(req.max_bytes, self.config.fetch_max_bytes))
        state = ld.replica(replica)
        if (records is None and may_park and req.max_wait_ms > 0
                and state.high_watermark_sent >= self._hw):
            return None
        state.high_watermark_sent = self._hw
        return FetchResponse(high_watermark=self._hw, records=records, **base)

    def _complete_parked(self, now_ms: int, expired_only: bool = False) -> None:
        ld = self._leader
        if ld is None or not ld.parked:
            return
        parked, ld.parked = ld.parked, []
        for src, req, deadline in parked:
            if expired_only and now_ms < deadline:
                ld.parked.append((src, req, deadline))
                continue
            resp = self._handle_fetch(src, req, now_ms, may_park=now_ms < deadline)
            if resp is None:
                ld.parked.append((src, req, deadline))
            else:
                self._out.append(Respond(src, req, resp))

    def _maybe_advance_leader_hw(self, now_ms: int) -> None:
        ld = self._leader
        if ld is None:
            return
        candidate = ld.majority_offset()
        if candidate > ld.epoch_start_offset and candidate > self._hw:
            self._set_hw(candidate)
            self._complete_parked(now_ms)

    def _set_hw(self, hw: int) -> None:
        if hw > self._hw:
            self._hw = hw
            self._out.append(HighWatermarkAdvanced(hw))

    def _handle_fetch_snapshot(self, src: int, req: FetchSnapshotRequest,
                               now_ms: int) -> FetchSnapshotResponse:
        error = self._leader_only_error(req.current_leader_epoch)
        if error != Errors.NONE or self._leader is None:
            return FetchSnapshotResponse(error, self._current_leader())
        self._leader.update_fetch(req.replica_id if req.replica_id >= 0 else src, None, now_ms,
                                  self.log.end_offset)
        max_bytes = min(req.max_bytes, self.config.fetch_snapshot_max_bytes)
        found = self.log.read_snapshot(req.snapshot_id, req.position, max_bytes)
        if found is None:
            return FetchSnapshotResponse(Errors.SNAPSHOT_NOT_FOUND, self._current_leader())
        chunk, size = found
        if req.position < 0 or req.position > size:
            return FetchSnapshotResponse(Errors.POSITION_OUT_OF_RANGE, self._current_leader())
        return FetchSnapshotResponse(Errors.NONE, self._current_leader(), req.snapshot_id,
                                     size, req.position, chunk)

    # -- fetching: the follower's side -------------------------------------------------------
    def _send_fetch(self, now_ms: int) -> None:
        self._fetch_at_ms = NEVER
        dst = self._leader_id
        if self._role != FOLLOWER or dst < 0:
            if self.is_voter or self._role != UNATTACHED:
                return
            dst = self.rng.choice(sorted(self.voters))  # an observer looking for the leader
        req: FetchRequest | FetchSnapshotRequest
        if self._snapshot is not None:
            sid, buf = self._snapshot
            req = FetchSnapshotRequest(self.config.cluster_id, self.node_id, self._epoch, sid,
                                       len(buf), self.config.fetch_snapshot_max_bytes)
        else:
            req = FetchRequest(self.config.cluster_id, self.node_id,
                               self.config.fetch_max_wait_ms, self._epoch, self.log.end_offset,
                               self.log.last_fetched_epoch, self.log.log_start_offset,
                               self.config.fetch_max_bytes)
        self._inflight, self._inflight_dst, self._inflight_sent_ms = req, dst, now_ms
        self._out.append(Send(dst, req))

    def _fetch_failed(self, resp: FetchResponse | FetchSnapshotResponse, now_ms: int) -> None:
        cl = resp.current_leader
        if self._observe(cl.leader_epoch, cl.leader_id, now_ms):
            return
        if (resp.error_code == Errors.NOT_LEADER_OR_FOLLOWER and self._role == FOLLOWER
                and cl == (self._leader_id, self._epoch)):
            self._leader_resigned = True  # our leader no longer leads this epoch
        self._fetch_at_ms = now_ms + self.config.retry_backoff_ms

    def _handle_fetch_response(self, src: int, req: FetchRequest, resp: FetchResponse,
                               now_ms: int) -> None:
        if req is not self._inflight:
            return  # a duplicate or an answer we stopped waiting for
        self._inflight = None
        if resp.error_code != Errors.NONE:
            self._fetch_failed(resp, now_ms)
            return
        cl = resp.current_leader
        if self._observe(cl.leader_epoch, cl.leader_id, now_ms) or self._role != FOLLOWER:
            return
        if cl != (self._leader_id, self._epoch):
            self._fetch_at_ms = now_ms + self.config.retry_backoff_ms
            return
        self._timer_ms = now_ms + self.config.fetch_timeout_ms
        self._leader_resigned = False
        self._fetched_from_leader = True
        log = self.log
        unchanged = (log.end_offset == req.fetch_offset
                     and log.last_fetched_epoch == req.last_fetched_epoch)
        if resp.diverging_epoch is not None:
            if unchanged:
                self._truncate_diverged(resp.diverging_epoch)
        elif resp.snapshot_id is not None:
            if resp.snapshot_id.end_offset > self._hw:
                self._snapshot = (resp.snapshot_id, bytearray())
        elif unchanged:
            if resp.records is not None:
                log.append_as_follower(resp.records)
            self._set_hw(min(resp.high_watermark, log.end_offset))
        self._send_fetch(now_ms)

    def _truncate_diverged(self, diverging: EpochEndOffset) -> None:
        local = self.log.end_offset_for_epoch(diverging.epoch)
        offset = min(local.offset, diverging.end_offset)
        if offset < self._hw:
            raise RaftInvariantError(
                f"node {self.node_id}: leader {self._leader_id} diverges at {offset}, below "
                f"the high watermark {self._hw}")
        self.log.truncate_to(offset)

    def _handle_fetch_snapshot_response(self, req: FetchSnapshotRequest,
                                        resp: FetchSnapshotResponse, now_ms: int) -> None:
        if req is not self._inflight:
            return
        self._inflight = None
        if resp.error_code != Errors.NONE:
            if resp.error_code in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
                self._snapshot = None  # fetch again: the leader names its current snapshot
            self._fetch_failed(resp, now_ms)
            return
        cl = resp.current_leader
        if self._observe(cl.leader_epoch, cl.leader_id, now_ms) or self._snapshot is None:
            return
        sid, buf = self._snapshot
        if resp.snapshot_id != sid or resp.position != len(buf):
            self._snapshot = None
        else:
            self._timer_ms = now_ms + self.config.fetch_timeout_ms
            self._fetched_from_leader = True
            buf += resp.unaligned_records
            if len(buf) >= resp.size:
                self._snapshot = None
                if sid.end_offset > self._hw:
                    self.log.install_snapshot(sid, bytes(buf))
                    self._out.append(SnapshotInstalled(sid))
                    self._set_hw(sid.end_offset)
        self._send_fetch(now_ms)
