"""The standalone herder: one process runs every connector; nothing is shared.

``StandaloneHerder(config, plugins, offsets=None, connector_configs=(), worker_factory=None)``:

- ``config`` a ``worker_config.WorkerConfig`` (standalone), ``plugins`` a
  ``plugins.Plugins``, ``offsets`` an offset store (default: the
  ``offset_store.FileOffsetStore`` on ``offset.storage.file.filename``); ``connector_configs`` the connectors given on the
  command line (dicts, see ``load_connector_file``), created by ``start()`` (an invalid
  one makes ``start()`` raise the 400 ``ConnectRestError``, as Kafka's
  ``connect-standalone`` refuses to start).
- The herder builds its ``worker.Worker(config, plugins, offsets, self.listener)``
  (``worker_factory`` replaces the class: same arguments); ``self.listener`` records
  statuses in memory with this worker's id (``worker_id``, ``host:port``).
- ``start()`` starts the offset store, then creates the command line's connectors;
  ``stop()`` stops the worker (every task and connector), then the offset store.

Configs live in memory (a ``config_log.ConfigState`` changed as the config topic's
records would change it), so a restart starts only the command line's connectors, as
Kafka's. Every change is serialised by one ``asyncio.Lock``; the worker's blocking calls
run in ``asyncio.to_thread``. Lifecycle of a connector, as Kafka's ``StandaloneHerder``:
create/replace -> validate (400 with Kafka's message; nothing starts) -> (replace: stop
its tasks and it) -> start it in its target state -> unless STOPPED, ask it for task
configs (``tasks.max``) and start those tasks. A connector's
``request_task_reconfiguration()`` asks again; changed configs replace the tasks.
``stop`` (STOPPED) stops the tasks and the connector and empties the task configs;
``resume`` from STOPPED starts it again. ``restart`` with ``includeTasks``/``onlyFailed``
answers the statuses with what restarts marked RESTARTING (202) and restarts in the
background. ``put_task_configs`` is refused (400), as Kafka's standalone mode does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from spool.connect.config_log import ConfigState
from spool.connect.herder import ConnectRestError, TaskId
from spool.connect.herder_common import BaseHerder
from spool.connect.herder_offsets import ALTERED, RESET
from spool.connect.status_log import MemoryStatusStore

log = logging.getLogger("spool.connect")


def load_connector_file(path: str | Path) -> dict[str, str]:
    """A connector's config from a ``.properties`` file, or a ``.json`` file holding the
    config itself or ``{"name", "config": {...}}`` (Kafka's create request)."""
    text = Path(path).read_text()
    if str(path).endswith(".json"):
        doc = json.loads(text)
        if isinstance(doc, dict) and isinstance(doc.get("config"), dict):
            cfg = {str(k): str(v) for k, v in doc["config"].items()}
            if doc.get("name"):
                cfg.setdefault("name", str(doc["name"]))
            return cfg
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a JSON object")
        return {str(k): str(v) for k, v in doc.items()}
    from spool.util.properties import parse_properties
    return parse_properties(text)


def tasks_max(props: dict[str, str]) -> int:
    try:
        return max(1, int(props.get("tasks.max", "1")))
    except ValueError:
        return 1


class StandaloneHerder(BaseHerder):
    """One process, configs in memory (module doc)."""

    def __init__(self, config: Any, plugins: Any, offsets: Any = None,
                 connector_configs: Iterable[dict[str, str]] = (), *,
                 worker_factory: Callable[..., Any] | None = None) -> None:
        if offsets is None:
            from spool.connect.offset_store import FileOffsetStore
            offsets = FileOffsetStore(config.get("offset.storage.file.filename"))
        super().__init__(config, plugins, offsets, MemoryStatusStore())
        if worker_factory is None:
            from spool.connect.worker import Worker
            worker_factory = Worker
        self.worker = worker_factory(config, plugins, offsets, self.listener)
        self._image = ConfigState()
        self._lock = asyncio.Lock()
        self._initial = [dict(c) for c in connector_configs]
        self._background: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _state(self) -> ConfigState:
        return self._image

    # ---- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.offsets.start)
        for cfg in self._initial:
            name = cfg.get("name")
            if not name:
                raise ConnectRestError(400, "Connector config is missing 'name'")
            await self.put_connector_config(name, cfg, allow_replace=True)

    async def stop(self) -> None:
        for t in list(self._background):
            t.cancel()
        async with self._lock:
            await asyncio.to_thread(self.worker.stop)
        await asyncio.to_thread(self.offsets.stop)

    # ---- running connectors and tasks (callers hold the lock)

    async def _start_connector(self, name: str) -> None:
        props = self._image.connectors[name]
        target = self._image.target_state(name)
        if target == "STOPPED":
            self.listener.connector_status(name, "STOPPED")
            return
        await asyncio.to_thread(self.worker.start_connector, name, props, target,
                                self._on_reconfigure)
        await self._update_tasks(name)

    async def _update_tasks(self, name: str) -> None:
        props = self._image.connectors.get(name)
        if props is None or self._image.target_state(name) == "STOPPED":
            return
        try:
            configs = await asyncio.to_thread(self.worker.connector_task_configs, name,
                                              tasks_max(props))
        except Exception as e:  # noqa: BLE001 - its status says why; the tasks it had run
            log.warning("connector %s gave no task configs: %s", name, e)
            configs = self._image.tasks.get(name, [])
        if configs != self._image.tasks.get(name):
            await self._stop_tasks(name)
            self._image.tasks[name] = [dict(c) for c in configs]
        running = self.worker.tasks()
        for t in self._image.task_ids(name):  # all of them, or those a replace stopped
            if t not in running:
                await self._start_task(t)

    async def _start_task(self, t: TaskId) -> None:
        await asyncio.to_thread(self.worker.start_task, t, self._image.connectors[t.connector],
                                self._image.task_config(t), self._image.target_state(t.connector))

    async def _stop_tasks(self, name: str, ids: list[TaskId] | None = None) -> None:
        ids = [t for t in self.worker.tasks() if t.connector == name] if ids is None else ids
        if ids:
            await asyncio.to_thread(self.worker.stop_tasks, ids)

    async def _stop_all(self, name: str) -> None:
        await self._stop_tasks(name)
        if name in self.worker.connectors():
            await asyncio.to_thread(self.worker.stop_connector, name)

    def _on_reconfigure(self, name: str) -> None:
        """The connector asked for new task configs (any thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._spawn, self._reconfigure(name))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reconfigure(self, name: str) -> None:
        async with self._lock:
            if name in self._image.connectors:
                await self._update_tasks(name)

    # ---- writes

    async def put_connector_config(self, name: str, config: dict[str, str], *,
                                   allow_replace: bool,
                                   initial_state: str = "STARTED") -> tuple[bool, dict[str, Any]]:
        config = await self._validated(name, config)
        async with self._lock:
            exists = name in self._image.connectors
            if exists and not allow_replace:
                raise ConnectRestError(409, f"Connector {name} already exists")
            if exists:
                await self._stop_all(name)
            else:
                self._image.target_states[name] = initial_state
            self._image.connectors[name] = config
            await self._start_connector(name)
        return not exists, await self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        async with self._lock:
            self._props(name)
            await self._stop_all(name)
            for d in (self._image.connectors, self._image.target_states, self._image.tasks):
                d.pop(name, None)
            self.statuses.remove_connector(name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        raise ConnectRestError(400, "Kafka Connect in standalone mode does not support "
                                    "externally setting task configurations.")

    async def restart_connector(self, name: str, *, include_tasks: bool = False,
                                only_failed: bool = False) -> dict[str, Any] | None:
        self._props(name)
        if not include_tasks and not only_failed:
            async with self._lock:
                await self._restart(name, True, [])
            return None
        status = await self._restart_status(name)
        conn = not only_failed or status["connector"]["state"] == "FAILED"
        tasks = [TaskId(name, t["id"]) for t in status["tasks"]
                 if include_tasks and (not only_failed or t["state"] == "FAILED")]
        if conn:
            status["connector"]["state"] = "RESTARTING"
            self.listener.connector_status(name, "RESTARTING")
        for t in status["tasks"]:
            if TaskId(name, t["id"]) in tasks:
                t["state"] = "RESTARTING"
                self.listener.task_status(TaskId(name, t["id"]), "RESTARTING")
        self._spawn(self._restart_locked(name, conn, tasks))
        return status

    async def _restart_locked(self, name: str, conn: bool, tasks: list[TaskId]) -> None:
        async with self._lock:
            if name in self._image.connectors:
                await self._restart(name, conn, tasks)

    async def _restart(self, name: str, conn: bool, tasks: list[TaskId]) -> None:
        if self._image.target_state(name) == "STOPPED":
            return
        if tasks:
            await self._stop_tasks(name, [t for t in tasks if t in self.worker.tasks()])
        if conn:
            if name in self.worker.connectors():
                await asyncio.to_thread(self.worker.stop_connector, name)
            await asyncio.to_thread(self.worker.start_connector, name,
                                    self._image.connectors[name],
                                    self._image.target_state(name), self._on_reconfigure)
        for t in tasks:
            if self._image.task_config(t) is not None:
                await self._start_task(t)

    async def restart_task(self, task: TaskId) -> None:
        async with self._lock:
            self._props(task.connector)
            if self._image.task_config(task) is None:
                raise ConnectRestError(404, f"Task {task} not found")
            await self._restart(task.connector, False, [task])

    async def pause_connector(self, name: str) -> None:
        await self._set_target(name, "PAUSED")

    async def resume_connector(self, name: str) -> None:
        await self._set_target(name, "STARTED")

    async def stop_connector(self, name: str) -> None:
        await self._set_target(name, "STOPPED")

    async def _set_target(self, name: str, state: str) -> None:
        async with self._lock:
            self._props(name)
            before = self._image.target_state(name)
            self._image.target_states[name] = state
            if state == "STOPPED":
                if before != "STOPPED":
                    await self._stop_all(name)
                    self._image.tasks[name] = []
                self.listener.connector_status(name, "STOPPED")
            elif before == "STOPPED":
                await self._start_connector(name)
            elif before != state:
                await asyncio.to_thread(self.worker.set_target_state, name, state)
                if state == "STARTED":  # a connector created PAUSED has no tasks yet
                    await self._update_tasks(name)

    # ---- KIP-875

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        offsets = self._check_offsets_body(offsets)
        async with self._lock:
            props = self._check_stopped(name)
            await asyncio.to_thread(self._alter_sync, name, props, offsets)
        return ALTERED

    async def reset_connector_offsets(self, name: str) -> str:
        async with self._lock:
            props = self._check_stopped(name)
            await asyncio.to_thread(self._alter_sync, name, props, None)
        return RESET

