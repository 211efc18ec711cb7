"""What both herders share: answers built from a config image and a status store.

``BaseHerder(config, plugins, offsets, statuses)`` implements the read side of
``herder.Herder`` (connector info, statuses, task configs, plugins, validation, KIP-875
offsets, KIP-558 topics) over two things a subclass provides:

- ``_state()``: a ``config_log.ConfigState`` (the standalone herder's own image; the
  distributed herder's replayed copy of ``connect-configs``);
- ``statuses``: a ``status_log.MemoryStatusStore`` or ``KafkaStatusStore``.

``listener`` (a ``StatusRecorder``) is the worker's ``StatusListener``
(``connector_status``, ``task_status``, ``connector_topic``): each status is stored with this
worker's id and the current group generation (``_generation``, -1 standalone), as
Kafka's herders do.

An invalid config is refused with 400 and ``connector_config.invalid_message``
(Kafka's wording).

KIP-875's offsets (list, alter, reset) are ``herder_offsets.OffsetsMixin``'s. Blocking
calls (validation, plugin loading, the admin client, the offset store) run in
``asyncio.to_thread``; nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import version as _dist_version
from typing import Any

from spool.connect import api
from spool.connect.config_log import ConfigState
from spool.connect.connector_config import invalid_message
from spool.connect.herder import ConnectRestError, Herder, TaskId, not_found
from spool.connect.herder_offsets import OffsetsMixin
from spool.connect.status_log import MemoryStatusStore

log = logging.getLogger("spool.connect")

PLUGIN_KINDS = ("connector", "converter", "header_converter", "transformation", "predicate")


class StatusRecorder:
    """The worker's ``StatusListener`` (worker.py's names): each status is stored with the
    herder's worker id and current generation. Called on the worker's threads."""

    def __init__(self, herder: BaseHerder) -> None:
        self.herder = herder

    def _status(self, state: str, trace: str | None) -> dict[str, Any]:
        return {"state": state, "trace": trace, "worker_id": self.herder.worker_id,
                "generation": self.herder._generation}

    def connector_status(self, name: str, state: str, trace: str | None = None) -> None:
        self.herder.statuses.put_connector(name, self._status(state, trace))

    def task_status(self, task_id: TaskId, state: str, trace: str | None = None) -> None:
        self.herder.statuses.put_task(task_id, self._status(state, trace))

    def connector_topic(self, name: str, topic: str) -> None:
        """KIP-558: a task of ``name`` used ``topic`` for the first time on this worker."""
        self.herder.statuses.put_topic(name, topic)


class BaseHerder(OffsetsMixin, Herder):
    """The shared read side and status listener (module doc)."""

    def __init__(self, config: Any, plugins: Any, offsets: Any,
                 statuses: MemoryStatusStore) -> None:
        self.config = config
        self.plugins_ = plugins
        self.offsets = offsets
        self.statuses = statuses
        self.worker_id: str = config.worker_id
        self._generation = -1
        self._cluster_id: str | None = None
        self.listener = StatusRecorder(self)

    def _state(self) -> ConfigState:
        raise NotImplementedError

    # ---- helpers

    def _props(self, name: str) -> dict[str, str]:
        props = self._state().connectors.get(name)
        if props is None:
            raise not_found(name)
        return props

    def _kind(self, props: dict[str, str]) -> str:
        try:
            return self.plugins_.load(props.get("connector.class", ""), "connector").kind \
                or "unknown"
        except Exception:  # noqa: BLE001 - an unloadable class has no type
            return "unknown"

    async def _validated(self, name: str, config: dict[str, str]) -> dict[str, str]:
        config = {**config, "name": config.get("name") or name}
        infos = await asyncio.to_thread(self._validate_sync, config)
        message = invalid_message(infos)
        if message is not None:
            raise ConnectRestError(400, message)
        return config

    def _validate_sync(self, config: dict[str, str]) -> dict[str, Any]:
        from spool.connect import connector_config
        return connector_config.validate(config, self.plugins_, self.config)

    def _fetch_cluster_id(self) -> str | None:
        from confluent_kafka.admin import AdminClient
        try:
            admin = AdminClient(self.config.client_config("admin"))
            return admin.list_topics(timeout=10).cluster_id
        except Exception as e:  # noqa: BLE001 - GET / still answers without it
            log.warning("could not read the Kafka cluster id: %s", e)
            return None

    # ---- reads

    async def cluster_info(self) -> dict[str, Any]:
        if self._cluster_id is None:
            self._cluster_id = await asyncio.to_thread(self._fetch_cluster_id)
        return {"version": _dist_version("spool"), "commit": "unknown",
                "kafka_cluster_id": self._cluster_id}

    async def connectors(self) -> list[str]:
        return sorted(self._state().connectors)

    async def connector_info(self, name: str) -> dict[str, Any]:
        state = self._state()
        props = state.connectors.get(name)
        if props is None:
            raise not_found(name)
        return {"name": name, "config": dict(props),
                "tasks": [t.as_json() for t in state.task_ids(name)],
                "type": self._kind(props)}

    async def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._props(name))

    async def patch_connector_config(self, name: str,
                                     patch: dict[str, str | None]) -> dict[str, Any]:
        merged = dict(self._props(name))
        for k, v in patch.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        _, info = await self.put_connector_config(name, merged, allow_replace=True)
        return info

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        state = self._state()
        if name not in state.connectors:
            raise not_found(name)
        return [{"id": t.as_json(), "config": dict(state.task_config(t) or {})}
                for t in state.task_ids(name)]

    def _status_entry(self, s: dict[str, Any] | None) -> dict[str, Any]:
        if s is None:
            return {"state": "UNASSIGNED", "worker_id": self.worker_id}
        out = {"state": s.get("state", "UNASSIGNED"), "worker_id": s.get("worker_id")}
        if s.get("trace"):
            out["trace"] = s["trace"]
        return out

    async def connector_status(self, name: str) -> dict[str, Any]:
        """Kafka's AbstractHerder.connectorStatus: 404 ``No status found for connector
        <name>`` until the connector's status is known (a connector just created, not yet
        started anywhere) and once it is deleted."""
        state = self._state()
        props = state.connectors.get(name)
        connector = self.statuses.connector(name)
        if props is None or connector is None:
            raise ConnectRestError(404, f"No status found for connector {name}")
        statuses = self.statuses.tasks(name)
        tasks = [{"id": t.task, **self._status_entry(statuses[t])}
                 for t in state.task_ids(name) if t in statuses]
        return {"name": name, "connector": self._status_entry(connector),
                "tasks": tasks, "type": self._kind(props)}

    async def _restart_status(self, name: str) -> dict[str, Any]:
        """The connector's status for a restart's answer (Kafka's buildRestartPlan): 404
        ``Status for connector <name> not found`` when it has none yet."""
        try:
            return await self.connector_status(name)
        except ConnectRestError as e:
            if e.status != 404 or name not in self._state().connectors:
                raise
            raise ConnectRestError(404, f"Status for connector {name} not found") from None

    async def task_status(self, task: TaskId) -> dict[str, Any]:
        state = self._state()
        if task.connector not in state.connectors:
            raise not_found(task.connector)
        s = self.statuses.task(task)
        if s is None or task not in state.task_ids(task.connector):
            raise ConnectRestError(404, f"No status found for task {task}")
        return {"id": task.task, **self._status_entry(s)}

    async def connector_topics(self, name: str) -> dict[str, Any]:
        self._props(name)
        return {name: {"topics": self.statuses.topics(name)}}

    async def reset_connector_topics(self, name: str) -> None:
        """KIP-558 ``PUT /connectors/{name}/topics/reset``."""
        self._props(name)
        await asyncio.to_thread(self.statuses.reset_topics, name)

    async def plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        return self.plugins_.connectors() if connectors_only else self.plugins_.all()

    def _load_plugin(self, plugin: str) -> type:
        for kind in PLUGIN_KINDS:
            try:
                return self.plugins_.load(plugin, kind)
            except api.ConfigError:
                continue
        raise ConnectRestError(404, f"Unknown plugin {plugin}.")

    async def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        cls = await asyncio.to_thread(self._load_plugin, plugin)
        cdef = cls().config_def()
        return [_key_info(k) for k in cdef.keys.values()]

    async def validate(self, plugin: str, config: dict[str, str]) -> dict[str, Any]:
        config = {**config}
        if config.get("connector.class") is None:
            config["connector.class"] = plugin
        return await asyncio.to_thread(self._validate_sync, config)


def client_security(config: Any) -> Any:
    """The worker's ``security.protocol``/``sasl.*``/``ssl.*`` keys for spool.net clients
    (None: PLAINTEXT)."""
    try:
        from spool.security.client_config import ClientSecurity
        raw = {k: str(v) for k, v in getattr(config, "raw", {}).items()}
        return ClientSecurity.from_properties(raw)
    except Exception as e:  # noqa: BLE001 - plaintext then; the request will say why
        log.warning("client security settings not understood (%s); using PLAINTEXT", e)
        return None


def _key_info(k: api.ConfigKey) -> dict[str, Any]:
    default = None if k.required else k.default
    if isinstance(default, list):
        default = ",".join(str(x) for x in default)
    elif isinstance(default, bool):
        default = str(default).lower()
    elif default is not None:
        default = str(default)
    return {"name": k.name, "type": k.type, "required": k.required, "default_value": default,
            "importance": k.importance, "documentation": k.doc, "group": k.group,
            "width": "NONE", "display_name": k.display_name or k.name, "dependents": [],
            "order": k.order}

