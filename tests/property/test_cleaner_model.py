"""Compaction against a model (Hypothesis state machine).

Random keyed updates and tombstones in random batches and codecs, cleanings at
random times (delete.retention.ms on a fake clock), restarts (clean and
kill -9 style). After every step: offsets strictly increase, every record the
log holds is one that was produced at that offset, every live key reads its
latest value, and a deleted key reads as deleted (a tombstone or nothing);
nothing older than a key's latest record survives below the cleaned point.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from spool.records import BatchBuilder, BatchHeader, iter_records
from spool.records.compression import GZIP, LZ4, NONE, ZSTD
from spool.storage.cleaner_manager import LogCleaner, log_to_clean
from spool.storage.manager import LogManager
from spool.util.clock import FakeClock

RETENTION = 10_000
PROPS = {"cleanup.policy": "compact", "internal.segment.bytes": "700", "delete.retention.ms": str(RETENTION),
         "file.delete.delay.ms": "0", "index.interval.bytes": "100"}
KEYS = [b"k%d" % i for i in range(6)]


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="spool-cleaner-model-"))
        self.clock = FakeClock(1_000_000)
        self.mgr = self._open()
        self.produced: dict[int, tuple[bytes, bytes | None]] = {}
        self.latest: dict[bytes, tuple[int, bytes | None]] = {}
        self.cleaned_to = 0

    def _open(self) -> LogManager:
        mgr = LogManager([str(self.tmp)], {}, self.clock)
        mgr.create_partition("m", 0, PROPS)
        return mgr

    @property
    def log(self):
        return self.mgr.get("m", 0)

    @rule(items=st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), min_size=1, max_size=6),
          codec=st.sampled_from([NONE, GZIP, LZ4, ZSTD]))
    def append(self, items, codec) -> None:
        b = BatchBuilder(0, compression=codec)
        base = self.log.log_end_offset
        for i, (key, tomb) in enumerate(items):
            value = None if tomb else b"%s@%d" % (key, base + i)
            b.append(key, value, timestamp=self.clock.now_ms())
        self.log.append(b.build())
        for i, (key, tomb) in enumerate(items):
            value = None if tomb else b"%s@%d" % (key, base + i)
            self.produced[base + i] = (key, value)
            self.latest[key] = (base + i, value)

    @rule(ms=st.integers(0, 2 * RETENTION))
    def clean(self, ms) -> None:
        self.clock.advance(ms)
        now = self.clock.now_ms()
        ltc = log_to_clean(self.log.tp, self.log, None, now)
        LogCleaner(self.mgr).clean(ltc, now)
        self.cleaned_to = ltc.first_uncleanable

    @rule(clean_shutdown=st.booleans())
    def restart(self, clean_shutdown) -> None:
        if clean_shutdown:
            self.mgr.shutdown()
        self.mgr = self._open()

    @invariant()
    def same_table(self) -> None:
        seen: dict[bytes, tuple[int, bytes | None]] = {}
        last = -1
        for raw in self.log.iter_batches():
            assert not BatchHeader.parse(raw).is_control
            for r in iter_records(raw):
                assert r.offset > last
                last = r.offset
                assert self.produced[r.offset] == (r.key, r.value)
                if r.offset < self.cleaned_to:
                    assert r.key not in seen, "a superseded record survived the cleaning"
                seen[r.key] = (r.offset, r.value)
        for key, (offset, value) in self.latest.items():
            if value is not None:
                assert seen.get(key) == (offset, value)
            else:
                assert seen.get(key, (offset, None)) == (offset, None)

    def teardown(self) -> None:
        self.mgr.shutdown()
        shutil.rmtree(self.tmp, ignore_errors=True)


CleanerMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=25,
                                            deadline=None)
TestCleanerModel = CleanerMachine.TestCase
