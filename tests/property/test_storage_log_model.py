"""PartitionLog against a plain in-memory model (Hypothesis state machine).

Random appends of random-size batches, reads at random offsets and sizes,
rolls (small segment.bytes, tiny indexes), DeleteRecords, truncation,
retention with a fake clock, offset-for-timestamp, and restarts (clean close
and kill -9 style) — after every step the log must hold exactly the model.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spool.protocol.errors import KafkaError
from spool.records.batch import BatchHeader, iter_batches
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.log_crash import crash
from tests.helpers.storage_batches import make_batch

RETENTION_MS = 5_000
CFG = LogConfig(
    internal_segment_bytes=1_500,
    index_interval_bytes=150,
    segment_index_bytes=96,  # 12 offset entries / 8 time entries: index-full rolls happen
    retention_ms=RETENTION_MS,
    file_delete_delay_ms=0,
)


class Batch:
    def __init__(self, data: bytes, timestamps: list[int]) -> None:
        h = BatchHeader.parse(data)
        self.data, self.base, self.last = data, h.base_offset, h.last_offset
        self.timestamps = timestamps
        self.max_ts = max(timestamps)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="spool-model-"))
        self.clock = FakeClock(1_000_000)
        self.log = self._open()
        self.batches: list[Batch] = []
        self.log_start = 0
        self.leo = 0
        self.tag = 0

    def _open(self, clean: bool = False) -> PartitionLog:
        return PartitionLog(self.tmp / "m-0", CFG, clock=self.clock, had_clean_shutdown=clean)

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def visible(self) -> list[Batch]:
        return [b for b in self.batches if b.last >= self.log_start]

    # -- rules ---------------------------------------------------------------------

    @rule(
        n=st.integers(1, 6),
        value_size=st.integers(0, 400),
        jitter=st.lists(st.integers(-50, 50), min_size=6, max_size=6),
        advance=st.integers(0, 3_000),
    )
    def append(self, n, value_size, jitter, advance) -> None:
        self.clock.advance(advance)
        now = self.clock.now_ms()
        stamps = [now + j for j in jitter[:n]]
        buf = make_batch(n, timestamps=stamps, value_size=value_size, tag=self.tag)
        self.tag += 1
        info = self.log.append(buf)
        assert info.first_offset == self.leo and info.last_offset == self.leo + n - 1
        self.batches.append(Batch(bytes(buf), stamps))
        self.leo += n

    @rule(data=st.data(), max_bytes=st.integers(1, 5_000), min_one=st.booleans())
    def read(self, data, max_bytes, min_one) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        sl = self.log.read(offset, max_bytes, min_one_batch=min_one)
        if offset == self.leo:
            assert sl is None
            return
        vis = self.visible()
        first = next(i for i, b in enumerate(vis) if b.last >= offset)
        if sl is None:
            assert not min_one and len(vis[first].data) > max_bytes
            return
        got = [bytes(sl.read()[p : p + h.size]) for p, h in iter_batches(sl.read())]
        assert got == [b.data for b in vis[first : first + len(got)]]
        assert got and sum(map(len, got)) == sl.length
        assert sl.length <= max_bytes or len(got) == 1

    @rule(data=st.data())
    def read_out_of_range(self, data) -> None:
        offset = data.draw(st.one_of(st.integers(self.leo + 1, self.leo + 10),
                                     st.integers(-5, self.log_start - 1)))
        if 0 <= offset < self.log_start or offset > self.leo or offset < 0:
            with pytest.raises(KafkaError):
                self.log.read(offset, 1000)

    @rule(data=st.data())
    def read_up_to_max_offset(self, data) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        max_offset = data.draw(st.integers(self.log_start, self.leo))
        sl = self.log.read(offset, 10**6, max_offset=max_offset)
        if sl is not None:
            for _, h in iter_batches(sl.read()):
                assert h.last_offset < max_offset

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data) -> None:
        target = data.draw(st.integers(self.log_start, self.leo))
        assert self.log.delete_records_before(target) == max(target, self.log_start)
        self.log_start = max(self.log_start, target)

    @precondition(lambda self: len(self.visible()) > 1)
    @rule(data=st.data())
    def truncate(self, data) -> None:
        vis = self.visible()
        cut = data.draw(st.sampled_from([b.base for b in vis[1:]]))
        self.log.truncate_to(cut)
        self.batches = [b for b in self.batches if b.base < cut]
        self.leo = cut

    @rule(advance=st.integers(0, 2 * RETENTION_MS))
    def retention(self, advance) -> None:
        self.clock.advance(advance)
        now = self.clock.now_ms()
        self.log.run_retention()
        new_start = self.log.log_start_offset
        gone = [b for b in self.visible() if b.last < new_start]
        assert all(now - b.max_ts > RETENTION_MS for b in gone)
        self.log_start = max(self.log_start, new_start)
        first = self.log.segments[0]
        assert first is self.log.active_segment or now - first.largest_timestamp() <= RETENTION_MS

    @rule(data=st.data())
    def offset_for_timestamp(self, data) -> None:
        lo = min((b.timestamps[0] for b in self.batches), default=0) - 100
        hi = max((b.max_ts for b in self.batches), default=0) + 100
        target = data.draw(st.integers(lo, hi))
        expected = None
        for b in self.visible():
            for j, ts in enumerate(b.timestamps):
                if b.base + j >= self.log_start and ts >= target:
                    expected = (b.base + j, ts)
                    break
            if expected:
                break
        assert self.log.offset_for_timestamp(target) == expected

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self.log = self._open(clean=True)

    @rule()
    def crash_and_reopen(self) -> None:
        crash(self.log)  # kill -9: nothing trimmed, flushed or checkpointed
        self.log.closed = True
        self.log = self._open()
        # the log start is checkpointed lazily: after a crash it may fall back to a segment base
        assert self.log.log_start_offset <= self.log_start
        self.log.delete_records_before(self.log_start)

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        assert self.log.log_end_offset == self.leo == self.log.high_watermark
        assert self.log.log_start_offset == self.log_start

    @invariant()
    def contents_match(self) -> None:
        assert list(self.log.iter_batches()) == [b.data for b in self.visible()]


LogMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=40, deadline=None)
TestLogModel = LogMachine.TestCase
