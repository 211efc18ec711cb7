"""spool.broker.share_manager: acknowledgements persisted through a persister that fails,
with two acknowledgements of one share-partition in flight together."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from spool.broker.share_manager import AckBatch, ShareManager, _Entry
from spool.protocol.errors import Errors, KafkaError
from spool.share.partition import SharePartition

T = uuid.UUID(int=7)
ACCEPT, ACKNOWLEDGED = 1, 2


class FlakyPersister:
    """Writes that answer in the order the test releases them; the first one fails."""

    def __init__(self) -> None:
        self.written: list[tuple[int, ...]] = []  # the offsets of each write that succeeded
        self.calls = 0
        self.gate = asyncio.Event()

    async def write(self, group_id, topic_id, partition, state_epoch, leader_epoch, start,
                    batches):
        self.calls += 1
        first = self.calls == 1
        await self.gate.wait()
        if first:
            return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "coordinator moving")
        self.written.append(tuple(o for b in batches for o in range(b.first_offset,
                                                                   b.last_offset + 1)
                                  if b.delivery_state == ACKNOWLEDGED))
        return None


def test_a_failed_write_leaves_its_changes_to_the_next_write():
    async def main():
        persister = FlakyPersister()
        broker = SimpleNamespace(
            config=SimpleNamespace(get_int=lambda name: 10), share_persister=persister,
            notify_key=lambda key: None, clock=SimpleNamespace(now_ms=lambda: 0))
        manager = ShareManager(broker)
        sp = SharePartition(0, record_lock_duration_ms=30000)
        sp.acquire("m1", [(0, 9)], 500, now_ms=0)
        entry = _Entry("g", "t", T, 0, leader_epoch=0, sp=sp)
        manager.entries[("g", T, 0)] = entry
        acks = [manager.acknowledge("g", "m1", "t", T, 0, [AckBatch(lo, hi, (ACCEPT,))])
                for lo, hi in ((2, 4), (6, 8))]
        # stand-in for the leader check: the entry is loaded and led here
        manager._entry = lambda *a: asyncio.sleep(0, entry)
        first = asyncio.ensure_future(acks[0])
        await asyncio.sleep(0.01)  # the first write (offsets 2-4) is in flight
        second = asyncio.ensure_future(acks[1])
        await asyncio.sleep(0.01)  # the second waits for it
        persister.gate.set()
        a, b = await first, await second
        assert a is not None and a.code == Errors.COORDINATOR_NOT_AVAILABLE
        # the second acknowledgement is answered by a write that carried its offsets, and
        # those of the failed write with them
        assert b is None
        assert persister.written == [(2, 3, 4, 6, 7, 8)]
        await manager.close()

    asyncio.run(main())
