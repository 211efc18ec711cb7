"""``Elections``: the part of ``RaftNode`` that elects leaders (a mixin; the state it
works on is ``RaftNode``'s, documented there).

- Vote, with KIP-996 pre-vote: a prospective voter asks for votes for ``epoch + 1``
  without bumping its epoch; a voter grants a pre-vote unless it is the leader or a
  follower that has fetched from its (not resigned) leader, and only to a log at least
  as up to date as its own (last epoch, then end offset). A pre-vote from a later epoch
  moves the receiver to that epoch. A real vote is granted once per epoch, persisted
  before the answer leaves.
- BeginQuorumEpoch: a new leader tells every voter, again until acknowledged (a Fetch in
  its epoch counts as an acknowledgement).
- EndQuorumEpoch: a resigning leader tells every voter, with its preferred successors
  (most caught-up first); a follower of it then stands after Kafka's strict exponential
  back-off by its place in that list (the first at once).
"""

from __future__ import annotations

from spool.cluster.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from spool.cluster.raft.outputs import Send
from spool.cluster.raft.roles import CANDIDATE, FOLLOWER, LEADER, PROSPECTIVE, RESIGNED, UNATTACHED
from spool.protocol.errors import Errors


class Elections:
    """Mixed into ``RaftNode`` (its state; see the module docstring)."""

    # -- elections ---------------------------------------------------------------------------
    def _request_votes(self, now_ms: int) -> None:
        for v in sorted(self.voters - {self.node_id}):
            self._send_vote(v, now_ms)

    def _send_vote(self, dst: int, now_ms: int) -> None:
        pre = self._role == PROSPECTIVE
        self._vote_sent[dst] = now_ms
        self._out.append(Send(dst, VoteRequest(
            self.config.cluster_id, self._epoch + 1 if pre else self._epoch, self.node_id,
            self.log.last_fetched_epoch, self.log.end_offset, pre_vote=pre, voter_id=dst)))

    def _check_election(self, now_ms: int) -> bool:
        """Move on if a majority has answered; True if the role changed."""
        majority = len(self.voters) // 2 + 1
        if len(self._granted) >= majority:
            if self._role == PROSPECTIVE:
                self._become_candidate(now_ms)
            else:
                self._become_leader(now_ms)
            return True
        if len(self._rejected) >= majority:
            if self._role == PROSPECTIVE and self._leader_id == self.node_id:
                # We led this epoch and resigned: stay resigned (and say so again) rather
                # than forget whom this epoch belonged to.
                self._become_resigned(now_ms, self._successors)
            elif self._role == PROSPECTIVE and self._leader_id >= 0:
                self._become_follower(self._epoch, self._leader_id, now_ms)
            else:
                backoff = self.rng.randrange(self.config.election_backoff_max_ms + 1)
                self._become_unattached(self._epoch, self._voted_id, now_ms,
                                        timer_ms=now_ms + backoff)
            return True
        return False

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        mine = (self.log.last_fetched_epoch, self.log.end_offset)
        return (last_epoch, last_offset) >= mine

    def _vote_response(self, error: int, granted: bool) -> VoteResponse:
        return VoteResponse(error, self._leader_id, self._epoch, granted)

    def _handle_vote(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        if req.candidate_id not in self.voters or not self.is_voter:
            return self._vote_response(Errors.INCONSISTENT_VOTER_SET, False)
        if req.pre_vote:
            if req.candidate_epoch <= self._epoch:
                return self._vote_response(Errors.FENCED_LEADER_EPOCH, False)
            if req.candidate_epoch - 1 > self._epoch:
                # The asker is already in a later epoch (it passed a pre-vote once but its
                # election failed): we, even a leader, move there, or the two sides would
                # never hear of each other -- pull replication sends it nothing.
                self._become_unattached(req.candidate_epoch - 1, -1, now_ms)
            # KIP-996: refused only by a leader, or by a follower that has fetched from
            # a leader that has not resigned since (its fetch timer has not expired: it
            # would be prospective then).
            heard_from_leader = self._role == LEADER or (
                self._role == FOLLOWER and self._fetched_from_leader
                and not self._leader_resigned)
            ok = not heard_from_leader and self._log_up_to_date(req.last_offset_epoch,
                                                                req.last_offset)
            return self._vote_response(Errors.NONE, ok)
        if req.candidate_epoch < self._epoch:
            return self._vote_response(Errors.FENCED_LEADER_EPOCH, False)
        if req.candidate_epoch > self._epoch:
            self._become_unattached(req.candidate_epoch, -1, now_ms)
        if self._voted_id == req.candidate_id:
            return self._vote_response(Errors.NONE, True)
        if (self._voted_id < 0 and self._leader_id < 0
                and self._role in (UNATTACHED, PROSPECTIVE)
                and self._log_up_to_date(req.last_offset_epoch, req.last_offset)):
            # Durable before granting; it also restarts our election timer.
            self._become_unattached(self._epoch, req.candidate_id, now_ms)
            return self._vote_response(Errors.NONE, True)
        return self._vote_response(Errors.NONE, False)

    def _handle_vote_response(self, src: int, req: VoteRequest, resp: VoteResponse,
                              now_ms: int) -> None:
        if resp.error_code not in (Errors.NONE, Errors.FENCED_LEADER_EPOCH):
            return
        if self._observe(resp.leader_epoch, resp.leader_id, now_ms):
            return
        expected = (PROSPECTIVE, self._epoch + 1) if req.pre_vote else (CANDIDATE, self._epoch)
        if (self._role, req.candidate_epoch) != expected or resp.error_code != Errors.NONE:
            return
        (self._granted if resp.vote_granted else self._rejected).add(src)
        self._check_election(now_ms)

    # -- BeginQuorumEpoch and EndQuorumEpoch -------------------------------------------------
    def _send_begin_epoch(self, dst: int, now_ms: int) -> None:
        assert self._leader is not None
        self._leader.begin_epoch_sent[dst] = now_ms
        self._out.append(Send(dst, BeginQuorumEpochRequest(
            self.config.cluster_id, self.node_id, self._epoch, voter_id=dst)))

    def _send_end_epoch(self, dst: int, now_ms: int) -> None:
        self._end_epoch_sent[dst] = now_ms
        self._out.append(Send(dst, EndQuorumEpochRequest(
            self.config.cluster_id, self.node_id, self._epoch, self._successors)))

    def _voter_only_error(self, leader_id: int, epoch: int) -> int:
        if leader_id not in self.voters:
            return Errors.INCONSISTENT_VOTER_SET
        if epoch < self._epoch:
            return Errors.FENCED_LEADER_EPOCH
        return Errors.NONE

    def _handle_begin_epoch(self, req: BeginQuorumEpochRequest,
                            now_ms: int) -> BeginQuorumEpochResponse:
        error = self._voter_only_error(req.leader_id, req.leader_epoch)
        if error == Errors.NONE:
            self._observe(req.leader_epoch, req.leader_id, now_ms)
        return BeginQuorumEpochResponse(error, self._leader_id, self._epoch)

    def _handle_end_epoch(self, req: EndQuorumEpochRequest,
                          now_ms: int) -> EndQuorumEpochResponse:
        error = self._voter_only_error(req.leader_id, req.leader_epoch)
        if error == Errors.NONE:
            self._observe(req.leader_epoch, req.leader_id, now_ms)
            if (self._role == FOLLOWER and self._leader_id == req.leader_id
                    and self._epoch == req.leader_epoch):
                self._leader_resigned = True
                self._timer_ms = min(self._timer_ms,
                                     now_ms + self._successor_backoff(req.preferred_successors))
        return EndQuorumEpochResponse(error, self._leader_id, self._epoch)

    def _successor_backoff(self, successors: tuple[int, ...]) -> int:
        """Kafka's strict exponential back-off: the first preferred successor stands at
        once, the next after retry_backoff, then twice that, ... (capped)."""
        pos = successors.index(self.node_id) if self.node_id in successors else len(successors)
        if pos == 0:
            return 0
        cap = self.config.election_backoff_max_ms
        return min(cap, self.config.retry_backoff_ms * (1 << min(pos - 1, 20)))

    def _handle_epoch_response(self, resp: BeginQuorumEpochResponse | EndQuorumEpochResponse,
                               src: int, now_ms: int) -> None:
        if resp.error_code not in (Errors.NONE, Errors.FENCED_LEADER_EPOCH):
            return
        if self._observe(resp.leader_epoch, resp.leader_id, now_ms):
            return
        if resp.error_code != Errors.NONE or resp.leader_epoch != self._epoch:
            return
        if isinstance(resp, BeginQuorumEpochResponse) and self._leader is not None:
            self._leader.begin_epoch_acked.add(src)
        elif isinstance(resp, EndQuorumEpochResponse) and self._role == RESIGNED:
            self._end_epoch_acked.add(src)
