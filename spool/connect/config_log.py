"""The ``connect-configs`` topic: connectors' and tasks' configurations, in Kafka's records.

Records (key: UTF-8 string; value: JSON as Kafka's JsonConverter with schemas disabled
writes it, compact; None is a tombstone)::

    connector-<name>        {"properties": {...}}           None: the connector is deleted
    target-state-<name>     {"state": "STARTED"|"PAUSED", "state.v2": "STARTED"|"PAUSED"|
                             "STOPPED"}                     (STOPPED is written as "state":
                                                            "PAUSED" for older readers, as
                                                            Kafka 3.5+ does; "state.v2" wins)
    task-<name>-<n>         {"properties": {...}}           held back until the commit
    commit-<name>           {"tasks": n}                    tasks 0..n-1 become current
    restart-connector-<name> {"include-tasks": bool, "only-failed": bool}   (KIP-745)
    tasks-fencing-<name>    {"task-count": n}               (KIP-618) the leader fenced the
                                                            previous generation's producers

``ConfigState`` is the replayed image, a pure state machine: ``apply(key, value,
offset)`` is its only mutator and answers what changed (``Change`` items). A connector
without a target-state record is STARTED. Task configs read before their commit are
kept aside; the commit makes exactly tasks 0..n-1 current when all of them were read,
else the connector's tasks are *inconsistent* (not run) until a later commit. A
connector's tombstone removes its config, target state and tasks. ``offset`` is the
next offset to read (the last record's offset + 1), what the group protocol compares.
KIP-618, as Kafka's ``ClusterConfigState``: a commit puts the connector in
``pending_fencing`` (its new tasks need a round of zombie fencing before they start, when
exactly-once sources are enabled); a ``tasks-fencing-<name>`` record takes it out and sets
``task_count_records[name]`` (the task count fenced next time): ``Change(FENCED, name)``.

``ConfigLog(client_config, topic, on_change, replication_factor=-1)`` is the shell over
``kafka_log.KafkaLog``: the group leader writes (``put_*``, durable when they return);
every worker, the leader included, changes its image only by reading the topic back.
``snapshot()`` copies the image under a lock (the reading thread applies records);
``on_change(changes, offset)`` is called on the reading thread after each record
that changed something (``offset``: that record's).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spool.connect.herder import TaskId

CONNECTOR, TARGET_STATE, TASKS, RESTART, REMOVED, FENCED = (
    "connector", "target_state", "tasks", "restart", "removed", "fenced")


@dataclass(frozen=True)
class Change:
    kind: str  # CONNECTOR, TARGET_STATE, TASKS, RESTART, REMOVED, FENCED
    connector: str
    detail: Any = None  # RESTART: (include_tasks, only_failed)


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass
class ConfigState:
    """The image of the config topic (module doc); ``apply`` is its only mutator."""

    offset: int = 0
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    task_count_records: dict[str, int] = field(default_factory=dict)
    pending_fencing: set[str] = field(default_factory=set)
    _deferred: dict[str, dict[int, dict[str, str]]] = field(default_factory=dict)

    def target_state(self, name: str) -> str:
        return self.target_states.get(name, "STARTED")

    def task_count(self, name: str) -> int:
        return 0 if name in self.inconsistent else len(self.tasks.get(name, []))

    def task_ids(self, name: str) -> list[TaskId]:
        return [TaskId(name, n) for n in range(self.task_count(name))]

    def task_config(self, task: TaskId) -> dict[str, str] | None:
        ts = self.tasks.get(task.connector, [])
        return ts[task.task] if 0 <= task.task < len(ts) else None

    def copy(self) -> ConfigState:
        return copy.deepcopy(self)

    def apply(self, key: bytes | None, value: bytes | None, offset: int) -> list[Change]:
        self.offset = offset + 1
        if key is None:
            return []
        k = key.decode(errors="replace")
        try:
            v = json.loads(value) if value is not None else None
        except ValueError:
            return []  # not ours (Kafka logs and skips it too)
        if k.startswith("connector-"):
            return self._connector(k[len("connector-"):], v)
        if k.startswith("target-state-"):
            return self._target_state(k[len("target-state-"):], v)
        if k.startswith("task-"):
            name, _, n = k[len("task-"):].rpartition("-")
            if name and n.isdigit() and isinstance(v, dict):
                self._deferred.setdefault(name, {})[int(n)] = _props(v)
            return []
        if k.startswith("commit-"):
            return self._commit(k[len("commit-"):], v)
        if k.startswith("tasks-fencing-"):
            return self._task_count_record(k[len("tasks-fencing-"):], v)
        if k.startswith("restart-connector-") and isinstance(v, dict):
            name = k[len("restart-connector-"):]
            if name in self.connectors:
                return [Change(RESTART, name, (bool(v.get("include-tasks", False)),
                                               bool(v.get("only-failed", False))))]
        return []

    def _connector(self, name: str, v: Any) -> list[Change]:
        if v is None:
            existed = name in self.connectors
            for d in (self.connectors, self.target_states, self.tasks, self._deferred,
                      self.task_count_records):
                d.pop(name, None)
            self.inconsistent.discard(name)
            self.pending_fencing.discard(name)
            return [Change(REMOVED, name)] if existed else []
        self.connectors[name] = _props(v)
        return [Change(CONNECTOR, name)]

    def _target_state(self, name: str, v: Any) -> list[Change]:
        if v is None:
            self.target_states.pop(name, None)
            return []
        state = v.get("state.v2") or v.get("state") if isinstance(v, dict) else None
        if state not in ("STARTED", "PAUSED", "STOPPED"):
            return []
        before = self.target_state(name)
        self.target_states[name] = state
        return [Change(TARGET_STATE, name)] if before != state else []

    def _commit(self, name: str, v: Any) -> list[Change]:
        if not isinstance(v, dict) or not isinstance(v.get("tasks"), int):
            return []
        n = v["tasks"]
        deferred = self._deferred.pop(name, {})
        if any(i not in deferred for i in range(n)):
            self.inconsistent.add(name)
        else:
            self.inconsistent.discard(name)
            self.tasks[name] = [deferred[i] for i in range(n)]
        self.pending_fencing.add(name)
        return [Change(TASKS, name)]

    def _task_count_record(self, name: str, v: Any) -> list[Change]:
        if not isinstance(v, dict) or not isinstance(v.get("task-count"), int):
            return []
        self.task_count_records[name] = v["task-count"]
        self.pending_fencing.discard(name)
        return [Change(FENCED, name)]


def _props(v: Any) -> dict[str, str]:
    props = v.get("properties") if isinstance(v, dict) else None
    return {str(k): str(x) for k, x in props.items()} if isinstance(props, dict) else {}


def target_state_value(state: str) -> dict[str, str]:
    return {"state": "PAUSED" if state == "STOPPED" else state, "state.v2": state}


class ConfigLog:
    """The config topic's shell (module doc). Thread-safe."""

    def __init__(self, client_config: dict[str, Any], topic: str,
                 on_change: Callable[[list[Change], int], None] | None = None, *,
                 replication_factor: int = -1, timeout: float = 30.0) -> None:
        from spool.connect.kafka_log import KafkaLog

        self.topic = topic
        self.timeout = timeout
        self._lock = threading.Lock()
        self._state = ConfigState()
        self._on_change = on_change
        self._log = KafkaLog(client_config, topic, partitions=1,
                             replication_factor=replication_factor, on_record=self._record)

    def _record(self, key: bytes | None, value: bytes | None, partition: int,
                offset: int) -> None:
        with self._lock:
            changes = self._state.apply(key, value, offset)
        if changes and self._on_change is not None:
            self._on_change(changes, offset)

    def start(self) -> None:
        self._log.start()

    def stop(self) -> None:
        self._log.stop()

    def snapshot(self) -> ConfigState:
        with self._lock:
            return self._state.copy()

    @property
    def offset(self) -> int:
        with self._lock:
            return self._state.offset

    def read_to_end(self, timeout: float | None = None) -> None:
        self._log.read_to_end(self.timeout if timeout is None else timeout)

    def _write(self, records: list[tuple[str, Any]]) -> None:
        for key, value in records:
            self._log.send(key.encode(), None if value is None else dumps(value))
        self._log.flush(self.timeout)

    def put_connector_config(self, name: str, props: dict[str, str],
                             target_state: str | None = None) -> None:
        records: list[tuple[str, Any]] = []
        if target_state is not None:
            records.append((f"target-state-{name}", target_state_value(target_state)))
        records.append((f"connector-{name}", {"properties": props}))
        self._write(records)

    def remove_connector_config(self, name: str) -> None:
        self._write([(f"connector-{name}", None), (f"target-state-{name}", None)])

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        self._write([*((f"task-{name}-{i}", {"properties": c}) for i, c in enumerate(configs)),
                     (f"commit-{name}", {"tasks": len(configs)})])

    def put_target_state(self, name: str, state: str) -> None:
        self._write([(f"target-state-{name}", target_state_value(state))])

    def put_task_count_record(self, name: str, task_count: int) -> None:
        self._write([(f"tasks-fencing-{name}", {"task-count": task_count})])

    def put_restart_request(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        self._write([(f"restart-connector-{name}",
                      {"include-tasks": include_tasks, "only-failed": only_failed})])
