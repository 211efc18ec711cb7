"""A coordinator's internal topic, created on first use, never on the event loop.

``InternalTopic(broker, name, partitions)`` stands for ``__consumer_offsets``
or ``__transaction_state``. Creating one is file work for every partition
(50 by default, ``offsets.topic.num.partitions`` allows thousands), so it
always runs in the broker's executor, one creation at a time per topic:

- ``await ensure()``: whether every partition log exists, creating the topic
  in the executor first if it does not (callers arriving meanwhile await the
  same creation). Handlers whose operation may append to the topic
  (FindCoordinator, OffsetCommit, JoinGroup, InitProducerId, ...) await it
  first: the request waits, every other connection goes on.
- ``prepare()``: the ``CoordinatorLog``'s hook before an append, on the
  loop. If the topic is not ready it starts the creation in the executor
  and raises COORDINATOR_LOAD_IN_PROGRESS, so the append is refused; the
  ``CoordinatorLog`` answers it with its runtime's retriable error
  (COORDINATOR_NOT_AVAILABLE) and the client tries again; it
  never blocks. It is the net for any path that did not ``ensure`` (timers).

Once ready the topic stays ready (internal topics cannot be deleted), so
the checks are cheap after the first success. A creation that fails (e.g.
beyond the partition limit) is logged; the next ``ensure`` tries again.

In a cluster, ``coordinator_error(key)`` is NOT_COORDINATOR when another
broker leads the key's partition (handlers answer it before touching the
coordinator), and the topic is created by the active controller
(``spool.broker.forwarding.create_topic_via_controller``) with
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor``
replicas, as Kafka does: with fewer live brokers than that the controller
refuses (INVALID_REPLICATION_FACTOR), the creation is logged and tried again
at the next ``ensure``, and clients meanwhile get COORDINATOR_NOT_AVAILABLE
(Kafka's behaviour; set the factor to what the cluster has). Ready there means
the topic is in the broker's view: the logs of the partitions this broker leads
follow from the image, and an append before one exists is refused (retriable).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from spool.broker.forwarding import create_topic_via_controller
from spool.coordinator import partition_for
from spool.protocol.errors import Errors, KafkaError

log = logging.getLogger("spool.broker.internal_topic")

REPLICATION_FACTOR_KEY = {
    "__consumer_offsets": "offsets.topic.replication.factor",
    "__transaction_state": "transaction.state.log.replication.factor",
}


class InternalTopic:
    def __init__(self, broker: Any, name: str, partitions: Callable[[], int]) -> None:
        self.broker = broker
        self.name = name
        self.partitions = partitions  # how many to create (the runtime's current count)
        self._ready = False
        self._creating: asyncio.Future | None = None

    def partition_for(self, key: str) -> int:
        """The partition holding ``key``'s records (a group id, a transactional id)."""
        return partition_for(key, self.partitions())

    def coordinator_error(self, key: str) -> KafkaError | None:
        """NOT_COORDINATOR when, in a cluster, another broker (or none) leads ``key``'s
        partition: the client looks the coordinator up again, as Kafka answers;
        COORDINATOR_LOAD_IN_PROGRESS while this broker leads it but its log is not created
        yet. None on a single node, before the topic exists (``ensure`` creates it), or when
        this broker leads the partition and has its log."""
        view = self.broker.view
        if not view.clustered:
            return None
        part = view.partition(self.name, self.partition_for(key))
        if part is None:
            return None
        if part.leader == self.broker.node_id:
            if self.broker.storage.logs.get(self.name, part.partition_index) is None:
                # just elected or created: the log follows the image (retriable, as Kafka
                # answers while it loads a coordinator partition)
                return KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                  f"{self.name} partition {part.partition_index} is being "
                                  f"created on broker {self.broker.node_id}")
            return None
        return KafkaError(Errors.NOT_COORDINATOR,
                          f"broker {self.broker.node_id} is not the coordinator of {key!r} "
                          f"({self.name} partition {part.partition_index} is led by "
                          f"{part.leader})")

    def ready(self) -> bool:
        """Whether every partition log of the topic exists (no file work)."""
        if not self._ready:
            if self.broker.view.clustered:
                self._ready = self.broker.view.partition_count(self.name) > 0
            else:
                self._ready = self.broker.partitions_ready(self.name)
        return self._ready

    async def ensure(self) -> bool:
        """Create the topic in the executor unless it is ready; whether it is ready now."""
        if self.ready():
            return True
        await asyncio.shield(self._start())
        return self.ready()

    def prepare(self) -> None:
        """On the loop: nothing if ready, else start the creation and raise
        COORDINATOR_LOAD_IN_PROGRESS (never blocks)."""
        if self.ready():
            return
        self._start()
        raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS, f"{self.name} is being created")

    async def stop(self) -> None:
        """Wait for a creation in flight (before the storage it writes to shuts down)."""
        if self._creating is not None:
            await asyncio.wait({self._creating})

    def _start(self) -> asyncio.Future:
        if self._creating is None or self._creating.done():
            if self.broker.view.clustered:
                self._creating = asyncio.ensure_future(self._create_in_cluster())
            else:
                self._creating = asyncio.ensure_future(self.broker.run_blocking(self.create))
        return self._creating

    async def _create_in_cluster(self) -> None:
        """Ask the controller (never raises: a failure is logged, ``ensure`` retries)."""
        n = self.partitions()
        rf = self.broker.config.get_int(REPLICATION_FACTOR_KEY[self.name])
        try:
            await create_topic_via_controller(self.broker, self.name, n, rf,
                                              {"cleanup.policy": "compact"})
        except KafkaError as e:
            if e.code != Errors.TOPIC_ALREADY_EXISTS:
                log.error("creating %s with %d partitions and replication factor %d "
                          "failed: %s", self.name, n, rf, e)
            return
        log.info("created %s with %d partitions, replication factor %d", self.name, n, rf)

    def create(self) -> None:
        """Create the topic (blocking: the executor). Never raises: a failure is logged."""
        if self.broker.has_topic(self.name):
            return  # created meanwhile (or being created by a restart's recovery)
        n = self.partitions()
        try:
            self.broker.create_topic(self.name, n, configs={"cleanup.policy": "compact"},
                                     internal_ok=True)
        except KafkaError as e:
            if e.code != Errors.TOPIC_ALREADY_EXISTS:
                log.error("creating %s with %d partitions failed: %s", self.name, n, e)
            return
        except Exception:
            log.exception("creating %s with %d partitions failed", self.name, n)
            return
        log.info("created %s with %d partitions", self.name, n)
