"""The simulator on the disk stores (``DiskRaftLog``, the quorum-state file): a crash
closes them and a restart reopens them from their directory, so the run checks that the
core and the disk store agree on the ``RaftLog`` contract, and that a restart keeps all
the core relies on. SPOOL_SIM_DISK_SEEDS seeds (200 by default), on tmpfs when there is
one (the files are fsynced; the point is the format and the reopening, not the disk)."""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from pathlib import Path

import pytest

from tests.sim.sim import Simulation

SEEDS = int(os.environ.get("SPOOL_SIM_DISK_SEEDS", "200"))
CHUNK = 50


def _base_dir(tmp_path: Path) -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="spool-sim-", dir=shm))
    return tmp_path


@pytest.mark.parametrize("seeds", [range(s, min(s + CHUNK, SEEDS)) for s in range(0, SEEDS, CHUNK)],
                         ids=lambda r: f"{r.start}-{r.stop - 1}")
def test_no_seed_breaks_an_invariant_on_disk_stores(seeds: range, tmp_path: Path) -> None:
    base = _base_dir(tmp_path)
    failure = None
    try:
        for seed in seeds:
            sim = Simulation(seed, store_dir=base / f"seed-{seed}")
            try:
                sim.run()
            except Exception as exc:
                failure = (f"seed {seed} on disk stores: {type(exc).__name__}: {exc}\n"
                           f"replay: python -m tests.sim --seed {seed} -v --disk DIR\n"
                           + "".join(traceback.format_exception(exc, limit=-4)))
                break
            finally:
                sim.close()
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)
    if failure:
        pytest.fail(failure, pytrace=False)
