"""The distributed herder: workers in a group share connectors and tasks through topics.

``DistributedHerder(config, plugins, offsets=None, *, rest_client=None,
worker_factory=None)``: ``config`` a distributed ``WorkerConfig``; ``offsets`` defaults to
``offset_store.KafkaOffsetStore(config)``; the herder builds its status store
(``status_log.KafkaStatusStore`` on ``status.storage.topic``), its ``config_log.ConfigLog``
on ``config.storage.topic``, its ``worker.Worker`` (``worker_factory``: same arguments)
and its ``membership.WorkerGroupMember`` in ``group.id`` (``session.timeout.ms``,
``heartbeat.interval.ms``, ``rebalance.timeout.ms``). ``rest_client`` (``rest.RestClient``)
carries task configs to the leader.

One writer per fact, as Kafka: the group's **leader** writes the config topic (a REST
write waits for a rebalance under way to end, up to min(``rebalance.timeout.ms``, 60 s),
as Kafka's queue of herder requests does; reaching another worker it raises
``NotLeaderError(leader_url)`` and the REST layer forwards it); **every** worker, the
leader included, changes what it runs only from what it reads back from the topic and
from its assignment:

- ``start()`` starts the offset, status and config stores (each read to its end), then
  joins the group and waits (up to ``rebalance.timeout.ms``) for a first assignment.
- Rebalances are eager: before each join the worker stops every task and connector it
  runs (their statuses are flushed), then runs what the leader assigned (the round robin
  of ``assignor``) once it has read the config topic up to the assignment's offset (else
  it rejoins). The leader assigns from its own view read to the end; a member ahead of it
  gets CONFIG_MISMATCH and rejoins. A connector or task-configs record at or past the
  assignment's config offset (written after the leader assigned), read before or while
  the assignment is applied, makes the worker ask for another rebalance.
- Config records read after the assignment's offset are applied as Kafka does: a
  connector added or removed, or a connector's task count changed, makes the worker ask
  for a rebalance; a changed config restarts the connector where it runs and the
  connector's tasks where they run (again if new task configs are committed); target states pause/resume/stop what runs here;
  ``restart-connector-*`` requests restart what runs here (``onlyFailed``: only FAILED ones).
- The worker running a connector asks it for task configs (at start, on
  ``request_task_reconfiguration``, on resume) and, when they differ from the committed
  ones, hands them to the leader (``put_task_configs`` locally, else
  ``POST {leader}/connectors/{name}/tasks``, retried while it still runs the connector).
- STOPPED (``stop_connector``): the leader commits zero task configs, then the target
  state, holding the lock its task-config commits take, so a connector's answer to the
  zero configs is judged after both (and dropped as STOPPED); the connector's owner stops
  it and reports STOPPED.
- ``restart_task`` runs where the task does: the leader knows the owners from the
  assignment it made and sends the request there (``NotLeaderError(owner_url)``).
- KIP-618 zombie fencing (``exactly.once.source.support=enabled``): after committing new
  task configs of a source connector, the leader fences the transactional producers of
  every task of the previous generation (``fencing.fence_producers`` on
  ``<group.id>-<connector>-<task>`` for task < the last ``tasks-fencing-<connector>``
  record's count), then writes ``tasks-fencing-<connector>`` ``{"task-count": n}``. A
  task of a connector pending fencing (``ConfigState.pending_fencing``) does not start
  until that record is read back; a fencing that failed (or a leader that died before
  writing it) is retried by the leader's reconcile loop. As Kafka, a generation of zero
  tasks (STOPPED) is not fenced until tasks are to start again.
- ``stop()`` stops the worker's tasks and connectors, leaves the group (the others
  rebalance at once), then stops the stores.

Statuses carry the worker id and the group generation. A worker killed with -9 stops
heartbeating; after ``session.timeout.ms`` the coordinator rebalances and its work is
assigned to the others. Reads (connectors, statuses, configs) answer from this worker's
own replayed view, as Kafka's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from spool.connect.assignor import assign
from spool.connect.config_log import (
    CONNECTOR,
    FENCED,
    REMOVED,
    RESTART,
    TARGET_STATE,
    TASKS,
    Change,
    ConfigLog,
    ConfigState,
)
from spool.connect.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from spool.connect.herder import ConnectRestError, NotLeaderError, TaskId, not_found
from spool.connect.herder_common import BaseHerder, client_security
from spool.connect.herder_offsets import ALTERED, RESET
from spool.connect.herder_standalone import tasks_max
from spool.connect.membership import WorkerGroupMember
from spool.connect.status_log import KafkaStatusStore

log = logging.getLogger("spool.connect")


_TOPOLOGY = (CONNECTOR, REMOVED, TASKS)  # what an assignment is computed from


def _int(config: Any, key: str, default: int) -> int:
    v = config.get(key)
    return default if v is None else int(v)


class DistributedHerder(BaseHerder):
    """A worker of a Connect cluster (module doc)."""

    def __init__(self, config: Any, plugins: Any, offsets: Any = None, *,
                 rest_client: Any = None,
                 worker_factory: Callable[..., Any] | None = None) -> None:
        if offsets is None:
            from spool.connect.offset_store import KafkaOffsetStore
            offsets = KafkaOffsetStore(config)
        internal = config.internal_client_config()
        statuses = KafkaStatusStore(
            internal, config.get("status.storage.topic"),
            partitions=_int(config, "status.storage.partitions", 5),
            replication_factor=_int(config, "status.storage.replication.factor", -1))
        super().__init__(config, plugins, offsets, statuses)
        self.config_log = ConfigLog(
            internal, config.get("config.storage.topic"), self._on_config_change,
            replication_factor=_int(config, "config.storage.replication.factor", -1))
        if worker_factory is None:
            from spool.connect.worker import Worker
            worker_factory = Worker
        self.worker = worker_factory(config, plugins, offsets, self.listener)
        self.url = config.rest_url
        self.rest_client = rest_client
        self.member = WorkerGroupMember(
            list(config.get("bootstrap.servers")), config.get("group.id"),
            metadata=self._metadata, on_revoke=self._revoke, on_assign=self._assign,
            on_assigned=self._assigned,
            session_timeout_ms=_int(config, "session.timeout.ms", 10000),
            rebalance_timeout_ms=_int(config, "rebalance.timeout.ms", 60000),
            heartbeat_interval_ms=_int(config, "heartbeat.interval.ms", 3000),
            client_id=f"connect-{self.worker_id}", security=client_security(config))
        self._sync_timeout = _int(config, "worker.sync.timeout.ms", 3000) / 1000
        self._write_wait = min(60.0, self.member.rebalance_timeout_ms / 1000)
        self._assignment: ConnectAssignment | None = None
        self._owners: dict[object, str] = {}  # leader only: connector/TaskId -> worker URL
        self._known: dict[str, int] = {}  # connectors and task counts the assignment knew
        self._applied_offset = 0
        self._topology_offset = -1  # the last connector/task-configs record read
        self._lock = asyncio.Lock()
        self._changes: asyncio.Queue[tuple[int, list[Change]]] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._joined = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._closing = False
        self._sending: dict[str, list[dict[str, str]]] = {}  # task configs on their way
        self._attempted: set[str] = set()  # connectors started (or tried) since assigned
        self._reconcile_s = max(1.0, _int(config, "heartbeat.interval.ms", 3000) / 1000)
        self._eos = str(config.get("exactly.once.source.support") or "").lower() == "enabled"
        self._fence_lock = asyncio.Lock()  # leader: task config commits and their fencing
        self._fencing: set[str] = set()  # leader: fencings the reconcile loop started

    def _state(self) -> ConfigState:
        return self.config_log.snapshot()

    # ---- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.offsets.start)
        await asyncio.to_thread(self.statuses.start)
        await asyncio.to_thread(self.config_log.start)
        self._spawn(self._process_changes())
        self._spawn(self._reconcile_loop())
        self.member.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._joined.wait(), self.member.rebalance_timeout_ms / 1000)

    async def stop(self) -> None:
        self._closing = True
        await self.member.stop(leave=True)  # revokes: stops every task and connector
        for t in list(self._tasks):
            t.cancel()
        await asyncio.to_thread(self.worker.stop)  # whatever a cancelled revoke left
        for stop in (self.config_log.stop, self.statuses.stop, self.offsets.stop):
            with contextlib.suppress(Exception):
                await asyncio.to_thread(stop)

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- the group

    def _metadata(self) -> bytes:
        return encode_metadata(WorkerState(self.url, self.config_log.offset))

    async def _revoke(self) -> None:
        self._joined.clear()
        async with self._lock:
            self._assignment = None
            self._attempted.clear()
            await asyncio.to_thread(self.worker.stop)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.statuses.flush)

    async def _assign(self, leader: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        states = {m: decode_metadata(md) for m, md in members}
        await asyncio.to_thread(self.config_log.read_to_end)
        snap = self.config_log.snapshot()
        leader_url = states[leader].url
        if snap.offset < max(s.config_offset for s in states.values()):
            log.warning("leader behind a member's config offset; asking all to rejoin")
            bad = ConnectAssignment(CONFIG_MISMATCH, leader, leader_url, snap.offset)
            return {m: encode_assignment(bad) for m in states}
        plan = assign(states, snap.connectors,
                      {n: snap.task_count(n) for n in snap.connectors})
        self._owners = {}
        for m, (cs, ts) in plan.items():
            for x in (*cs, *ts):
                self._owners[x] = states[m].url
        return {m: encode_assignment(ConnectAssignment(0, leader, leader_url, snap.offset, cs, ts))
                for m, (cs, ts) in plan.items()}

    async def _assigned(self, data: bytes, generation: int) -> None:
        a = decode_assignment(data)
        async with self._lock:
            if a.failed:
                await asyncio.to_thread(self.config_log.read_to_end)
                self.member.request_rejoin()
                return
            if self.config_log.offset < a.config_offset:
                try:
                    await asyncio.to_thread(self.config_log.read_to_end, self._sync_timeout)
                except TimeoutError:
                    pass
                if self.config_log.offset < a.config_offset:
                    self.member.request_rejoin()
                    return
            self._generation = generation
            self._assignment = a
            snap = self.config_log.snapshot()
            log.info("generation %d: running connectors %s, tasks %s (config offset %d)",
                     generation, a.connectors, [str(t) for t in a.tasks], snap.offset)
            self._applied_offset = snap.offset
            self._known = {n: snap.task_count(n) for n in snap.connectors}
            if self._topology_offset >= a.config_offset:
                # read here after the leader assigned: connectors or tasks the assignment
                # does not have, and nothing else would notice (_known includes them)
                log.info("connector or task configs after the assignment's config offset "
                         "%d; rebalancing", a.config_offset)
                self.member.request_rejoin()
            for name in a.connectors:
                if name in snap.connectors:
                    await self._start_connector(name, snap)
            for t in a.tasks:
                await self._start_task(t, snap)
            self._joined.set()

    async def _leader_wait(self) -> ConnectAssignment:
        """The assignment, once no rebalance is under way (REST writes wait for it, as
        Kafka's queue of herder requests does), when this worker leads; NotLeaderError."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._joined.wait(), self._write_wait)
        return self._leader()

    def _leader(self) -> ConnectAssignment:
        a = self._assignment
        if a is None:
            raise NotLeaderError(None)
        if a.leader != self.member.member_id:
            raise NotLeaderError(a.leader_url)
        return a

    # ---- running things (callers hold the lock)

    async def _start_connector(self, name: str, snap: ConfigState) -> None:
        target = snap.target_state(name)
        if target == "STOPPED":
            self.listener.connector_status(name, "STOPPED")
            return
        self._attempted.add(name)
        try:
            await asyncio.to_thread(self.worker.start_connector, name, snap.connectors[name],
                                    target, self._on_reconfigure)
        except Exception as e:  # noqa: BLE001 - reported; the rest of the assignment runs
            log.error("connector %s did not start: %s", name, e)
            self.listener.connector_status(name, "FAILED", str(e))
            return
        if target == "STARTED":
            await self._publish_tasks(name, snap)

    async def _start_task(self, t: TaskId, snap: ConfigState) -> None:
        props, tc = snap.connectors.get(t.connector), snap.task_config(t)
        if props is None or tc is None or snap.target_state(t.connector) == "STOPPED":
            return
        if self._needs_fencing(t.connector, snap):
            log.info("task %s waits for the fencing of its connector's previous tasks", t)
            return
        try:
            await asyncio.to_thread(self.worker.start_task, t, props, tc,
                                    snap.target_state(t.connector))
        except Exception as e:  # noqa: BLE001 - reported, the others still start
            log.error("task %s did not start: %s", t, e)
            self.listener.task_status(t, "FAILED", str(e))

    async def _stop_connector(self, name: str) -> None:
        self._attempted.discard(name)
        if name in self.worker.connectors():
            await asyncio.to_thread(self.worker.stop_connector, name)

    async def _stop_tasks(self, ids: list[TaskId]) -> None:
        running = self.worker.tasks()
        ids = [t for t in ids if t in running]
        if ids:
            await asyncio.to_thread(self.worker.stop_tasks, ids)

    def _mine(self, name: str) -> tuple[bool, list[TaskId]]:
        a = self._assignment
        if a is None:
            return False, []
        return name in a.connectors, [t for t in a.tasks if t.connector == name]

    async def _publish_tasks(self, name: str, snap: ConfigState) -> None:
        """Ask the connector for task configs; hand changed ones to the leader."""
        props = snap.connectors.get(name)
        if props is None:
            return
        try:
            configs = await asyncio.to_thread(self.worker.connector_task_configs, name,
                                              tasks_max(props))
        except Exception as e:  # noqa: BLE001 - its status says why
            log.warning("connector %s gave no task configs: %s", name, e)
            return
        if name not in snap.inconsistent and configs == snap.tasks.get(name):
            return
        if self._sending.get(name) == configs:
            return  # already on its way
        log.info("connector %s: %d new task configs for the leader", name, len(configs))
        self._sending[name] = configs
        task = self._spawn(self._send_task_configs(name, configs))
        task.add_done_callback(lambda _t: self._sending.pop(name, None)
                               if self._sending.get(name) is configs else None)

    async def _send_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        for attempt in range(30):
            if self._closing:
                return
            a = self._assignment
            if a is not None and name not in a.connectors:
                return  # no longer ours
            try:
                if a is not None and a.leader == self.member.member_id:
                    await self.put_task_configs(name, configs)
                    return
                if a is not None:
                    status, body = await self._post(f"{a.leader_url.rstrip('/')}/connectors/"
                                                    f"{name}/tasks", configs)
                    if status < 300:
                        return
                    log.info("leader refused task configs of %s: %s %s", name, status, body)
            except Exception as e:  # noqa: BLE001 - retried
                log.info("task configs of %s not delivered yet: %s", name, e)
            await asyncio.sleep(min(5.0, 0.25 * (attempt + 1)))
        log.error("gave up handing the task configs of %s to the leader", name)

    async def _post(self, url: str, body: Any) -> tuple[int, Any]:
        if self.rest_client is not None:
            return await self.rest_client.request("POST", url, body)
        import aiohttp
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s, \
                s.post(url, json=body) as r:
            return r.status, await r.text()

    def _on_reconfigure(self, name: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._spawn, self._reconfigure(name))

    async def _reconfigure(self, name: str) -> None:
        async with self._lock:
            if self._mine(name)[0] and name in self.worker.connectors():
                await self._publish_tasks(name, self.config_log.snapshot())

    # ---- config changes read back from the topic

    def _on_config_change(self, changes: list[Change], offset: int) -> None:
        if any(ch.kind in _TOPOLOGY for ch in changes):
            self._topology_offset = max(self._topology_offset, offset)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._changes.put_nowait, (offset, changes))

    async def _process_changes(self) -> None:
        while not self._closing:  # not only cancelled: 3.11's wait_for may drop that
            offset, changes = await self._changes.get()
            try:
                async with self._lock:
                    a = self._assignment
                    if a is not None and offset >= self._applied_offset:
                        await self._apply(changes)
                    elif a is not None and offset >= a.config_offset and any(
                            ch.kind in _TOPOLOGY for ch in changes):
                        log.info("config changes %s at %d: after the assignment's config "
                                 "offset %d; rebalancing", changes, offset, a.config_offset)
                        self.member.request_rejoin()
                    else:
                        log.debug("config changes %s at %d: left to the assignment", changes,
                                  offset)
            except Exception:  # noqa: BLE001 - one bad change must not stop the others
                log.exception("applying config changes %s failed", changes)

    async def _apply(self, changes: list[Change]) -> None:
        snap = self.config_log.snapshot()
        for ch in changes:
            log.debug("config change %s", ch)
            name = ch.connector
            own_conn, own_tasks = self._mine(name)
            if ch.kind == REMOVED:
                await self._stop_tasks(own_tasks)
                for t in own_tasks:
                    self.statuses.remove_task(t)
                if own_conn:
                    await self._stop_connector(name)
                    await asyncio.to_thread(self.statuses.remove_connector, name, 0)
                self._rebalance_if(name in self._known)
            elif ch.kind == CONNECTOR:
                if name not in self._known:
                    self._rebalance_if(True)
                elif name in snap.connectors:
                    if own_conn:
                        await self._stop_connector(name)
                        await self._start_connector(name, snap)
                    for t in own_tasks:  # new converters, clients... even if their own
                        await self._stop_tasks([t])  # configs come out the same
                        await self._start_task(t, snap)
            elif ch.kind == TASKS:
                if snap.task_count(name) != self._known.get(name):
                    self._rebalance_if(True)
                else:
                    for t in own_tasks:
                        await self._stop_tasks([t])
                        await self._start_task(t, snap)
            elif ch.kind == TARGET_STATE:
                await self._target_state(name, snap, own_conn, own_tasks)
            elif ch.kind == RESTART:
                await self._restart(name, snap, own_conn, own_tasks, *ch.detail)
            elif ch.kind == FENCED:
                running = self.worker.tasks()
                for t in own_tasks:
                    if t not in running:
                        await self._start_task(t, snap)

    async def _reconcile_loop(self) -> None:
        """Every heartbeat interval, make what runs here what the config topic and the
        assignment say, whatever event was missed: an assigned connector or task that
        should run and does not is started; a running connector's task configs that
        differ from the committed ones are handed to the leader; a committed task count
        the assignment did not know asks for a rebalance."""
        while not self._closing:
            await asyncio.sleep(self._reconcile_s)
            try:
                async with self._lock:
                    if self._assignment is not None:
                        await self._reconcile()
            except Exception:  # noqa: BLE001 - next time
                log.exception("reconciling the assignment failed")

    async def _reconcile(self) -> None:
        a = self._assignment
        assert a is not None
        snap = self.config_log.snapshot()
        if snap.offset < self._applied_offset:
            return
        if set(snap.connectors) != set(self._known) or any(
                snap.task_count(n) != self._known[n] for n in snap.connectors):
            log.info("the connectors or their task counts changed since the assignment; "
                     "rebalancing")
            self.member.request_rejoin()
            return
        if a.leader == self.member.member_id:
            for name in snap.pending_fencing - self._fencing:
                if self._needs_fencing(name, snap):
                    self._fencing.add(name)
                    self._spawn(self._fence_zombies(name)).add_done_callback(
                        lambda _t, n=name: self._fencing.discard(n))
        running = self.worker.connectors()
        for name in a.connectors:
            target = snap.target_state(name)
            if target == "STOPPED" or name in self._attempted:
                continue
            if name not in running:
                log.info("connector %s should run here: starting it", name)
                await self._start_connector(name, snap)
            elif target == "STARTED" and self.worker.connector_running(name):
                await self._publish_tasks(name, snap)
        tasks = self.worker.tasks()
        for t in a.tasks:
            if t not in tasks and snap.task_config(t) is not None \
                    and snap.target_state(t.connector) != "STOPPED":
                log.info("task %s should run here: starting it", t)
                await self._start_task(t, snap)

    def _rebalance_if(self, needed: bool) -> None:
        if needed:
            self.member.request_rejoin()

    async def _target_state(self, name: str, snap: ConfigState, own_conn: bool,
                            own_tasks: list[TaskId]) -> None:
        target = snap.target_state(name)
        if target == "STOPPED":
            await self._stop_tasks(own_tasks)
            if own_conn:
                await self._stop_connector(name)
                self.listener.connector_status(name, "STOPPED")
            return
        if own_conn and name not in self.worker.connectors():  # was STOPPED
            await self._start_connector(name, snap)
            return
        if own_conn or own_tasks:
            await asyncio.to_thread(self.worker.set_target_state, name, target)
        if own_conn and target == "STARTED":
            await self._publish_tasks(name, snap)

    async def _restart(self, name: str, snap: ConfigState, own_conn: bool,
                       own_tasks: list[TaskId], include_tasks: bool, only_failed: bool) -> None:
        if snap.target_state(name) == "STOPPED":
            return
        failed = self._failed(name)
        if own_conn and (not only_failed or name in failed):
            self.listener.connector_status(name, "RESTARTING")
            await self._stop_connector(name)
            await self._start_connector(name, snap)
        if include_tasks:
            for t in own_tasks:
                if not only_failed or t in failed:
                    self.listener.task_status(t, "RESTARTING")
                    await self._stop_tasks([t])
                    await self._start_task(t, snap)

    def _failed(self, name: str) -> set[object]:
        out: set[object] = {t for t, s in self.statuses.tasks(name).items()
                            if s.get("state") == "FAILED"}
        c = self.statuses.connector(name)
        if c is not None and c.get("state") == "FAILED":
            out.add(name)
        return out

    # ---- REST writes (the leader's)

    async def _write(self, fn: Callable[..., None], *args: Any) -> None:
        await asyncio.to_thread(fn, *args)
        await asyncio.to_thread(self.config_log.read_to_end)

    async def put_connector_config(self, name: str, config: dict[str, str], *,
                                   allow_replace: bool,
                                   initial_state: str = "STARTED") -> tuple[bool, dict[str, Any]]:
        await self._leader_wait()
        config = await self._validated(name, config)
        await self._leader_wait()
        exists = name in self._state().connectors
        if exists and not allow_replace:
            raise ConnectRestError(409, f"Connector {name} already exists")
        await self._write(self.config_log.put_connector_config, name, config,
                          None if exists else initial_state)
        return not exists, await self.connector_info(name)

    async def patch_connector_config(self, name: str,
                                     patch: dict[str, str | None]) -> dict[str, Any]:
        await self._leader_wait()
        return await super().patch_connector_config(name, patch)

    async def delete_connector(self, name: str) -> None:
        await self._leader_wait()
        self._props(name)
        await self._write(self.config_log.remove_connector_config, name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        await self._leader_wait()
        # Under the lock stop_connector holds across its two writes: a connector that saw
        # the stop's zero task configs before its STOPPED may answer with its configs in
        # between, which would bring the tasks back to a STOPPED connector.
        async with self._fence_lock:
            # Judged on the topic read to its end: the sender decided from what it read,
            # which the leader's own reader may not have applied yet (a resume the leader
            # wrote and its sender saw first would look STOPPED here: the configs dropped,
            # nothing rebalancing, the connector running without tasks).
            await asyncio.to_thread(self.config_log.read_to_end)
            snap = self._state()
            if name not in snap.connectors:
                raise not_found(name)
            if name not in snap.inconsistent and snap.tasks.get(name) == configs:
                return
            if snap.target_state(name) == "STOPPED" and configs:
                log.info("connector %s is STOPPED: its %d task configs are not written",
                         name, len(configs))
                return  # a late answer from before the stop: STOPPED keeps zero tasks
            await self._write(self.config_log.put_task_configs, name, configs)
            log.info("connector %s: %d task configs written", name, len(configs))
            await self._fence_zombies(name, locked=True)

    # ---- KIP-618 zombie fencing (the leader's)

    def _needs_fencing(self, name: str, snap: ConfigState) -> bool:
        props = snap.connectors.get(name)
        return (self._eos and props is not None and name in snap.pending_fencing
                and snap.task_count(name) > 0 and self._kind(props) == "source")

    async def _fence_zombies(self, name: str, *, locked: bool = False) -> None:
        """Fence the previous generation's producers, then record the new task count."""
        if not locked:
            async with self._fence_lock:
                return await self._fence_zombies(name, locked=True)
        from spool.connect.fencing import fence_producers, transactional_ids
        await asyncio.to_thread(self.config_log.read_to_end)
        snap = self.config_log.snapshot()
        if not self._needs_fencing(name, snap):
            return
        previous = snap.task_count_records.get(name, 0)
        ids = transactional_ids(self.config.get("group.id"), name, previous)
        try:
            await fence_producers(list(self.config.get("bootstrap.servers")), ids,
                                  security=client_security(self.config),
                                  client_id=f"connect-{self.worker_id}-fencing")
            await self._write(self.config_log.put_task_count_record, name,
                              snap.task_count(name))
        except Exception as e:  # noqa: BLE001 - the reconcile loop tries again
            log.error("zombie fencing of connector %s failed (its tasks wait): %s", name, e)
            return
        log.info("connector %s: fenced the producers of its %d previous tasks; %d tasks may "
                 "start", name, previous, snap.task_count(name))

    async def restart_connector(self, name: str, *, include_tasks: bool = False,
                                only_failed: bool = False) -> dict[str, Any] | None:
        await self._leader_wait()
        self._props(name)
        answer = None
        if include_tasks or only_failed:
            try:
                answer = await self._restart_status(name)
            except ConnectRestError:  # as Kafka: the request is written all the same
                await self._write(self.config_log.put_restart_request, name, include_tasks,
                                  only_failed)
                raise
            if not only_failed or answer["connector"]["state"] == "FAILED":
                answer["connector"]["state"] = "RESTARTING"
            for t in answer["tasks"]:
                if include_tasks and (not only_failed or t["state"] == "FAILED"):
                    t["state"] = "RESTARTING"
        await self._write(self.config_log.put_restart_request, name, include_tasks, only_failed)
        return answer

    async def restart_task(self, task: TaskId) -> None:
        snap = self._state()
        if task.connector not in snap.connectors:
            raise not_found(task.connector)
        if snap.task_config(task) is None:
            raise ConnectRestError(404, f"Task {task} not found")
        async with self._lock:
            if task in self._mine(task.connector)[1]:
                await self._stop_tasks([task])
                await self._start_task(task, self.config_log.snapshot())
                return
        await self._leader_wait()  # only the leader knows where each task runs
        owner = self._owners.get(task)
        if owner is None or owner == self.url:
            raise ConnectRestError(409, f"Task {task} is not assigned to any worker; a "
                                        "rebalance is likely underway")
        raise NotLeaderError(owner)

    async def pause_connector(self, name: str) -> None:
        await self._leader_wait()
        self._props(name)
        await self._write(self.config_log.put_target_state, name, "PAUSED")

    async def resume_connector(self, name: str) -> None:
        await self._leader_wait()
        self._props(name)
        await self._write(self.config_log.put_target_state, name, "STARTED")

    async def stop_connector(self, name: str) -> None:
        await self._leader_wait()
        self._props(name)
        async with self._fence_lock:  # no task configs committed between the two writes
            await self._write(self.config_log.put_task_configs, name, [])
            await self._write(self.config_log.put_target_state, name, "STOPPED")

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        await self._leader_wait()
        offsets = self._check_offsets_body(offsets)
        props = self._check_stopped(name)
        await asyncio.to_thread(self._alter_sync, name, props, offsets)
        return ALTERED

    async def reset_connector_offsets(self, name: str) -> str:
        await self._leader_wait()
        props = self._check_stopped(name)
        await asyncio.to_thread(self._alter_sync, name, props, None)
        return RESET

