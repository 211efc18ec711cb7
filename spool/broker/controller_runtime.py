"""``ControllerRuntime``: the QuorumController run by a controller node (Kafka's QuorumController
event loop).

Every controller node replays the committed metadata log into its own
``QuorumController`` (it is a ``RaftListener`` of the node's ``RaftDriver``:
snapshots, committed records, leader changes, in log order). The one whose
Raft core leads the quorum is the **active controller**; it alone writes:

    write(op)   one at a time (an asyncio lock): compute ``op(controller, next_offset,
                now_ms)`` -> ControllerResult from the committed image; append its
                records through Raft as one batch; wait until they are committed and
                replayed; return the reply.

A write on a node that is not the active controller, or whose leadership
moves before its records commit, raises ``KafkaError(NOT_CONTROLLER)`` (the
handlers answer Kafka's NOT_CONTROLLER; the records may still commit under
the next leader, as in Kafka, which is why clients retry idempotent admin
operations). Nothing is rolled back: the controller's state only ever
changes by replaying committed records, so losing leadership leaves it
equal to the committed log already; the soft state of broker sessions is
reset by ``activate`` when this node next becomes active.

Becoming active: when the Raft core leads and every committed entry up to
its epoch's LeaderChange has been replayed, the runtime calls
``QuorumController.activate`` (fresh broker sessions; on a new cluster, the
bootstrap records) and starts the periodic tick that fences brokers whose
heartbeats stopped (``broker.session.timeout.ms``).

Leader balancing (``auto.leader.rebalance.enable``, default true): the tick
also runs ``QuorumController.balance_leaders`` once every
``leader.imbalance.check.interval.seconds`` (the first time one interval
after becoming active, as Kafka's deferred schedule), as many writes in a
row as it needs (each moves at most 1,000 leaders, Kafka's
``maxElectionsPerImbalance``). In the same way, every
``unclean.leader.election.interval.ms`` it gives leaderless partitions of
topics that now allow ``unclean.leader.election.enable`` a leader
(``QuorumController.elect_unclean_leaders``).

Snapshots: ``snapshot_values`` gives the image as framed metadata records
(``QuorumController.snapshot_records``), the driver's snapshot source.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from spool.cluster.controller import QuorumController
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.cluster.raft.messages import SnapshotId
from spool.cluster.raft.store import LogEntry
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.metadata_records import decode_record, encode_record

log = logging.getLogger("spool.controller")

TICK_MS = 500  # how often the active controller looks for expired broker sessions
MAX_ELECTIONS_PER_IMBALANCE = 1000
WRITE_TIMEOUT_S = 30.0
ACTIVATION_WAIT_MS = 2000

Op = Callable[[QuorumController, int, int], ControllerResult]


class ControllerRuntime:
    """The controller of one node over its Raft driver (module doc)."""

    def __init__(self, driver, config: ControllerConfig, *, cluster_id: str | None = None
                 ) -> None:
        self.driver = driver
        self.node_id = driver.node_id
        self.controller = QuorumController(config, cluster_id=cluster_id)
        self._lock = asyncio.Lock()
        self._active_epoch = -1  # the epoch this node is the active controller in (-1: not)
        self._activating = False
        self._tick_task: asyncio.Task | None = None
        # periodic writes (name -> next run, ms); empty until this node is active
        self._next_run_ms: dict[str, int] = {}
        self._stopped = False
        driver.add_listener(self)
        driver.set_snapshot_source(self.snapshot_values)

    @property
    def active(self) -> bool:
        return self._active_epoch >= 0 and self._active_epoch == self.driver.epoch \
            and self.driver.is_leader

    @property
    def active_controller_id(self) -> int:
        """The quorum leader as this node knows it (-1: none)."""
        return self.driver.leader_id

    # ---- RaftListener

    def handle_snapshot(self, snapshot_id: SnapshotId, values: list[bytes]) -> None:
        self.controller.load_snapshot((decode_record(v)[0] for v in values),
                                      snapshot_id.end_offset - 1)
        self._maybe_activate(snapshot_id.end_offset)

    def handle_commit(self, entries: list[LogEntry]) -> None:
        c = self.controller
        for e in entries:
            if e.value is not None:
                c.replay(decode_record(e.value)[0], e.offset)
        if entries:
            self._maybe_activate(entries[-1].offset + 1)

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        if self._active_epoch >= 0 and (leader_id != self.node_id or epoch != self._active_epoch):
            log.info("controller %d: no longer active (epoch %d, leader %d)", self.node_id,
                     epoch, leader_id)
            self._active_epoch = -1
        self._maybe_activate(self.driver.applied_offset)

    def snapshot_values(self) -> list[bytes]:
        return [encode_record(r) for r in self.controller.snapshot_records()]

    # ---- becoming active

    def _maybe_activate(self, applied: int) -> None:
        """``applied``: every entry below it is replayed."""
        d = self.driver
        if self._stopped or self._activating or self._active_epoch == d.epoch \
                or not d.is_leader or d.node is None:
            return
        start = d.node.epoch_start_offset
        if start < 0 or applied <= start:
            return  # not every committed entry before our epoch is replayed yet
        self._activating = True
        asyncio.ensure_future(self._activate(d.epoch))

    async def _activate(self, epoch: int) -> None:
        try:
            async with self._lock:
                if self.driver.epoch != epoch or not self.driver.is_leader:
                    return
                now = self.driver.now_ms()
                result = self.controller.activate(now)
                if result.records:
                    await self._commit(result.records, epoch)
                self._active_epoch = epoch
                self._next_run_ms = {name: now + interval
                                     for name, interval, _op in self._periodic()}
            log.info("controller %d: active in epoch %d (log end %d)", self.node_id, epoch,
                     self.driver.log.end_offset)
            if self._tick_task is None or self._tick_task.done():
                self._tick_task = asyncio.ensure_future(self._tick_loop())
        except KafkaError as e:
            log.info("controller %d: not activated in epoch %d: %s", self.node_id, epoch, e)
        except Exception:  # noqa: BLE001 - logged; the next leader change retries
            log.exception("controller %d: activation failed", self.node_id)
        finally:
            self._activating = False

    # ---- writes

    async def write(self, op: Op) -> Any:
        """Run one write (module doc); returns its reply. NOT_CONTROLLER when not active."""
        await self._wait_activation()
        async with self._lock:
            if not self.active:
                raise KafkaError(Errors.NOT_CONTROLLER,
                                 f"node {self.node_id} is not the active controller "
                                 f"(leader {self.driver.leader_id})")
            epoch = self._active_epoch
            result = op(self.controller, self.driver.log.end_offset, self.driver.now_ms())
            if result.records:
                await self._commit(result.records, epoch)
            return result.reply

    async def _wait_activation(self) -> None:
        """A new leader becomes active once its LeaderChange is committed and replayed
        (milliseconds): a write arriving meanwhile waits for it rather than bouncing."""
        deadline = self.driver.now_ms() + ACTIVATION_WAIT_MS
        while (not self.active and self.driver.is_leader and not self._stopped
               and self.driver.now_ms() < deadline):
            await asyncio.sleep(0.01)

    async def _commit(self, records: list, epoch: int) -> None:
        values = [encode_record(r) for r in records]
        last = await self.driver.append(values)
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await self.driver.wait_applied(last, epoch)
        except TimeoutError as e:
            raise KafkaError(Errors.NOT_CONTROLLER,
                             f"offset {last} not committed within {WRITE_TIMEOUT_S} s") from e

    async def _tick_loop(self) -> None:
        while not self._stopped:
            await asyncio.sleep(TICK_MS / 1000)
            if not self.active:
                continue
            try:
                fenced = await self.write(lambda c, _offset, now: c.tick(now))
                if fenced:
                    log.info("controller %d: fenced brokers %s (session expired)",
                             self.node_id, fenced)
            except KafkaError:
                continue
            except Exception:  # noqa: BLE001 - logged; the next tick tries again
                log.exception("controller %d: tick failed", self.node_id)
            for name, interval, op in self._periodic():
                await self._maybe_run(name, interval, op)

    def _periodic(self) -> list[tuple[str, int, Op]]:
        """(name, interval ms, op) of the periodic writes; an op's reply says whether
        to run it again at once (more remains)."""
        config = self.controller.config
        jobs: list[tuple[str, int, Op]] = [(
            "unclean elections", config.unclean_leader_election_interval_ms,
            lambda c, _offset, _now: c.elect_unclean_leaders(MAX_ELECTIONS_PER_IMBALANCE))]
        if config.auto_leader_rebalance_enable:
            jobs.append(("leader balancing", config.leader_imbalance_check_interval_ms,
                         lambda c, _offset, _now: c.balance_leaders(
                             MAX_ELECTIONS_PER_IMBALANCE)))
        return jobs

    async def _maybe_run(self, name: str, interval_ms: int, op: Op) -> None:
        now = self.driver.now_ms()
        due = self._next_run_ms.get(name)
        if due is None or now < due or not self.active:
            return
        self._next_run_ms[name] = now + interval_ms
        try:
            more = True
            while more and self.active and not self._stopped:
                more = await self.write(op)
        except KafkaError:
            return
        except Exception:  # noqa: BLE001 - logged; the next interval tries again
            log.exception("controller %d: %s failed", self.node_id, name)

    async def shutdown(self) -> None:
        self._stopped = True
        self._active_epoch = -1
        if self._tick_task is not None:
            self._tick_task.cancel()
            with contextlib.suppress(BaseException):
                await self._tick_task
