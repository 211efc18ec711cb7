"""The group coordinator's asyncio shell: the ``__consumer_offsets`` topic, appends, timers.

``GroupRuntime(broker)`` owns a ``GroupCoordinator`` and is its only caller,
always on the event loop's thread, so operations never interleave.

- Topic: ``__consumer_offsets`` is created on first use with
  ``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``
  (internal). A group's records go to partition ``partition_for(group)``.
- ``run(result)``: appends the result's records (one batch per partition,
  non-transactional, CreateTime = now) and only then releases its replies;
  if an append fails, every reply gets COORDINATOR_NOT_AVAILABLE instead.
  Appends are synchronous on the loop, like Produce's: no other operation
  can observe the state before its records are in the log.
- Startup: ``load()`` (in the executor, before the listeners open) replays
  every record of the topic into the coordinator, then starts the loaded
  members' session timers.
- Timers: one task sleeps until the coordinator's next deadline (or until
  an operation wakes it, since operations add earlier deadlines) and runs
  ``tick()``. Parked JoinGroup/SyncGroup requests wait on futures: they
  never block the loop, other connections, or the reader of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import Any

from spool.coordinator import CoordinatorConfig, GroupCoordinator, Result, partition_for
from spool.coordinator.txn_offsets import PendingTxnOffsets
from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records

log = logging.getLogger("spool.groups")

TOPIC = "__consumer_offsets"
UNAVAILABLE = KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "the offsets topic refused the append")


def coordinator_config(config) -> CoordinatorConfig:
    return CoordinatorConfig(
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        max_size=config.get_int("group.max.size"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        max_metadata_bytes=config.get_int("offset.metadata.max.bytes"),
    )


class GroupRuntime:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(broker.clock, coordinator_config(broker.config))
        self.num_partitions = broker.config.get_int("offsets.topic.num.partitions")
        self.txn_offsets = PendingTxnOffsets()  # TxnOffsetCommit records awaiting their marker
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    # ---- lifecycle

    def load(self) -> int:
        """Replay ``__consumer_offsets`` (blocking: call from the executor at startup)."""
        count = 0
        if self.broker.has_topic(TOPIC):
            self.num_partitions = self.broker.partition_count(TOPIC)
            for p in range(self.num_partitions):
                for batch in self.broker.get_log(TOPIC, p).iter_batches():
                    h = BatchHeader.parse(batch)
                    if h.is_control or h.is_transactional:  # spool.coordinator.txn_offsets
                        self.txn_offsets.load_batch(p, h, batch, self.coordinator.load)
                        continue
                    for rec in iter_records(batch):
                        self.coordinator.load(_bytes(rec.key), _bytes(rec.value))
                        count += 1
        self.coordinator.loaded()
        return count

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer_loop())

    async def stop(self) -> None:
        """Stop the timers and answer parked requests (COORDINATOR_NOT_AVAILABLE: retriable)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for group in self.coordinator.groups.values():
            for m in group.members.values():
                for fn in (m.join_reply, m.sync_reply):
                    if fn is not None:
                        fn(UNAVAILABLE)
                m.join_reply = m.sync_reply = None

    def ensure_topic(self) -> None:
        if self.broker.has_topic(TOPIC):
            return
        with contextlib.suppress(KafkaError):
            self.broker.create_topic(TOPIC, self.num_partitions, configs={"cleanup.policy": "compact"},
                                     internal_ok=True)
        log.info("created %s with %d partitions", TOPIC, self.num_partitions)

    # ---- operations

    def run(self, result: Result) -> None:
        """Append ``result.records``, then release ``result.replies`` (see the module doc)."""
        ok = True
        if result.records:
            try:
                self._append(result)
            except Exception:
                log.exception("appending to %s failed", TOPIC)
                ok = False
        for fn, value in result.replies:
            fn(value if ok else UNAVAILABLE)
        self._wake.set()

    def complete(self, result: Result, value: Any) -> Any:
        """``run`` a result whose answer is ``value``: ``value`` once appended, else the error."""
        box: list = []
        result.reply(box.append, value)
        self.run(result)
        return box[0]

    def _append(self, result: Result) -> None:
        self.ensure_topic()
        now = self.broker.clock.now_ms()
        by_partition: dict[int, BatchBuilder] = defaultdict(BatchBuilder)
        for rec in result.records:
            by_partition[partition_for(rec.group, self.num_partitions)].append(
                rec.key, rec.value, timestamp=now)
        for p, builder in sorted(by_partition.items()):
            plog = self.broker.get_log(TOPIC, p)
            plog.append(bytearray(builder.build()), leader_epoch=self.broker.leader_epoch)
            self.broker.notify_append(TOPIC, p)

    async def _timer_loop(self) -> None:
        clock = self.broker.clock
        while True:
            deadline = self.coordinator.next_deadline()
            wait_s = None if deadline is None else max(0.0, (deadline - clock.now_ms()) / 1000.0)
            self._wake.clear()
            if wait_s is None or wait_s > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_s)
            try:
                self.run(self.coordinator.tick())
            except Exception:
                log.exception("group coordinator timer failed")
                await asyncio.sleep(1.0)


def _bytes(b) -> bytes | None:
    return None if b is None else bytes(b)
