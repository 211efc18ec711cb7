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
  resigns. A follower without a successful fetch for fetch timeout turns prospective, and
  asks for pre-votes after a random wait in ``[0, election timeout / 4)`` (so that the
  followers of a dead leader do not all stand in the same epoch and split the vote).

A bug in the core or a store that breaks an invariant (truncating committed entries)
raises ``RaftInvariantError`` rather than carrying on.

The class is in three modules: this one (the API, roles and their transitions, timers,
dispatch), ``elections`` (Vote, BeginQuorumEpoch, EndQuorumEpoch) and ``replication``
(Fetch and FetchSnapshot, both sides); ``roles`` names the roles.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence

from spool.cluster.raft.config import RaftConfig
from spool.cluster.raft.elections import Elections
from spool.cluster.raft.leader import LeaderState, ReplicaState
from spool.cluster.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from spool.cluster.raft.outputs import LeaderChanged, Output, Respond
from spool.cluster.raft.replication import Replication
from spool.cluster.raft.roles import (
    CANDIDATE,
    FOLLOWER,
    LEADER,
    NEVER,
    PROSPECTIVE,
    RESIGNED,
    UNATTACHED,
    RaftInvariantError,
)
from spool.cluster.raft.store import (
    ElectionState,
    LeaderChange,
    LogEntry,
    QuorumStateStore,
    RaftLog,
)
from spool.protocol.errors import Errors, KafkaError


class RaftNode(Elections, Replication):
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
        self._vote_at_ms = NEVER  # a prospective follower's first pre-votes (see _on_timer)
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
        deadlines = [self._timer_ms, self._fetch_at_ms, self._vote_at_ms]
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
        if self._vote_at_ms <= now_ms:
            self._vote_at_ms = NEVER
            self._request_votes(now_ms)
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
        self._vote_at_ms = NEVER
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

    def _become_prospective(self, now_ms: int, vote_delay_ms: int = 0) -> None:
        self._leave_role(now_ms)
        self._role = PROSPECTIVE
        self._granted = {self.node_id}
        self._timer_ms = self._election_timeout(now_ms)
        if self._check_election(now_ms):
            return
        if vote_delay_ms > 0:
            self._vote_at_ms = now_ms + vote_delay_ms
        else:
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
            # The followers of a dead leader see their fetch timers expire together (their
            # parked Fetches were answered together). Asking for pre-votes at once, each
            # would grant the other's, both would stand in the same epoch and split the vote.
            # So the follower turns prospective now (it grants pre-votes from here on) but
            # asks for its own after a random wait in [0, election timeout / 4): the first
            # to ask wins, and the others grant its vote.
            spread = max(1, self.config.election_timeout_ms // 4)
            self._become_prospective(now_ms, vote_delay_ms=self.rng.randrange(spread))
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
