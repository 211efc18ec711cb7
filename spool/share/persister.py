"""The share-partition state persister: KIP-932's ``Persister`` as the broker uses it.

A share-partition leader (``spool.broker.share_manager``) and the share-group coordinator
keep a share-partition's durable state through ``broker.share_persister``; the share
coordinator (``spool.share.coordinator``) owns it in ``__share_group_state``. Every call
is a coroutine for one key (group id, topic id, partition) and returns its error as a
``KafkaError`` value, never raises it:

- ``initialize(group_id, topic_id, partition, state_epoch, start_offset)`` -> None |
  KafkaError: start the state (or restart it: an offsets reset) at ``state_epoch`` with no
  batches; FENCED_STATE_EPOCH below the state epoch already stored.
- ``read(group_id, topic_id, partition, leader_epoch)`` -> ``ShareState`` | KafkaError:
  the state; the caller's ``leader_epoch`` becomes the key's (a share-partition leader
  reads as it takes over); FENCED_LEADER_EPOCH below the one stored;
  UNKNOWN_TOPIC_OR_PARTITION for a key never initialized or written. ``start_offset``
  -1: not set yet (``share.auto.offset.reset`` decides).
- ``write(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset,
  batches)`` -> None | KafkaError: the changed ranges (``batches``); the coordinator
  merges them into the state (``spool.share.batches.combine``: batches below the start
  offset dropped). FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH below the stored epochs.
  Once it returns None the state survives a broker crash (replicated like any
  coordinator record).
- ``delete(group_id, topic_id, partition)`` -> None | KafkaError: forget the key (a
  tombstone).
- ``read_summary(group_id, topic_id, partition, leader_epoch)`` -> ``(state_epoch,
  start_offset)`` | KafkaError: as ``read`` without the batches, and without taking the
  leader epoch (DescribeShareGroupOffsets).

Retriable errors (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR) are retried inside the persister until its timeout, as Kafka's
``PersisterStateManager`` does; what comes out is the final answer.

``MemoryPersister`` is the same contract in memory (no durability): the share
coordinator's state machine without a log, a stand-in for unit tests of its users. The
broker's is ``spool.broker.share_persister.CoordinatorPersister``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from spool.protocol.errors import KafkaError
from spool.share.batches import StateBatch

__all__ = ["MemoryPersister", "Persister", "ShareState", "StateBatch"]


@dataclass(frozen=True)
class ShareState:
    state_epoch: int
    start_offset: int  # -1: not set
    leader_epoch: int
    batches: tuple[StateBatch, ...]


class Persister(Protocol):
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> KafkaError | None: ...

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> ShareState | KafkaError: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...] | list[StateBatch]
                    ) -> KafkaError | None: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID,
                     partition: int) -> KafkaError | None: ...

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, int] | KafkaError: ...

    async def close(self) -> None:
        """Release connections (the broker's shutdown)."""


class MemoryPersister:
    """The persister's contract in memory (module doc): the share coordinator's state
    machine with its records applied at once; nothing survives the process."""

    def __init__(self, snapshot_every: int = 500) -> None:
        from spool.share.coordinator import ShareCoordinator  # (it imports ShareState)

        self.coordinator = ShareCoordinator(snapshot_every)

    def _apply(self, op: tuple[list, Any]) -> Any:
        records, answer = op
        for rec in records:
            self.coordinator.replay(rec)
        return answer

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> KafkaError | None:
        return self._apply(self.coordinator.initialize((group_id, topic_id, partition),
                                                       state_epoch, start_offset))

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> ShareState | KafkaError:
        return self._apply(self.coordinator.read((group_id, topic_id, partition),
                                                 leader_epoch))

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...] | list[StateBatch]) -> KafkaError | None:
        return self._apply(self.coordinator.write((group_id, topic_id, partition), state_epoch,
                                                  leader_epoch, start_offset, tuple(batches)))

    async def delete(self, group_id: str, topic_id: uuid.UUID,
                     partition: int) -> KafkaError | None:
        return self._apply(self.coordinator.delete((group_id, topic_id, partition)))

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, int] | KafkaError:
        got = self.coordinator.read_summary((group_id, topic_id, partition), leader_epoch)
        return got if isinstance(got, KafkaError) else (got.state_epoch, got.start_offset)

    async def close(self) -> None:
        return None
