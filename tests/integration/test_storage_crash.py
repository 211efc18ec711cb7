"""Crash test with real processes: kill -9 a writer at random moments, then check the log.

Each round starts ``tests/helpers/storage_crash_writer.py`` on the same log
dir, lets it append for a random time, SIGKILLs it, then opens the log as a
restarting broker would and checks: every batch the writer acknowledged (in
any round) is present and intact (CRC-32C valid, same CRC as acknowledged),
offsets are contiguous from the log start, and the log ends exactly at a
batch boundary. Rounds alternate between fsync per message and the default
(page cache only): both must keep every acknowledged batch across kill -9.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from spool.records.batch import BatchHeader, crc_is_valid, iter_batches
from spool.storage.manager import LogManager

WRITER = Path(__file__).resolve().parents[1] / "helpers" / "storage_crash_writer.py"
ROUNDS = 20


def run_writer(log_dir: Path, seed: int, flush_messages: str, run_s: float) -> list[tuple]:
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(log_dir), str(seed), flush_messages],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline()  # wait until it is appending
    assert first, proc.stderr.read()
    time.sleep(run_s)
    os.kill(proc.pid, signal.SIGKILL)
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    acked = []
    for line in [first, *rest.splitlines()]:
        parts = line.split()
        if len(parts) == 3:  # a line cut by the kill was never acknowledged
            acked.append(tuple(int(x) for x in parts))
    return acked


def check_log(log_dir: Path, acked: dict[int, tuple[int, int]]) -> int:
    mgr = LogManager([str(log_dir)], {})
    try:
        log = mgr.get("crash", 0)
        expected = log.log_start_offset
        seen: dict[int, tuple[int, int]] = {}
        for batch in log.iter_batches():
            h = BatchHeader.parse(batch)
            assert crc_is_valid(batch)
            assert h.base_offset == expected, "offsets are not contiguous"
            seen[h.base_offset] = (h.last_offset, h.crc)
            expected = h.next_offset
        assert expected == log.log_end_offset, "the log does not end at a batch boundary"
        for seg in log.segments:  # every segment file is whole batches
            data = seg.pread(seg.size, 0)
            assert sum(hh.size for _, hh in iter_batches(data)) == seg.size == len(data)
        for first, (last, crc) in acked.items():
            assert seen.get(first) == (last, crc), f"acknowledged batch at {first} lost"
        return log.log_end_offset
    finally:
        mgr.shutdown()


def test_kill_minus_nine_keeps_every_acknowledged_batch(tmp_path):
    rng = random.Random(1234)
    log_dir = tmp_path / "logs"
    acked: dict[int, tuple[int, int]] = {}
    for round_no in range(ROUNDS):
        flush = "1" if round_no % 2 else "9223372036854775807"
        batches = run_writer(log_dir, round_no + 1, flush, rng.uniform(0.05, 0.4))
        assert batches, "the writer acknowledged nothing"
        for first, last, crc in batches:
            acked[first] = (last, crc)
        leo = check_log(log_dir, acked)
        assert leo >= max(last for last, _ in acked.values()) + 1
    assert len(acked) > ROUNDS
