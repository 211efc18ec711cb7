"""kill -9 and the high watermark checkpoint (``replication-offset-checkpoint``), real processes.

Each round starts ``tests/helpers/hw_checkpoint_writer.py`` on the same log dir (three
partitions opened with ``hw_follows_leo=False``, appends, HW moves and checkpoints, its
background thread checkpointing too), SIGKILLs it at a random moment, then checks the file
as a restarting replica reads it: it parses whole (never torn, never empty), holds every
partition, each HW is at least the last one the writer reported on disk and at most the
partition's log end offset after recovery; and the next round's writer opens each
partition at exactly that HW.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from spool.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT
from spool.storage.manager import LogManager

WRITER = Path(__file__).resolve().parents[1] / "helpers" / "hw_checkpoint_writer.py"
ROUNDS = 12
PARTITIONS = 3


def run_writer(log_dir: Path, seed: int, run_s: float) -> tuple[dict[int, int], dict[int, int]]:
    """(HWs it opened with, last HWs it reported checkpointed)."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(log_dir), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    assert first, proc.stderr.read()
    time.sleep(run_s)
    os.kill(proc.pid, signal.SIGKILL)
    rest = proc.stdout.read()  # the same reader as readline: nothing it buffered is lost
    err = proc.stderr.read()
    assert proc.wait(timeout=30) == -signal.SIGKILL, err
    opened: dict[int, int] = {}
    reported: dict[int, int] = {}
    for line in [first, *rest.splitlines()]:
        parts = line.split()
        if len(parts) != 4:  # a line cut by the kill
            continue
        kind, _, p, hw = parts
        (opened if kind == "open" else reported)[int(p)] = int(hw)
    return opened, reported


def parse_strictly(path: Path) -> dict[int, int]:
    lines = path.read_text().splitlines()
    assert lines[0] == "0"
    count = int(lines[1])
    assert len(lines) == 2 + count, f"torn or padded file: {lines}"
    out = {}
    for line in lines[2:]:
        topic, p, hw = line.split(" ")
        if topic == "hw":
            out[int(p)] = int(hw)
    return out


def test_kill_minus_nine_leaves_a_whole_hw_checkpoint_that_a_replica_opens_at(tmp_path):
    rng = random.Random(4321)
    log_dir = tmp_path / "logs"
    expected_open: dict[int, int] | None = None
    moved = 0
    for round_no in range(ROUNDS):
        opened, reported = run_writer(log_dir, round_no + 1, rng.uniform(0.1, 0.5))
        if expected_open is not None:
            assert opened == expected_open, f"round {round_no}: opened at {opened}"
        assert reported, "the writer never checkpointed"
        on_disk = parse_strictly(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        assert sorted(on_disk) == list(range(PARTITIONS))
        mgr = LogManager([str(log_dir)], {}, hw_follows_leo=False)  # a restarting replica
        try:
            for p, hw in on_disk.items():
                log = mgr.get("hw", p)
                assert reported.get(p, 0) <= hw <= log.log_end_offset
                assert log.high_watermark == hw
        finally:
            mgr.shutdown()
        assert parse_strictly(log_dir / REPLICATION_OFFSET_CHECKPOINT) == on_disk
        expected_open = on_disk
        moved += sum(1 for p in on_disk if on_disk[p] > 0)
    assert moved, "no high watermark ever moved"
