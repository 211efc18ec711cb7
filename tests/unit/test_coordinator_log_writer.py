"""PartitionLogWriter (spool.broker.coordinator_log), the coordinators' production writer,
over a real ReplicaManager and PartitionLog (the stand-in broker of test_replica_manager):
a coordinator's record appended with acks=-1 is not replicated, and ``wait_replicated``
does not return, until every ISR member fetched past it; so ``CoordinatorLog`` releases
no reply (a commit, a join) that a new leader could lack."""

from __future__ import annotations

import asyncio

from spool.broker.coordinator_log import PartitionLogWriter
from tests.helpers.storage_batches import make_batch
from tests.unit.test_replica_manager import TP, changes, in_loop, manager, reg, settle


@in_loop
async def test_the_writer_waits_for_every_isr_member(tmp_path):
    broker, rm, _ = manager(tmp_path)
    broker.replicas = rm
    rm.apply_changes(None, changes(leaders={TP: reg()}))  # ISR (1, 2, 3), led here
    part = rm.leader_partition("t", 0)
    w = PartitionLogWriter(broker)
    last = w.append("t", 0, make_batch(2))
    assert (last, part.log_end_offset) == (1, 2)
    assert w.replicated("t", 0, last) is False
    waiting = asyncio.ensure_future(w.wait_replicated("t", 0, last, 5000))
    await settle()
    rm.follower_fetched(part, 2, 2, broker.clock.now_ms())
    await settle()
    assert not waiting.done() and w.replicated("t", 0, last) is False  # 3 lacks them
    rm.follower_fetched(part, 3, 2, broker.clock.now_ms())
    await asyncio.wait_for(waiting, 1)
    assert w.replicated("t", 0, last) is True and part.high_watermark == 2
