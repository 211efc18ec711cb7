"""Partition replication under the seeded simulator (tests/sim/replication_sim.py): real
``Partition``s over real ``PartitionLog``s (on tmpfs when there is one), a real
``QuorumController``, the fetcher and the ISR changes as the broker shell drives them.
SPOOL_REPL_SIM_SEEDS seeds from SPOOL_SIM_FIRST_SEED (400 from 0 by default, about 40 s
of CPU; ``make soak-sim`` runs more), in chunks that ``pytest -n auto`` spreads over its
workers. A failure names its seed and the command that replays it."""

from __future__ import annotations

import os
import traceback

import pytest

from spool.replica.partition import Partition
from spool.storage.producer_state import ProducerStateManager
from tests.sim.replication_sim import ReplicationSimulation, Violation

SEEDS = int(os.environ.get("SPOOL_REPL_SIM_SEEDS", "400"))
FIRST = int(os.environ.get("SPOOL_SIM_FIRST_SEED", "0"))
CHUNK = 50


def _chunks() -> list[range]:
    return [range(s, min(s + CHUNK, FIRST + SEEDS)) for s in range(FIRST, FIRST + SEEDS, CHUNK)]


@pytest.mark.parametrize("seeds", _chunks(), ids=lambda r: f"{r.start}-{r.stop - 1}")
def test_no_seed_loses_an_acknowledged_record_or_stalls(seeds: range) -> None:
    failure = None
    for seed in seeds:
        try:
            ReplicationSimulation(seed).run()
        except Exception as exc:  # a Violation, or Partition / the log raising on its own
            failure = (f"seed {seed}: {type(exc).__name__}: {exc}\n"
                       f"replay: python -m tests.sim --replication --seed {seed} -v\n"
                       + "".join(traceback.format_exception(exc, limit=-4)))
            break
    if failure:
        pytest.fail(failure, pytrace=False)


def _violations(seeds: range, *wanted: str) -> list[str]:
    """The violations of ``seeds``, up to the first that names one of ``wanted``."""
    found = []
    for seed in seeds:
        try:
            ReplicationSimulation(seed).run()
        except Violation as v:
            found.append(str(v))
            if any(w in str(v) for w in wanted):
                break
    return found


def test_the_simulator_catches_a_high_watermark_that_ignores_the_followers(monkeypatch) -> None:
    def to_the_log_end(self: Partition) -> bool:
        moved = self.is_leader and self.log.high_watermark < self.log.log_end_offset
        if moved:
            self.log.update_high_watermark(self.log.log_end_offset)
        return moved

    monkeypatch.setattr(Partition, "_maybe_increment_hw", to_the_log_end)
    found = _violations(range(30), "lacks acks=all batch")
    assert any("lacks acks=all batch" in v for v in found), found


def test_the_simulator_catches_a_follower_that_never_truncates(monkeypatch) -> None:
    monkeypatch.setattr(Partition, "truncate_to", lambda self, offset: None)
    found = _violations(range(30), "diverge", "was below a high watermark")
    assert any("diverge" in v or "was below a high watermark" in v for v in found), found


def test_the_simulator_catches_a_leader_that_writes_a_retried_batch_twice(monkeypatch) -> None:
    monkeypatch.setattr(ProducerStateManager, "check", lambda self, header, *args: None)
    found = _violations(range(30), "written twice")
    assert any("written twice" in v for v in found), found


def test_the_simulator_catches_a_shell_that_forgets_an_isr_change_it_timed_out_on(
        monkeypatch) -> None:
    """A leader that takes an unanswered (or refused) AlterPartition as not applied drops
    the replica it was adding from its maximal ISR while the controller may have added
    it (then the HW can pass that replica's log end, and the replica be elected)."""
    monkeypatch.setattr(ReplicationSimulation, "alter_failure_completes", True)
    found = []
    for seed in range(100):
        try:
            ReplicationSimulation(seed).run()
        except Violation as v:
            found.append(str(v))
            if "of the controller's ISR" in str(v) or "was below a high watermark" in str(v):
                return
    pytest.fail(f"no seed of 100 found it: {found}")


def test_the_simulator_catches_a_leader_that_drops_its_isr_change_on_a_stale_image(
        monkeypatch) -> None:
    """The image catching up with an AlterPartition reply already applied (same leader
    and partition epoch) must not settle the change sent after that reply."""
    take = Partition._take

    def forgetful(self: Partition, reg) -> None:
        take(self, reg)
        self.pending_isr = None

    monkeypatch.setattr(Partition, "_take", forgetful)
    for seed in range(50):
        try:
            ReplicationSimulation(seed).run()
        except Violation as v:
            if "of the controller's ISR" in str(v):
                return
    pytest.fail("no seed of 50 found it")


@pytest.mark.parametrize("seed", [1263])
def test_the_simulator_catches_a_late_answer_that_settles_a_newer_isr_change(
        monkeypatch, seed: int) -> None:
    """The answer to an AlterPartition the image already settled arrives after the
    leader proposed another change: applying it clears the newer change from the
    maximal ISR (a rare interleaving: this seed, 6 of 1,600; if a change to the
    simulator moves it, find another with ``stale_alter_reply_completes``)."""
    monkeypatch.setattr(ReplicationSimulation, "stale_alter_reply_completes", True)
    with pytest.raises(Violation, match="of the controller's ISR"):
        ReplicationSimulation(seed).run()
    monkeypatch.setattr(ReplicationSimulation, "stale_alter_reply_completes", False)
    ReplicationSimulation(seed).run()


@pytest.mark.parametrize("seed", [3, 4242])
def test_a_seed_replays_exactly(seed: int) -> None:
    traces: list[list[str]] = [[], []]
    for trace in traces:
        ReplicationSimulation(seed, trace=trace.append).run()
    assert traces[0] == traces[1]
    assert any("truncates" in line for line in traces[0])
    assert any("acknowledged (acks=all)" in line for line in traces[0])
