"""The coordinators' one way into the log: a narrow writer seam and the append-then-replay step.

Both coordinators (groups, ``spool.broker.group_runtime``; transactions,
``spool.broker.txn_runtime``) have the same runtime shape, Kafka's
coordinator-common ``CoordinatorResult``/``CoordinatorPlayback``:

1. an operation of the state machine returns a ``Result``: the records to
   append and the replies to release; it changes no durable state itself;
2. ``CoordinatorLog.commit(result)`` appends the records (one batch per
   partition, through the writer, at once: appends keep the operations'
   order) and, only if every append succeeded *and is replicated*, replays
   each record into the state machine (``replay``) and releases the replies.
   Before appending it calls ``prepare`` (the topic's readiness check,
   ``spool.broker.internal_topic``); if that raises, or an append fails, it
   replays nothing, calls ``revert`` so the operation leaves no trace in
   memory, and answers every reply with the error instead.

Replication (a cluster): Kafka's coordinators append with acks=-1, so a reply
leaves only once the records are in every in-sync replica. ``commit`` returns a
``Commit``: ``appended`` (the records are in the leader's log: the operation's
in-memory changes stand) and ``done``, None when the replies were released at
once (nothing appended, or already replicated: a single node, an ISR of one),
else a future that completes once ``writer.wait_replicated`` (the high watermark
passed the last offset, within ``timeout_ms``) let the records be replayed and
the replies released (True), or failed them (False): no replay, and the replies
get Kafka's mapping of the failure (``coordinator_error``): NOT_COORDINATOR when
leadership was lost (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR), else the
runtime's COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS*,
UNKNOWN_TOPIC_OR_PARTITION). Replays of one partition happen in append order.

``CoordinatorLogWriter`` is everything a coordinator may do to the log:
``append(topic, partition, batch)``, which returns the last offset appended once
the batch is in the log or raises (``KafkaError`` or ``OSError``), and the
replication wait. ``PartitionLogWriter`` is the production one (the partition
this broker leads, in its leader epoch, then wake the fetches waiting on it).
Tests pass another one to ``Broker`` (``tests/helpers/faulty_broker.py``) to fail
appends or kill the process at a chosen point; production code has no crash hooks.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from spool.coordinator.result import OutRecord, Result
from spool.protocol.errors import Errors, KafkaError
from spool.records.builder import BatchBuilder

log = logging.getLogger("spool.coordinator.log")


class CoordinatorLogWriter(Protocol):
    def append(self, topic: str, partition: int, batch: bytearray) -> int | None:
        """Append one v2 batch; its last offset (None: unknown, nothing to wait for); raise
        ``KafkaError`` or ``OSError`` if it is not in the log."""

    def replicated(self, topic: str, partition: int, offset: int) -> bool:
        """Whether ``offset`` is replicated already (below the high watermark)."""

    async def wait_replicated(self, topic: str, partition: int, offset: int,
                              timeout_ms: int) -> None:
        """Until ``offset`` is replicated; raises ``KafkaError`` (module doc)."""


NOT_COORDINATOR_CODES = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR})


def coordinator_error(e: BaseException, default: KafkaError) -> KafkaError:
    """The error a coordinator's client gets for a failed append or replication (Kafka's
    mapping): NOT_COORDINATOR when this broker lost the partition, else ``default``."""
    if isinstance(e, KafkaError) and e.code in NOT_COORDINATOR_CODES:
        return KafkaError(Errors.NOT_COORDINATOR, str(e))
    return default


class PartitionLogWriter:
    """The production writer: the partition this broker leads (``broker.replicas``), appended
    as leader in its epoch with acks=-1 (which wakes the fetches waiting on it)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def _replicas(self) -> Any:
        return getattr(self.broker, "replicas", None)

    def append(self, topic: str, partition: int, batch: bytearray, *,
               transaction_version: int = 0) -> int | None:
        """``transaction_version``: of a transaction marker (2: KIP-890's strict epoch)."""
        replicas = self.broker.replicas
        part = replicas.leader_partition(topic, partition)
        return replicas.append_as_leader(part, batch, acks=-1, now_ms=self.broker.clock.now_ms(),
                                         transaction_version=transaction_version).last_offset

    def replicated(self, topic: str, partition: int, offset: int) -> bool:
        replicas = self._replicas()
        if replicas is None:
            return True
        part = replicas.get_partition(topic, partition)
        return part is not None and part.high_watermark > offset

    async def wait_replicated(self, topic: str, partition: int, offset: int,
                              timeout_ms: int) -> None:
        replicas = self._replicas()
        if replicas is not None:
            await replicas.wait_replicated(topic, partition, offset, timeout_ms)


@dataclass
class Commit:
    """What ``CoordinatorLog.commit`` did (module doc)."""

    appended: bool
    done: asyncio.Future | None = None

    async def wait(self) -> bool:
        """Whether the records are replicated and replayed (the replies were released)."""
        return self.appended if self.done is None else await self.done


