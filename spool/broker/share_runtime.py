"""The share coordinator's asyncio shell: ``__share_group_state``, appends, loads.

``ShareStateRuntime(broker, writer)`` owns a ``spool.share.coordinator.ShareCoordinator``
and is its only caller, on the event loop, as ``spool.broker.group_runtime`` is the
group coordinator's:

- Topic: ``__share_group_state`` (``self.topic``, ``spool.broker.internal_topic``),
  created on first use with ``share.coordinator.state.topic.num.partitions`` partitions
  (internal; replication factor ``share.coordinator.state.topic.replication.factor``
  capped at the brokers registered, ``min.insync.replicas`` =
  ``share.coordinator.state.topic.min.isr`` capped by it). A key (group id, topic id,
  partition) lives in partition ``partition_for("group:topicId:partition")`` (Kafka's
  ``Utils.abs(hashCode) % n``); its coordinator is that partition's leader.
- Operations (``initialize``, ``read``, ``write``, ``delete``, ``read_summary``): after
  ``coordinator_error`` (None: this broker coordinates the key; else NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE, retriable) and the topic
  check (``initialize``, ``read``, ``write``: UNKNOWN_TOPIC_OR_PARTITION for a topic id or
  partition the metadata does not have, as Kafka's shard), the state machine's records go
  through the ``CoordinatorLog`` (one batch, acks=-1, within
  ``share.coordinator.write.timeout.ms``) and are replayed before the answer leaves; a
  failed append or replication answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR and
  changes nothing. Operations on one key run one at a time (a per-key lock held until the
  records are replayed), so each sees the state the previous one left.
- Startup: ``load()`` (a single node, in the executor before the listeners open) replays
  every partition; in a cluster partitions load and unload as this broker becomes or
  stops being their leader (``on_leadership``).
- Pruning (Kafka's ShareCoordinatorOffsetsManager and ``deleteRecords``): the topic is not
  compacted, so the runtime remembers the offset of each key's latest ShareSnapshot
  (``snapshot_offsets``: from the load, and from each append it replayed), and every
  ``share.coordinator.state.topic.prune.interval.ms`` moves the log start offset of each
  partition it leads up to the smallest of them: everything below is superseded by a
  snapshot (or belongs to deleted keys). A partition without keys is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from spool.broker.coordinator_log import CoordinatorLog, CoordinatorLogWriter, PartitionLogWriter
from spool.broker.internal_topic import InternalTopic
from spool.coordinator.result import Result
from spool.coordinator.schema import SchemaError
from spool.protocol.errors import Errors, KafkaError
from spool.records.record import iter_records
from spool.share.batches import StateBatch
from spool.share.coordinator import (
    SNAPSHOT,
    ShareCoordinator,
    ShareKey,
    coordinator_key,
    partition_for,
    record_key,
)
from spool.share.persister import ShareState

log = logging.getLogger("spool.share.coordinator")

TOPIC = "__share_group_state"
UNAVAILABLE = KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                         "the share-group state topic refused the append")
T = TypeVar("T")


class _OffsetTap:
    """The coordinator log's writer, remembering the last offset appended per partition."""

    def __init__(self, writer: CoordinatorLogWriter) -> None:
        self.writer = writer
        self.last: dict[int, int | None] = {}

    def append(self, topic: str, partition: int, batch: bytearray) -> int | None:
        self.last[partition] = None
        self.last[partition] = last = self.writer.append(topic, partition, batch)
        return last

    def replicated(self, topic: str, partition: int, offset: int) -> bool:
        return self.writer.replicated(topic, partition, offset)

    async def wait_replicated(self, topic: str, partition: int, offset: int,
                              timeout_ms: int) -> None:
        await self.writer.wait_replicated(topic, partition, offset, timeout_ms)


