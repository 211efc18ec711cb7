"""A seeded, deterministic simulation of a KRaft quorum (``spool.cluster.raft``).

One ``Simulation(seed)`` draws everything from ``random.Random(seed)``: the cluster
(3 or 5 voters, sometimes an observer), the network's faults (loss, duplication,
delays that reorder, partitions that heal), crashes and restarts (a restarted node keeps
only its ``MemoryRaftLog`` and ``MemoryQuorumStateStore``, or with ``store_dir`` what
reached its ``DiskRaftLog`` and quorum-state file, reopened; its state machine reloads
from its latest snapshot), client appends at random nodes, snapshots and resignations.
Time is simulated: an event queue ordered by (time, sequence). The same seed replays
the same run exactly: ``python -m tests.sim --seed N -v`` traces it.

A run has a fault phase, then a calm phase (partitions healed, crashed nodes restarted,
no loss or duplication) in which the quorum must elect a leader that every live voter
follows and commit an append on every voter within ``LIVENESS_MS``.

Invariants, checked after every event (``Violation`` names the first broken one):

- at most one leader per epoch, over the whole run (restarts included);
- a node never holds two different votes in one epoch (read from its quorum store);
- every entry a node applies (offsets below its high watermark, read from its own log,
  or loaded from a snapshot) equals the entry at that offset in the committed log that
  the run has seen so far: a committed entry is never lost or changed anywhere;
- leader completeness: a node that becomes leader of epoch E holds every entry that was
  committed in an epoch before E;
- a node's high watermark never goes backwards within one life;
- a leader never shortens its log within its epoch (Raft's leader append-only).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import pickle
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from spool.cluster.raft import (
    LEADER,
    ElectionState,
    HighWatermarkAdvanced,
    LeaderChanged,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    QuorumStateStore,
    RaftConfig,
    RaftLog,
    RaftNode,
    Respond,
    Send,
    SnapshotInstalled,
)
from spool.protocol.errors import KafkaError
from tests.sim.events import EventQueue, Violation, draw_cut

CONFIG = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=100, request_timeout_ms=100,
                    fetch_max_wait_ms=25, retry_backoff_ms=5, election_backoff_max_ms=50,
                    fetch_max_bytes=120, fetch_snapshot_max_bytes=96)
LIVENESS_MS = 4000



@dataclass
class Params:
    """What one seed draws: the cluster and how hostile its world is."""

    voters: int
    observers: int
    fault_ms: int
    loss: float
    duplicate: float
    delay_max_ms: int
    crash_every_ms: int
    partition_every_ms: int
    append_every_ms: int
    snapshot_every_ms: int
    resign_every_ms: int
    fetch_max_bytes: int
    clock_drift: float

    @classmethod
    def draw(cls, rng: random.Random) -> Params:
        return cls(
            voters=rng.choice((3, 3, 5)),
            observers=rng.choice((0, 0, 1)),
            fault_ms=rng.choice((800, 1500, 3000)),
            loss=rng.choice((0.0, 0.02, 0.1, 0.25)),
            duplicate=rng.choice((0.0, 0.02, 0.1)),
            delay_max_ms=rng.choice((2, 10, 30)),
            crash_every_ms=rng.choice((0, 300, 800)),
            partition_every_ms=rng.choice((0, 250, 600)),
            append_every_ms=rng.choice((15, 40)),
            snapshot_every_ms=rng.choice((0, 150, 400)),
            resign_every_ms=rng.choice((0, 0, 500)),
            fetch_max_bytes=rng.choice((1, 120, 1000)),  # 1: one entry per Fetch
            clock_drift=rng.choice((0.0, 0.0, 0.1)),  # node clocks run up to 10% off
        )


class WatchedQuorumState:
    """A QuorumStateStore passed through, remembering the last state written (so the
    one-vote-per-epoch check reads no file)."""

    def __init__(self, inner: QuorumStateStore) -> None:
        self.inner = inner
        self.last = inner.read()

    def read(self) -> ElectionState | None:
        return self.inner.read()

    def write(self, state: ElectionState) -> None:
        self.inner.write(state)
        self.last = state


@dataclass
class SimNode:
    node_id: int
    log: RaftLog = field(default_factory=MemoryRaftLog)
    quorum_state: WatchedQuorumState = field(
        default_factory=lambda: WatchedQuorumState(MemoryQuorumStateStore()))
    raft: RaftNode | None = None
    life: int = 0
    applied: list = field(default_factory=list)  # (epoch, value) per offset from 0
    hw_seen: int = 0
    poll_at: int = -1
    leader_end: tuple[int, int] = (-1, 0)  # (epoch, log end) when last seen leading
    clock_offset: int = 0  # the node's clock reads offset + rate * simulated ms
    clock_rate: float = 1.0


class Simulation(EventQueue):
    def __init__(self, seed: int, trace: Callable[[str], None] | None = None,
                 params: Params | None = None, store_dir: Path | None = None) -> None:
        self.seed = seed
        self.store_dir = store_dir
        super().__init__(random.Random(seed), trace)
        self.p = params or Params.draw(self.rng)
        self.config = dataclasses.replace(CONFIG, fetch_max_bytes=self.p.fetch_max_bytes)
        voters = list(range(1, self.p.voters + 1))
        self.voters = voters
        ids = voters + list(range(100, 100 + self.p.observers))
        self.nodes = {i: SimNode(i) for i in ids}
        for n in self.nodes.values():
            n.clock_offset = self.rng.randrange(1 << 40)
            n.clock_rate = 1 + self.rng.uniform(-self.p.clock_drift, self.p.clock_drift)
        self.cut: set[tuple[int, int]] = set()
        self.loss, self.duplicate = self.p.loss, self.p.duplicate
        self.faults = True
        self.committed: list[tuple[int, bytes | None]] = []
        self.commit_epoch: list[int] = []
        self.leaders: dict[int, int] = {}
        self.votes: dict[tuple[int, int], int] = {}
        self.appended = 0
        self.origin: dict[int, tuple[object, int]] = {}  # id(request) -> (request, life)
        self.steps = 0
        self.recovery_ms = -1  # calm to an append committed on every voter
        self.leader_ms = -1  # calm to a leader that every voter follows
        self.stats = {"crashes": 0, "elections": 0, "snapshots": 0, "installs": 0,
                      "partitions": 0, "resigns": 0}
        for i in ids:
            self._start(i)
        self._at(self._every(self.p.append_every_ms), "append")
        for kind, every in (("crash", self.p.crash_every_ms),
                            ("partition", self.p.partition_every_ms),
                            ("snapshot", self.p.snapshot_every_ms),
                            ("resign", self.p.resign_every_ms)):
            if every:
                self._at(self._every(every), kind)


    # -- nodes -------------------------------------------------------------------------------
    def _open_stores(self, n: SimNode) -> None:
        """With ``store_dir``: (re)open the node's DiskRaftLog and quorum-state file, so a
        restart keeps exactly what reached the files."""
        if self.store_dir is None:
            return
        from spool.cluster.raft.disk import DiskRaftLog, FileQuorumStateStore
        from spool.util.clock import FakeClock

        if isinstance(n.log, DiskRaftLog):
            n.log.close()
        d = self.store_dir / f"node-{n.node_id}"
        n.log = DiskRaftLog(d, clock=FakeClock(0))
        n.quorum_state = WatchedQuorumState(FileQuorumStateStore(d))

    def close(self) -> None:
        for n in self.nodes.values():
            if hasattr(n.log, "close"):
                n.log.close()

    def _start(self, i: int) -> None:
        n = self.nodes[i]
        n.life += 1
        self._open_stores(n)
        n.raft = RaftNode(i, self.voters, n.log, n.quorum_state, self.config,
                          random.Random(self.rng.getrandbits(64)), self._clock(n))
        n.hw_seen = n.raft.high_watermark
        n.applied = []
        self.new_state_machine(n)
        snap = n.log.latest_snapshot_id
        if snap is not None:
            self._load_snapshot(n, snap)
        self._log(f"start {i} life {n.life}: {self._describe(n)}")
        self._after(n, n.raft.poll(self._clock(n)))

    def _crash(self, i: int) -> None:
        n = self.nodes[i]
        n.raft = None
        n.poll_at = -1
        self.stats["crashes"] += 1
        self._log(f"crash {i}")
        if self.faults:
            self._at(self.now + 20 + self.rng.randrange(300), "restart", i)

    def _describe(self, n: SimNode) -> str:
        r = n.raft
        if r is None:
            return f"{n.node_id}:down"
        return (f"{n.node_id}:{r.role}/e{r.epoch}/l{r.leader_id}/v{r.voted_id}/"
                f"hw{r.high_watermark}/leo{r.log_end_offset}/lso{n.log.log_start_offset}")

    def _clock(self, n: SimNode) -> int:
        return n.clock_offset + int(self.now * n.clock_rate)

    def _schedule_poll(self, n: SimNode) -> None:
        if n.raft is None:
            return
        # The first simulated ms at which the node's clock reads next_poll_ms.
        t = max(self.now + 1, math.ceil((n.raft.next_poll_ms - n.clock_offset) / n.clock_rate))
        if n.poll_at < 0 or t < n.poll_at or n.poll_at <= self.now:
            n.poll_at = t
            self._at(t, "poll", n.node_id, n.life)

    def _after(self, n: SimNode, outputs: list) -> None:
        """Route a node's outputs, apply what it committed, reschedule its timer, check."""
        for o in outputs:
            if isinstance(o, Send):
                self.origin[id(o.request)] = (o.request, n.life)
                self._send(n.node_id, o.dst, o.request, None)
            elif isinstance(o, Respond):
                self._send(n.node_id, o.dst, o.request, o.response)
            elif isinstance(o, HighWatermarkAdvanced):
                pass  # applied below, from the node's high watermark
            elif isinstance(o, LeaderChanged):
                self._log(f"{n.node_id} leader change: {o.leader_id} in epoch {o.epoch}")
                if o.leader_id == n.node_id:
                    self.stats["elections"] += 1
                    self._check_leader_completeness(n)
            elif isinstance(o, SnapshotInstalled):
                self._log(f"{n.node_id} installed snapshot {o.snapshot_id}")
                self.stats["installs"] += 1
                self._load_snapshot(n, o.snapshot_id)
        self._apply(n)
        self._check_node(n)
        self._schedule_poll(n)

    # -- the network -------------------------------------------------------------------------
    def _send(self, src: int, dst: int, request: object, response: object) -> None:
        """A request (response None) or a response, through the faulty network. Like a TCP
        connection, a response reaches only the life of the node that sent the request."""
        if (src, dst) in self.cut or (self.faults and self.rng.random() < self.loss):
            self._log(f"lost {src}->{dst} {type(response or request).__name__}")
            return
        copies = 2 if self.faults and self.rng.random() < self.duplicate else 1
        for _ in range(copies):
            delay = 1 + self.rng.randrange(self.p.delay_max_ms)
            if response is None:
                self._at(self.now + delay, "req", src, dst, request)
            else:
                life = self.origin[id(request)][1]
                self._at(self.now + delay, "resp", src, dst, request, response, life)

    def _deliver_request(self, src: int, dst: int, request: object) -> None:
        n = self.nodes[dst]
        if n.raft is None or (src, dst) in self.cut:
            return
        self._log(f"{src}->{dst} {request}")
        response, outputs = n.raft.handle_request(src, request, self._clock(n))
        if response is not None:
            self._send(dst, src, request, response)
        self._after(n, outputs)

    def _deliver_response(self, src: int, dst: int, request: object, response: object,
                          life: int) -> None:
        n = self.nodes[dst]
        if n.raft is None or (src, dst) in self.cut or n.life != life:
            return
        self._log(f"{src}->{dst} {response}")
        self._after(n, n.raft.handle_response(src, request, response, self._clock(n)))

    # -- the state machine -------------------------------------------------------------------
    def _apply(self, n: SimNode) -> None:
        r = n.raft
        if r is None:
            return
        if r.high_watermark > len(n.applied):
            for e in r.committed_entries(len(n.applied)):
                self._check_committed(n, e.offset, (e.epoch, e.value), r.epoch)
                n.applied.append((e.epoch, e.value))
                self.applied_entry(n, e)
        self.after_apply(n)

    def _load_snapshot(self, n: SimNode, snapshot_id: object) -> None:
        data, size = n.log.read_snapshot(snapshot_id, 0, 1 << 30)
        applied, extra = pickle.loads(data)
        for offset, entry in enumerate(applied):
            self._check_committed(n, offset, entry, -1)
        n.applied = applied
        self.loaded_snapshot(n, extra)

    # -- hooks for a state machine above Raft (tests/sim/controller_sim.py) ------------------
    def new_state_machine(self, n: SimNode) -> None:
        """A node (re)starts: its state machine is empty until a snapshot or entries."""

    def applied_entry(self, n: SimNode, entry: object) -> None:
        """A committed entry reached the node's state machine (after the log check)."""

    def after_apply(self, n: SimNode) -> None:
        """The node took a step and applied what it could."""

    def snapshot_extra(self, n: SimNode) -> object:
        """What the state machine adds to a snapshot of the node's applied prefix."""
        return None

    def loaded_snapshot(self, n: SimNode, extra: object) -> None:
        """The node's state machine restarts from a snapshot (``extra``: its part)."""

    def workload(self) -> None:
        """The fault phase's client operation (default: appends at a random node)."""
        self._client_append()

    def final_values(self) -> list[bytes]:
        """What the calm phase appends at the leader and waits to see committed."""
        return [b"s%d-final" % self.seed]

    def final_check(self) -> None:
        """After the calm phase committed on every voter."""

    def _check_committed(self, n: SimNode, offset: int, entry: tuple, epoch: int) -> None:
        if offset < len(self.committed):
            if self.committed[offset] != entry:
                raise Violation(f"node {n.node_id} applied {entry} at offset {offset}, "
                                f"but {self.committed[offset]} was committed there")
        elif offset == len(self.committed):
            self.committed.append(entry)
            self.commit_epoch.append(epoch if epoch >= 0 else 0)
        else:
            raise Violation(f"node {n.node_id} applied offset {offset} past a gap")

    # -- invariants --------------------------------------------------------------------------
    def _check_node(self, n: SimNode) -> None:
        r = n.raft
        if r is None:
            return
        if r.role == LEADER:
            holder = self.leaders.setdefault(r.epoch, n.node_id)
            if holder != n.node_id:
                raise Violation(f"two leaders in epoch {r.epoch}: {holder} and {n.node_id}")
            epoch, end = n.leader_end
            if epoch == r.epoch and r.log_end_offset < end:
                raise Violation(f"leader {n.node_id} of epoch {epoch} truncated its log from "
                                f"{end} to {r.log_end_offset}")
            n.leader_end = (r.epoch, r.log_end_offset)
        st = n.quorum_state.last
        if st is not None and st.voted_id >= 0:
            vote = self.votes.setdefault((n.node_id, st.epoch), st.voted_id)
            if vote != st.voted_id:
                raise Violation(f"node {n.node_id} voted for {vote} and {st.voted_id} "
                                f"in epoch {st.epoch}")
        if r.high_watermark < n.hw_seen:
            raise Violation(f"node {n.node_id}'s high watermark went back from {n.hw_seen} "
                            f"to {r.high_watermark}")
        n.hw_seen = r.high_watermark

    def _check_leader_completeness(self, n: SimNode) -> None:
        r = n.raft
        assert r is not None
        start = n.log.log_start_offset
        for offset, (entry, epoch) in enumerate(zip(self.committed, self.commit_epoch, strict=True)):
            if epoch >= r.epoch or offset < start:
                continue
            if offset >= n.log.end_offset:
                raise Violation(f"leader {n.node_id} of epoch {r.epoch} lacks offset {offset}, "
                                f"committed in epoch {epoch}")
            mine = next(n.log.entries(offset, offset + 1))
            if (mine.epoch, mine.value) != entry:
                raise Violation(f"leader {n.node_id} of epoch {r.epoch} holds {mine} at "
                                f"{offset}, where {entry} was committed in epoch {epoch}")

    # -- the world's events ------------------------------------------------------------------
    def _live(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raft is not None]

    def _client_append(self) -> None:
        n = self.rng.choice(list(self.nodes.values()))
        if n.raft is not None:
            values = [b"s%d-%d" % (self.seed, self.appended + k)
                      for k in range(1 + self.rng.randrange(3))]
            try:
                last = n.raft.append(values, self._clock(n))
            except KafkaError:
                pass
            else:
                self.appended += len(values)
                self._log(f"append {len(values)} at {n.node_id}, last offset {last}")
                self._after(n, n.raft.poll(self._clock(n)))

    def _partition(self) -> None:
        if self.cut:
            self.cut.clear()
            self._log("partition healed")
        else:
            ids = list(self.nodes)
            side, self.cut = draw_cut(self.rng, ids)
            self._log(f"partition {sorted(side)} | {sorted(set(ids) - side)}")
            self.stats["partitions"] += 1
        self._at(self._every(self.p.partition_every_ms), "partition")

    def _snapshot(self) -> None:
        n = self.rng.choice(list(self.nodes.values()))
        r = n.raft
        if r is not None and len(n.applied) > n.log.log_start_offset + 2:
            end = len(n.applied)
            data = pickle.dumps((n.applied[:end], self.snapshot_extra(n)))
            sid = r.create_snapshot(end, data)
            self._log(f"{n.node_id} snapshot {sid}")
            self.stats["snapshots"] += 1
        self._at(self._every(self.p.snapshot_every_ms), "snapshot")

    def _resign(self) -> None:
        for n in self._live():
            if n.raft is not None and n.raft.role == LEADER:
                self._log(f"{n.node_id} resigns")
                self.stats["resigns"] += 1
                n.raft.resign(self._clock(n))
                self._after(n, n.raft.poll(self._clock(n)))
                break
        self._at(self._every(self.p.resign_every_ms), "resign")

    def _end_faults(self) -> None:
        self.faults = False
        self.cut.clear()
        self._log("faults end: healed, restarting every node")
        for n in self.nodes.values():
            if n.raft is None:
                self._start(n.node_id)

    def _step(self) -> bool:
        if not self.queue:
            return False
        t, _, kind, payload = heapq.heappop(self.queue)
        self.now = t
        self.steps += 1
        if kind == "poll":
            i, life = payload
            n = self.nodes[i]
            if n.raft is None or n.life != life or n.poll_at != t:
                return True
            n.poll_at = -1
            self._after(n, n.raft.poll(self._clock(n)))
        elif kind == "req":
            self._deliver_request(*payload)
        elif kind == "resp":
            self._deliver_response(*payload)
        elif not self.faults:
            return True  # fault and workload events stop with the fault phase
        elif kind == "append":
            self.workload()
            self._at(self._every(self.p.append_every_ms), "append")
        elif kind == "crash":
            live = self._live()
            if live:
                self._crash(self.rng.choice(live).node_id)
            self._at(self._every(self.p.crash_every_ms), "crash")
        elif kind == "restart":
            if self.nodes[payload[0]].raft is None:
                self._start(payload[0])
        elif kind == "partition":
            self._partition()
        elif kind == "snapshot":
            self._snapshot()
        elif kind == "resign":
            self._resign()
        return True

    def run(self) -> Simulation:
        """The fault phase, then the calm phase's liveness check; raises ``Violation``."""
        while self.queue and self.queue[0][0] <= self.p.fault_ms:
            self._step()
        self.now = self.p.fault_ms
        self._end_faults()
        deadline = self.now + LIVENESS_MS
        offset = None
        leader = None
        epoch = -1
        while self.now < deadline:
            if offset is None:
                leader = self._agreed_leader()
                if leader is not None:
                    if self.leader_ms < 0:
                        self.leader_ms = self.now - self.p.fault_ms
                    values = self.final_values()
                    offset = leader.raft.append(values, self._clock(leader))
                    epoch = leader.raft.epoch
                    self._log(f"final append at {leader.node_id}, offset {offset}")
                    self._after(leader, leader.raft.poll(self._clock(leader)))
            elif leader.raft is None or leader.raft.role != LEADER or leader.raft.epoch != epoch:
                offset = None  # leadership moved before the append committed: append again
            elif all(self.nodes[v].raft.high_watermark > offset for v in self.voters):
                self.recovery_ms = self.now - self.p.fault_ms
                self.final_check()
                return self
            if not self._step():
                break
        raise Violation(f"no progress within {LIVENESS_MS} ms of calm: "
                        f"{'no agreed leader' if offset is None else f'offset {offset} not committed everywhere'}; "
                        + ", ".join(self._describe(n) for n in self.nodes.values()))

    def _agreed_leader(self) -> SimNode | None:
        leaders = [n for n in self._live() if n.raft.role == LEADER]
        if len(leaders) != 1:
            return None
        lead = leaders[0].raft
        for v in self.voters:
            r = self.nodes[v].raft
            if r is None or r.epoch != lead.epoch or r.leader_id != lead.node_id:
                return None
        return leaders[0]
