"""Epoch-based follower truncation (``spool.replica.fetcher.truncation_offset`` over real
``LeaderEpochCache``s) against histories made by leaders and followers (Hypothesis).

Three replicas; any of them may be elected (clean or not: the leader epoch goes up by one
and the new leader records its start at its log end, as ``Partition.make_leader`` does);
the leader appends records (unique ids) in its epoch; a follower syncs: the fetcher's loop
-- ask the leader's cache where the follower's latest epoch ends, truncate, repeat until
complete -- then fetches some or all of what the leader has past its log end. After every
sync the follower's log is a prefix of the leader's (no record the leader lacks survives,
nothing the leader has is missing below the follower's end), the loop ends within a round
per epoch, and every cache matches the runs of epochs in its log.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from spool.replica.fetcher import truncation_offset
from spool.storage.leader_epoch import LeaderEpochCache

NODES = 3
_SHM = Path("/dev/shm")


class Replica:
    def __init__(self, directory: Path) -> None:
        self.log: list[tuple[int, int]] = []  # (epoch, record id)
        self.cache = LeaderEpochCache(directory)

    @property
    def leo(self) -> int:
        return len(self.log)

    def append(self, records: list[tuple[int, int]]) -> None:
        for epoch, rid in records:  # PartitionLog.append: assign where the epoch changes
            if epoch != self.cache.latest:
                self.cache.assign(epoch, self.leo)
            self.log.append((epoch, rid))

    def truncate_to(self, offset: int) -> None:  # PartitionLog.truncate_to
        del self.log[offset:]
        self.cache.truncate_from_end(self.leo)


class TruncationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="spool-trunc-",
                                         dir=_SHM if _SHM.is_dir() else None))
        self.replicas = []
        for n in range(NODES):
            (self.tmp / str(n)).mkdir()
            self.replicas.append(Replica(self.tmp / str(n)))
        self.leader = 0
        self.epoch = 0
        self.replicas[0].cache.assign(0, 0)
        self.next_id = 0

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(node=st.integers(0, NODES - 1))
    def elect(self, node) -> None:
        self.epoch += 1
        self.leader = node
        r = self.replicas[node]
        r.cache.assign(self.epoch, r.leo)

    @rule(n=st.integers(1, 4))
    def append(self, n) -> None:
        records = [(self.epoch, self.next_id + i) for i in range(n)]
        self.next_id += n
        self.replicas[self.leader].append(records)

    @rule(node=st.integers(0, NODES - 1), fetch=st.one_of(st.none(), st.integers(0, 5)))
    def sync(self, node, fetch) -> None:
        if node == self.leader:
            return
        leader, f = self.replicas[self.leader], self.replicas[node]
        for _ in range(self.epoch + 2):  # the fetcher's truncation loop
            if f.cache.latest < 0:
                target, done = min(0, f.leo), True  # no epoch: the HW (0 here: the safest)
            else:
                le, end = leader.cache.end_offset_for(f.cache.latest, leader.leo)
                target, done = truncation_offset(f.cache, f.leo, 0, le, end)
            if target >= 0:
                f.truncate_to(target)
            if done or f.cache.latest < 0:
                break
        else:
            raise AssertionError(f"truncation did not end: {f.cache!r}")
        assert f.log == leader.log[:f.leo], "the follower kept records the leader lacks"
        upto = leader.leo if fetch is None else min(leader.leo, f.leo + fetch)
        f.append(leader.log[f.leo:upto])
        assert f.log == leader.log[:upto]

    @invariant()
    def caches_match_their_logs(self) -> None:
        for r in self.replicas:
            runs: list[tuple[int, int]] = []
            for offset, (epoch, _) in enumerate(r.log):
                if not runs or runs[-1][0] != epoch:
                    runs.append((epoch, offset))
            entries = [tuple(e) for e in r.cache.entries()]
            assert [e for e in entries if e[1] < r.leo] == runs
            assert all(s == r.leo for _, s in entries[len(runs):])


TruncationMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40,
                                               deadline=None)
TestTruncationModel = TruncationMachine.TestCase
