"""A lockstep harness for the Raft core's unit tests: nodes, a FIFO network that delivers
everything unless a link is cut, and a clock advanced by hand. (The seeded, faulty
network is tests/sim; this one is for stepping a rule through exactly.)"""

from __future__ import annotations

import random
from collections import deque

from spool.cluster.raft import (
    LEADER,
    HighWatermarkAdvanced,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    RaftConfig,
    RaftNode,
    Respond,
    Send,
    SnapshotInstalled,
)

CONFIG = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=200, request_timeout_ms=100,
                    fetch_max_wait_ms=50, election_backoff_max_ms=100, retry_backoff_ms=10)


class Harness:
    def __init__(self, voters: list[int], observers: list[int] = (), config: RaftConfig = CONFIG,
                 logs: dict[int, MemoryRaftLog] | None = None) -> None:
        self.voters = voters
        self.config = config
        self.now = 0
        self.logs = {i: MemoryRaftLog() for i in [*voters, *observers]}
        self.logs.update(logs or {})
        self.states = {i: MemoryQuorumStateStore() for i in self.logs}
        self.nodes: dict[int, RaftNode] = {}
        self.cut: set[frozenset[int]] = set()
        self.queue: deque = deque()
        self.events: list[tuple[int, object]] = []
        self.requests: list[tuple[int, int, object]] = []
        for i in self.logs:
            self.start(i)

    def start(self, i: int) -> RaftNode:
        self.nodes[i] = RaftNode(i, self.voters, self.logs[i], self.states[i], self.config,
                                 random.Random(i), self.now)
        return self.nodes[i]

    def isolate(self, i: int) -> None:
        self.cut |= {frozenset((i, j)) for j in self.logs if j != i}

    def heal(self) -> None:
        self.cut.clear()

    def _emit(self, src: int, outputs: list) -> None:
        for o in outputs:
            if isinstance(o, Send):
                self.requests.append((src, o.dst, o.request))
                self.queue.append(("req", src, o.dst, o.request, None))
            elif isinstance(o, Respond):
                self.queue.append(("resp", src, o.dst, o.request, o.response))
            else:
                self.events.append((src, o))

    def deliver(self) -> None:
        while self.queue:
            kind, src, dst, req, resp = self.queue.popleft()
            if frozenset((src, dst)) in self.cut or dst not in self.nodes:
                continue
            node = self.nodes[dst]
            if kind == "req":
                answer, outs = node.handle_request(src, req, self.now)
                self._emit(dst, outs)
                if answer is not None:
                    self.queue.append(("resp", dst, src, req, answer))
            else:
                self._emit(dst, node.handle_response(src, req, resp, self.now))

    def step(self, ms: int = 1) -> None:
        for _ in range(ms):
            self.now += 1
            for i, node in list(self.nodes.items()):
                if node.next_poll_ms <= self.now:
                    self._emit(i, node.poll(self.now))
            self.deliver()

    def poll(self, i: int) -> None:
        self._emit(i, self.nodes[i].poll(self.now))
        self.deliver()

    def leaders(self) -> list[RaftNode]:
        return [n for n in self.nodes.values() if n.role == LEADER]

    def run_until_leader(self, limit_ms: int = 5000) -> RaftNode:
        for _ in range(limit_ms):
            ls = self.leaders()
            if ls and all(n.leader_id == ls[0].node_id for n in self.nodes.values()
                          if n.node_id not in {i for c in self.cut for i in c}):
                return ls[0]
            self.step()
        raise AssertionError(f"no leader within {limit_ms} ms: {self.describe()}")

    def append_and_commit(self, values: list[bytes], limit_ms: int = 2000) -> int:
        leader = self.leaders()[0]
        last = leader.append(values, self.now)
        self.poll(leader.node_id)
        for _ in range(limit_ms):
            if leader.high_watermark > last:
                return last
            self.step()
        raise AssertionError(f"offset {last} not committed: {self.describe()}")

    def hw_events(self, i: int) -> list[int]:
        return [o.high_watermark for src, o in self.events
                if src == i and isinstance(o, HighWatermarkAdvanced)]

    def snapshots_installed(self, i: int) -> list:
        return [o.snapshot_id for src, o in self.events
                if src == i and isinstance(o, SnapshotInstalled)]

    def describe(self) -> str:
        return ", ".join(f"{i}:{n.role}/e{n.epoch}/l{n.leader_id}/hw{n.high_watermark}"
                         f"/leo{n.log_end_offset}" for i, n in sorted(self.nodes.items()))
