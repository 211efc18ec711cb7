"""The group coordinator's asyncio shell: the ``__consumer_offsets`` topic, appends, timers.

``GroupRuntime(broker, writer)`` owns a ``GroupCoordinator`` and is its only
caller, always on the event loop's thread, so operations never interleave.

- Topic: ``__consumer_offsets`` (``self.topic``, ``spool.broker.internal_topic``)
  is created on first use with ``offsets.topic.num.partitions`` partitions and
  ``cleanup.policy=compact`` (internal), always in the executor: handlers
  ``await self.topic.ensure()`` before an operation that may append, and an
  append while it is not ready is refused (COORDINATOR_NOT_AVAILABLE,
  retriable) while the creation runs. A group's records go to partition
  ``partition_for(group)``.
- ``execute(group_ids, op)``: checkpoints the groups ``op`` may change, runs
  it, and hands its ``Result`` to the ``CoordinatorLog``
  (``spool.broker.coordinator_log``): records appended through the
  coordinator log writer (one batch per partition, CreateTime = now), then
  replayed into the coordinator (committed offsets, group deletion), then
  the replies released, once the records are replicated (acks=-1, as
  Kafka's coordinator appends, within ``offsets.commit.timeout.ms``). If an
  append fails nothing is replayed, the groups and timers go back to the
  checkpoint, and every reply gets COORDINATOR_NOT_AVAILABLE (retriable)
  instead; if the replication fails the replies get NOT_COORDINATOR
  (leadership lost) or COORDINATOR_NOT_AVAILABLE and nothing is replayed:
  OffsetFetch never shows an offset that is not in the log, or not yet
  replicated. ``call`` (awaited) is ``execute`` for an operation that also
  returns the response (or the error). Appends are synchronous on the loop,
  like Produce's: operations append in the order they ran.
- Startup: ``load()`` (in the executor, before the listeners open) replays
  every record of the topic into the coordinator, then starts the loaded
  members' session timers.
- Timers: one task sleeps until the coordinator's next deadline (or until
  an operation wakes it, since operations add earlier deadlines) and fires
  each due timer as its own operation; one whose append fails is tried
  again ``TIMER_RETRY_MS`` later. Parked JoinGroup/SyncGroup requests wait
  on futures: they never block the loop, other connections, or the reader
  of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from spool.broker.coordinator_log import CoordinatorLog, CoordinatorLogWriter, PartitionLogWriter
from spool.broker.internal_topic import InternalTopic
from spool.coordinator import (
    ClassicGroup,
    CoordinatorConfig,
    GroupCoordinator,
    Result,
    partition_for,
)
from spool.coordinator.admin import delete_topic_offsets
from spool.coordinator.consumer_group import TopicMetadata
from spool.coordinator.share_group import ShareGroup
from spool.coordinator.share_ops import ToInitialize, forget_topics, initialized, share_partitions
from spool.coordinator.txn_offsets import PendingTxnOffsets
from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader
from spool.records.record import iter_records
from spool.util.aio import wait_event

log = logging.getLogger("spool.groups")

TOPIC = "__consumer_offsets"
UNAVAILABLE = KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "the offsets topic refused the append")
TIMER_RETRY_MS = 1000
T = TypeVar("T")


def coordinator_config(config) -> CoordinatorConfig:
    return CoordinatorConfig(
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        max_size=config.get_int("group.max.size"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        max_metadata_bytes=config.get_int("offset.metadata.max.bytes"),
        share_session_timeout_ms=config.get_int("group.share.session.timeout.ms"),
        consumer_session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        consumer_max_size=config.get_int("group.consumer.max.size"),
        consumer_assignors=assignor_names(config.get("group.consumer.assignors")),
        consumer_migration_policy=str(config.get("group.consumer.migration.policy")),
    )


def assignor_names(value) -> tuple[str, ...]:
    """``group.consumer.assignors`` as the names clients ask for: Kafka's class names
    (``org.apache.kafka.coordinator.group.assignor.UniformAssignor``) become theirs
    (``uniform``)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in (i.strip() for i in items):
        if "." in item:
            item = item.rsplit(".", 1)[1].removesuffix("Assignor").lower()
        if item and item not in out:
            out.append(item)
    return tuple(out)