class CoordinatorLog:
    """Appends a ``Result``'s records to ``topic``, then replays them (see the module doc)."""

    def __init__(self, topic: str, writer: CoordinatorLogWriter, clock,
                 partition_of: Callable[[str], int], replay: Callable[[OutRecord], None],
                 error: KafkaError, prepare: Callable[[], None] | None = None,
                 timeout_ms: Callable[[], int] = lambda: 5000) -> None:
        self.topic = topic
        self.prepare = prepare  # e.g. refuse until the topic exists (never blocks: the loop)
        self.writer = writer
        self.clock = clock
        self.partition_of = partition_of
        self.replay = replay
        self.error = error
        self.timeout_ms = timeout_ms
        self._tails: dict[int, asyncio.Future] = {}  # the last waiting commit per partition

    def commit(self, result: Result, revert: Callable[[], None] | None = None) -> Commit:
        """Append, then replay and release once replicated (see the module doc).

        Records go one batch per partition; should a later partition's append
        fail after an earlier one succeeded, the earlier records are in the
        log and are replayed (memory follows the log), the rest are not.
        """
        written, err, waits = self.append(result.records)
        if err is not None:
            for rec in written:
                self.replay(rec)
            if revert is not None:
                revert()
            for fn, _ in result.replies:
                fn(err)
            return Commit(False)
        parts = sorted({self.partition_of(rec.owner) for rec in result.records})
        prev = [self._tails[p] for p in parts if p in self._tails]
        if not waits and not prev:
            self._release(result, None)
            return Commit(True)
        done = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(self._wait(result, waits, prev))
        for p in parts:
            self._tails[p] = task
        task.add_done_callback(lambda t: self._finished(t, done, parts))
        return Commit(True, done)

    async def _wait(self, result: Result, waits: list[tuple[int, int]],
                    prev: list[asyncio.Future]) -> bool:
        err: KafkaError | None = None
        try:
            await self._replicated(waits, prev)
        except asyncio.CancelledError:  # stopping: the replies are not left hanging
            self._release(result, self.error)
            raise
        except (KafkaError, OSError) as e:
            log.warning("records appended to %s not replicated: %s", self.topic, e)
            err = coordinator_error(e, self.error)
            if prev:
                await asyncio.wait(prev)
        self._release(result, err)
        return err is None

    async def _replicated(self, waits: list[tuple[int, int]],
                          prev: list[asyncio.Future]) -> None:
        await asyncio.gather(*(self.writer.wait_replicated(self.topic, p, offset,
                                                           self.timeout_ms())
                               for p, offset in waits))
        if prev:
            await asyncio.wait(prev)  # replays of a partition in append order

    async def stop(self) -> None:
        """Stop waiting (shutdown): the replies waiting get the runtime's error."""
        tasks = set(self._tails.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def _release(self, result: Result, err: KafkaError | None) -> None:
        if err is None:
            for rec in result.records:
                self.replay(rec)
        for fn, value in result.replies:
            fn(value if err is None else err)

    def _finished(self, task: asyncio.Task, done: asyncio.Future, parts: list[int]) -> None:
        for p in parts:
            if self._tails.get(p) is task:
                del self._tails[p]
        if done.done():
            return
        if task.cancelled():
            done.set_result(False)
        elif task.exception() is not None:
            log.error("releasing %s replies failed", self.topic, exc_info=task.exception())
            done.set_result(False)
        else:
            done.set_result(task.result())

    def append(self, records: list[OutRecord]
               ) -> tuple[list[OutRecord], KafkaError | None, list[tuple[int, int]]]:
        """(the records now in the log, the error if not all are, the (partition, last
        offset) still to replicate): one batch per partition, CreateTime now."""
        now = self.clock.now_ms()
        by_partition: dict[int, list[OutRecord]] = defaultdict(list)
        for rec in records:
            by_partition[self.partition_of(rec.owner)].append(rec)
        written: list[OutRecord] = []
        waits: list[tuple[int, int]] = []
        if records and self.prepare is not None:
            try:
                self.prepare()
            except (KafkaError, OSError) as e:  # e.g. the topic is still being created
                log.warning("cannot append to %s yet: %s", self.topic, e)
                return written, self.error, waits
        for p, recs in sorted(by_partition.items()):
            builder = BatchBuilder()
            for rec in recs:
                builder.append(rec.key, rec.value, timestamp=now)
            try:
                last = self.writer.append(self.topic, p, bytearray(builder.build()))
            except (KafkaError, OSError) as e:
                log.error("appending to %s-%d failed: %s", self.topic, p, e)
                return written, coordinator_error(e, self.error), waits
            written += recs
            if last is not None and not self.writer.replicated(self.topic, p, last):
                waits.append((p, last))
        return written, None, waits
