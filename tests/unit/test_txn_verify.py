"""The leader -> coordinator AddPartitionsToTxn sender (KIP-890, Kafka's
AddPartitionsToTxnManager): one request in flight per coordinator, what arrives meanwhile
batched into the next one, one entry per transactional id (an older epoch loses)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spool.broker import peer_clients
from spool.broker.txn_verify import AddPartitionsToTxnSender
from spool.protocol._generated import AddPartitionsToTxnResponse
from spool.protocol._generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from spool.protocol.errors import Errors, KafkaError

COORDINATOR = 2


class FakeClient:
    """Records each request and answers it when the test releases it."""

    sent: list = []
    gates: list = []

    def __init__(self, host, port, **_kw) -> None:
        pass

    async def request(self, req, version):
        gate = asyncio.get_running_loop().create_future()
        FakeClient.sent.append((req, version))
        FakeClient.gates.append(gate)
        code = await gate
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=[
            AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=[
                AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=[
                    AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                    for p in topic.partitions]) for topic in t.topics])
            for t in req.transactions])

    async def close(self) -> None:
        pass


def sender(monkeypatch) -> AddPartitionsToTxnSender:
    monkeypatch.setattr(peer_clients, "NodeClient", FakeClient)
    FakeClient.sent, FakeClient.gates = [], []
    view = SimpleNamespace(
        partition=lambda topic, p: SimpleNamespace(leader=COORDINATOR),
        broker=lambda node, listener: SimpleNamespace(host="127.0.0.1", port=9000 + node))
    broker = SimpleNamespace(view=view, node_id=1,
                             cluster=SimpleNamespace(inter_broker_listener_name="PLAINTEXT"))
    topic = SimpleNamespace(
        coordinator_error=lambda txn_id: KafkaError(Errors.NOT_COORDINATOR, "elsewhere"),
        partition_for=lambda txn_id: 0)
    return AddPartitionsToTxnSender(broker, SimpleNamespace(topic=topic))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_one_request_in_flight_per_coordinator_and_the_rest_batched(monkeypatch):
    async def main():
        s = sender(monkeypatch)
        first = asyncio.ensure_future(s.add_or_verify("a", 10, 0, [("t", 0)], True))
        await settle()
        assert len(FakeClient.sent) == 1  # in flight
        second = asyncio.ensure_future(s.add_or_verify("b", 11, 0, [("t", 1)], True))
        third = asyncio.ensure_future(s.add_or_verify("c", 12, 0, [("t", 2)], False))
        await settle()
        assert len(FakeClient.sent) == 1  # they wait for the answer
        FakeClient.gates[0].set_result(0)
        assert await first == {("t", 0): 0}
        await settle()
        assert len(FakeClient.sent) == 2  # one request for both
        req, version = FakeClient.sent[1]
        assert version == 5
        assert [(t.transactional_id, t.verify_only) for t in req.transactions] == [
            ("b", True), ("c", False)]
        FakeClient.gates[1].set_result(Errors.TRANSACTION_ABORTABLE)
        assert await second == {("t", 1): Errors.TRANSACTION_ABORTABLE}
        assert await third == {("t", 2): Errors.TRANSACTION_ABORTABLE}

    asyncio.run(main())


def test_a_waiting_entry_of_the_same_id_is_replaced(monkeypatch):
    async def main():
        s = sender(monkeypatch)
        busy = asyncio.ensure_future(s.add_or_verify("x", 1, 0, [("t", 0)], True))
        await settle()
        old = asyncio.ensure_future(s.add_or_verify("a", 10, 3, [("t", 1)], True))
        await settle()
        # a retry at the same epoch: the waiting one gets a retriable error
        same = asyncio.ensure_future(s.add_or_verify("a", 10, 3, [("t", 1)], True))
        assert await old == {("t", 1): Errors.NETWORK_EXCEPTION}
        # a newer epoch fences the waiting one; an older one is fenced at once
        newer = asyncio.ensure_future(s.add_or_verify("a", 10, 4, [("t", 1)], True))
        assert await same == {("t", 1): Errors.INVALID_PRODUCER_EPOCH}
        # answered at once (the bound only turns a wait that never ends into a failure)
        assert await asyncio.wait_for(s.add_or_verify("a", 10, 2, [("t", 1)], True), 10) == {
            ("t", 1): Errors.INVALID_PRODUCER_EPOCH}
        FakeClient.gates[0].set_result(0)
        await busy
        await settle()
        (req, _) = FakeClient.sent[1]
        assert [(t.transactional_id, t.producer_epoch) for t in req.transactions] == [("a", 4)]
        FakeClient.gates[1].set_result(0)
        assert await newer == {("t", 1): 0}

    asyncio.run(main())
