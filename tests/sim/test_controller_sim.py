"""The quorum carrying the controller (tests/sim/controller_sim.py): SPOOL_SIM_CONTROLLER_SEEDS
seeds (1,000 by default) in chunks for ``pytest -n auto``; each names its replay command."""

from __future__ import annotations

import os
import traceback

import pytest

from tests.sim.controller_sim import ControllerSimulation

SEEDS = int(os.environ.get("SPOOL_SIM_CONTROLLER_SEEDS", "1000"))
FIRST = int(os.environ.get("SPOOL_SIM_FIRST_SEED", "0"))
CHUNK = 100


@pytest.mark.parametrize("seeds", [range(s, min(s + CHUNK, FIRST + SEEDS))
                                   for s in range(FIRST, FIRST + SEEDS, CHUNK)],
                         ids=lambda r: f"{r.start}-{r.stop - 1}")
def test_no_seed_loses_or_changes_committed_metadata(seeds: range) -> None:
    failure = None
    for seed in seeds:
        try:
            ControllerSimulation(seed).run()
        except Exception as exc:
            failure = (f"seed {seed}: {type(exc).__name__}: {exc}\n"
                       f"replay: python -m tests.sim --controller --seed {seed} -v\n"
                       + "".join(traceback.format_exception(exc, limit=-4)))
            break
    if failure:
        pytest.fail(failure, pytrace=False)


def test_the_simulator_catches_a_snapshot_that_drops_a_record(monkeypatch) -> None:
    snapshot_extra = ControllerSimulation.snapshot_extra
    monkeypatch.setattr(ControllerSimulation, "snapshot_extra",
                        lambda self, n: snapshot_extra(self, n)[:-1])
    messages = []
    for seed in range(30):
        try:
            ControllerSimulation(seed).run()
        except AssertionError as exc:
            messages.append(str(exc))
    assert any("controller image after loading a snapshot" in m for m in messages)
