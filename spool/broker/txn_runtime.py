"""The transaction coordinator's asyncio shell: ``__transaction_state``, markers, timers.

``TransactionRuntime(broker, writer)`` owns a ``TransactionCoordinator`` and
is its only caller, on the event loop's thread. It has the group runtime's
shape (``spool.broker.coordinator_log``): the state machine returns the
metadata to write, the runtime appends its record through the coordinator
log writer and only then replays it, so a failed append changes nothing
(the request gets COORDINATOR_NOT_AVAILABLE) and live state == replayed
state.

- Topic: ``__transaction_state`` (``self.topic``, ``spool.broker.internal_topic``)
  is created on first use with ``transaction.state.log.num.partitions``
  partitions, ``cleanup.policy=compact``, always in the executor, as the
  group runtime's ``__consumer_offsets``: handlers ``await`` the topics their
  operation appends to (``self.topic``, ``broker.groups.topic``); an operation
  that finds one not ready fails with a retriable error while it is created.
  A transactional id's records go to ``partition_for(id)``.
- EndTxn / fencing / timeout: PREPARE_COMMIT|PREPARE_ABORT written (EndTxn
  is answered once it is), then a COMMIT|ABORT marker (``build_control_batch``,
  coordinator epoch 0) appended to every partition of the transaction (for
  ``__consumer_offsets`` partitions the group coordinator's pending
  transactional offsets are applied or dropped), then COMPLETE_COMMIT|
  COMPLETE_ABORT written, and only after every marker is in its log.
  The first attempt runs inline, so normally the response leaves after
  the markers; a marker (or the COMPLETE record) whose append fails is
  retried by a background task with exponential backoff
  (``MARKER_RETRY_MS`` .. ``MARKER_RETRY_MAX_MS``) until it succeeds.
  Meanwhile the transaction stays PREPARE_*: its producer gets
  CONCURRENT_TRANSACTIONS (retriable), as from Kafka. A partition deleted
  meanwhile, or one a newer epoch of the producer has written to
  (INVALID_PRODUCER_EPOCH), gets none (``MARKER_MOOT``). In a cluster, the
  markers of partitions another broker leads go to it as WriteTxnMarkers
  (``spool.broker.txn_marker_channel``) from the background task, at once and
  then with the same backoff, before COMPLETE_* is written.
- Crash recovery: ``load()`` replays the topic at startup; ``recover()`` then
  completes every PREPARE_* transaction (markers again: a marker for a
  transaction already closed on a partition changes nothing there).
- Transaction version (KIP-890): ``transaction_version(broker)`` is the finalized
  ``transaction.version`` level; at 1+ the records are written as value version 1
  (Kafka's flexible TransactionLogValue, ``spool.coordinator.transaction``). What a
  request does follows its version, as in Kafka: EndTxn v5 is a transaction version 2
  end (the epoch bumped, the answer carrying the producer id and epoch), partitions
  added by a partition leader (AddPartitionsToTxn v4+, ``spool.broker.txn_verify``)
  are transaction version 2 adds.
- Timers (one task): open transactions past ``transaction.timeout.ms`` are
  aborted with a bumped epoch (the producer that let them time out is fenced; bumped
  twice at transaction.version 2, as Kafka's fence then version 2 end)
  every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``;
  completed ids idle for ``transactional.id.expiration.ms`` are tombstoned;
  partitions forget producers idle for ``producer.id.expiration.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from spool.broker.coordinator_log import (
    CoordinatorLog,
    CoordinatorLogWriter,
    PartitionLogWriter,
    coordinator_error,
)
from spool.broker.internal_topic import InternalTopic
from spool.broker.txn_marker_channel import TxnMarkerChannel
from spool.broker.txn_verify import AddPartitionsToTxnSender
from spool.cluster import features
from spool.coordinator import OutRecord, Result, partition_for
from spool.coordinator.admin import _check_commit
from spool.coordinator.offsets import CommittedOffset, OffsetStore
from spool.coordinator.transaction import (
    TransactionCoordinator,
    TxnMetadata,
    TxnState,
    encode_key,
    encode_value,
)
from spool.protocol.errors import Errors, KafkaError
from spool.records.builder import BatchBuilder, build_control_batch
from spool.records.record import iter_records
from spool.util.logs import fields

log = logging.getLogger("spool.transactions")

TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_EPOCH = 0
MARKER_RETRY_MS = 50
MARKER_RETRY_MAX_MS = 5000
UNAVAILABLE = KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "the transaction log refused the append")
# Marker errors that retrying cannot fix: the partition is gone, or a newer producer epoch
# has written there (Kafka abandons the marker on a fenced epoch too). Anything else retries.
MARKER_MOOT = frozenset({Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.INVALID_PRODUCER_EPOCH})


def marker_already_written(broker: Any, topic: str, partition: int, producer_id: int,
                           epoch: int) -> bool:
    """Whether a transaction version 2 marker refused as late (INVALID_PRODUCER_EPOCH) is
    there already: the producer is at the marker's epoch on the partition with no open
    transaction (a retry of a marker appended but not replicated in time). Its pending
    transactional offsets may then be completed; otherwise they belong to a newer one."""
    plog = broker.storage.logs.get(topic, partition)
    e = None if plog is None else plog.producers.producers.get(producer_id)
    return e is not None and e.epoch == epoch and e.txn_first_offset < 0


def transaction_version(broker: Any) -> int:
    """The finalized ``transaction.version`` feature level (``spool.cluster.features``)."""
    return features.transaction_version(broker.view)


class TransactionRuntime:
    def __init__(self, broker: Any, writer: CoordinatorLogWriter | None = None) -> None:
        self.broker = broker
        cfg = broker.config
        self.coordinator = TransactionCoordinator(cfg.get_int("transaction.max.timeout.ms"))
        self.num_partitions = cfg.get_int("transaction.state.log.num.partitions")
        self.writer = writer or PartitionLogWriter(broker)
        self.topic = InternalTopic(broker, TOPIC, lambda: self.num_partitions, owner=self)
        self.log = CoordinatorLog(
            TOPIC, self.writer, broker.clock, lambda t: partition_for(t, self.num_partitions),
            lambda rec: self.coordinator.load(rec.key, rec.value), UNAVAILABLE,
            prepare=self.topic.prepare, timeout_ms=lambda: cfg.get_int("request.timeout.ms"))
        self._task: asyncio.Task | None = None
        self._completing: dict[str, asyncio.Task] = {}  # markers being retried, by id
        self._writing: set[str] = set()  # ids whose record is being written (replicated)
        self.markers = TxnMarkerChannel(broker)  # partitions other brokers lead (a cluster)
        self.verifier = AddPartitionsToTxnSender(broker, self)  # leaders -> coordinators

    def _cfg(self, key: str) -> int:
        return self.broker.config.get_int(key)

    def now(self) -> int:
        return self.broker.clock.now_ms()

    # ---- lifecycle

    def load(self) -> int:
        """Replay ``__transaction_state`` (blocking: the executor, at startup, on a single
        node; in a cluster partitions load as this broker becomes their leader)."""
        count = 0
        if self.broker.has_topic(TOPIC):
            self.num_partitions = self.broker.partition_count(TOPIC)
            for p in range(self.num_partitions):
                for key, value in self.read_partition(p):
                    self.coordinator.load(key, value)
                    count += 1
        return count

    def recover(self, partition: int | None = None) -> int:
        """Complete the transactions a crash (or a coordinator move) left in
        PREPARE_COMMIT/PREPARE_ABORT: of ``partition``, or of every partition."""
        todo = [m for m in self.coordinator.pending_completion()
                if partition is None or self._partition_of(m.transactional_id) == partition]
        for m in todo:
            log.info("completing %s of %s after a restart or a coordinator move",
                     m.state.kafka_name, m.transactional_id)
            self._complete_in_background(m, set(m.partitions))
        return len(todo)

    # ---- coordinator partitions (a cluster: spool.broker.internal_topic)

    def _partition_of(self, txn_id: str) -> int:
        return partition_for(txn_id, self.num_partitions)

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """A leadership listener for ``__transaction_state``: load or unload ``partition``."""
        n = self.broker.view.partition_count(TOPIC)
        if n > 0:
            self.num_partitions = n
        self.topic.on_leadership(partition, is_leader, leader_epoch)

    def read_partition(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        """The partition's records (blocking: the executor)."""
        plog = self.broker.replica_log(TOPIC, partition)
        return [(_b(r.key), _b(r.value))
                for batch in (plog.iter_batches() if plog is not None else ())
                for r in iter_records(batch)]

    def apply_partition(self, partition: int, data: list) -> None:
        """Replay a partition read by ``read_partition`` (on the loop), then complete its
        PREPARE_* transactions (Kafka's new coordinator does, after loading)."""
        for key, value in data:
            self.coordinator.load(key, value)
        self.recover(partition)

    def unload_partition(self, partition: int) -> None:
        """Drop the partition's transactions and stop completing them here (the new
        coordinator completes them after its load)."""
        ids = [t for t in self.coordinator.txns if self._partition_of(t) == partition]
        for txn_id in ids:
            del self.coordinator.txns[txn_id]
            task = self._completing.pop(txn_id, None)
            if task is not None:
                task.cancel()
        log.info("%s-%d: %d transactional ids unloaded", TOPIC, partition, len(ids))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer_loop())

    async def stop(self) -> None:
        """Stop the timers and marker retries (a PREPARE_* left is completed after restart)."""
        for task in [self._task, *self._completing.values()]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._completing.clear()
        await self.log.stop()
        await self.markers.close()
        await self.verifier.close()
        await self.topic.stop()

    # ---- appends

    def _owns(self, txn_id: str) -> bool:
        return self.topic.owns(self._partition_of(txn_id)) and txn_id in self.coordinator.txns

    async def _write(self, m: TxnMetadata, *, tombstone: bool = False) -> None:
        """Append ``m``'s record, then, once replicated, replay it. Raises
        COORDINATOR_NOT_AVAILABLE (or NOT_COORDINATOR: leadership lost) if it is not
        replicated, CONCURRENT_TRANSACTIONS while another write of the same id waits."""
        txn_id = m.transactional_id
        if txn_id in self._writing:  # Kafka's pendingState
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS,
                             f"{txn_id}: a state change is being written")
        version = 1 if transaction_version(self.broker) >= 1 else 0
        rec = OutRecord(txn_id, encode_key(txn_id),
                        None if tombstone else encode_value(m, version))
        result = Result(records=[rec])
        box: list = []
        result.reply(box.append, None)
        self._writing.add(txn_id)
        try:
            await self.log.commit(result).wait()
        finally:
            self._writing.discard(txn_id)
        if box and isinstance(box[0], KafkaError):
            raise box[0]

    async def _write_markers(self, m: TxnMetadata,
                             todo: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Append ``m``'s marker to each partition of ``todo`` this broker leads and wait for
        them to be replicated; the partitions still without one (the remote ones too)."""
        commit = m.state == TxnState.PREPARE_COMMIT
        groups = self.broker.groups
        left = set()
        appended: list[tuple[str, int, int | None]] = []
        for topic, p in sorted(todo):
            if self.markers.remote(topic, p):
                left.add((topic, p))  # another broker leads it: WriteTxnMarkers (_retry)
                continue
            if self.broker.storage.logs.get(topic, p) is None:
                continue  # the topic was deleted meanwhile
            if topic == OFFSETS_TOPIC and groups is not None and p in groups.topic.loading:
                left.add((topic, p))  # its pending offsets are being read: retry
                continue
            marker = build_control_batch(m.producer_id, m.producer_epoch, commit, COORDINATOR_EPOCH,
                                         0, self.now())
            try:
                if m.client_tv >= 2:  # KIP-890: the marker's epoch must be above the producer's
                    last = self.writer.append(topic, p, bytearray(marker), transaction_version=2)
                else:
                    last = self.writer.append(topic, p, bytearray(marker))
            except (KafkaError, OSError) as e:
                if isinstance(e, KafkaError) and e.code in MARKER_MOOT:
                    # as Kafka: nothing left for this marker to close
                    log.error("marker for %s to %s-%d skipped: %s", m.transactional_id, topic, p, e)
                    if (topic == OFFSETS_TOPIC and groups is not None and m.client_tv >= 2
                            and marker_already_written(self.broker, topic, p, m.producer_id,
                                                       m.producer_epoch)):
                        groups.txn_offsets.complete(m.producer_id, p, commit,
                                                    groups.coordinator.load)
                else:
                    log.warning("marker for %s to %s-%d failed (will retry): %s",
                                m.transactional_id, topic, p, e)
                    left.add((topic, p))
                continue
            appended.append((topic, p, last))
        done = await asyncio.gather(*(self._replicated(m, topic, p, last)
                                      for topic, p, last in appended))
        for (topic, p, _), ok in zip(appended, done, strict=True):
            if not ok:
                left.add((topic, p))
            elif topic == OFFSETS_TOPIC and groups is not None:
                groups.txn_offsets.complete(m.producer_id, p, commit, groups.coordinator.load)
        return left

    async def _replicated(self, m: TxnMetadata, topic: str, p: int, last: int | None) -> bool:
        """Whether the marker at ``last`` is replicated (acks=-1) within request.timeout.ms."""
        if last is None or self.writer.replicated(topic, p, last):
            return True
        try:
            await self.writer.wait_replicated(topic, p, last, self._cfg("request.timeout.ms"))
        except (KafkaError, OSError) as e:
            log.warning("marker for %s to %s-%d not replicated (will retry): %s",
                        m.transactional_id, topic, p, e)
            return False
        return True

    async def _write_complete(self, m: TxnMetadata) -> bool:
        """COMPLETE_* for ``m`` (every marker is written); whether it is in the log."""
        try:
            await self._write(self.coordinator.completed(m, self.now()))
        except KafkaError as e:
            log.warning("completing %s failed (will retry): %s", m.transactional_id, e)
            return False
        return True

    async def _complete(self, m: TxnMetadata) -> bool:
        """Complete a PREPARE_* transaction now if every local marker and the COMPLETE_*
        record are appended and replicated, else keep retrying in the background (remote
        markers always go from there). True if it is complete now."""
        left = await self._write_markers(m, set(m.partitions))
        if not left and await self._write_complete(m):
            return True
        self._complete_in_background(m, left)
        return False

    def _complete_in_background(self, m: TxnMetadata, left: set[tuple[str, int]]) -> None:
        if not self._owns(m.transactional_id) or m.transactional_id in self._completing:
            return  # moved to another coordinator meanwhile (it completes it), or under way
        task = asyncio.get_running_loop().create_task(self._retry(m, left))
        self._completing[m.transactional_id] = task

    async def _retry(self, m: TxnMetadata, left: set[tuple[str, int]]) -> None:
        delay = MARKER_RETRY_MS
        commit = m.state == TxnState.PREPARE_COMMIT
        me = asyncio.current_task()
        try:
            while self._owns(m.transactional_id):
                # remote markers to the partitions' current leaders (NOT_LEADER_OR_FOLLOWER and
                # the like come back in ``left``), then the local ones
                left = await self.markers.send(m, commit, COORDINATOR_EPOCH, left)
                left = await self._write_markers(m, left)
                if not left and await self._write_complete(m):
                    log.info("completed %s of %s in the background", m.state.kafka_name,
                             m.transactional_id)
                    return
                await asyncio.sleep(delay / 1000.0)
                delay = min(delay * 2, MARKER_RETRY_MAX_MS)
        finally:
            if self._completing.get(m.transactional_id) is me:
                del self._completing[m.transactional_id]

    # ---- operations (handlers call these; KafkaError is the answer)

    def _check_coordinator(self, txn_id: str) -> None:
        err = self.topic.coordinator_error(txn_id)
        if err is not None:
            raise err

    async def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int,
                               epoch: int) -> tuple[int, int]:
        if not txn_id:
            raise KafkaError(Errors.INVALID_REQUEST, "empty transactional id")
        self._check_coordinator(txn_id)
        abort, m = self.coordinator.init_producer_id(
            txn_id, timeout_ms, producer_id, epoch, self.now(), self.broker.producer_ids.next_id,
            tv2=transaction_version(self.broker) >= 2)
        if abort is not None:
            log.info("fencing %s: aborting its open transaction", txn_id)
            await self._write(abort)
            if not await self._complete(abort):
                raise KafkaError(Errors.CONCURRENT_TRANSACTIONS,
                                 f"{txn_id}: aborting the previous producer's transaction")
        await self._write(m)
        return m.producer_id, m.producer_epoch

    async def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                             partitions: list[tuple[str, int]],
                             client_tv: int = 0) -> dict[tuple[str, int], int]:
        """Error code per partition (Kafka: one unknown partition fails the whole request).
        ``client_tv`` 2: a transaction version 2 add, from a partition leader."""
        err = self.topic.coordinator_error(txn_id)
        if err is not None:
            return {tp: err.code for tp in partitions}
        unknown = {tp for tp in partitions
                   if not 0 <= tp[1] < self.broker.partition_count(tp[0])}
        if unknown:
            return {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                    else Errors.OPERATION_NOT_ATTEMPTED for tp in partitions}
        try:
            m = self.coordinator.add_partitions(txn_id, producer_id, epoch, set(partitions),
                                                self.now(), client_tv)
            if m is not None:
                await self._write(m)
        except KafkaError as e:
            return {tp: e.code for tp in partitions}
        return {tp: 0 for tp in partitions}

    async def add_offsets(self, txn_id: str, producer_id: int, epoch: int,
                          group_id: str) -> None:
        groups = self.broker.groups
        groups.topic.prepare()  # the handler awaited it: raises only if its creation failed
        p = partition_for(group_id, groups.num_partitions)
        codes = await self.add_partitions(txn_id, producer_id, epoch, [(OFFSETS_TOPIC, p)])
        if codes[(OFFSETS_TOPIC, p)]:
            raise KafkaError(codes[(OFFSETS_TOPIC, p)])

    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                      tv2: bool = False) -> tuple[int, int]:
        """End the transaction (``tv2``: EndTxn v5+); the producer id and epoch to answer
        (transaction version 2: the bumped ones, module doc)."""
        self._check_coordinator(txn_id)
        if not txn_id:
            raise KafkaError(Errors.INVALID_REQUEST, "empty transactional id")
        m = self.coordinator.end_txn(txn_id, producer_id, epoch, commit, self.now(), tv2=tv2,
                                     new_pid=self.broker.producer_ids.next_id)
        if m is not None:
            await self._write(m)
            answer = self.coordinator.answer_v2(m)
            await self._complete(m)
        else:
            cur = self.coordinator.txns.get(txn_id)
            answer = (cur.producer_id, cur.producer_epoch) if cur is not None else (-1, -1)
        return answer if tv2 else (-1, -1)

    async def txn_offset_commit(self, txn_id: str, group_id: str, producer_id: int, epoch: int,
                                generation: int, member_id: str, instance: str | None,
                                offsets: list[tuple[str, int, int, int, str | None]],
                                version: int = 3) -> int:
        """Append the offsets as a transactional batch; pending until the marker. Error code
        (once replicated, within offsets.commit.timeout.ms).

        This broker answers as the group's coordinator. When it coordinates the transaction
        too it checks the producer against it. Either way, as Kafka's group coordinator, it
        asks the transaction coordinator (``self.verifier``, KIP-890) whether the group's
        ``__consumer_offsets`` partition is in the transaction (TxnOffsetCommit v0-4, the
        client added it with AddOffsetsToTxn) or adds it (v5+, transaction version 2); the
        offsets log's producer state also fences a stale epoch on append (PRODUCER_FENCED)."""
        groups = self.broker.groups
        err = groups.topic.coordinator_error(group_id)
        if err is not None:
            return err.code
        m = self.coordinator.txns.get(txn_id)
        local = self.topic.coordinator_error(txn_id) is None
        if local and (m is None or m.producer_id != producer_id):
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if local and m.producer_epoch != epoch:
            return Errors.PRODUCER_FENCED
        coord = groups.coordinator
        if generation >= 0 or member_id or instance is not None:
            code = _check_commit(coord, group_id, generation, member_id, instance,
                                 transactional=True)
            if code:
                return code
        elif not group_id:
            return Errors.INVALID_GROUP_ID
        p = partition_for(group_id, groups.num_partitions)
        code = await self._offsets_in_txn(txn_id, producer_id, epoch, p, version)
        if code:
            return code
        now = self.now()
        b = BatchBuilder(producer_id=producer_id, producer_epoch=epoch, is_transactional=True)
        records = []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            rec, _, _ = OffsetStore.commit_record(
                group_id, topic, partition, CommittedOffset(offset, leader_epoch, metadata or "", now))
            b.append(rec.key, rec.value, timestamp=now)
            records.append((rec.key, rec.value))
        if not records:
            return 0
        try:
            last = self.writer.append(OFFSETS_TOPIC, p, bytearray(b.build()))
        except KafkaError as e:
            if e.code == Errors.INVALID_PRODUCER_EPOCH:
                return Errors.PRODUCER_FENCED
            return coordinator_error(e, KafkaError(e.code)).code
        except OSError as e:
            log.error("appending transactional offsets to %s-%d failed: %s", OFFSETS_TOPIC, p, e)
            return Errors.COORDINATOR_NOT_AVAILABLE
        for key, value in records:
            groups.txn_offsets.add(producer_id, p, key, value)
        if last is not None and not self.writer.replicated(OFFSETS_TOPIC, p, last):
            try:
                await self.writer.wait_replicated(OFFSETS_TOPIC, p, last,
                                                  self._cfg("offsets.commit.timeout.ms"))
            except (KafkaError, OSError) as e:
                return coordinator_error(e, UNAVAILABLE).code
        return 0

    async def _offsets_in_txn(self, txn_id: str, producer_id: int, epoch: int, p: int,
                              version: int) -> int:
        """Verify (v0-4) or add (v5+) ``__consumer_offsets``-``p`` in the transaction; the
        error to answer, mapped as Kafka's group coordinator does (TRANSACTION_ABORTABLE is
        INVALID_TXN_STATE below v4; a coordinator that cannot be asked is
        COORDINATOR_NOT_AVAILABLE; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH)."""
        tp = (OFFSETS_TOPIC, p)
        codes = await self.verifier.add_or_verify(txn_id, producer_id, epoch, [tp],
                                                  verify_only=version < 5)
        code = codes.get(tp, 0)
        if code == Errors.TRANSACTION_ABORTABLE and version < 4:
            return Errors.INVALID_TXN_STATE
        if code == Errors.PRODUCER_FENCED:
            return Errors.INVALID_PRODUCER_EPOCH
        if code in (Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                    Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE) or (
                code == Errors.CONCURRENT_TRANSACTIONS and version < 5):
            return Errors.COORDINATOR_NOT_AVAILABLE
        return code

    # ---- timers

    async def abort_timed_out(self) -> int:
        todo = self.coordinator.timed_out(self.now(), tv2=transaction_version(self.broker) >= 2)
        for m in todo:
            log.info("aborting the transaction of %s (producer id %d, epoch %d): open longer "
                     "than its timeout of %d ms", m.transactional_id, m.producer_id,
                     m.producer_epoch, m.timeout_ms,
                     extra=fields(transactional_id=m.transactional_id,
                                  producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                  timeout_ms=m.timeout_ms, reason="timeout"))
            try:
                await self._write(m)
            except KafkaError as e:  # still Ongoing: the next pass tries again
                log.warning("aborting %s failed: %s", m.transactional_id, e)
                continue
            await self._complete(m)
        return len(todo)

    async def expire_ids(self) -> int:
        ids = self.coordinator.expired(self.now(), self._cfg("transactional.id.expiration.ms"))
        for txn_id in ids:
            m = self.coordinator.txns.get(txn_id)
            if m is None:
                continue
            try:
                await self._write(m, tombstone=True)
            except KafkaError as e:  # still there: the next pass tries again
                log.warning("expiring %s failed: %s", txn_id, e)
        return len(ids)

    async def expire_producers(self) -> int:
        now, ms = self.now(), self._cfg("producer.id.expiration.ms")
        return sum(plog.expire_producers(now, ms) for plog in self.broker.logs.logs().values())

    async def _timer_loop(self) -> None:
        jobs = [
            (self.abort_timed_out, "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            (self.expire_ids, "transaction.remove.expired.transaction.cleanup.interval.ms"),
            (self.expire_producers, "producer.id.expiration.check.interval.ms"),
        ]
        due = {fn: self.now() + self._cfg(key) for fn, key in jobs}
        while True:
            await asyncio.sleep(max(0.0, (min(due.values()) - self.now()) / 1000.0))
            for fn, key in jobs:
                if due[fn] <= self.now():
                    try:
                        await fn()
                    except Exception:
                        log.exception("transaction timer %s failed", fn.__name__)
                    due[fn] = self.now() + self._cfg(key)


def _b(v) -> bytes | None:
    return None if v is None else bytes(v)