class ShareStateRuntime:
    def __init__(self, broker: Any, writer: CoordinatorLogWriter | None = None) -> None:
        self.broker = broker
        config = broker.config
        self.coordinator = ShareCoordinator(
            config.get_int("share.coordinator.snapshot.update.records.per.snapshot"))
        self.num_partitions = config.get_int("share.coordinator.state.topic.num.partitions")
        self.topic = InternalTopic(broker, TOPIC, lambda: self.num_partitions, owner=self,
                                   partition_of=partition_for)
        self._tap = _OffsetTap(writer or PartitionLogWriter(broker))
        self.snapshot_offsets: dict[ShareKey, int] = {}  # key -> its latest ShareSnapshot's
        self._pruner: asyncio.Task | None = None
        self.log = CoordinatorLog(
            TOPIC, self._tap, broker.clock,
            lambda key: partition_for(key, self.num_partitions), self.coordinator.replay,
            UNAVAILABLE, prepare=self.topic.prepare,
            timeout_ms=lambda: config.get_int("share.coordinator.write.timeout.ms"))
        self._locks: dict[ShareKey, list] = {}  # key -> [lock, users]

    # ---- lifecycle

    def load(self) -> int:
        """Replay every partition (blocking: the executor, at start, on a single node)."""
        count = 0
        if self.broker.has_topic(TOPIC):
            self.num_partitions = self.broker.partition_count(TOPIC)
            for p in range(self.num_partitions):
                data = self.read_partition(p)
                self.apply_partition(p, data)
                count += len(data)
        return count

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        n = self.broker.view.partition_count(TOPIC)
        if n > 0:
            self.num_partitions = n
        self.topic.on_leadership(partition, is_leader, leader_epoch)

    def read_partition(self, partition: int) -> list[tuple[bytes | None, bytes | None, int]]:
        """The partition's records with their offsets (blocking: the executor)."""
        plog = self.broker.replica_log(TOPIC, partition)
        return [(_b(r.key), _b(r.value), r.offset)
                for batch in (plog.iter_batches() if plog is not None else ())
                for r in iter_records(batch)]

    def apply_partition(self, partition: int, data: list) -> None:
        """Replay a partition read by ``read_partition`` (on the loop) onto no state of it:
        what a replication finishing after an unload replayed here is dropped first."""
        self._forget(self._keys_of(partition))
        for key, value, offset in data:
            try:
                self.coordinator.load(key, value)
                self._track(key, value, offset)
            except SchemaError as e:
                log.error("%s-%d: skipping a record: %s", TOPIC, partition, e)
        log.info("%s-%d: %d records replayed", TOPIC, partition, len(data))

    def _keys_of(self, partition: int) -> list[ShareKey]:
        return [k for k in self.coordinator.states
                if partition_for(coordinator_key(k), self.num_partitions) == partition]

    def unload_partition(self, partition: int) -> None:
        keys = self._keys_of(partition)
        self._forget(keys)
        log.info("%s-%d: %d share-partition states unloaded", TOPIC, partition, len(keys))

    def _forget(self, keys: list[ShareKey]) -> None:
        self.coordinator.unload(keys)
        for k in keys:
            self.snapshot_offsets.pop(k, None)

    def _track(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """Remember where a key's latest ShareSnapshot is (a tombstone forgets the key)."""
        if key is None:
            return
        rtype, share_key = record_key(key)
        if value is None:
            self.snapshot_offsets.pop(share_key, None)
        elif rtype == SNAPSHOT:
            self.snapshot_offsets[share_key] = offset

    def redundant_offset(self, partition: int) -> int | None:
        """The offset below which the partition's records are superseded (module doc)."""
        offsets = [o for k, o in self.snapshot_offsets.items()
                   if partition_for(coordinator_key(k), self.num_partitions) == partition]
        return min(offsets) if offsets else None

    def start(self) -> None:
        self._pruner = asyncio.get_running_loop().create_task(self._prune_loop())

    async def _prune_loop(self) -> None:
        config = self.broker.config
        while True:
            await asyncio.sleep(config.get_int("share.coordinator.state.topic.prune.interval.ms")
                                / 1000)
            for p in sorted(self.topic.loaded) if self.broker.view.clustered else range(
                    self.num_partitions if self.topic.ready() else 0):
                try:
                    await self.prune(p)
                except KafkaError as e:  # e.g. no longer its leader: the next one prunes
                    log.info("%s-%d not pruned: %s", TOPIC, p, e)
                except Exception:  # logged; tried again at the next interval
                    log.exception("pruning %s-%d failed", TOPIC, p)

    async def prune(self, partition: int) -> int | None:
        """Move the partition's log start offset up to ``redundant_offset`` (as leader);
        the new log start offset, or None when there is nothing to prune."""
        offset = self.redundant_offset(partition)
        if offset is None:
            return None
        plog = self.broker.replicas.leader_partition(TOPIC, partition).log
        offset = min(offset, plog.high_watermark)
        if offset <= plog.log_start_offset:
            return None
        start = await self.broker.run_blocking(plog.delete_records_before, offset)
        log.info("%s-%d: records below %d deleted (superseded by snapshots)", TOPIC,
                 partition, start)
        return start

    async def stop(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
        await self.log.stop()
        await self.topic.stop()

    # ---- operations (module doc)

    async def coordinator_error(self, key: ShareKey) -> KafkaError | None:
        """None when this broker coordinates ``key`` (the topic created first if need be)."""
        if not await self.topic.ensure():
            return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"{TOPIC} is being created")
        return self.topic.coordinator_error(coordinator_key(key))

    def _unknown_partition(self, key: ShareKey) -> KafkaError | None:
        view = self.broker.view
        name = view.topic_name(key[1])
        if name is None or not 0 <= key[2] < view.partition_count(name):
            return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                              f"topic {key[1]} partition {key[2]} is not in the metadata")
        return None

    async def initialize(self, key: ShareKey, state_epoch: int,
                         start_offset: int) -> KafkaError | None:
        return await self._run(key, True, lambda: self.coordinator.initialize(
            key, state_epoch, start_offset))

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...] | list[StateBatch]
                    ) -> KafkaError | None:
        return await self._run(key, True, lambda: self.coordinator.write(
            key, state_epoch, leader_epoch, start_offset, batches))

    async def read(self, key: ShareKey, leader_epoch: int) -> ShareState | KafkaError:
        return await self._run(key, True, lambda: self.coordinator.read(key, leader_epoch))

    async def delete(self, key: ShareKey) -> KafkaError | None:
        return await self._run(key, False, lambda: self.coordinator.delete(key))

    async def read_summary(self, key: ShareKey, leader_epoch: int
                           ) -> ShareState | KafkaError:
        return await self._run(key, False,
                               lambda: ([], self.coordinator.read_summary(key, leader_epoch)))

    async def _run(self, key: ShareKey, check_topic: bool,
                   op: Callable[[], tuple[list, T]]) -> T | KafkaError:
        err = await self.coordinator_error(key)
        if err is None and check_topic:
            err = self._unknown_partition(key)
        if err is not None:
            return err
        with self._lock(key) as lock:
            async with lock:
                err = self.topic.coordinator_error(coordinator_key(key))  # moved meanwhile?
                if err is not None:
                    return err
                records, answer = op()
                if not records:
                    return answer
                fut = asyncio.get_running_loop().create_future()
                result = Result(records)
                result.reply(lambda v: fut.done() or fut.set_result(v), answer)
                p = partition_for(coordinator_key(key), self.num_partitions)
                self._tap.last.pop(p, None)
                self.log.commit(result)
                last = self._tap.last.get(p)
                got = await fut
                if last is not None and got is answer:  # appended, replicated, replayed
                    for i, rec in enumerate(records):
                        self._track(rec.key, rec.value, last - len(records) + 1 + i)
                return got

    @contextlib.contextmanager
    def _lock(self, key: ShareKey) -> Iterator[asyncio.Lock]:
        """The key's lock, forgotten once nobody holds or awaits it."""
        entry = self._locks.setdefault(key, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            yield entry[0]
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[key]


def _b(x) -> bytes | None:
    return None if x is None else bytes(x)
