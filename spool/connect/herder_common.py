"""What both herders share: answers built from a config image and a status store.

``BaseHerder(config, plugins, offsets, statuses)`` implements the read side of
``herder.Herder`` (connector info, statuses, task configs, plugins, validation, KIP-875
offsets reads, KIP-558 topics) over two things a subclass provides:

- ``_state()``: a ``config_log.ConfigState`` (the standalone herder's own image; the
  distributed herder's replayed copy of ``connect-configs``);
- ``statuses``: a ``status_log.MemoryStatusStore`` or ``KafkaStatusStore``.

``listener`` (a ``StatusRecorder``) is the worker's ``StatusListener``
(``connector_status``, ``task_status``, ``connector_topic``): each status is stored with this
worker's id and the current group generation (``_generation``, -1 standalone), as
Kafka's herders do.

``validation_error(infos)`` is Kafka's 400 message for an invalid config:
``Connector configuration is invalid and contains the following N error(s):\\n<each
error>\\nYou can also find the above list of errors at the endpoint
`/connector-plugins/{connectorType}/config/validate```.

Blocking calls (validation, plugin loading, the admin client, the offset store) run in
``asyncio.to_thread``; nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import version as _dist_version
from typing import Any

from spool.connect import api
from spool.connect.config_log import ConfigState
from spool.connect.herder import ConnectRestError, Herder, TaskId, not_found
from spool.connect.status_log import MemoryStatusStore

log = logging.getLogger("spool.connect")

MUST_BE_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be "
                   "modified. This can be done for the specified connector by issuing a "
                   "'PUT' request to the '/connectors/{}/stop' endpoint")
ALTERED = ("The Connect framework-managed offsets for this connector have been altered "
           "successfully. However, if this connector manages offsets externally, they will "
           "need to be manually altered in the system that the connector uses.")
RESET = ("The Connect framework-managed offsets for this connector have been reset "
         "successfully. However, if this connector manages offsets externally, they will "
         "need to be manually reset in the system that the connector uses.")
PLUGIN_KINDS = ("connector", "converter", "header_converter", "transformation", "predicate")


def validation_error(infos: dict[str, Any]) -> ConnectRestError:
    msg = [f"Connector configuration is invalid and contains the following "
           f"{infos.get('error_count', 0)} error(s):"]
    for c in infos.get("configs", []):
        msg.extend(c.get("value", {}).get("errors") or [])
    msg.append("You can also find the above list of errors at the endpoint "
               "`/connector-plugins/{connectorType}/config/validate`")
    return ConnectRestError(400, "\n".join(msg))


def sink_group_id(name: str, props: dict[str, str]) -> str:
    return props.get("consumer.override.group.id") or f"connect-{name}"


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


class BaseHerder(Herder):
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
        if infos.get("error_count", 0) > 0:
            raise validation_error(infos)
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
        state = self._state()
        props = state.connectors.get(name)
        if props is None:
            raise not_found(name)
        statuses = self.statuses.tasks(name)
        tasks = [{"id": t.task, **self._status_entry(statuses[t])}
                 for t in state.task_ids(name) if t in statuses]
        return {"name": name, "connector": self._status_entry(self.statuses.connector(name)),
                "tasks": tasks, "type": self._kind(props)}

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
        config.setdefault("connector.class", plugin)
        return await asyncio.to_thread(self._validate_sync, config)

    # ---- KIP-875 offsets

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        props = self._props(name)
        if self._kind(props) == "sink":
            return {"offsets": await asyncio.to_thread(self._sink_offsets, name, props)}
        pairs = await asyncio.to_thread(self.offsets.connector_offsets, name)
        return {"offsets": [{"partition": p, "offset": o} for p, o in pairs]}

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient
        return AdminClient(self.config.client_config("admin"))

    def _sink_offsets(self, name: str, props: dict[str, str]) -> list[dict[str, Any]]:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
        group = sink_group_id(name, props)
        try:
            admin = self._admin()  # kept referenced: a collected client's futures never end
            fut = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)])[group]
            tps = fut.result(timeout=30).topic_partitions or []
        except KafkaException as e:
            if "GROUP_ID_NOT_FOUND" in str(e):
                return []
            raise
        return [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                 "offset": {"kafka_offset": tp.offset}}
                for tp in sorted(tps, key=lambda tp: (tp.topic, tp.partition)) if tp.offset >= 0]

    def _check_stopped(self, name: str) -> dict[str, str]:
        props = self._props(name)
        state = self._state()
        if state.target_state(name) != "STOPPED" or state.task_count(name):
            raise ConnectRestError(400, MUST_BE_STOPPED.format(name))
        return props

    def _alter_sync(self, name: str, props: dict[str, str],
                    offsets: list[dict[str, Any]] | None) -> None:
        sink = self._kind(props) == "sink"
        if offsets is None:  # reset
            if sink:
                self._delete_group(sink_group_id(name, props))
            else:
                pairs = self.offsets.connector_offsets(name)
                self.offsets.put(name, [(p, None) for p, _ in pairs], 30)
            return
        if sink:
            self._alter_sink(name, props, offsets)
        else:
            self.offsets.put(name, [(o["partition"], o.get("offset")) for o in offsets], 30)

    def _delete_group(self, group: str) -> None:
        from confluent_kafka import KafkaException
        try:
            admin = self._admin()
            admin.delete_consumer_groups([group])[group].result(timeout=30)
        except KafkaException as e:
            if "GROUP_ID_NOT_FOUND" not in str(e):
                raise ConnectRestError(500, f"Failed to reset offsets for group {group}: {e}") \
                    from None

    def _alter_sink(self, name: str, props: dict[str, str],
                    offsets: list[dict[str, Any]]) -> None:
        """KIP-875 for a sink: its consumer group's committed offsets; a null offset
        deletes that partition's (OffsetDelete, as Kafka's deleteConsumerGroupOffsets)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        alter, delete = [], []
        for o in offsets:
            p, off = o["partition"], o.get("offset")
            if not isinstance(p, dict) or "kafka_topic" not in p or "kafka_partition" not in p:
                raise ConnectRestError(400, "The partition for a sink connector offset must "
                                            "contain the keys 'kafka_topic' and "
                                            "'kafka_partition'.")
            try:
                tp = (str(p["kafka_topic"]), int(p["kafka_partition"]))
                if off is None:
                    delete.append(tp)
                    continue
                if "kafka_offset" not in off:
                    raise ValueError
                alter.append(TopicPartition(*tp, int(off["kafka_offset"])))
            except (TypeError, ValueError):
                raise ConnectRestError(400, "The offset for a sink connector should either be "
                                            "null or contain the key 'kafka_offset' (a "
                                            "number); partitions are numbers") from None
        group = sink_group_id(name, props)
        if alter:
            admin = self._admin()
            admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, alter)])[group].result(timeout=30)
        if delete:
            asyncio.run(delete_group_offsets(self.config, group, delete))

    def _check_offsets_body(self, offsets: Any) -> list[dict[str, Any]]:
        if not isinstance(offsets, list) or not offsets:
            raise ConnectRestError(400, "Partitions / offsets need to be provided for an "
                                        "alter offsets request")
        for o in offsets:
            if not isinstance(o, dict) or not isinstance(o.get("partition"), dict):
                raise ConnectRestError(400, "Each entry needs a 'partition' object")
            if o.get("offset") is not None and not isinstance(o["offset"], dict):
                raise ConnectRestError(400, "An entry's 'offset' must be an object or null")
        return offsets


