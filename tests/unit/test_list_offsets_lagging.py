"""ListOffsets on a new leader whose high watermark lags behind its epoch's start: Kafka's
OFFSET_NOT_AVAILABLE for a consumer's latest and unreadable lookups, the earliest and a
replica's answers unaffected. A real Partition and PartitionLog; the broker around the
handler is reduced to what it asks (``replicas.leader_partition``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spool.broker.handlers.list_offsets import list_offsets
from spool.protocol._generated import ListOffsetsRequest
from spool.protocol._generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from spool.protocol.errors import Errors
from spool.util.clock import FakeClock
from tests.unit.test_partition import append, leader, reg


def _ask(part, version: int, timestamp: int, replica_id: int = -1):
    ctx = SimpleNamespace(api_version=version, broker=SimpleNamespace(
        authorizer=None,  # no authorizer.class.name: every check allows
        replicas=SimpleNamespace(leader_partition=lambda topic, p: part)))
    req = ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=[
        ListOffsetsTopic(name="t", partitions=[ListOffsetsPartition(partition_index=0,
                                                                    timestamp=timestamp)])])
    r = asyncio.run(list_offsets(ctx, req)).topics[0].partitions[0]
    return r.error_code, r.offset


def test_lagging_new_leader_answers_offset_not_available(tmp_path):
    clock = FakeClock(1_700_000_000_000)
    part = leader(tmp_path, clock)  # epoch 5, ISR 1-3: the HW waits for the followers
    append(part, 3, clock=clock)
    assert part.high_watermark == 0
    assert part.make_leader(reg(epoch=6), clock.now_ms()) is True  # epoch 6 starts at 3
    unavailable = (Errors.OFFSET_NOT_AVAILABLE, -1)
    assert _ask(part, 11, -1) == unavailable  # latest
    assert _ask(part, 11, -3) == unavailable  # max timestamp: past the HW
    assert _ask(part, 11, 0) == unavailable  # by timestamp: past the HW
    assert _ask(part, 11, -2) == (0, 0)  # earliest is known
    assert _ask(part, 11, -1, replica_id=2) == (0, 3)  # a replica reads up to the LEO
    # once the HW reaches the epoch's start, the answers come back
    part.update_follower_fetch(2, 3, clock.now_ms())
    part.update_follower_fetch(3, 3, clock.now_ms())
    assert part.high_watermark == 3
    assert _ask(part, 11, -1) == (0, 3)
    assert _ask(part, 11, 0) == (0, 0)
