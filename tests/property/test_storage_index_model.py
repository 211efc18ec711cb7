"""The offset and time indexes against a sorted-list model (Hypothesis state machine)."""

from __future__ import annotations

import bisect
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spool.storage.index import OffsetIndex, TimeIndex

BASE = 1_000
MAX_ENTRIES = 12


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="spool-index-"))
        self.oi = OffsetIndex(self.tmp / "x.index", BASE, 8 * MAX_ENTRIES)
        self.ti = TimeIndex(self.tmp / "x.timeindex", BASE, 12 * MAX_ENTRIES)
        self.oi.make_writable()
        self.ti.make_writable()
        self.offsets: list[tuple[int, int]] = []  # (offset, position)
        self.times: list[tuple[int, int]] = []  # (timestamp, offset)
        self.next_offset, self.next_pos, self.max_ts = BASE, 1, -1

    def teardown(self) -> None:
        self.oi.close()
        self.ti.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @precondition(lambda self: len(self.offsets) < MAX_ENTRIES)
    @rule(gap=st.integers(0, 50), size=st.integers(1, 5000), ts=st.integers(0, 10_000))
    def append(self, gap: int, size: int, ts: int) -> None:
        offset = self.next_offset + gap
        self.oi.append(offset, self.next_pos)
        self.offsets.append((offset, self.next_pos))
        self.max_ts = max(self.max_ts, ts)
        if not self.ti.is_full:
            appended = self.ti.maybe_append(self.max_ts, offset)
            if not self.times or self.max_ts > self.times[-1][0]:
                assert appended
                self.times.append((self.max_ts, offset))
            else:
                assert not appended
        self.next_offset, self.next_pos = offset + 1, self.next_pos + size

    @rule(want=st.integers(BASE - 5, BASE + 700))
    def lookup_offset(self, want: int) -> None:
        i = bisect.bisect_right([o for o, _ in self.offsets], want) - 1
        expected = self.offsets[i] if i >= 0 else (BASE, 0)
        assert self.oi.lookup(want) == expected

    @rule(want=st.integers(0, 200_000))
    def lookup_position(self, want: int) -> None:
        i = bisect.bisect_right([p for _, p in self.offsets], want) - 1
        expected = self.offsets[i] if i >= 0 else (BASE, 0)
        assert self.oi.lookup_position(want) == expected

    @rule(want=st.integers(-1, 11_000), strict=st.booleans())
    def lookup_time(self, want: int, strict: bool) -> None:
        keys = [t for t, _ in self.times]
        i = (bisect.bisect_left if strict else bisect.bisect_right)(keys, want) - 1
        expected = self.times[i] if i >= 0 else (-1, BASE)
        assert self.ti.lookup(want, strict=strict) == expected

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        to = data.draw(st.integers(BASE, self.next_offset + 1))
        self.oi.truncate_to(to)
        self.ti.truncate_to(to)
        self.offsets = [(o, p) for o, p in self.offsets if o < to]
        self.times = [(t, o) for t, o in self.times if o < to]
        if self.offsets:
            self.next_offset, self.next_pos = self.offsets[-1][0] + 1, self.offsets[-1][1] + 1
        else:
            self.next_offset, self.next_pos = BASE, 1
        self.max_ts = self.times[-1][0] if self.times else -1

    @rule()
    def trim_and_reopen(self) -> None:
        self.oi.close()
        self.ti.close()
        self.oi = OffsetIndex(self.tmp / "x.index", BASE, 8 * MAX_ENTRIES)
        self.ti = TimeIndex(self.tmp / "x.timeindex", BASE, 12 * MAX_ENTRIES)
        self.oi.sanity_check(log_size=10**9)
        self.ti.sanity_check(log_size=10**9)
        self.oi.make_writable()
        self.ti.make_writable()

    @invariant()
    def same_entries(self) -> None:
        assert [(BASE + r, p) for r, p in self.oi.all_entries()] == self.offsets
        assert [(t, BASE + r) for t, r in self.ti.all_entries()] == self.times


IndexMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestIndexModel = IndexMachine.TestCase