async def delete_group_offsets(config: Any, group: str, tps: list[tuple[str, int]]) -> None:
    """OffsetDelete v0 to ``group``'s coordinator (found through the bootstrap servers);
    ConnectRestError(500) naming the first partition the coordinator refused."""
    from spool.net.client import NodeClient
    from spool.protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from spool.protocol._generated.offset_delete_request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )
    from spool.protocol.errors import error_name

    security = client_security(config)
    host, _, port = str(list(config.get("bootstrap.servers"))[0]).rpartition(":")
    boot = NodeClient(host.strip("[]"), int(port), security=security)
    try:
        fc = await boot.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    finally:
        await boot.close()
    if fc.error_code:
        raise ConnectRestError(500, f"Could not find the coordinator of group {group}: "
                                    f"{error_name(fc.error_code)}")
    coord = NodeClient(fc.host, fc.port, security=security)
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    try:
        r = await coord.request(OffsetDeleteRequest(group_id=group, topics=[
            OffsetDeleteRequestTopic(name=t, partitions=[
                OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in by_topic.items()]), 0)
    finally:
        await coord.close()
    errors = [f"{t.name}-{p.partition_index}: {error_name(p.error_code)}"
              for t in r.topics for p in t.partitions if p.error_code]
    if r.error_code and error_name(r.error_code) != "GROUP_ID_NOT_FOUND":
        errors.insert(0, error_name(r.error_code))
    if errors:
        raise ConnectRestError(500, f"Failed to delete offsets of group {group}: "
                                    f"{', '.join(errors)}")


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
