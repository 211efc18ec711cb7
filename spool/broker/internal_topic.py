"""A coordinator's internal topic, created on first use, never on the event loop.

``InternalTopic(broker, name, partitions)`` stands for ``__consumer_offsets``,
``__transaction_state`` or ``__share_group_state`` (keys placed by ``partition_of``).
Creating one is file work for every partition
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
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor`` /
``share.coordinator.state.topic.replication.factor`` replicas (default 3, Kafka's), capped by the brokers registered at that moment
(fenced ones included: the controller places followers on them), so a
smaller cluster still gets its coordinators; ``__transaction_state`` gets
``min.insync.replicas`` = ``transaction.state.log.min.isr`` (default 2), capped by
that replication factor, and ``__share_group_state``
``share.coordinator.state.topic.min.isr`` likewise (``topic_configs``: its cleanup policy). A creation the controller refuses (say every broker is
fenced) is logged and tried again at the next ``ensure``; clients meanwhile get
COORDINATOR_NOT_AVAILABLE. Ready there means
the topic is in the broker's view: the logs of the partitions this broker leads
follow from the image, and an append before one exists is refused (retriable).
(Kafka since KIP-115 refuses to create them below the configured factor
instead of capping; Spool caps, as older Kafka did, so that a cluster smaller than
3 brokers works without configuration.)

Coordinator partitions (a cluster): the coordinator of a key is the leader of its
partition, and the coordinator's state of a partition lives only on that leader
(Kafka's ``CoordinatorRuntime`` load/unload). ``on_leadership(p, is_leader,
leader_epoch)`` (a leadership listener of the broker's replicas) loads a
partition when this broker becomes its leader and unloads it when it stops:

- load: ``loading[p] = epoch``; the owner's ``read_partition(p)`` runs in the
  executor (the partition's log only), then, back on the loop and only if
  ``loading[p]`` still holds that epoch (leadership did not move meanwhile: a
  stale load is dropped), ``apply_partition(p, data)`` replays it and the
  partition is ``loaded[p] = epoch``. A partition already loaded that gets a new
  epoch here just takes the epoch (it was led here throughout).
- unload: the owner's ``unload_partition(p)`` drops its groups / transactions
  (parked requests answered NOT_COORDINATOR, timers stopped).
- ``hold()`` / ``release()``: a broker catching up with the metadata log holds the
  changes until it caught up (it would load partitions it led before a restart and
  no longer leads), then acts on the latest one of each partition.

``coordinator_error(key)``: None when the key's partition is loaded here (and the
view does not name another leader yet); COORDINATOR_LOAD_IN_PROGRESS while it
loads (or the view names this broker before the listener fired); else
NOT_COORDINATOR. On a single node every partition is loaded at start and the
check is None.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from spool.broker.forwarding import create_topic_via_controller
from spool.coordinator import partition_for
from spool.protocol.errors import Errors, KafkaError

log = logging.getLogger("spool.broker.internal_topic")

REPLICATION_FACTOR_KEY = {
    "__consumer_offsets": "offsets.topic.replication.factor",
    "__transaction_state": "transaction.state.log.replication.factor",
    "__share_group_state": "share.coordinator.state.topic.replication.factor",
}
MIN_ISR_KEY = {
    "__transaction_state": "transaction.state.log.min.isr",
    "__share_group_state": "share.coordinator.state.topic.min.isr",
}


def topic_configs(name: str, config: Any) -> dict[str, str]:
    """The topic configs an internal topic is created with: compacted, except
    ``__share_group_state``, whose ShareUpdate records all count until the next
    ShareSnapshot (compaction would keep only the last one): Kafka (KIP-932) gives it
    ``cleanup.policy=delete``, never by time (``retention.ms=-1``): the share coordinator
    deletes what snapshots superseded (``spool.broker.share_runtime``: pruning)."""
    if name == "__share_group_state":
        return {"cleanup.policy": "delete", "retention.ms": "-1",
                "segment.bytes": str(config.get_int("share.coordinator.state.topic.segment.bytes"))}
    return {"cleanup.policy": "compact"}


def cluster_topic_settings(name: str, config: Any, registered_brokers: int
                           ) -> tuple[int, dict[str, str]]:
    """(replication factor, topic configs) for creating internal topic ``name`` in a
    cluster of ``registered_brokers`` (module doc)."""
    rf = max(1, min(config.get_int(REPLICATION_FACTOR_KEY[name]), registered_brokers))
    configs = topic_configs(name, config)
    if name in MIN_ISR_KEY:
        configs["min.insync.replicas"] = str(min(config.get_int(MIN_ISR_KEY[name]), rf))
    return rf, configs


class PartitionOwner(Protocol):
    """The coordinator runtime whose state a partition holds (module doc)."""

    def read_partition(self, partition: int) -> Any:
        """Read the partition's log (blocking: the executor); what ``apply_partition`` takes."""

    def apply_partition(self, partition: int, data: Any) -> None:
        """Replay what ``read_partition`` read (on the loop): the partition is loaded."""

    def unload_partition(self, partition: int) -> None:
        """Drop the partition's state (on the loop)."""


