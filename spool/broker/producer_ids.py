"""Producer ids for InitProducerId, unique across broker restarts.

Kafka's controller hands brokers blocks of producer ids and records each
block in the metadata log (``ProducerIdsRecord``, next id after the block).
Here ``MetadataStore.allocate_producer_ids`` does the same: the broker takes
a block of ``BLOCK_SIZE`` ids (one fsynced metadata record), hands them out
one by one, and takes the next block when it runs dry. A restart starts
from the next unreserved block, so an id is never given twice even if the
broker crashed in the middle of a block (the rest of that block is skipped).

Called on the event loop only (not thread-safe); the rare block allocation
fsyncs the metadata log in place, like the other metadata changes.

In a cluster the controller hands out the blocks: ``ControllerProducerIdManager``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from spool.protocol._generated import AllocateProducerIdsRequest
from spool.protocol.errors import Errors, KafkaError, error_name

log = logging.getLogger("spool.broker.producer_ids")

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, metadata: Any, block_size: int = BLOCK_SIZE) -> None:
        self.metadata = metadata
        self.block_size = block_size
        self._next = self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next, self._end = self.metadata.allocate_producer_ids(self.block_size)
        pid = self._next
        self._next += 1
        return pid


ALLOCATE_PRODUCER_IDS = 67
PREFETCH_AT = 0.9  # Kafka's RPCProducerIdManager asks for the next block at 90% of this one


class ControllerProducerIdManager:
    """Producer ids in a cluster: blocks from the active controller (Kafka's
    ``RPCProducerIdManager``). The controller records every block it hands out
    (``ProducerIdsRecord``), so ids are unique across the brokers and their restarts.

    ``next_id()`` hands out the current block; at 90% of it the next block is asked
    for (AllocateProducerIds with this broker's id and epoch, over the controller
    channel). When no id is left (none fetched yet, or the controller did not
    answer) it raises COORDINATOR_LOAD_IN_PROGRESS, retriable, as Kafka does, and
    asks for a block. On the event loop only."""

    def __init__(self, channel: Any, node_id: int, broker_epoch: Any,
                 timeout_s: float = 30.0) -> None:
        self.channel = channel
        self.node_id = node_id
        self.broker_epoch = broker_epoch  # () -> int: -1 until registered
        self.timeout_s = timeout_s
        self._start = self._next = self._end = 0
        self._prefetched: tuple[int, int] | None = None
        self._task: asyncio.Task | None = None

    def next_id(self) -> int:
        if self._next >= self._end and self._prefetched is not None:
            (self._start, self._end), self._prefetched = self._prefetched, None
            self._next = self._start
        if self._next >= self._end:
            self.prefetch()
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS,
                             "producer ids are being allocated by the controller")
        pid = self._next
        self._next += 1
        if self._next - self._start >= PREFETCH_AT * (self._end - self._start):
            self.prefetch()
        return pid

    def prefetch(self) -> None:
        """Ask for the next block unless one is waiting or being asked for."""
        if self._prefetched is None and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._allocate())

    async def _allocate(self) -> None:
        epoch = self.broker_epoch()
        if epoch < 0:
            return
        try:
            resp = await self.channel.send(
                ALLOCATE_PRODUCER_IDS, 0,
                AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=epoch),
                self.timeout_s)
        except ConnectionError as e:
            log.info("producer ids not allocated: %s", e)
            return
        if resp.error_code:
            log.warning("producer ids not allocated: %s", error_name(resp.error_code))
            return
        self._prefetched = (resp.producer_id_start,
                            resp.producer_id_start + resp.producer_id_len)
