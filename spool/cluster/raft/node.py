"""``RaftNode``: a sans-I/O KRaft replica (KIP-595 with KIP-996 pre-vote).

The node reads no clock, opens no socket and draws randomness only from the ``rng`` it
is given. Its inputs are method calls carrying ``now_ms``; its outputs are lists of
``spool.cluster.raft.outputs`` values (messages to send, deferred responses, high
watermark and leader changes). Storage goes through ``RaftLog`` and
``QuorumStateStore`` (``spool.cluster.raft.store``), whose calls are durable on return.

Driving it (the shell's loop, single-threaded)::

    node = RaftNode(node_id, voters, log, quorum_state, config, rng, now_ms)
    outputs = node.poll(now_ms)                  # at start, then at node.next_poll_ms
    response, outputs = node.handle_request(src, request, now_ms)    # None: parked
    outputs = node.handle_response(src, request, response, now_ms)   # request: as sent
    last_offset = node.append([b"...", ...], now_ms)                 # leader only
    node.resign(now_ms); node.create_snapshot(end_offset, data)
    outputs = node.poll(now_ms)                  # after append/resign/create_snapshot

Methods that are not ``poll``/``handle_*`` queue their outputs; the next ``poll``
returns them. ``next_poll_ms`` is the time by which ``poll`` must be called again.

Roles (Kafka's state classes): ``unattached`` (an epoch, maybe a vote, no leader),
``prospective`` (a voter asking for pre-votes: it does not bump the epoch, and a voter
that hears from a leader refuses it, so a node that was cut off cannot depose a healthy
leader when it comes back), ``candidate`` (epoch + 1, voted for itself, asking for
votes), ``leader``, ``follower`` (fetching from a known leader) and ``resigned`` (a
leader that stepped down: by ``resign`` or check-quorum; it refuses appends, sends
EndQuorumEpoch with its preferred successors, and waits for the next epoch). A node not
in ``voters`` is an observer: it is only ever unattached (finding the leader by fetching
from a random voter) or a follower; it never votes and never counts for the quorum.

Rules it keeps (Raft, as Kafka's KafkaRaftClient applies them):

- The quorum state (epoch, voted_id, leader_id) is written through the
  ``QuorumStateStore`` before any vote is requested or granted and before any message of
  a new epoch is sent. One vote per epoch; a vote goes only to a candidate whose log is
  at least as up to date (last epoch, then end offset).
- Every request carries an epoch; an older one is answered FENCED_LEADER_EPOCH, and
  every answer carries the responder's leader and epoch so the asker catches up.
- Replication is pull: followers and observers send Fetch(fetch_offset,
  last_fetched_epoch); the leader answers entries, a DivergingEpoch (the follower
  truncates and fetches again) or a SnapshotId (the offset is below the leader's log
  start: the follower fetches the snapshot in chunks with FetchSnapshot).
- The high watermark is ``LeaderState``'s majority rule; a follower's is the leader's,
  capped by its own log end. It never decreases within the life of a node.
- Check-quorum: a leader not fetched from by a majority within 1.5 x fetch timeout
  resigns. A follower without a successful fetch for fetch timeout turns prospective.

A bug in the core or a store that breaks an invariant (truncating committed entries)
raises ``RaftInvariantError`` rather than carrying on.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence

from spool.cluster.raft.config import RaftConfig
from spool.cluster.raft.leader import LeaderState, ReplicaState
from spool.cluster.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from spool.cluster.raft.outputs import (
    HighWatermarkAdvanced,
    LeaderChanged,
    Output,
    Respond,
    Send,
    SnapshotInstalled,
)
from spool.cluster.raft.store import (
    ElectionState,
    LeaderChange,
    LogEntry,
    QuorumStateStore,
    RaftLog,
)
from spool.protocol.errors import Errors, KafkaError

NEVER = 1 << 62

UNATTACHED = "unattached"
PROSPECTIVE = "prospective"
CANDIDATE = "candidate"
LEADER = "leader"
FOLLOWER = "follower"
RESIGNED = "resigned"


class RaftInvariantError(AssertionError):
    """The core was asked to do something Raft forbids (a bug, not a fault to survive)."""


class RaftNode:
    def __init__(self, node_id: int, voters: Iterable[int], log: RaftLog,
                 quorum_state: QuorumStateStore, config: RaftConfig, rng: random.Random,
                 now_ms: int) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.is_voter = node_id in self.voters
        self.log = log
        self.quorum_state = quorum_state
        self.config = config
        self.rng = rng
        self._out: list[Output] = []
        self._hw = log.log_start_offset
        self._role = UNATTACHED
        self._timer_ms = NEVER
        # Elections (prospective and candidate): who answered, who granted, when we asked.
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        self._vote_sent: dict[int, int] = {}
        # Fetching (follower, and an observer finding its leader).
        self._inflight: FetchRequest | FetchSnapshotRequest | None = None
        self._inflight_dst = -1
        self._inflight_sent_ms = 0
        self._fetch_at_ms = NEVER
        self._leader_resigned = False
        self._fetched_from_leader = False
        self._snapshot: tuple[SnapshotId, bytearray] | None = None
        # Leading and resigning.
        self._leader: LeaderState | None = None
        self._orphans: list[tuple[int, FetchRequest]] = []
        self._successors: tuple[int, ...] = ()
        self._end_epoch_acked: set[int] = set()
        self._end_epoch_sent: dict[int, int] = {}

        stored = quorum_state.read()
        state = stored or ElectionState(0)
        self._persisted: ElectionState | None = stored
        self._epoch, self._voted_id, self._leader_id = state
        if state.leader_id == node_id:
            # We led this epoch before a restart: we cannot resume (our in-memory state
            # is gone), so we resign it and let the others elect the next leader.
            self._become_resigned(now_ms, successors=tuple(sorted(self.voters - {node_id})))
        elif state.leader_id >= 0:
            self._become_follower(state.epoch, state.leader_id, now_ms)
        else:
            self._become_unattached(state.epoch, state.voted_id, now_ms)

    # -- public properties -----------------------------------------------------------------
    @property
    def role(self) -> str:
        return self._role

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leader_id(self) -> int:
        """The leader of ``epoch`` as far as this node knows; -1 when unknown."""
        return self._leader_id

    @property
    def voted_id(self) -> int:
        return self._voted_id

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def epoch_start_offset(self) -> int:
        """Leader only: the offset of its LeaderChange entry (-1 when not leader)."""
        return self._leader.epoch_start_offset if self._leader else -1

    @property
    def next_poll_ms(self) -> int:
        deadlines = [self._timer_ms, self._fetch_at_ms]
        rt = self.config.request_timeout_ms
        if self._inflight is not None:
            deadlines.append(self._inflight_sent_ms + rt)
        if self._role in (PROSPECTIVE, CANDIDATE):
            deadlines += [t + rt for d, t in self._vote_sent.items()
                          if d not in self._granted and d not in self._rejected]
        if self._role == RESIGNED:
            deadlines += [t + rt for d, t in self._end_epoch_sent.items()
                          if d not in self._end_epoch_acked]
        if self._leader is not None:
            ld = self._leader
            deadlines += [t + rt for d, t in ld.begin_epoch_sent.items()
                          if d not in ld.begin_epoch_acked]
            deadlines += [deadline for _, _, deadline in ld.parked]
        return min(deadlines)

    def describe_quorum(self) -> tuple[list[ReplicaState], list[ReplicaState]]:
        """Leader only (else NOT_LEADER_OR_FOLLOWER): (voters, observers) as DescribeQuorum
        reports them."""
        if self._leader is None:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"leader is {self._leader_id}")
        ld = self._leader
        return (sorted(ld.replicas.values(), key=lambda r: r.replica_id),
                sorted(ld.observers.values(), key=lambda r: r.replica_id))

    # -- the user's side ---------------------------------------------------------------------
    def append(self, values: Sequence[bytes], now_ms: int) -> int:
        """Append entries as leader; returns the offset of the last one. They are committed
        once ``high_watermark`` passes that offset; they may be lost if leadership moves
        first (``LeaderChanged``). Raises KafkaError(NOT_LEADER_OR_FOLLOWER) elsewhere."""
        if self._leader is None or self._role != LEADER:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"leader is {self._leader_id}")
        if not values:
            return self.log.end_offset - 1
        last = self.log.append_as_leader(values, self._epoch)
        self._leader.update_local(self.log.end_offset, now_ms)
        self._maybe_advance_leader_hw(now_ms)
        self._complete_parked(now_ms)
        return last

    def resign(self, now_ms: int) -> None:
        """Controlled shutdown: a leader steps down and asks its most caught-up voters to
        stand (EndQuorumEpoch). A no-op on any other role."""
        if self._role == LEADER and self._leader is not None:
            self._become_resigned(now_ms, self._leader.preferred_successors())

    def committed_entries(self, start: int) -> Iterator[LogEntry]:
        """Committed entries from ``start`` (``log_start_offset <= start``) up to the high
        watermark."""
        return self.log.entries(start, self._hw)

    def latest_snapshot(self) -> tuple[SnapshotId, bytes] | None:
        """The newest snapshot in the log store and its bytes (the state machine loads it
        at start and after ``SnapshotInstalled``), or None."""
        sid = self.log.latest_snapshot_id
        if sid is None:
            return None
        found = self.log.read_snapshot(sid, 0, 0x7FFFFFFF)
        if found is None:
            return None
        return sid, found[0]

    def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """The state machine's image of offsets ``[0, end_offset)`` (committed: at most the
        high watermark). Stored, then the log before it is deleted. With a store that keeps
        several entries per batch (``DiskRaftLog``), ``end_offset`` must end a batch -- a
        high watermark always does -- since a follower restarting its log there fetches
        whole batches (Kafka snapshots at a committed batch's end too)."""
        if not self.log.log_start_offset < end_offset <= self._hw:
            raise ValueError(f"snapshot end {end_offset} outside "
                             f"({self.log.log_start_offset}, {self._hw}]")
        sid = SnapshotId(end_offset, self.log.epoch_at(end_offset - 1))
        self.log.store_snapshot(sid, data)
        self.log.delete_before(end_offset)
        return sid

    def poll(self, now_ms: int) -> list[Output]:
        """Fire the timers that are due; returns every output queued since the last call."""
        if now_ms >= self._timer_ms:
            self._on_timer(now_ms)
        self._resend_due(now_ms)
        if self._fetch_at_ms <= now_ms and self._inflight is None:
            self._send_fetch(now_ms)
        if self._leader is not None and self._leader.parked:
            self._complete_parked(now_ms, expired_only=True)
        return self._drain()

    def _drain(self) -> list[Output]:
        if self._orphans:
            orphans, self._orphans = self._orphans, []
            for src, req in orphans:
                self._out.append(Respond(src, req, self._fetch_error(req)))
        out, self._out = self._out, []
        return out

    # -- state transitions -------------------------------------------------------------------
    def _persist(self, epoch: int, voted_id: int, leader_id: int) -> None:
        changed_leader = (epoch, leader_id) != (self._epoch, self._leader_id)
        state = ElectionState(epoch, voted_id, leader_id)
        if state != self._persisted:
            self.quorum_state.write(state)
            self._persisted = state
        self._epoch, self._voted_id, self._leader_id = epoch, voted_id, leader_id
        if changed_leader:
            self._out.append(LeaderChanged(leader_id, epoch))

    def _leave_role(self, now_ms: int) -> None:
        if self._leader is not None:
            # Parked fetches are answered by _drain, once the new state is known.
            self._orphans += [(src, req) for src, req, _ in self._leader.parked]
            self._leader = None
        self._granted.clear()
        self._rejected.clear()
        self._vote_sent.clear()
        self._inflight = None
        self._fetch_at_ms = NEVER
        self._snapshot = None
        self._end_epoch_acked.clear()
        self._end_epoch_sent.clear()

    def _election_timeout(self, now_ms: int) -> int:
        t = self.config.election_timeout_ms
        return now_ms + t + self.rng.randrange(t)

    def _become_unattached(self, epoch: int, voted_id: int, now_ms: int,
                           timer_ms: int | None = None) -> None:
        self._leave_role(now_ms)
        self._role = UNATTACHED
        self._persist(epoch, voted_id, -1)
        if self.voters == {self.node_id}:
            self._timer_ms = now_ms  # a quorum of one elects itself at once
        elif self.is_voter:
            self._timer_ms = timer_ms if timer_ms is not None else self._election_timeout(now_ms)
        else:
            self._timer_ms = NEVER
            self._fetch_at_ms = now_ms  # observers look for the leader
        self._leader_resigned = False

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        self._leave_role(now_ms)
        voted = self._voted_id if epoch == self._epoch else -1
        self._role = FOLLOWER
        self._persist(epoch, voted, leader_id)
        self._timer_ms = now_ms + self.config.fetch_timeout_ms
        self._fetch_at_ms = now_ms
        self._leader_resigned = False
        self._fetched_from_leader = False

    def _become_prospective(self, now_ms: int) -> None:
        self._leave_role(now_ms)
        self._role = PROSPECTIVE
        self._granted = {self.node_id}
        self._timer_ms = self._election_timeout(now_ms)
        if not self._check_election(now_ms):
            self._request_votes(now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        self._leave_role(now_ms)
        self._role = CANDIDATE
        self._persist(self._epoch + 1, self.node_id, -1)  # durable before any vote request
        self._granted = {self.node_id}
        self._timer_ms = self._election_timeout(now_ms)
        if not self._check_election(now_ms):
            self._request_votes(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        granted = tuple(sorted(self._granted))
        self._leave_role(now_ms)
        self._role = LEADER
        self._persist(self._epoch, self._voted_id, self.node_id)
        start = self.log.append_control_as_leader(
            LeaderChange(self.node_id, tuple(sorted(self.voters)), granted), self._epoch)
        self._leader = LeaderState(self.node_id, self.voters, self._epoch, start, now_ms)
        self._leader.update_local(self.log.end_offset, now_ms)
        self._timer_ms = self._leader.next_quorum_check_ms(self.config.check_quorum_timeout_ms)
        for v in sorted(self.voters - {self.node_id}):
            self._send_begin_epoch(v, now_ms)
        self._maybe_advance_leader_hw(now_ms)

    def _become_resigned(self, now_ms: int, successors: tuple[int, ...]) -> None:
        self._leave_role(now_ms)
        self._role = RESIGNED
        self._persist(self._epoch, self._voted_id, self.node_id)
        self._successors = successors
        self._end_epoch_acked = {self.node_id}
        alone = self.voters == {self.node_id}
        self._timer_ms = now_ms if alone else self._election_timeout(now_ms)
        for v in sorted(self.voters - {self.node_id}):
            self._send_end_epoch(v, now_ms)

    def _observe(self, epoch: int, leader_id: int, now_ms: int) -> bool:
        """Catch up with what another node reports (its epoch and leader); True when our
        state moved to that epoch or leader."""
        if epoch > self._epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now_ms)
            else:
                self._become_unattached(epoch, -1, now_ms)
            return True
        if (epoch == self._epoch and leader_id >= 0 and leader_id != self.node_id
                and self._leader_id != leader_id):
            if self._leader_id >= 0:
                raise RaftInvariantError(
                    f"node {self.node_id}: two leaders in epoch {epoch}: "
                    f"{self._leader_id} and {leader_id}")
            self._become_follower(epoch, leader_id, now_ms)
            return True
        return False

    # -- timers ------------------------------------------------------------------------------
    def _on_timer(self, now_ms: int) -> None:
        role = self._role
        if role == LEADER and self._leader is not None:
            timeout = self.config.check_quorum_timeout_ms
            if self._leader.quorum_alive(now_ms, timeout):
                self._timer_ms = max(now_ms + 1, self._leader.next_quorum_check_ms(timeout))
            else:
                self._become_resigned(now_ms, self._leader.preferred_successors())
        elif role == FOLLOWER and self.is_voter:
            self._become_prospective(now_ms)
        elif role == FOLLOWER:
            self._become_unattached(self._epoch, self._voted_id, now_ms)
        elif role == PROSPECTIVE:
            self._become_prospective(now_ms)  # a new round of pre-votes
        elif role in (UNATTACHED, CANDIDATE, RESIGNED) and self.is_voter:
            self._become_prospective(now_ms)
        else:
            self._timer_ms = NEVER

    def _resend_due(self, now_ms: int) -> None:
        rt = self.config.request_timeout_ms
        if self._role in (PROSPECTIVE, CANDIDATE):
            for d, t in list(self._vote_sent.items()):
                if d not in self._granted and d not in self._rejected and now_ms >= t + rt:
                    self._send_vote(d, now_ms)
        elif self._role == RESIGNED:
            for d, t in list(self._end_epoch_sent.items()):
                if d not in self._end_epoch_acked and now_ms >= t + rt:
                    self._send_end_epoch(d, now_ms)
        elif self._leader is not None:
            ld = self._leader
            for d, t in list(ld.begin_epoch_sent.items()):
                if d not in ld.begin_epoch_acked and now_ms >= t + rt:
                    self._send_begin_epoch(d, now_ms)
        if self._inflight is not None and now_ms >= self._inflight_sent_ms + rt:
            self._inflight = None  # lost: ask again (a snapshot fetch resumes at its position)
            self._fetch_at_ms = now_ms

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

    # -- dispatch ----------------------------------------------------------------------------
    def handle_request(self, src: int, request: Request,
                       now_ms: int) -> tuple[Response | None, list[Output]]:
        """Answer a request from node ``src``. The response is None when the request is
        parked (a Fetch with nothing new); its answer comes later as ``Respond``."""
        cid = self.config.cluster_id
        if cid is not None and request.cluster_id not in (None, cid):
            return self._cluster_id_error(request), self._drain()
        resp: Response | None
        if isinstance(request, FetchRequest):
            resp = self._handle_fetch(src, request, now_ms)
            if resp is None and self._leader is not None:
                self._leader.parked.append((src, request, now_ms + request.max_wait_ms))
        elif isinstance(request, VoteRequest):
            resp = self._handle_vote(request, now_ms)
        elif isinstance(request, BeginQuorumEpochRequest):
            resp = self._handle_begin_epoch(request, now_ms)
        elif isinstance(request, EndQuorumEpochRequest):
            resp = self._handle_end_epoch(request, now_ms)
        elif isinstance(request, FetchSnapshotRequest):
            resp = self._handle_fetch_snapshot(src, request, now_ms)
        else:
            raise TypeError(f"not a Raft request: {request!r}")
        return resp, self._drain()

    def _cluster_id_error(self, request: Request) -> Response:
        e, cl = Errors.INCONSISTENT_CLUSTER_ID, self._current_leader()
        if isinstance(request, FetchRequest):
            return FetchResponse(e, cl)
        if isinstance(request, FetchSnapshotRequest):
            return FetchSnapshotResponse(e, cl)
        if isinstance(request, VoteRequest):
            return VoteResponse(e, cl.leader_id, cl.leader_epoch, False)
        if isinstance(request, BeginQuorumEpochRequest):
            return BeginQuorumEpochResponse(e, cl.leader_id, cl.leader_epoch)
        return EndQuorumEpochResponse(e, cl.leader_id, cl.leader_epoch)

    def handle_response(self, src: int, request: Request, response: Response,
                        now_ms: int) -> list[Output]:
        """The answer from ``src`` to ``request`` (the object this node sent)."""
        if isinstance(response, FetchResponse) and isinstance(request, FetchRequest):
            self._handle_fetch_response(src, request, response, now_ms)
        elif isinstance(response, VoteResponse) and isinstance(request, VoteRequest):
            self._handle_vote_response(src, request, response, now_ms)
        elif isinstance(response, (BeginQuorumEpochResponse, EndQuorumEpochResponse)):
            self._handle_epoch_response(response, src, now_ms)
        elif isinstance(response, FetchSnapshotResponse) and isinstance(
                request, FetchSnapshotRequest):
            self._handle_fetch_snapshot_response(request, response, now_ms)
        else:
            raise TypeError(f"{response!r} does not answer {request!r}")
        return self._drain()