class BrokerTopics:
    """The broker's topics as KIP-848 groups see them (``spool.coordinator.consumer_group``):
    read from the current metadata view at each call."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def names(self) -> list[str]:
        view = self.broker.view
        return [] if view is None else view.topic_names()

    def lookup(self, name: str) -> TopicMetadata | None:
        view = self.broker.view
        if view is None:
            return None
        topic_id, n = view.topic_id(name), view.partition_count(name)
        return None if topic_id is None or n <= 0 else TopicMetadata(topic_id, name, n)


class GroupRuntime:
    def __init__(self, broker: Any, writer: CoordinatorLogWriter | None = None,
                 new_id: Callable[[], str] | None = None) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(broker.clock, coordinator_config(broker.config), new_id)
        self.coordinator.topics = BrokerTopics(broker)
        group_configs = getattr(broker, "group_configs", None)
        if group_configs is not None:
            self.coordinator.group_config = group_configs.get
        self.num_partitions = broker.config.get_int("offsets.topic.num.partitions")
        self.coordinator.partition_of = lambda group: partition_for(group, self.num_partitions)
        self.topic = InternalTopic(broker, TOPIC, lambda: self.num_partitions, owner=self)
        self.log = CoordinatorLog(
            TOPIC, writer or PartitionLogWriter(broker), broker.clock,
            lambda group: partition_for(group, self.num_partitions), self.coordinator.replay,
            UNAVAILABLE, prepare=self.topic.prepare,
            timeout_ms=lambda: broker.config.get_int("offsets.commit.timeout.ms"))
        self.txn_offsets = PendingTxnOffsets()  # TxnOffsetCommit records awaiting their marker
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._share_inits: set[asyncio.Task] = set()  # initialize_share_state calls

    # ---- lifecycle

    def load(self) -> int:
        """Replay every partition of ``__consumer_offsets`` (blocking: call from the executor
        at startup, on a single node; in a cluster partitions load as this broker becomes
        their leader: ``on_leadership``)."""
        count = 0
        if self.broker.has_topic(TOPIC):
            self.num_partitions = self.broker.partition_count(TOPIC)
            for p in range(self.num_partitions):
                data = self.read_partition(p)
                count += sum(len(x) for h, x in data if h is None)
                self._replay_partition(p, data)
        self.coordinator.loaded()
        return count

    # ---- coordinator partitions (a cluster: spool.broker.internal_topic)

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """A leadership listener for ``__consumer_offsets``: load or unload ``partition``."""
        n = self.broker.view.partition_count(TOPIC)
        if n > 0:
            self.num_partitions = n
        self.topic.on_leadership(partition, is_leader, leader_epoch)

    def read_partition(self, partition: int) -> list[tuple[BatchHeader | None, Any]]:
        """The partition's batches (blocking: the executor): ``(None, [(key, value)])`` for
        plain ones, ``(header, bytes)`` for transactional and control ones."""
        out: list[tuple[BatchHeader | None, Any]] = []
        plog = self.broker.replica_log(TOPIC, partition)
        for batch in plog.iter_batches() if plog is not None else ():
            h = BatchHeader.parse(batch)
            if h.is_control or h.is_transactional:  # spool.coordinator.txn_offsets
                out.append((h, bytes(batch)))
            else:
                out.append((None, [(_bytes(r.key), _bytes(r.value)) for r in iter_records(batch)]))
        return out

    def _replay_partition(self, partition: int, data: list) -> None:
        for h, x in data:
            if h is None:
                for key, value in x:
                    self.coordinator.load(key, value)
            else:
                self.txn_offsets.load_batch(partition, h, x, self.coordinator.load)

    def _groups_of(self, partition: int) -> list[str]:
        return [g for g in self.coordinator.group_ids()
                if partition_for(g, self.num_partitions) == partition]

    def apply_partition(self, partition: int, data: list) -> None:
        """Replay a partition read by ``read_partition`` (on the loop), then start the
        session timers of its groups' members."""
        self._replay_partition(partition, data)
        groups = self._groups_of(partition)
        self.coordinator.loaded(groups)
        self._wake.set()
        log.info("%s-%d: %d groups loaded", TOPIC, partition, len(groups))

    def unload_partition(self, partition: int) -> None:
        """Drop the partition's groups: parked JoinGroup/SyncGroup answered NOT_COORDINATOR,
        their timers stopped, their offsets and pending transactional offsets forgotten."""
        groups = self._groups_of(partition)
        err = KafkaError(Errors.NOT_COORDINATOR,
                         f"{TOPIC} partition {partition} moved to another coordinator")
        answered = self.coordinator.unload(groups, err)
        self.txn_offsets.drop_partition(partition)
        self._wake.set()
        log.info("%s-%d: %d groups unloaded, %d parked requests answered NOT_COORDINATOR",
                 TOPIC, partition, len(groups), answered)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer_loop())

    async def stop(self) -> None:
        """Stop the timers and answer parked requests (COORDINATOR_NOT_AVAILABLE: retriable)."""
        # A flag and a wake-up, not only cancel(): Python 3.11's wait_for can swallow a
        # cancellation that arrives as its inner wait completes, and the loop would then
        # sleep until the next deadline (offset retention: minutes).
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=1.0)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for group in self.coordinator.groups.values():
            for m in group.members.values() if isinstance(group, ClassicGroup) else ():
                for fn in (m.join_reply, m.sync_reply):
                    if fn is not None:
                        fn(UNAVAILABLE)
                m.join_reply = m.sync_reply = None
        for task in list(self._share_inits):
            task.cancel()
        await self.log.stop()
        await self.topic.stop()

    # ---- operations

    def execute(self, group_ids: list[str], op: Callable[[], Result]) -> bool:
        """Run ``op`` (which may change only ``group_ids``), append, replay, release (module doc)."""
        coord = self.coordinator
        cp = coord.checkpoint(group_ids)
        try:
            result = op()
            commit = self.log.commit(result,
                                     lambda: coord.revert(cp, [fn for fn, _ in result.replies]))
        except BaseException:
            coord.revert(cp, [])  # (again, if commit had: harmless) closes the journals
            raise
        if commit.appended:
            coord.accept(cp)
        self._wake.set()
        return commit.appended

    async def call(self, group_ids: list[str],
                   op: Callable[[], tuple[Result, T]]) -> T | KafkaError:
        """``execute`` an operation returning ``(result, answer)``: the answer once its records
        are in the log and replicated, else the error."""
        fut = asyncio.get_running_loop().create_future()

        def answer(value) -> None:
            if not fut.done():
                fut.set_result(value)

        def run() -> Result:
            result, value = op()
            result.reply(answer, value)
            return result

        self.execute(group_ids, run)
        return await fut

    async def delete_topic_offsets(self, topics: set[str]) -> None:
        """Drop the committed offsets of deleted ``topics`` from the groups loaded here
        (``spool.coordinator.admin.delete_topic_offsets``) and the share groups' share state
        of them (``_delete_share_state``); a failed append is logged (the offsets stay, as
        after a crash before Kafka's cleanup)."""
        coord = self.coordinator

        def op() -> tuple[Result, None]:
            return delete_topic_offsets(coord, topics)[0], None

        if delete_topic_offsets(coord, topics)[1]:
            done = await self.call([], op)
            if isinstance(done, KafkaError):
                log.warning("committed offsets of deleted topics %s not removed: %s",
                            sorted(topics), done)
        await self._delete_share_state(topics)

    async def _delete_share_state(self, topics: set[str]) -> None:
        """Kafka's maybeCleanupShareGroupState: a share group's state of a deleted topic
        (named in ``topics``, its id gone from the metadata view) is deleted through the
        persister, then the group forgets the topic (``share_ops.forget_topics``); a
        partition the persister could not delete keeps the topic for the next deletion."""
        coord, view = self.coordinator, self.broker.view
        for g in [g for g in coord.groups.values() if isinstance(g, ShareGroup)]:
            gone = {t for table in (g.initialized, g.initializing) for t, i in table.items()
                    if i.name in topics and view.topic_name(t) is None}
            parts = [(t, p) for t, p in share_partitions(g) if t in gone]
            if not parts:
                continue
            errors = await asyncio.gather(*(self.broker.share_persister.delete(g.group_id, t, p)
                                            for t, p in parts))
            failed = {t for (t, _), e in zip(parts, errors, strict=True) if e is not None}
            if failed:
                log.warning("group %s: share state of deleted topics %s not deleted: %s",
                            g.group_id, sorted(map(str, failed)),
                            [e for e in errors if e is not None][0])
            forget = sorted(gone - failed)
            if forget:
                gid = g.group_id
                done = await self.call([gid], lambda gid=gid, forget=forget:
                                       forget_topics(coord, gid, forget))
                if isinstance(done, KafkaError):
                    log.warning("group %s: deleted topics not forgotten: %s", gid, done)

    def initialize_share_state(self, group_id: str, state_epoch: int,
                               partitions: tuple[ToInitialize, ...]) -> None:
        """Initialize the share-partition state of ``partitions`` (a ShareGroupHeartbeat's
        answer, recorded as initializing) through ``broker.share_persister`` in a task of
        its own (the heartbeat is answered without waiting, as Kafka's), then record the
        outcome (``spool.coordinator.share_ops.initialized``): a partition the persister
        refused is tried again by a later heartbeat."""
        if partitions:
            task = asyncio.get_running_loop().create_task(
                self._initialize_share_state(group_id, state_epoch, partitions))
            self._share_inits.add(task)
            task.add_done_callback(self._share_inits.discard)

    async def _initialize_share_state(self, group_id: str, state_epoch: int,
                                      partitions: tuple[ToInitialize, ...]) -> None:
        persister = self.broker.share_persister
        try:
            errors = await asyncio.gather(*(
                persister.initialize(group_id, t.topic_id, t.partition, state_epoch,
                                     t.start_offset) for t in partitions))
        except Exception:
            log.exception("group %s: share-partition state initialization failed", group_id)
            errors = [UNAVAILABLE] * len(partitions)
        for t, err in zip(partitions, errors, strict=True):
            if err is not None:
                log.warning("group %s: share state of %s-%d not initialized: %s", group_id,
                            t.topic_id, t.partition, err)
        outcomes = [(t.topic_id, t.partition, err is None)
                    for t, err in zip(partitions, errors, strict=True)]
        coord = self.coordinator
        done = await self.call([group_id], lambda: initialized(coord, group_id, outcomes))
        if isinstance(done, KafkaError):
            log.warning("group %s: share-partition initialization not recorded: %s",
                        group_id, done)

    async def _timer_loop(self) -> None:
        clock = self.broker.clock
        while not self._stopping:
            deadline = self.coordinator.next_deadline()
            wait_s = None if deadline is None else max(0.0, (deadline - clock.now_ms()) / 1000.0)
            self._wake.clear()
            if wait_s is None or wait_s > 0:
                await wait_event(self._wake, wait_s)
            if self._stopping:
                return
            for key, fire in self.coordinator.due():
                self._fire(key, fire)

    def _fire(self, key: tuple, fire: Callable[[Result], None]) -> None:
        """One due timer as an operation; tried again later if its append fails."""
        group_ids = [key[1]] if len(key) > 1 else []

        def op() -> Result:
            out = Result()
            fire(out)
            return out

        try:
            ok = self.execute(group_ids, op)
        except Exception:
            log.exception("group coordinator timer %s failed", key)
            ok = False
        if not ok:
            coord = self.coordinator
            coord.timers.schedule(key, coord.now() + TIMER_RETRY_MS, fire)


def _bytes(b) -> bytes | None:
    return None if b is None else bytes(b)
