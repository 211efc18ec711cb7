"""``broker.share_persister``: the persister (``spool.share.persister``'s contract) over the
share coordinator, here or on the broker that coordinates the key.

Kafka's ``DefaultStatePersister`` / ``PersisterStateManager``, one key per call:

1. ``runtime.coordinator_error(key)`` (``spool.broker.share_runtime``): None when this
   broker leads the key's ``__share_group_state`` partition: the operation runs on the
   local share coordinator, no network.
2. NOT_COORDINATOR: the leader named by this broker's metadata view for that partition is
   the coordinator (what FindCoordinator key type 2 answers); the request
   (InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85,
   DeleteShareGroupState 86, ReadShareGroupStateSummary 87, v0) goes to it over this
   broker's own connection on ``inter.broker.listener.name`` (``spool.net.client.NodeClient``,
   one per endpoint, the inter-broker security), as the transaction markers do.
3. COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR (from either
   path), no leader known, or a connection that fails: tried again after a backoff
   (50 ms doubling to 1 s) until ``request.timeout.ms`` is spent; then the last error is
   the answer (retriable: the caller decides).

Every other error (FENCED_*, UNKNOWN_TOPIC_OR_PARTITION, ...) is the answer at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from spool.broker.peer_clients import PeerClients
from spool.broker.share_runtime import TOPIC
from spool.protocol._generated import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from spool.protocol._generated import delete_share_group_state_request as dreq
from spool.protocol._generated import initialize_share_group_state_request as ireq
from spool.protocol._generated import read_share_group_state_request as rreq
from spool.protocol._generated import read_share_group_state_summary_request as sreq
from spool.protocol._generated import write_share_group_state_request as wreq
from spool.protocol.errors import Errors, KafkaError
from spool.share.batches import StateBatch
from spool.share.coordinator import ShareKey, coordinator_key
from spool.share.persister import ShareState

log = logging.getLogger("spool.share.persister")

RETRIABLE = frozenset({Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                       Errors.NOT_COORDINATOR})
BACKOFF_MS, MAX_BACKOFF_MS = 50, 1000


class CoordinatorPersister:
    """The persister of a broker (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._clients = PeerClients(broker, "share-persister")

    @property
    def runtime(self) -> Any:
        return self.broker.share_state

    # ---- the contract (spool.share.persister)

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> KafkaError | None:
        key = (group_id, topic_id, partition)
        req = InitializeShareGroupStateRequest(group_id=group_id, topics=[
            ireq.InitializeStateData(topic_id=topic_id, partitions=[ireq.PartitionData(
                partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])
        return await self._call(key, lambda: self.runtime.initialize(
            key, state_epoch, start_offset), req, _no_value)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> ShareState | KafkaError:
        key = (group_id, topic_id, partition)
        req = ReadShareGroupStateRequest(group_id=group_id, topics=[rreq.ReadStateData(
            topic_id=topic_id, partitions=[rreq.PartitionData(partition=partition,
                                                              leader_epoch=leader_epoch)])])

        def value(p: Any) -> ShareState:
            return ShareState(p.state_epoch, p.start_offset, leader_epoch, tuple(
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in p.state_batches))

        return await self._call(key, lambda: self.runtime.read(key, leader_epoch), req, value)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...] | list[StateBatch]) -> KafkaError | None:
        key = (group_id, topic_id, partition)
        batches = tuple(batches)
        req = WriteShareGroupStateRequest(group_id=group_id, topics=[wreq.WriteStateData(
            topic_id=topic_id, partitions=[wreq.PartitionData(
                partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                start_offset=start_offset, state_batches=[
                    wreq.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                    delivery_state=b.delivery_state,
                                    delivery_count=b.delivery_count) for b in batches])])])
        return await self._call(key, lambda: self.runtime.write(
            key, state_epoch, leader_epoch, start_offset, batches), req, _no_value)

    async def delete(self, group_id: str, topic_id: uuid.UUID,
                     partition: int) -> KafkaError | None:
        key = (group_id, topic_id, partition)
        req = DeleteShareGroupStateRequest(group_id=group_id, topics=[dreq.DeleteStateData(
            topic_id=topic_id, partitions=[dreq.PartitionData(partition=partition)])])
        return await self._call(key, lambda: self.runtime.delete(key), req, _no_value)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, int] | KafkaError:
        key = (group_id, topic_id, partition)
        req = ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[
            sreq.ReadStateSummaryData(topic_id=topic_id, partitions=[sreq.PartitionData(
                partition=partition, leader_epoch=leader_epoch)])])

        async def local() -> tuple[int, int] | KafkaError:
            got = await self.runtime.read_summary(key, leader_epoch)
            return got if isinstance(got, KafkaError) else (got.state_epoch, got.start_offset)

        return await self._call(key, local, req, lambda p: (p.state_epoch, p.start_offset))

    # ---- local or remote, with retries (module doc)

    async def _call(self, key: ShareKey, local: Callable[[], Awaitable[Any]], req: Any,
                    value: Callable[[Any], Any]) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.broker.config.get_int("request.timeout.ms") / 1000
        backoff = BACKOFF_MS
        while True:
            err = await self.runtime.coordinator_error(key)
            if err is None:
                answer = await local()
            elif err.code == Errors.NOT_COORDINATOR:
                answer = await self._remote(key, req, value)
            else:
                answer = err
            if not (isinstance(answer, KafkaError) and answer.code in RETRIABLE):
                return answer
            if loop.time() + backoff / 1000 > deadline:
                log.warning("share-group state of %s: giving up: %s", coordinator_key(key),
                            answer)
                return answer
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, MAX_BACKOFF_MS)

    async def _remote(self, key: ShareKey, req: Any, value: Callable[[Any], Any]) -> Any:
        """Send ``req`` to the key's coordinator; the partition's value or a KafkaError."""
        broker = self.broker
        view = broker.view
        p = self.runtime.topic.partition_for(coordinator_key(key))
        part = view.partition(TOPIC, p)
        listener = broker.cluster.inter_broker_listener_name
        ep = None if part is None or part.leader < 0 else view.broker(part.leader, listener)
        if ep is None or part.leader == broker.node_id:
            return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                              f"{TOPIC} partition {p} has no leader")
        client = self._clients.for_endpoint(ep)
        try:
            resp = await client.request(req, 0)
        except (ConnectionError, TimeoutError) as e:
            return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                              f"share coordinator {part.leader} unreachable: {e}")
        try:
            result = resp.results[0].partitions[0]
        except (IndexError, AttributeError):
            return KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                              f"share coordinator {part.leader} answered no partition")
        if result.error_code:
            return KafkaError(result.error_code, result.error_message or "")
        return value(result)

    async def close(self) -> None:
        await self._clients.close()


def _no_value(_: Any) -> None:
    return None
