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
"""

from __future__ import annotations

from typing import Any

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
