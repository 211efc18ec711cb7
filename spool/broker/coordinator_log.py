"""The coordinators' one way into the log: a narrow writer seam and the append-then-replay step.

Both coordinators (groups, ``spool.broker.group_runtime``; transactions,
``spool.broker.txn_runtime``) have the same runtime shape, Kafka's
coordinator-common ``CoordinatorResult``/``CoordinatorPlayback``:

1. an operation of the state machine returns a ``Result``: the records to
   append and the replies to release; it changes no durable state itself;
2. ``CoordinatorLog.commit(result)`` appends the records (one batch per
   partition, through the writer) and, only if every append succeeded,
   replays each record into the state machine (``replay``) and releases the
   replies. Before appending it calls ``prepare`` (the topic's readiness
   check, ``spool.broker.internal_topic``); if that raises, or an append
   fails, it replays nothing, calls ``revert`` so the
   operation leaves no trace in memory, and answers every reply with
   ``error`` instead; it returns whether the records are in the log.

``CoordinatorLogWriter`` is everything a coordinator may do to the log:
``append(topic, partition, batch)``, which returns once the batch is in the
log or raises (``KafkaError`` or ``OSError``). ``PartitionLogWriter`` is the
production one (the partition's ``PartitionLog``, then wake the fetches
waiting on it). Tests pass another one to ``Broker`` (``tests/helpers/
faulty_broker.py``) to fail appends or kill the process at a chosen point;
production code has no crash hooks.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

from spool.coordinator.result import OutRecord, Result
from spool.protocol.errors import KafkaError
from spool.records.builder import BatchBuilder

log = logging.getLogger("spool.coordinator.log")


class CoordinatorLogWriter(Protocol):
    def append(self, topic: str, partition: int, batch: bytearray) -> None:
        """Append one v2 batch; raise ``KafkaError`` or ``OSError`` if it is not in the log."""


class PartitionLogWriter:
    """The production writer: the log of a partition this broker leads
    (``broker.leader_log``), in its leader epoch, then ``notify_append``."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def append(self, topic: str, partition: int, batch: bytearray) -> None:
        plog, leader_epoch = self.broker.leader_log(topic, partition)
        plog.append(batch, leader_epoch=leader_epoch)
        self.broker.notify_append(topic, partition)


class CoordinatorLog:
    """Appends a ``Result``'s records to ``topic``, then replays them (see the module doc)."""

    def __init__(self, topic: str, writer: CoordinatorLogWriter, clock,
                 partition_of: Callable[[str], int], replay: Callable[[OutRecord], None],
                 error: KafkaError, prepare: Callable[[], None] | None = None) -> None:
        self.topic = topic
        self.prepare = prepare  # e.g. refuse until the topic exists (never blocks: the loop)
        self.writer = writer
        self.clock = clock
        self.partition_of = partition_of
        self.replay = replay
        self.error = error

    def commit(self, result: Result, revert: Callable[[], None] | None = None) -> bool:
        """Append, replay, release (see the module doc); False if an append failed.

        Records go one batch per partition; should a later partition's append
        fail after an earlier one succeeded, the earlier records are in the
        log and are replayed (memory follows the log), the rest are not.
        """
        written, ok = self.append(result.records)
        for rec in written:
            self.replay(rec)
        if not ok and revert is not None:
            revert()
        for fn, value in result.replies:
            fn(value if ok else self.error)
        return ok

    def append(self, records: list[OutRecord]) -> tuple[list[OutRecord], bool]:
        """(the records now in the log, whether all are): one batch per partition, CreateTime now."""
        now = self.clock.now_ms()
        by_partition: dict[int, list[OutRecord]] = defaultdict(list)
        for rec in records:
            by_partition[self.partition_of(rec.owner)].append(rec)
        written: list[OutRecord] = []
        if records and self.prepare is not None:
            try:
                self.prepare()
            except (KafkaError, OSError) as e:  # e.g. the topic is still being created
                log.warning("cannot append to %s yet: %s", self.topic, e)
                return written, False
        for p, recs in sorted(by_partition.items()):
            builder = BatchBuilder()
            for rec in recs:
                builder.append(rec.key, rec.value, timestamp=now)
            try:
                self.writer.append(self.topic, p, bytearray(builder.build()))
            except (KafkaError, OSError) as e:
                log.error("appending to %s-%d failed: %s", self.topic, p, e)
                return written, False
            written += recs
        return written, True
