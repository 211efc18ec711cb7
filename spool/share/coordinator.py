"""The share coordinator's state machine over ``__share_group_state`` (KIP-932).

Kafka's ``ShareCoordinatorShard``: the durable state of every share-partition, one key
per (group id, topic id, partition) (``ShareKey``), kept as two record types of
``spool.coordinator.records.SHARE_STATE_TYPES``:

- ShareSnapshot (type 0): the whole state: snapshot epoch, state epoch, leader epoch,
  start offset, state batches;
- ShareUpdate (type 1): a change since the last snapshot: leader epoch (-1: unchanged),
  start offset (-1: unchanged), the changed batches, merged into the state by
  ``spool.share.batches.combine`` (batches below the start offset dropped).

State changes only by replay (``replay``): an operation (``initialize``, ``write``,
``read``, ``delete``) checks its request against the state and returns ``(records,
answer)``; it changes nothing itself. The runtime (``spool.broker.share_runtime``)
appends the records and replays them, then releases the answer; a load at start replays
the topic through the same ``replay``, so the state after a restart is the state before.

- ``initialize(key, state_epoch, start_offset)``: a ShareSnapshot with the new state
  epoch and start offset and no batches (an offsets reset starts over), the leader epoch
  kept; FENCED_STATE_EPOCH if the stored state epoch is higher.
- ``write(key, state_epoch, leader_epoch, start_offset, batches)``: FENCED_LEADER_EPOCH /
  FENCED_STATE_EPOCH below the stored epochs; otherwise a ShareSnapshot for a key not
  stored yet or once ``snapshot_every`` (``share.coordinator.snapshot.update.records.per.snapshot``)
  ShareUpdates followed the last snapshot (the merged state, snapshot epoch + 1), else a
  ShareUpdate of the (merged) new batches.
- ``read(key, leader_epoch)``: the state; FENCED_LEADER_EPOCH below the stored leader
  epoch; a higher leader epoch is recorded (a ShareUpdate without batches: Kafka's
  read-and-update-leader-epoch), so a leader that lost the partition is fenced from then
  on, after a restart too. UNKNOWN_TOPIC_OR_PARTITION for a key never stored.
- ``read_summary(key, leader_epoch)``: the state (the caller wants its epochs and start
  offset); FENCED_LEADER_EPOCH below the stored leader epoch unless -1; never writes.
- ``delete(key)``: tombstones for the key's ShareSnapshot and ShareUpdate.

Epochs of the stored state only grow (a replayed snapshot or update keeps the higher of
the stored and recorded leader/state epoch), as Kafka's leader/state epoch maps.
Deterministic and single-threaded; the runtime is its only caller.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from spool.coordinator.records import SHARE_STATE_TYPES, decode, encode
from spool.coordinator.result import OutRecord
from spool.protocol._generated import DATA_SCHEMAS
from spool.protocol.errors import Errors, KafkaError
from spool.share.batches import StateBatch, combine
from spool.share.persister import ShareState
from spool.util.ids import uuid_text

ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
SNAPSHOT, UPDATE = 0, 1
_TYPES = {SNAPSHOT: "ShareSnapshot", UPDATE: "ShareUpdate"}


def coordinator_key(key: ShareKey) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``groupId:topicId:partition``, the
    FindCoordinator key (type 2, SHARE) and the partitioning key."""
    group_id, topic_id, partition = key
    return f"{group_id}:{uuid_text(topic_id)}:{partition}"


def record_key(key: bytes) -> tuple[int, ShareKey]:
    """(record type, share key) of a record of the topic (raises ``SchemaError``)."""
    key_msg, _ = decode(key, None, SHARE_STATE_TYPES)
    return type(key_msg).VALID_VERSIONS[0], (key_msg.group_id, key_msg.topic_id,
                                             key_msg.partition)


