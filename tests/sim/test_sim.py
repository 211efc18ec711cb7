"""The quorum under the seeded simulator (tests/sim/sim.py): SPOOL_SIM_SEEDS seeds
(10,000 by default; ``make soak-sim`` runs more), in chunks that ``pytest -n auto``
spreads over its workers. A failure names its seed and the command that replays it."""

from __future__ import annotations

import os
import traceback

import pytest

from spool.cluster.raft import leader as leader_module
from spool.cluster.raft import node as node_module
from tests.sim.sim import Simulation, Violation

SEEDS = int(os.environ.get("SPOOL_SIM_SEEDS", "10000"))
FIRST = int(os.environ.get("SPOOL_SIM_FIRST_SEED", "0"))
CHUNK = 250


def _chunks() -> list[range]:
    return [range(s, min(s + CHUNK, FIRST + SEEDS)) for s in range(FIRST, FIRST + SEEDS, CHUNK)]


@pytest.mark.parametrize("seeds", _chunks(), ids=lambda r: f"{r.start}-{r.stop - 1}")
def test_no_seed_breaks_an_invariant_or_stalls(seeds: range) -> None:
    for seed in seeds:
        try:
            Simulation(seed).run()
        except Exception as exc:  # a Violation, or the core raising on its own
            failure = (f"seed {seed}: {type(exc).__name__}: {exc}\n"
                       f"replay: python -m tests.sim --seed {seed} -v\n"
                       + "".join(traceback.format_exception(exc, limit=-4)))
            break
    else:
        return
    pytest.fail(failure, pytrace=False)


def _first_violation(seeds: range) -> tuple[int, Violation] | None:
    for seed in seeds:
        try:
            Simulation(seed).run()
        except Violation as v:
            return seed, v
    return None


def test_the_simulator_catches_a_leader_that_commits_without_a_majority(monkeypatch) -> None:
    def one_short_of_a_majority(self) -> int:
        ends = sorted((r.log_end_offset for r in self.replicas.values()), reverse=True)
        return ends[self.majority - 2]

    monkeypatch.setattr(leader_module.LeaderState, "majority_offset", one_short_of_a_majority)
    found = _first_violation(range(100))
    assert found is not None
    assert "committed" in str(found[1])


def test_the_simulator_catches_a_voter_that_votes_twice_in_an_epoch(monkeypatch) -> None:
    handle_vote = node_module.RaftNode._handle_vote

    def forgetful(self, req, now_ms):
        if not req.pre_vote and req.candidate_epoch == self._epoch and self._leader_id < 0:
            self._voted_id = -1  # forgets whom it voted for
        return handle_vote(self, req, now_ms)

    monkeypatch.setattr(node_module.RaftNode, "_handle_vote", forgetful)
    found = _first_violation(range(100))
    assert found is not None
    assert "voted for" in str(found[1]) or "two leaders" in str(found[1])


@pytest.mark.parametrize("seed", [17, 4242])
def test_a_seed_replays_exactly(seed: int) -> None:
    traces: list[list[str]] = [[], []]
    for trace in traces:
        Simulation(seed, trace=trace.append).run()
    assert traces[0] == traces[1]
    assert any("leader change" in line for line in traces[0])
