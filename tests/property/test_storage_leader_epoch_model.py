"""PartitionLog's leader epoch cache against a model: the runs of equal partitionLeaderEpoch
in the batches the log holds (Hypothesis state machine).

Leader appends (in a kept or newer epoch), follower appends (several batches, their own
epochs, offsets kept), truncation, DeleteRecords, rolls, clean and kill -9 style restarts,
and restarts with the checkpoint file lost. After every step the cache holds exactly one
entry per run of batches at or past the log start -- (epoch, first offset of the run, the
first run starting at the log start) -- plus at most an entry at the log end (the log start
was moved there), and the checkpoint file says the same as memory.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spool.records.batch import patch_partition_leader_epoch
from spool.storage.config import LogConfig
from spool.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_entries
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.log_crash import crash
from tests.helpers.storage_batches import make_batch

CFG = LogConfig(internal_segment_bytes=1_000, index_interval_bytes=150, file_delete_delay_ms=0)


class EpochMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="spool-epochs-"))
        self.clock = FakeClock(1_000_000)
        self.log = self._open()
        self.batches: list[tuple[int, int, int]] = []  # (base, last, epoch)
        self.log_start = 0
        self.leo = 0
        self.tag = 0

    def _open(self, clean: bool = False) -> PartitionLog:
        return PartitionLog(self.tmp / "e-0", CFG, clock=self.clock, had_clean_shutdown=clean)

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def latest(self) -> int:
        return self.batches[-1][2] if self.batches else 0

    def expected(self) -> list[tuple[int, int]]:
        runs: list[tuple[int, int]] = []
        for base, last, epoch in self.batches:
            if last >= self.log_start and (not runs or runs[-1][0] != epoch):
                runs.append((epoch, max(base, self.log_start)))
        return runs

    # -- rules -------------------------------------------------------------------------

    @rule(n=st.integers(1, 5), bump=st.integers(0, 2), value_size=st.integers(0, 200))
    def leader_append(self, n, bump, value_size) -> None:
        epoch = self.latest() + bump
        buf = make_batch(n, value_size=value_size, tag=self.tag)
        self.tag += 1
        info = self.log.append(buf, leader_epoch=epoch)
        assert info.first_offset == self.leo
        self.batches.append((self.leo, self.leo + n - 1, epoch))
        self.leo += n

    @rule(spec=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=4))
    def follower_append(self, spec) -> None:
        data = bytearray()
        epoch, off = self.latest(), self.leo
        for n, bump in spec:
            epoch += bump
            b = make_batch(n, base_offset=off, value_size=50, tag=self.tag)
            patch_partition_leader_epoch(b, 0, epoch)
            self.tag += 1
            data += b
            self.batches.append((off, off + n - 1, epoch))
            off += n
        self.log.append(data, assign_offsets=False)
        self.leo = off

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data) -> None:
        target = data.draw(st.integers(self.log_start, self.leo))
        self.log.delete_records_before(target)
        self.log_start = max(self.log_start, target)

    @precondition(lambda self: sum(1 for b in self.batches if b[1] >= self.log_start) > 1)
    @rule(data=st.data())
    def truncate(self, data) -> None:
        vis = [b for b in self.batches if b[1] >= self.log_start]
        cut = data.draw(st.sampled_from([b[0] for b in vis[1:]]))
        self.log.truncate_to(cut)
        self.batches = [b for b in self.batches if b[0] < cut]
        self.leo = cut

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self.log = self._open(clean=True)

    @rule()
    def crash_and_reopen(self) -> None:
        crash(self.log)  # kill -9: nothing trimmed, flushed or checkpointed
        self.log.closed = True
        self.log = self._open()
        # the log start is checkpointed lazily: it may fall back to a segment base
        self.log.delete_records_before(self.log_start)

    @rule()
    def lose_the_checkpoint_and_reopen(self) -> None:
        self.log.close()
        (self.log.dir / LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
        self.log = self._open(clean=True)

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.log_start, self.leo)

    @invariant()
    def cache_matches_the_runs(self) -> None:
        entries = [tuple(e) for e in self.log.leader_epochs.entries()]
        below = [e for e in entries if e[1] < self.leo]
        assert below == self.expected()
        at_end = entries[len(below):]
        assert len(at_end) <= 1 and all(s == self.leo for _, s in at_end)
        assert self.log.leader_epochs.latest_epoch() == (entries[-1][0] if entries else -1)

    @invariant()
    def file_matches_memory(self) -> None:
        on_disk = read_entries(self.log.dir / LEADER_EPOCH_CHECKPOINT)
        assert (on_disk or []) == list(self.log.leader_epochs.entries())


EpochMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestLeaderEpochModel = EpochMachine.TestCase
