"""Crash injection into the compaction swap: a crash after writing .cleaned, after each
rename to .swap / .deleted / live (several segments merged into one), then recovery.

A real crash at an exact step cannot be provoked, so ``os.rename`` raises after N
calls and the log is then reopened as after a kill -9 (no close, no clean-shutdown
marker). Whatever N, recovery must leave exactly the old segments or exactly the
new ones for the swapped group: the same records, never a mix, never a loss.
"""

from __future__ import annotations

import os
import shutil

import pytest

from spool.records import BatchBuilder, BatchHeader, iter_records
from spool.storage.cleaner_manager import LogCleaner, log_to_clean
from spool.storage.config import LogConfig
from spool.storage.loader import complete_swaps
from spool.storage.log import PartitionLog
from spool.storage.manager import LogManager
from spool.util.clock import FakeClock

T0 = 1_700_000_000_000
CFG = {"cleanup.policy": "compact", "internal.segment.bytes": "2500", "file.delete.delay.ms": "0",
       "min.cleanable.dirty.ratio": "0.01"}


class Crash(Exception):
    pass


def records(plog: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    out = []
    for raw in plog.iter_batches():
        if not BatchHeader.parse(raw).is_control:
            out += [(r.offset, r.key, r.value) for r in iter_records(raw)]
    return out


def fill(plog, n, keys, start=0):
    for i in range(start, start + n, 5):
        b = BatchBuilder(0)
        for j in range(i, i + 5):
            b.append(b"k%d" % (j % keys), b"v%d" % j, timestamp=T0)
        plog.append(b.build())


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A log whose first cleaning left many small segments, plus new dirty data: the
    next cleaning merges several segments into one group."""
    root = tmp_path_factory.mktemp("swap")
    clock = FakeClock(T0)
    mgr = LogManager([str(root / "d")], {}, clock)
    plog = mgr.create_partition("t", 0, CFG)
    fill(plog, 600, 8)
    LogCleaner(mgr).clean_once()
    fill(plog, 300, 8, start=600)
    before = records(plog)
    mgr.shutdown()
    after_dir = tmp_path_factory.mktemp("after")
    shutil.copytree(root / "d", after_dir / "d")
    mgr = LogManager([str(after_dir / "d")], {}, clock)
    renames = count_renames(mgr, clock)
    after = records(mgr.get("t", 0))
    mgr.shutdown()
    assert before != after
    return root / "d", before, after, renames


def clean_all(mgr, clock):
    plog = mgr.get("t", 0)
    LogCleaner(mgr).clean(log_to_clean(plog.tp, plog, None, clock.now_ms()), clock.now_ms())


def count_renames(mgr, clock) -> int:
    calls = []
    real = os.rename

    def counting(a, b):
        calls.append((os.path.basename(a), os.path.basename(b)))
        real(a, b)

    os.rename = counting
    try:
        clean_all(mgr, clock)
    finally:
        os.rename = real
    merged = [c for c in calls if c[1].endswith(".log.deleted")]
    assert len(merged) >= 3, calls  # several old segments were merged into one
    return len(calls)


def reopen(d) -> PartitionLog:
    return PartitionLog(d / "t-0", LogConfig.from_props(CFG), clock=FakeClock(T0))


def test_crash_at_every_rename_recovers_old_or_new(prepared, tmp_path):
    src, before, after, renames = prepared
    seen = set()
    for n in range(renames + 1):
        d = tmp_path / f"n{n}"
        shutil.copytree(src, d)
        mgr = LogManager([str(d)], {}, FakeClock(T0))
        real = os.rename
        calls = [0]

        def crashing(a, b, _calls=calls, _real=real, _n=n):
            if _calls[0] >= _n:
                raise Crash(f"crash before rename #{_n}: {a} -> {b}")
            _calls[0] += 1
            _real(a, b)

        os.rename = crashing
        try:
            clean_all(mgr, FakeClock(T0))
        except Crash:
            pass
        finally:
            os.rename = real
        # kill -9: no close, no clean-shutdown marker; reopen from the files alone
        reopened = reopen(d)
        got = records(reopened)
        reopened.close()
        mgr.shutdown()  # after the check: the crashed manager's descriptors
        assert got in (before, after), f"crash before rename #{n} left a mix"
        seen.add("before" if got == before else "after")
        leftovers = [x for x in os.listdir(d / "t-0") if x.endswith((".cleaned", ".swap"))]
        assert leftovers == []
    assert seen == {"before", "after"}


def test_leftover_cleaned_files_are_dropped(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(b"")
    (d / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    (d / "00000000000000000000.index.swap").write_bytes(b"")
    (d / "00000000000000000010.log.swap").write_bytes(b"")
    removed, renamed = complete_swaps(d)
    assert sorted(removed) == ["00000000000000000000.index.swap",
                               "00000000000000000000.log.cleaned",
                               "00000000000000000010.log.swap"]
    assert renamed == []
    assert sorted(os.listdir(d)) == ["00000000000000000000.log"]
