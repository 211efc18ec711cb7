"""``LeaderState``: what a leader tracks about the replicas that fetch from it.

Per voter (the leader included) the offset up to which its log is known to match the
leader's (``end_offset``: the last validated FetchOffset; the leader's own log end for
itself) and when it last fetched; per observer the same, for DescribeQuorum only. The
high watermark is the largest offset that a majority of voters have reached, once that
offset is past ``epoch_start_offset`` (the leader's LeaderChange entry): a leader never
commits entries of earlier epochs by counting replicas, only by committing one of its own
epoch after them (Raft's 5.4.2, Kafka's LeaderState.maybeUpdateHighWatermark).

Check-quorum: ``quorum_alive(now_ms, timeout_ms)`` is false once fewer than a majority
of voters (the leader counting itself) have fetched within ``timeout_ms``; the node then
resigns. Parked fetches (long polls) are kept here as ``(src, request, deadline_ms)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from spool.cluster.raft.messages import FetchRequest


@dataclass(slots=True)
class ReplicaState:
    """Kafka's DescribeQuorum ReplicaState: -1 for what is not known yet."""

    replica_id: int
    log_end_offset: int = -1
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1
    high_watermark_sent: int = -1


class LeaderState:
    def __init__(self, local_id: int, voters: frozenset[int], epoch: int,
                 epoch_start_offset: int, now_ms: int) -> None:
        self.local_id = local_id
        self.voters = voters
        self.epoch = epoch
        self.epoch_start_offset = epoch_start_offset
        self.replicas: dict[int, ReplicaState] = {
            v: ReplicaState(v, last_fetch_timestamp=now_ms) for v in voters
        }
        self.observers: dict[int, ReplicaState] = {}
        self.begin_epoch_acked: set[int] = {local_id}
        self.begin_epoch_sent: dict[int, int] = {}
        self.parked: list[tuple[int, FetchRequest, int]] = []

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def replica(self, replica_id: int) -> ReplicaState:
        if replica_id in self.replicas:
            return self.replicas[replica_id]
        return self.observers.setdefault(replica_id, ReplicaState(replica_id))

    def update_local(self, log_end_offset: int, now_ms: int) -> None:
        me = self.replicas[self.local_id]
        me.log_end_offset = log_end_offset
        me.last_fetch_timestamp = me.last_caught_up_timestamp = now_ms

    def update_fetch(self, replica_id: int, end_offset: int | None, now_ms: int,
                     leader_end_offset: int) -> None:
        """A Fetch from ``replica_id`` arrived; ``end_offset`` is its validated FetchOffset
        (None when it diverged or needs a snapshot: only the timestamp counts)."""
        r = self.replica(replica_id)
        r.last_fetch_timestamp = now_ms
        if replica_id in self.voters:
            self.begin_epoch_acked.add(replica_id)
        if end_offset is not None:
            r.log_end_offset = max(r.log_end_offset, end_offset)
            if end_offset >= leader_end_offset:
                r.last_caught_up_timestamp = now_ms

    def majority_offset(self) -> int:
        """The largest offset a majority of voters have reached (-1 if not known)."""
        ends = sorted((r.log_end_offset for r in self.replicas.values()), reverse=True)
        return ends[self.majority - 1]

    def quorum_alive(self, now_ms: int, timeout_ms: int) -> bool:
        fresh = sum(1 for v, r in self.replicas.items()
                    if v == self.local_id or now_ms - r.last_fetch_timestamp < timeout_ms)
        return fresh >= self.majority

    def next_quorum_check_ms(self, timeout_ms: int) -> int:
        """When ``quorum_alive`` may first turn false if no fetch arrives."""
        stamps = sorted((r.last_fetch_timestamp for v, r in self.replicas.items()
                         if v != self.local_id), reverse=True)
        # The (majority - 1)-th freshest follower stamp keeps the quorum alive.
        need = self.majority - 1
        if need == 0:
            return 1 << 62
        return stamps[need - 1] + timeout_ms

    def preferred_successors(self) -> tuple[int, ...]:
        """Voters other than the leader, most caught-up first (EndQuorumEpoch)."""
        others = [r for v, r in self.replicas.items() if v != self.local_id]
        others.sort(key=lambda r: (-r.log_end_offset, r.replica_id))
        return tuple(r.replica_id for r in others)
