"""Partition leader -> transaction coordinator: AddPartitionsToTxn v4+ (KIP-890).

Kafka's ``AddPartitionsToTxnManager``: before a leader appends the first
transactional batch of a producer's transaction to a partition it asks the
transaction coordinator whether that partition is in the transaction
(``verify_only``, part 1: a batch the coordinator does not know of would be a
hanging transaction, holding the LSO with nobody to write its marker), or, for a
transaction version 2 producer (Produce v12+, TxnOffsetCommit v5+), adds it
(part 2: the producer sends no AddPartitionsToTxn itself).

``await add_or_verify(txn_id, producer_id, epoch, partitions, verify_only)``
returns an error code per partition (0: verified / added), the coordinator's codes
(INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, TRANSACTION_ABORTABLE,
CONCURRENT_TRANSACTIONS, ...) or, when the coordinator cannot be asked,
COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / NETWORK_EXCEPTION. Mapping them to what
a producer understands is the caller's (``spool.broker.handlers.produce``).

- When this broker coordinates the transactional id it answers itself
  (``TransactionRuntime``; always on a single node).
- Otherwise the coordinator is the leader of the id's ``__transaction_state``
  partition in the view; requests to one coordinator are batched as Kafka does:
  at most one request in flight per coordinator; what arrives meanwhile waits in
  that node's next request, one entry per transactional id. A second entry for an
  id already waiting replaces it: the older one is answered INVALID_PRODUCER_EPOCH
  if the new one has a higher epoch, NETWORK_EXCEPTION (retriable) for the same
  epoch; a new one with a lower epoch is answered INVALID_PRODUCER_EPOCH at once.
- A coordinator that answers UNSUPPORTED_VERSION cannot verify: the partitions
  count as verified (Kafka goes on with the append); a top-level
  CLUSTER_AUTHORIZATION_FAILED becomes INVALID_TXN_STATE.

On the event loop only; ``close()`` drops the connections.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from spool.broker.peer_clients import PeerClients
from spool.net.client import ClientError
from spool.protocol._generated import AddPartitionsToTxnRequest
from spool.protocol._generated.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from spool.protocol.errors import Errors

log = logging.getLogger("spool.transactions")

VERSION = 5  # Kafka's AddPartitionsToTxnRequest.Builder.forBroker: the latest
TIMEOUT_MS = 30_000
TXN_TOPIC = "__transaction_state"

TP = tuple[str, int]


class _Pending:
    """One transactional id's entry in a coordinator's next request."""

    __slots__ = ("data", "partitions", "future")

    def __init__(self, data: AddPartitionsToTxnTransaction, partitions: list[TP]) -> None:
        self.data = data
        self.partitions = partitions
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()

    def answer(self, codes: dict[TP, int]) -> None:
        if not self.future.done():
            self.future.set_result(codes)

    def fail(self, code: int) -> None:
        self.answer({tp: code for tp in self.partitions})


class AddPartitionsToTxnSender:
    def __init__(self, broker: Any, runtime: Any) -> None:
        self.broker = broker
        self.runtime = runtime
        self._clients = PeerClients(broker, "txn-verify", TIMEOUT_MS)
        self._waiting: dict[int, dict[str, _Pending]] = {}  # node -> txn id -> entry
        self._in_flight: dict[int, asyncio.Task] = {}

    async def add_or_verify(self, txn_id: str, producer_id: int, epoch: int,
                            partitions: list[TP], verify_only: bool) -> dict[TP, int]:
        rt = self.runtime
        err = rt.topic.coordinator_error(txn_id)
        if err is None or err.code != Errors.NOT_COORDINATOR:
            if err is not None:
                return {tp: err.code for tp in partitions}
            if verify_only:
                return rt.coordinator.verify_partitions(txn_id, producer_id, epoch, partitions)
            return await rt.add_partitions(txn_id, producer_id, epoch, partitions, client_tv=2)
        node = self._coordinator_node(txn_id)
        if node is None:
            return {tp: Errors.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        entry = _Pending(AddPartitionsToTxnTransaction(
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch,
            verify_only=verify_only,
            topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()]),
            partitions)
        waiting = self._waiting.setdefault(node, {})
        old = waiting.get(txn_id)
        if old is not None:
            if old.data.producer_epoch > epoch:
                return {tp: Errors.INVALID_PRODUCER_EPOCH for tp in partitions}
            old.fail(Errors.INVALID_PRODUCER_EPOCH if old.data.producer_epoch < epoch
                     else Errors.NETWORK_EXCEPTION)
        waiting[txn_id] = entry
        if node not in self._in_flight:
            self._in_flight[node] = asyncio.get_running_loop().create_task(self._drain(node))
        return await entry.future

    def _coordinator_node(self, txn_id: str) -> int | None:
        view = self.broker.view
        part = view.partition(TXN_TOPIC, self.runtime.topic.partition_for(txn_id))
        if part is None or part.leader < 0:
            return None
        return part.leader

    async def _drain(self, node: int) -> None:
        """Send the node's waiting entries, one request at a time, until none wait."""
        try:
            while self._waiting.get(node):
                batch = self._waiting.pop(node)
                await self._send(node, batch)
        finally:
            self._in_flight.pop(node, None)
            if self._waiting.get(node):  # arrived after the loop's last look
                self._in_flight[node] = asyncio.get_running_loop().create_task(
                    self._drain(node))

    async def _send(self, node: int, batch: dict[str, _Pending]) -> None:
        listener = self.broker.cluster.inter_broker_listener_name
        ep = self.broker.view.broker(node, listener)
        if ep is None:
            for e in batch.values():
                e.fail(Errors.COORDINATOR_NOT_AVAILABLE)
            return
        client = self._clients.for_endpoint(ep)
        req = AddPartitionsToTxnRequest(transactions=[e.data for e in batch.values()])
        try:
            resp = await client.request(req, VERSION)
        except (ClientError, ConnectionError, TimeoutError) as e:
            log.warning("AddPartitionsToTxn to broker %d failed: %s", node, e)
            for entry in batch.values():
                entry.fail(Errors.NETWORK_EXCEPTION)
            return
        if resp.error_code:
            if resp.error_code == Errors.UNSUPPORTED_VERSION:
                for entry in batch.values():
                    entry.answer({tp: 0 for tp in entry.partitions})
                return
            code = (Errors.INVALID_TXN_STATE if resp.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
                    else resp.error_code)
            for entry in batch.values():
                entry.fail(code)
            return
        for result in resp.results_by_transaction:
            entry = batch.get(result.transactional_id)
            if entry is None:
                continue
            codes = {(t.name, p.partition_index): p.partition_error_code
                     for t in result.topic_results for p in t.results_by_partition}
            entry.answer({tp: codes.get(tp, Errors.UNKNOWN_SERVER_ERROR)
                          for tp in entry.partitions})
        for entry in batch.values():
            entry.fail(Errors.UNKNOWN_SERVER_ERROR)  # not in the response: no-op if answered

    async def close(self) -> None:
        for task in list(self._in_flight.values()):
            task.cancel()
        for waiting in self._waiting.values():
            for entry in waiting.values():
                entry.fail(Errors.NETWORK_EXCEPTION)
        self._waiting.clear()
        await self._clients.close()