class InternalTopic:
    def __init__(self, broker: Any, name: str, partitions: Callable[[], int],
                 owner: PartitionOwner | None = None,
                 partition_of: Callable[[str, int], int] = partition_for) -> None:
        self.broker = broker
        self.name = name
        self.partition_of = partition_of  # (key, partitions) -> partition
        self.partitions = partitions  # how many to create (the runtime's current count)
        self.owner = owner
        self.loaded: dict[int, int] = {}  # partition -> leader epoch it is loaded in
        self.loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._loads: set[asyncio.Task] = set()
        self._held: dict[int, tuple[bool, int]] | None = None  # ``hold``: latest per partition
        self._ready = False
        self._creating: asyncio.Future | None = None

    def partition_for(self, key: str) -> int:
        """The partition holding ``key``'s records (a group id, a transactional id)."""
        return self.partition_of(key, self.partitions())

    def coordinator_error(self, key: str) -> KafkaError | None:
        """Whether this broker coordinates ``key`` now (module doc): None if so (always on a
        single node), else COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR (retriable:
        the client looks the coordinator up again, as Kafka answers)."""
        view = self.broker.view
        if not view.clustered:
            return None
        p = self.partition_for(key)
        part = view.partition(self.name, p)
        leader = -1 if part is None else part.leader
        if p in self.loaded and (part is None or leader == self.broker.node_id):
            return None
        if p in self.loading or (p not in self.loaded and leader == self.broker.node_id):
            # just elected: the partition replays (retriable, as Kafka answers)
            return KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS,
                              f"{self.name} partition {p} is loading on broker "
                              f"{self.broker.node_id}")
        if part is None:
            return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"{self.name} is being created")
        return KafkaError(Errors.NOT_COORDINATOR,
                          f"broker {self.broker.node_id} is not the coordinator of {key!r} "
                          f"({self.name} partition {p} is led by {leader})")

    def owns(self, partition: int, leader_epoch: int | None = None) -> bool:
        """Whether ``partition`` is loaded here (in ``leader_epoch``, if given); always on a
        single node."""
        if not self.broker.view.clustered:
            return True
        epoch = self.loaded.get(partition)
        return epoch is not None and (leader_epoch is None or epoch == leader_epoch)

    # ---- load / unload (a cluster: module doc)

    def hold(self) -> None:
        """Keep leadership changes until ``release`` (a broker catching up with the metadata
        log sees leaderships it lost long ago: only the state it caught up to counts)."""
        if self._held is None:
            self._held = {}

    def release(self) -> None:
        """Act on the latest leadership change held for each partition, and from now on at
        once."""
        held, self._held = self._held or {}, None
        for partition, (is_leader, epoch) in sorted(held.items()):
            self.on_leadership(partition, is_leader, epoch)

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """This broker became (``is_leader``) or stopped being the partition's leader."""
        if self._held is not None:
            self._held[partition] = (is_leader, leader_epoch)
            return
        if not is_leader:
            self.loading.pop(partition, None)
            if self.loaded.pop(partition, None) is not None and self.owner is not None:
                log.info("%s-%d: no longer its leader, unloading", self.name, partition)
                self.owner.unload_partition(partition)
            return
        if partition in self.loaded:  # led here throughout: a newer epoch only
            self.loaded[partition] = max(self.loaded[partition], leader_epoch)
            return
        if self.loading.get(partition, -1) >= leader_epoch:
            return  # this load (or a newer one) is under way
        self.loading[partition] = leader_epoch
        task = asyncio.ensure_future(self._load(partition, leader_epoch))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, partition: int, leader_epoch: int) -> None:
        owner = self.owner
        started = self.broker.clock.now_ms()
        try:
            data = await self.broker.run_blocking(owner.read_partition, partition)
        except Exception:
            log.exception("loading %s-%d in leader epoch %d failed", self.name, partition,
                          leader_epoch)
            if self.loading.get(partition) == leader_epoch:
                del self.loading[partition]
            return
        if self.loading.get(partition) != leader_epoch:
            log.info("%s-%d: dropping the load of leader epoch %d (leadership moved)",
                     self.name, partition, leader_epoch)
            return
        del self.loading[partition]
        self.loaded[partition] = leader_epoch
        owner.apply_partition(partition, data)
        log.info("%s-%d loaded in leader epoch %d (%d ms)", self.name, partition, leader_epoch,
                 self.broker.clock.now_ms() - started)

    def unload_all(self) -> None:
        """Forget every partition (shutdown): loads in flight are dropped."""
        self.loading.clear()
        self.loaded.clear()

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
        """Wait for a creation and the loads in flight (before the storage they use shuts
        down)."""
        self.loading.clear()  # a load finishing now is dropped
        if self._creating is not None:
            await asyncio.wait({self._creating})
        if self._loads:
            await asyncio.wait(set(self._loads))

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
        view = self.broker.view
        registered = len(view.brokers()) + len(view.fenced_brokers())
        rf, configs = cluster_topic_settings(self.name, self.broker.config, registered)
        try:
            await create_topic_via_controller(self.broker, self.name, n, rf, configs)
        except KafkaError as e:
            if e.code != Errors.TOPIC_ALREADY_EXISTS:
                log.error("creating %s with %d partitions and replication factor %d "
                          "failed: %s", self.name, n, rf, e)
            return  # the active controller logs the creation

    def create(self) -> None:
        """Create the topic (blocking: the executor). Never raises: a failure is logged."""
        if self.broker.has_topic(self.name):
            return  # created meanwhile (or being created by a restart's recovery)
        n = self.partitions()
        try:
            self.broker.create_topic(self.name, n, configs=topic_configs(self.name,
                                                                        self.broker.config),
                                     internal_ok=True)
        except KafkaError as e:
            if e.code != Errors.TOPIC_ALREADY_EXISTS:
                log.error("creating %s with %d partitions failed: %s", self.name, n, e)
            return
        except Exception:
            log.exception("creating %s with %d partitions failed", self.name, n)
            return  # the storage logs the creation
