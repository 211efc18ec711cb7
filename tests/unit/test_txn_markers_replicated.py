"""WriteTxnMarkers (spool.broker.handlers.txn_markers) in a cluster broker's shape (the
stand-in broker of test_replica_manager around a real ReplicaManager and PartitionLog):
the marker is appended as leader at once, but its partition's answer waits until every
ISR member fetched past it (acks=-1, as Kafka), so the coordinator completes a
transaction only once its markers survive the leader's loss."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spool.broker.handlers.txn_markers import _write
from spool.records.batch import BatchHeader
from tests.unit.test_replica_manager import TP, changes, in_loop, manager, reg, settle


@in_loop
async def test_a_marker_is_answered_once_the_isr_has_it(tmp_path):
    broker, rm, _ = manager(tmp_path)
    broker.replicas, broker.groups = rm, None
    rm.apply_changes(None, changes(leaders={TP: reg()}))  # ISR (1, 2, 3), led here
    part = rm.leader_partition("t", 0)
    marker = SimpleNamespace(transaction_result=True, producer_id=7, producer_epoch=0,
                             coordinator_epoch=3, transaction_version=0)  # WritableTxnMarker v2
    answer = asyncio.ensure_future(_write(broker, "t", 0, marker))
    await settle()
    assert part.log_end_offset == 1  # the COMMIT marker is in the leader's log
    assert BatchHeader.parse(part.log.read_bytes(0)).is_control
    rm.follower_fetched(part, 2, 1, broker.clock.now_ms())
    await settle()
    assert not answer.done()  # 3 lacks it
    rm.follower_fetched(part, 3, 1, broker.clock.now_ms())
    assert await asyncio.wait_for(answer, 1) == 0
    assert part.high_watermark == 1
