"""Partition (spool.replica.partition): replica.lag.time.max.ms is a window, not a threshold
on offsets. A follower behind the leader's log end stays in sync for as long as it was
caught up within ``replica.lag.time.max.ms`` (Kafka's ``isCaughtUp``), and becomes a shrink
candidate the millisecond after; a busy partition (the leader always a few records ahead)
must not lose its followers at every ISR check."""

from __future__ import annotations

from spool.cluster.image import PartitionRegistration
from spool.replica.partition import Partition
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

LAG_MS = 10_000
ME = 1


def test_a_follower_behind_the_log_end_stays_in_sync_for_the_lag_window(tmp_path):
    clock = FakeClock(1_700_000_000_000)
    log = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock, hw_follows_leo=False)
    part = Partition("t", 0, log, ME)
    part.make_leader(PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=ME,
                                           leader_epoch=5, partition_epoch=7), clock.now_ms())
    part.append_as_leader(make_batch(5), acks=1, now_ms=clock.now_ms())
    t0 = clock.now_ms()
    part.update_follower_fetch(2, 5, t0)  # both at the leader's log end: caught up at t0
    part.update_follower_fetch(3, 5, t0)
    part.append_as_leader(make_batch(3), acks=1, now_ms=t0)  # LEO 8: both now behind
    clock.advance(LAG_MS)
    part.update_follower_fetch(2, 5, clock.now_ms())  # still at 5 (the LEO of its last fetch)
    assert part.followers[2].last_caught_up_ms == t0
    assert part.isr_shrink_candidates(clock.now_ms(), LAG_MS) == ()
    clock.advance(1)
    assert part.isr_shrink_candidates(clock.now_ms(), LAG_MS) == (2, 3)
    part.update_follower_fetch(3, 8, clock.now_ms())  # at the log end: in sync again
    assert part.isr_shrink_candidates(clock.now_ms(), LAG_MS) == (2,)
