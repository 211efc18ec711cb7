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

``MemoryPersister`` is the same contract in memory (no durability): the broker's
persister until the coordinator runtime serves it, and a stand-in for unit tests of its
users.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from spool.protocol.errors import Errors, KafkaError
from spool.share.batches import StateBatch, combine

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


def not_found(group_id: str, topic_id: uuid.UUID, partition: int) -> KafkaError:
    return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                      f"no share-partition state for group {group_id!r}, topic {topic_id}, "
                      f"partition {partition}")


class MemoryPersister:
    """The persister's contract in memory (module doc): nothing survives the process."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], ShareState] = {}

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> KafkaError | None:
        key = (group_id, topic_id, partition)
        old = self.states.get(key)
        if old is not None and old.state_epoch > state_epoch:
            return KafkaError(Errors.FENCED_STATE_EPOCH, "state epoch below the stored one")
        self.states[key] = ShareState(state_epoch, start_offset, -1, ())
        return None

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> ShareState | KafkaError:
        key = (group_id, topic_id, partition)
        state = self.states.get(key)
        if state is None:
            return not_found(group_id, topic_id, partition)
        if state.leader_epoch > leader_epoch:
            return KafkaError(Errors.FENCED_LEADER_EPOCH, "leader epoch below the stored one")
        state = ShareState(state.state_epoch, state.start_offset, leader_epoch, state.batches)
        self.states[key] = state
        return state

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...] | list[StateBatch]) -> KafkaError | None:
        key = (group_id, topic_id, partition)
        old = self.states.get(key)
        if old is None:
            self.states[key] = ShareState(state_epoch, start_offset, leader_epoch,
                                          combine((), batches, start_offset))
            return None
        if old.leader_epoch > leader_epoch:
            return KafkaError(Errors.FENCED_LEADER_EPOCH, "leader epoch below the stored one")
        if old.state_epoch > state_epoch:
            return KafkaError(Errors.FENCED_STATE_EPOCH, "state epoch below the stored one")
        start = old.start_offset if start_offset == -1 else start_offset
        self.states[key] = ShareState(old.state_epoch, start,
                                      old.leader_epoch if leader_epoch == -1 else leader_epoch,
                                      combine(old.batches, batches, start))
        return None

    async def delete(self, group_id: str, topic_id: uuid.UUID,
                     partition: int) -> KafkaError | None:
        self.states.pop((group_id, topic_id, partition), None)
        return None

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, int] | KafkaError:
        state = self.states.get((group_id, topic_id, partition))
        if state is None:
            return not_found(group_id, topic_id, partition)
        return state.state_epoch, state.start_offset
