"""The transaction coordinator (spool.broker.txn_runtime) writes COMPLETE_COMMIT only once
its markers are replicated (Kafka: the marker requests complete with acks=-1 before the
transition is logged), and answers a TxnOffsetCommit only once its offsets are replicated
(within offsets.commit.timeout.ms). The set-up of test_coordinator_partitions (stand-in broker, in-memory
logs) with a writer whose every append waits for the test to call it replicated."""

from __future__ import annotations

import asyncio

from spool.broker.group_runtime import GroupRuntime
from spool.broker.txn_runtime import TransactionRuntime
from spool.coordinator import partition_for
from spool.coordinator.transaction import TxnState
from spool.records.batch import BatchHeader
from tests.unit.test_coordinator_partitions import (
    OFFSETS,
    TXNS,
    broker,
    lead,
    settle,
    stored_prepare_commit,
)


class HeldWriter:
    """Appends to the in-memory logs; every append is unreplicated until ``release``."""

    def __init__(self, logs: dict) -> None:
        self.logs = logs
        self.pending: dict[tuple[str, int, int], asyncio.Future] = {}

    def append(self, topic: str, partition: int, batch: bytearray) -> int:
        log = self.logs[(topic, partition)]
        log.batches.append(bytes(batch))
        return len(log.batches) - 1

    def replicated(self, topic: str, partition: int, offset: int) -> bool:
        return False

    async def wait_replicated(self, topic, partition, offset, timeout_ms) -> None:
        fut = self.pending.setdefault((topic, partition, offset),
                                      asyncio.get_running_loop().create_future())
        await fut

    def release(self, topic: str) -> int:
        done = [k for k, f in self.pending.items() if k[0] == topic and not f.done()]
        for k in done:
            self.pending[k].set_result(None)
        return len(done)


def test_complete_commit_waits_for_the_markers_to_be_replicated():
    async def main():
        b, plain = broker()
        w = HeldWriter(plain.logs)
        b.groups = GroupRuntime(b, w)
        rt = TransactionRuntime(b, w)
        txn = "tx-a"
        p = stored_prepare_commit(b, txn)
        lead(b, TXNS, p, 4, rt)
        await settle()
        b.gate.open()  # the load reads the partition
        await settle()
        for dp in (0, 1):  # both markers are in the logs, neither replicated
            (marker,) = b.data[("data", dp)].batches
            assert BatchHeader.parse(marker).is_control
        assert len(b.data[(TXNS, p)].batches) == 1  # no COMPLETE_COMMIT yet
        assert rt.coordinator.txns[txn].state == TxnState.PREPARE_COMMIT
        assert w.release("data") == 2
        for _ in range(4):
            await settle()
        assert len(b.data[(TXNS, p)].batches) == 2  # now it is written...
        assert rt.coordinator.txns[txn].state == TxnState.PREPARE_COMMIT
        assert w.release(TXNS) == 1
        for _ in range(4):
            await settle()
        assert rt.coordinator.txns[txn].state == TxnState.COMPLETE_COMMIT  # ...and applied

    asyncio.run(main())


def test_txn_offset_commit_answers_once_its_offsets_are_replicated():
    async def main():
        b, plain = broker()
        w = HeldWriter(plain.logs)
        groups = b.groups = GroupRuntime(b, w)
        rt = TransactionRuntime(b, w)  # __transaction_state is led elsewhere: not local

        async def in_the_transaction(txn_id, pid, epoch, tps, verify_only):
            return {tp: 0 for tp in tps}  # the remote coordinator's KIP-890 answer

        rt.verifier.add_or_verify = in_the_transaction
        group = "g-tx"
        p = partition_for(group, 2)
        lead(b, OFFSETS, p, 4, groups)
        await settle()
        b.gate.open()  # the group coordinator loads its partition
        await settle()
        answer = asyncio.ensure_future(rt.txn_offset_commit(
            "tx-b", group, 1000, 3, -1, "", None, [("data", 0, 42, -1, None)]))
        await settle()
        assert len(b.data[(OFFSETS, p)].batches) == 1  # appended, transactional
        assert BatchHeader.parse(b.data[(OFFSETS, p)].batches[0]).is_transactional
        assert not answer.done()
        assert w.release(OFFSETS) == 1
        assert await asyncio.wait_for(answer, 1) == 0

    asyncio.run(main())
