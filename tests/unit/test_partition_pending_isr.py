"""Partition: the image catching up with an AlterPartition reply the leader already
applied (same leader epoch, same partition epoch) must not settle a change sent after
that reply: the controller may still commit it, so the HW keeps waiting for it
(found by tests/sim/replication_sim.py, seeds 2388 and 419: an acknowledged acks=all
record lost)."""

from __future__ import annotations

from spool.cluster.image import PartitionRegistration
from spool.replica.partition import Partition
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch


def _reg(isr: tuple[int, ...], pepoch: int) -> PartitionRegistration:
    return PartitionRegistration(replicas=(1, 2, 3), isr=isr, leader=1, leader_epoch=5,
                                 partition_epoch=pepoch)


def test_an_image_of_the_epoch_held_keeps_the_isr_change_in_flight(tmp_path) -> None:
    part = Partition("t", 0, PartitionLog(tmp_path / "t-0", LogConfig(), clock=FakeClock(),
                                          hw_follows_leo=False), 1)
    part.make_leader(_reg((1,), 7), 0)
    part.append_as_leader(make_batch(2), acks=1, now_ms=0)
    assert part.high_watermark == 2  # the leader alone in the ISR
    part.update_follower_fetch(2, 2, 0)
    part.begin_isr_change((1, 2))  # 2 caught up
    part.complete_isr_change((1, 2), 5, 8)  # the reply, before the image has it
    part.update_follower_fetch(3, 2, 0)
    part.begin_isr_change((1, 2, 3))  # 3 caught up: sent with partition epoch 8
    part.make_leader(_reg((1, 2), 8), 0)  # the image reaches partition epoch 8
    assert part.pending_isr == (1, 2, 3)
    part.append_as_leader(make_batch(1), acks=1, now_ms=0)
    part.update_follower_fetch(2, 3, 0)
    assert part.high_watermark == 2  # 3 (LEO 2) may be in the ISR the controller holds
    part.make_leader(_reg((1, 2, 3), 9), 0)  # the controller committed it
    assert (part.isr, part.pending_isr) == ((1, 2, 3), None)