def partition_for(coordinator_key: str, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of a key: Java ``Utils.abs(key.hashCode())``
    mod n (ShareCoordinatorService.partitionFor; abs, not & 0x7fffffff)."""
    data = coordinator_key.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


@dataclass(frozen=True)
class KeyState:
    """One share-partition's stored state."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    updates: int = 0  # ShareUpdates replayed since the last ShareSnapshot

    def share_state(self) -> ShareState:
        return ShareState(self.state_epoch, self.start_offset, self.leader_epoch, self.batches)


Records = list[OutRecord]


def _record(type_: int, key: ShareKey, value: Any | None) -> OutRecord:
    group_id, topic_id, partition = key
    k, v = encode(DATA_SCHEMAS[_TYPES[type_] + "Key"](group_id, topic_id, partition), value)
    return OutRecord(coordinator_key(key), k, v)


def _wire_batches(cls: Any, batches: tuple[StateBatch, ...]) -> list:
    return [cls(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in batches]


def _batches(wire: list) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in wire)


def _fenced_state(key: ShareKey) -> KafkaError:
    return KafkaError(Errors.FENCED_STATE_EPOCH,
                      f"state epoch of {coordinator_key(key)} is below the stored one")


def _fenced_leader(key: ShareKey) -> KafkaError:
    return KafkaError(Errors.FENCED_LEADER_EPOCH,
                      f"leader epoch of {coordinator_key(key)} is below the stored one")


class ShareCoordinator:
    """The share-partition states of the ``__share_group_state`` partitions loaded here."""

    def __init__(self, snapshot_every: int = 500) -> None:
        self.snapshot_every = snapshot_every
        self.states: dict[ShareKey, KeyState] = {}

    # ---- replay (the only mutator)

    def replay(self, rec: OutRecord) -> None:
        self.load(rec.key, rec.value)

    def load(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of the topic (raises ``SchemaError`` for a malformed one)."""
        if key is None:
            return
        key_msg, value_msg = decode(key, value, SHARE_STATE_TYPES)
        share_key = (key_msg.group_id, key_msg.topic_id, key_msg.partition)
        if value_msg is None:
            self.states.pop(share_key, None)
            return
        old = self.states.get(share_key)
        if type(key_msg).VALID_VERSIONS[0] == SNAPSHOT:
            self.states[share_key] = KeyState(
                value_msg.snapshot_epoch,
                max(value_msg.state_epoch, -1 if old is None else old.state_epoch),
                max(value_msg.leader_epoch, -1 if old is None else old.leader_epoch),
                value_msg.start_offset, _batches(value_msg.state_batches))
            return
        if old is None:  # an update without its snapshot (Kafka keeps it as the state)
            old = KeyState(value_msg.snapshot_epoch, -1, -1, -1, (), -1)
        start = old.start_offset if value_msg.start_offset == -1 else value_msg.start_offset
        self.states[share_key] = replace(
            old, leader_epoch=max(old.leader_epoch, value_msg.leader_epoch),
            start_offset=start, updates=old.updates + 1,
            batches=combine(old.batches, _batches(value_msg.state_batches), start))

    def unload(self, keys: list[ShareKey]) -> None:
        """Forget ``keys`` (their partition moved to another coordinator)."""
        for key in keys:
            self.states.pop(key, None)

    # ---- operations: (records, answer); nothing changes until the records are replayed

    def initialize(self, key: ShareKey, state_epoch: int,
                   start_offset: int) -> tuple[Records, KafkaError | None]:
        old = self.states.get(key)
        if old is not None and old.state_epoch > state_epoch:
            return [], _fenced_state(key)
        value = DATA_SCHEMAS["ShareSnapshotValue"](
            0 if old is None else (old.snapshot_epoch + 1) & 0xFFFF, state_epoch,
            -1 if old is None else old.leader_epoch, start_offset, [])
        return [_record(SNAPSHOT, key, value)], None

    def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: tuple[StateBatch, ...] | list[StateBatch]
              ) -> tuple[Records, KafkaError | None]:
        old = self.states.get(key)
        if old is not None and old.leader_epoch > leader_epoch:
            return [], _fenced_leader(key)
        if old is not None and old.state_epoch > state_epoch:
            return [], _fenced_state(key)
        if old is None or old.updates >= self.snapshot_every:
            cls = DATA_SCHEMAS["ShareSnapshotValue"]
            if old is None:
                snapshot = cls(0, state_epoch, leader_epoch, start_offset,
                               _wire_batches(cls.StateBatch, combine((), batches, start_offset)))
            else:
                start = old.start_offset if start_offset == -1 else start_offset
                snapshot = cls((old.snapshot_epoch + 1) & 0xFFFF,
                               old.state_epoch if state_epoch == -1 else state_epoch,
                               old.leader_epoch if leader_epoch == -1 else leader_epoch, start,
                               _wire_batches(cls.StateBatch, combine(old.batches, batches, start)))
            return [_record(SNAPSHOT, key, snapshot)], None
        cls = DATA_SCHEMAS["ShareUpdateValue"]
        update = cls(old.snapshot_epoch, leader_epoch, start_offset,
                     _wire_batches(cls.StateBatch, combine((), batches, start_offset)))
        return [_record(UPDATE, key, update)], None

    def read(self, key: ShareKey, leader_epoch: int) -> tuple[Records, ShareState | KafkaError]:
        old = self.states.get(key)
        if old is None:
            return [], KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"no share-partition state for {coordinator_key(key)}")
        if old.leader_epoch > leader_epoch:
            return [], _fenced_leader(key)
        state = replace(old, leader_epoch=leader_epoch).share_state()
        if leader_epoch == old.leader_epoch:
            return [], state
        update = DATA_SCHEMAS["ShareUpdateValue"](old.snapshot_epoch, leader_epoch, -1, [])
        return [_record(UPDATE, key, update)], state

    def read_summary(self, key: ShareKey, leader_epoch: int) -> ShareState | KafkaError:
        old = self.states.get(key)
        if old is None:
            return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                              f"no share-partition state for {coordinator_key(key)}")
        if leader_epoch != -1 and old.leader_epoch > leader_epoch:
            return _fenced_leader(key)
        return old.share_state()

    def delete(self, key: ShareKey) -> tuple[Records, KafkaError | None]:
        if key not in self.states:
            return [], None
        return [_record(SNAPSHOT, key, None), _record(UPDATE, key, None)], None
