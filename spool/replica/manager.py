"""``ReplicaManager``: the broker's partition replicas, the asyncio shell around
``Partition`` (Kafka's ``ReplicaManager``). ``broker.replicas``.

Handlers reach a partition's leader work through it, never ``PartitionLog``:

    leader_partition(topic, p)  the Partition this broker leads; ``NotLeader``
                                (NOT_LEADER_OR_FOLLOWER with the leader known) or
                                UNKNOWN_TOPIC_OR_PARTITION
    append_as_leader(part, ...) append, then wake what waits: followers' delayed
                                fetches on every append, consumers' on HW moves
    wait_replicated(...)        the delayed produce (acks=-1), also the coordinators'
    follower_fetched(...)       a follower's Fetch: its state, the HW, ISR expansion

**Single node** (no ``process.roles``): every partition is led here, the ISR is this
broker, its logs' high watermark follows the log end offset. Partitions are made on
first use (a dict lookup and an identity check of the log per request); no tasks,
no timers, no fetcher: as fast as the handlers' old direct path.

**Cluster**: ``apply_changes(image, changes)`` (the ``BrokerMetadataPublisher``, on the
loop, once the logs of ``changes`` exist) makes partitions leaders or followers,
hands followers to the fetcher (``spool.replica.fetcher``), removes
deleted replicas and calls the leadership listeners (``fn(topic, partition,
is_leader, leader_epoch)``, the coordinators). One task per broker checks the ISRs
every ``replica.lag.time.max.ms / 2`` and shrinks them; a follower that caught up
is added at its Fetch. ISR changes go to the controller as AlterPartition v3
(``broker.controller_channel``): one change in flight per partition, and one request in
flight per broker carrying every change proposed meanwhile (Kafka's
AlterPartitionManager), so a broker's death is one controller write, not one each.
A change stays pending (the HW waits for its maximal ISR) until answered: no answer or
a retriable error sends it again after ALTER_RETRY_MS (the controller may have applied
it); INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED drop it; the errors that say the
leader is out of date leave it to the metadata; an answer to a change no longer
pending is ignored (Kafka's Partition.handleAlterPartitionError).

Delayed produce (acks=-1, Kafka's ``DelayedProduce``): waits, keyed by partition and
woken when its HW moves, its ISR changes or its leadership goes (no polling),
until the HW passes the batch (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then
below ``min.insync.replicas``), leadership is lost (NOT_LEADER_OR_FOLLOWER) or the
timeout passes (REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from typing import Any

from spool.cluster.image import MetadataImage
from spool.cluster.local_changes import LocalReplicaChanges
from spool.protocol._generated import AlterPartitionRequest
from spool.protocol._generated import alter_partition_request as apreq
from spool.protocol.errors import Errors, KafkaError, error_name
from spool.replica.fetcher import ReplicaFetcherManager
from spool.replica.partition import NotLeader, Partition
from spool.storage.log import AppendInfo

log = logging.getLogger("spool.replica")

LeadershipListener = Callable[[str, int, bool, int], None]
ALTER_PARTITION_VERSION = 3
ALTER_RETRY_MS = 500  # after a failed AlterPartition, before it is sent again / proposed anew
ALTER_TIMEOUT_S = 5.0  # an AlterPartition not answered by then is sent again
# The controller applied nothing: the leader goes back to its committed ISR (Kafka's
# Partition.handleAlterPartitionError).
ALTER_NOT_APPLIED = frozenset({Errors.INELIGIBLE_REPLICA, Errors.OPERATION_NOT_ATTEMPTED})
# The leader's state is out of date: the change stays pending until the metadata settles it.
ALTER_AWAIT_METADATA = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID, Errors.FENCED_LEADER_EPOCH,
    Errors.INVALID_UPDATE_VERSION, Errors.INVALID_REQUEST, Errors.NEW_LEADER_ELECTED})
# One proposed ISR change: the partition, the ISR, the leader and partition epochs sent.
AlterProposal = tuple[Partition, tuple[int, ...], int, int]
REPLICA_KEY = "replica"  # Broker wait keys: (REPLICA_KEY, topic, p) is followers' fetches


class ReplicaManager:
    """This broker's partition replicas (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.node_id: int = broker.node_id
        self.clustered: bool = bool(broker.cluster.kraft)
        self._logs = broker.storage.logs
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._listeners: list[LeadershipListener] = []
        # delayed produces: per partition a heap of (offset the HW must reach, seq, future)
        self._hw_waiters: dict[tuple[str, int], list[tuple[int, int, asyncio.Future]]] = {}
        self._seq = itertools.count()
        self._alter_retry_at: dict[tuple[str, int], int] = {}
        self._alter_in_flight: set[tuple[str, int]] = set()  # one ISR change each, queued or sent
        self._alter_queue: dict[tuple[str, int], AlterProposal] = {}
        self._alter_sender: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._isr_task: asyncio.Task | None = None
        self._fetcher_step: asyncio.Future | None = None
        self._closed = False
        self.lag_ms = broker.config.get_int("replica.lag.time.max.ms")
        self.fetcher: ReplicaFetcherManager | None = None
        if self.clustered:
            self.fetcher = _make_fetcher(broker, self._follower_appended)

    # ---- lookups

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        """This broker's replica of a partition (leader or follower), or None."""
        if not self.clustered:
            try:
                return self.leader_partition(topic, partition)
            except KafkaError:
                return None
        return self._partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int) -> Partition:
        """The partition this broker leads (module doc: the errors)."""
        key = (topic, partition)
        part = self._partitions.get(key)
        if not self.clustered:
            plog = self._logs.get(topic, partition)
            if part is not None and part.log is plog:
                return part
            return self._lead_alone(topic, partition, plog)
        if part is not None and part.is_leader:
            return part
        view = self.broker.view.partition(topic, partition)
        if part is not None:
            leader = part.leader_id
            epoch = part.leader_epoch
            if view is not None and view.leader_epoch > epoch:
                leader, epoch = view.leader, view.leader_epoch
            raise NotLeader(topic, partition, leader, epoch)
        if view is not None:
            raise NotLeader(topic, partition, view.leader, view.leader_epoch)
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")

    def _lead_alone(self, topic: str, partition: int, plog: Any) -> Partition:
        view = self.broker.view.partition(topic, partition)
        if view is None or plog is None:
            self._partitions.pop((topic, partition), None)
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        part = Partition(topic, partition, plog, self.node_id, self.broker.view.topic_id(topic))
        part.leader_id = self.node_id
        part.leader_epoch = max(view.leader_epoch, 0)
        part.partition_epoch = 0
        part.replicas = part.isr = (self.node_id,)
        self._partitions[(topic, partition)] = part
        return part

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def add_leadership_listener(self, fn: LeadershipListener) -> None:
        """``fn(topic, partition, is_leader, leader_epoch)`` after each leadership change
        this broker's replicas go through in a cluster (``apply_changes``)."""
        self._listeners.append(fn)

    # ---- leader side

    def append_as_leader(self, part: Partition, records, *, acks: int, now_ms: int,
                         log_append_time_ms: int | None = None,
                         flush: bool = True, verification_guard: object | None = None,
                         transaction_version: int = 0) -> AppendInfo:
        """``part.append_as_leader``, then wake the delayed fetches (and, when the HW moved,
        the delayed produces and the consumers)."""
        hw = part.log.high_watermark
        info = part.append_as_leader(records, acks=acks, now_ms=now_ms,
                                     log_append_time_ms=log_append_time_ms, flush=flush,
                                     verification_guard=verification_guard,
                                     transaction_version=transaction_version)
        broker = self.broker
        if not self.clustered:
            broker.notify_append(part.topic, part.partition)
            return info
        broker.notify_key((REPLICA_KEY, part.topic, part.partition))
        if part.log.high_watermark != hw:
            self._hw_moved(part)
        return info

    async def append(self, topic: str, partition: int, records, acks: int, timeout_ms: int,
                     now_ms: int) -> AppendInfo | KafkaError:
        """Append as leader and, for acks=-1, wait until replicated: the AppendInfo, or the
        KafkaError that ended it (nothing is raised)."""
        try:
            part = self.leader_partition(topic, partition)
            info = self.append_as_leader(part, records, acks=acks, now_ms=now_ms)
            if acks == -1:
                await self.wait_replicated(topic, partition, info.last_offset, timeout_ms)
            return info
        except KafkaError as e:
            return e

    async def wait_replicated(self, topic: str, partition: int, offset: int,
                              timeout_ms: int) -> None:
        """Until the HW is past ``offset`` (module doc: the errors raised)."""
        key = (topic, partition)
        required = offset + 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        while True:
            part = self._partitions.get(key)
            if part is None or self._closed:
                raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition}")
            done, code = part.replication_status(required)
            if done:
                if code:
                    raise KafkaError(code, f"{topic}-{partition}")
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KafkaError(Errors.REQUEST_TIMED_OUT,
                                 f"{topic}-{partition}: offset {offset} not replicated in "
                                 f"{timeout_ms} ms")
            fut = loop.create_future()
            heapq.heappush(self._hw_waiters.setdefault(key, []), (required, next(self._seq), fut))
            timer = loop.call_later(remaining, _wake, fut)  # then the deadline is checked
            try:
                await fut
            finally:
                timer.cancel()
                if not fut.done():  # cancelled: its entry is skipped, then dropped
                    fut.cancel()

    def _wake_produces(self, part: Partition, everyone: bool = False) -> None:
        """Wake the delayed produces the HW now passes (``everyone``: all of them, when
        leadership or the partition goes); each checks its own state again."""
        key = (part.topic, part.partition)
        heap = self._hw_waiters.get(key)
        if not heap:
            return
        if everyone:
            del self._hw_waiters[key]
            woken = [fut for _, _, fut in heap]
        else:
            hw = part.log.high_watermark
            woken = []
            while heap and heap[0][0] <= hw:
                woken.append(heapq.heappop(heap)[2])
            if not heap:
                del self._hw_waiters[key]
        for fut in woken:
            if not fut.done():
                fut.set_result(None)

    def _hw_moved(self, part: Partition) -> None:
        self._wake_produces(part)
        self.broker.notify_append(part.topic, part.partition)

    def follower_fetched(self, part: Partition, replica_id: int, fetch_offset: int,
                         now_ms: int) -> None:
        """A follower's Fetch read from ``fetch_offset``: update its state (NOT_LEADER_OR_
        FOLLOWER if it is no replica), wake what the HW move completes, and propose to
        add it to the ISR once it caught up."""
        if part.update_follower_fetch(replica_id, fetch_offset, now_ms):
            self._hw_moved(part)
        if part.pending_isr is None and replica_id not in part.isr:
            self._maybe_expand(part, now_ms)

    # ---- ISR changes

    def _image(self) -> MetadataImage | None:
        return getattr(self.broker.view, "image", None)

    def _maybe_expand(self, part: Partition, now_ms: int) -> None:
        add = part.isr_expand_candidates()
        if not add or now_ms < self._alter_retry_at.get((part.topic, part.partition), 0):
            return
        img = self._image()
        if img is None:
            return
        eligible = [r for r in add if r in img.brokers and img.brokers[r].active]
        if eligible:
            self._alter_isr(part, part.isr + tuple(eligible))

    def check_isr(self, now_ms: int) -> None:
        """Shrink the ISR of every partition led here whose followers lag (one pass)."""
        for part in list(self._partitions.values()):
            out = part.isr_shrink_candidates(now_ms, self.lag_ms)
            if out and now_ms >= self._alter_retry_at.get((part.topic, part.partition), 0):
                log.info("%s-%d: shrinking the ISR %s: %s not caught up within "
                         "replica.lag.time.max.ms=%d", part.topic, part.partition,
                         list(part.isr), list(out), self.lag_ms)
                self._alter_isr(part, tuple(r for r in part.isr if r not in out))

    def _alter_isr(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        """Propose ``new_isr``: it goes in the next AlterPartition this broker sends."""
        key = (part.topic, part.partition)
        if (self.broker.controller_channel is None or part.topic_id is None
                or key in self._alter_in_flight):
            return
        part.begin_isr_change(new_isr)
        self._queue_alter(key, (part, tuple(new_isr), part.leader_epoch, part.partition_epoch))

    def _queue_alter(self, key: tuple[str, int], proposal: AlterProposal) -> None:
        self._alter_in_flight.add(key)
        self._alter_queue[key] = proposal
        if self._alter_sender is None or self._alter_sender.done():
            self._alter_sender = self._spawn(self._send_alters())

    async def _resend_alters(self, batch: dict[tuple[str, int], AlterProposal]) -> None:
        """Send again, after ALTER_RETRY_MS, the changes still pending (Kafka's
        AlterPartitionManager retries until answered: the controller may have applied it)."""
        try:
            await asyncio.sleep(ALTER_RETRY_MS / 1000.0)
        finally:
            for key in batch:
                self._alter_in_flight.discard(key)
        for key, proposal in batch.items():
            part, new_isr, leader_epoch, partition_epoch = proposal
            if (self._partitions.get(key) is part
                    and part.is_pending(new_isr, leader_epoch, partition_epoch)):
                self._queue_alter(key, proposal)

    async def _send_alters(self) -> None:
        """Kafka's AlterPartitionManager: one AlterPartition in flight per broker, carrying
        every ISR change proposed since the last one was sent."""
        while self._alter_queue:
            batch, self._alter_queue = self._alter_queue, {}
            answers: dict[tuple[str, int], Any] = {}
            try:
                answers = await self._send_alter_batch(batch)
            except (ConnectionError, OSError, TimeoutError, KafkaError) as e:
                log.info("AlterPartition for %d partition(s) not answered: %s", len(batch), e)
            except asyncio.CancelledError:
                for part, *_ in batch.values():
                    part.pending_isr = None
                raise
            finally:
                for key in batch:
                    self._alter_in_flight.discard(key)
            now = self.broker.clock.now_ms()
            resend: dict[tuple[str, int], AlterProposal] = {}
            for key, proposal in batch.items():
                if self._alter_done(key, proposal, answers.get(key), now):
                    resend[key] = proposal
            if resend:
                for key in resend:
                    self._alter_in_flight.add(key)
                self._spawn(self._resend_alters(resend))

    async def _send_alter_batch(self, batch: dict) -> dict[tuple[str, int], Any]:
        img = self._image()
        me = None if img is None else img.brokers.get(self.node_id)
        if me is None:
            raise KafkaError(Errors.STALE_BROKER_EPOCH, "this broker is not registered yet")
        by_topic: dict[Any, list[apreq.PartitionData]] = {}
        names: dict[Any, str] = {}
        for part, new_isr, leader_epoch, partition_epoch in batch.values():
            names[part.topic_id] = part.topic
            by_topic.setdefault(part.topic_id, []).append(apreq.PartitionData(
                partition_index=part.partition, leader_epoch=leader_epoch,
                new_isr_with_epochs=[apreq.BrokerState(broker_id=r, broker_epoch=(
                    img.brokers[r].epoch if r in img.brokers else -1)) for r in new_isr],
                leader_recovery_state=0, partition_epoch=partition_epoch))
        req = AlterPartitionRequest(broker_id=self.node_id, broker_epoch=me.epoch, topics=[
            apreq.TopicData(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()])
        resp = await self.broker.controller_channel.send(
            56, ALTER_PARTITION_VERSION, req, timeout_s=ALTER_TIMEOUT_S)
        if resp.error_code:
            raise KafkaError(resp.error_code, error_name(resp.error_code))
        return {(names.get(t.topic_id, ""), p.partition_index): p
                for t in resp.topics for p in t.partitions}

    def _alter_done(self, key: tuple[str, int], proposal: AlterProposal, answer: Any,
                    now_ms: int) -> bool:
        """Act on one change's answer (None: not answered) by Kafka's rules; True: send it
        again. An answer to a change no longer pending (the image settled it, another was
        proposed since) is ignored: it must not clear the newer change."""
        part, new_isr, leader_epoch, partition_epoch = proposal
        if self._partitions.get(key) is not part:
            part.pending_isr = None
            return False
        if not part.is_pending(new_isr, leader_epoch, partition_epoch):
            log.info("%s-%d: AlterPartition to ISR %s answered after the partition moved on "
                     "(ISR %s, pending %s, partition epoch %d): ignored", part.topic,
                     part.partition, list(new_isr), list(part.isr), part.pending_isr,
                     part.partition_epoch)
            return False
        error = Errors.REQUEST_TIMED_OUT if answer is None else answer.error_code
        if error:
            log.info("%s-%d: AlterPartition to ISR %s failed: %s", part.topic,
                     part.partition, list(new_isr), error_name(error))
            self._alter_retry_at[key] = now_ms + ALTER_RETRY_MS
            if error in ALTER_AWAIT_METADATA:
                return False  # pending until the image brings a new leader/partition epoch
            if error not in ALTER_NOT_APPLIED:
                return True  # it may have been applied: send the same change again
            moved = part.complete_isr_change(None, leader_epoch, -1)
        else:
            self._alter_retry_at.pop(key, None)
            log.info("%s-%d: ISR is now %s (partition epoch %d)", part.topic, part.partition,
                     list(answer.isr), answer.partition_epoch)
            moved = part.complete_isr_change(tuple(answer.isr), answer.leader_epoch,
                                             answer.partition_epoch)
        if moved:
            self._hw_moved(part)
        else:
            self._wake_produces(part)
        return False

    async def _isr_loop(self) -> None:
        interval = max(self.lag_ms / 2000.0, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                self.check_isr(self.broker.clock.now_ms())
            except Exception:
                log.exception("the ISR check failed")

    # ---- metadata

    def apply_changes(self, image: MetadataImage, changes: LocalReplicaChanges) -> None:
        """Act on this broker's part of a new image (module doc); on the loop, after the
        logs of ``changes`` exist."""
        now = self.broker.clock.now_ms()
        events: list[tuple[str, int, bool, int]] = []
        stop_fetching: list[Partition] = []
        start_fetching: list[Partition] = []
        epochs: list[tuple[Partition, int, int]] = []  # leader epoch starts, for the file
        for tp in changes.deletes:
            part = self._partitions.pop((tp.topic, tp.partition), None)
            if part is None:
                continue
            was_leader = part.is_leader
            part.leader_id = -1
            self._wake_produces(part, everyone=True)
            stop_fetching.append(part)
            if was_leader:
                events.append((tp.topic, tp.partition, False, part.leader_epoch))
        for tp, reg in changes.leaders.items():
            part = self._replica(tp, image)
            if part is None:
                continue
            was_leader = part.is_leader
            if part.make_leader(reg, now, assign_epoch=False):
                epochs.append((part, reg.leader_epoch, part.epoch_start_offset))
                if not was_leader:
                    stop_fetching.append(part)
                events.append((tp.topic, tp.partition, True, reg.leader_epoch))
            self._wake_produces(part)  # the ISR may have changed
            self.broker.notify_append(tp.topic, tp.partition)
        for tp, reg in changes.followers.items():
            part = self._replica(tp, image)
            if part is None:
                continue
            was_leader = part.is_leader
            if part.make_follower(reg):
                if was_leader:
                    events.append((tp.topic, tp.partition, False, reg.leader_epoch))
                    self._wake_produces(part, everyone=True)
                stop_fetching.append(part)
                if reg.leader >= 0:
                    start_fetching.append(part)
        if epochs:
            self._spawn(self._assign_epochs(epochs))
        if stop_fetching or start_fetching:
            self._update_fetcher(stop_fetching, start_fetching)
        for topic, partition, is_leader, epoch in events:
            for fn in self._listeners:
                try:
                    fn(topic, partition, is_leader, epoch)
                except Exception:
                    log.exception("a leadership listener failed for %s-%d", topic, partition)

    async def _assign_epochs(self, epochs: list[tuple[Partition, int, int]]) -> None:
        """New leader epochs' start offsets into the partitions' leader-epoch-checkpoint
        (fsynced files: in the executor, not on the loop)."""
        def assign() -> None:
            for part, epoch, start in epochs:
                if part.log.closed or part.leader_epoch != epoch:
                    continue
                try:
                    part.log.leader_epochs.assign(epoch, start)
                except OSError as e:
                    log.warning("%s-%d: leader epoch %d not checkpointed: %s", part.topic,
                                part.partition, epoch, e)

        await self.broker.run_blocking(assign)

    def _replica(self, tp: Any, image: MetadataImage) -> Partition | None:
        plog = self._logs.get(tp.topic, tp.partition)
        key = (tp.topic, tp.partition)
        part = self._partitions.get(key)
        if plog is None:
            log.warning("%s-%d: no local log; the replica waits for the next image",
                        tp.topic, tp.partition)
            if part is not None:
                self._partitions.pop(key, None)
            return None
        if part is None or part.log is not plog:
            part = Partition(tp.topic, tp.partition, plog, self.node_id, tp.topic_id)
            self._partitions[key] = part
        return part

    def _update_fetcher(self, stop: list[Partition], start: list[Partition]) -> None:
        fetcher = self.fetcher
        if fetcher is None:
            return
        prev = self._fetcher_step

        async def step() -> None:
            if prev is not None:
                await asyncio.wait({prev})
            try:
                if stop:
                    await fetcher.remove(stop)
                live = [p for p in start if not p.is_leader and p.leader_id >= 0
                        and self._partitions.get((p.topic, p.partition)) is p]
                if live:
                    fetcher.add(live)
            except Exception:
                log.exception("the replica fetcher update failed")

        self._fetcher_step = self._spawn(step())

    def _follower_appended(self, part: Partition) -> None:
        """The fetcher appended to a follower (KIP-392: consumers may read here)."""
        self.broker.notify_append(part.topic, part.partition)

    # ---- lifecycle

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def start(self) -> None:
        """Cluster only: the broker-wide ISR check."""
        if self.clustered and self._isr_task is None:
            self._isr_task = asyncio.ensure_future(self._isr_loop())

    async def shutdown(self) -> None:
        self._closed = True
        tasks = list(self._tasks)
        if self._isr_task is not None:
            tasks.append(self._isr_task)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self.fetcher is not None:
            try:
                await self.fetcher.shutdown()
            except Exception:
                log.exception("the replica fetcher did not shut down cleanly")
        for heap in self._hw_waiters.values():
            for _, _, fut in heap:
                if not fut.done():
                    fut.set_result(None)
        self._hw_waiters.clear()


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _make_fetcher(broker: Any,
                  on_append: Callable[[Partition], None]) -> ReplicaFetcherManager:
    """The follower fetcher, reaching leaders on the inter-broker listener."""
    listener = broker.cluster.inter_broker_listener_name

    def address(node_id: int) -> tuple[str, int] | None:
        img = getattr(broker.view, "image", None)
        b = None if img is None else img.brokers.get(node_id)
        e = None if b is None else b.listener(listener)
        return None if e is None else (e.host, e.port)

    metrics = getattr(broker, "metrics", None)

    def bytes_in(topic: str, n: int) -> None:  # BrokerTopicMetrics' ReplicationBytesIn
        metrics.topic(topic).replication_bytes_in += n

    return ReplicaFetcherManager(broker.node_id, broker.config, address, on_append,
                                 executor=broker.executor,
                                 security=getattr(broker, "inter_broker_security", None),
                                 on_bytes_in=bytes_in if metrics is not None else None)

