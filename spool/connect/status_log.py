"""Connectors' and tasks' statuses: in memory (standalone) or in ``connect-status``.

Records of ``connect-status`` (Kafka's; key UTF-8, value compact JSON, None a
tombstone)::

    status-connector-<name>                {"state", "trace", "worker_id", "generation"}
    status-task-<name>-<n>                 {"state", "trace", "worker_id", "generation"}
    status-topic-<topic>:connector-<name>  {"topic": {"name", "connector", "task",
                                             "discoverTimestamp"}}   (KIP-558)

``MemoryStatusStore`` keeps them in dicts (standalone). ``KafkaStatusStore(client_config,
topic, partitions, replication_factor)`` writes records and changes its image only by
reading the topic back (each key on one partition, so per-key order is the write
order). Both apply a status as Kafka's ``putSafe`` would: one written by another worker
with an older generation than the current one is ignored (a zombie's late write);
``remove_connector`` writes tombstones for the connector, its tasks and its topics.

Statuses are dicts ``{"state", "trace", "worker_id", "generation"}`` (``trace`` None
when there is none). Thread-safe: workers' threads write, the herder's loop reads.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from spool.connect.herder import TaskId

Status = dict[str, Any]


def _safe(current: Status | None, new: Status) -> bool:
    return (current is None or current.get("worker_id") == new.get("worker_id")
            or int(current.get("generation", -1)) <= int(new.get("generation", -1)))


class MemoryStatusStore:
    """Statuses in memory (module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[TaskId, Status] = {}
        self._topics: dict[str, dict[str, dict[str, Any]]] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def flush(self) -> None:
        pass

    # ---- writes (the Kafka store sends records; applying is the read side's)

    def put_connector(self, name: str, status: Status) -> None:
        self._apply_connector(name, status)

    def put_task(self, task: TaskId, status: Status) -> None:
        self._apply_task(task, status)

    def put_topic(self, connector: str, topic: str, task: int = 0) -> None:
        self._apply_topic(connector, topic, _topic_value(connector, topic, task))

    def reset_topics(self, connector: str) -> None:
        for topic in list(self.topics(connector)):
            self._apply_topic(connector, topic, None)

    def remove_task(self, task: TaskId) -> None:
        self._apply_task(task, None)

    def remove_connector(self, name: str, task_count: int | None = None) -> None:
        self._apply_connector(name, None)
        for t in [t for t in self.tasks(name)]:
            self._apply_task(t, None)
        self.reset_topics(name)

    # ---- the image

    def _apply_connector(self, name: str, status: Status | None) -> None:
        with self._lock:
            if status is None:
                self._connectors.pop(name, None)
            elif _safe(self._connectors.get(name), status):
                self._connectors[name] = status

    def _apply_task(self, task: TaskId, status: Status | None) -> None:
        with self._lock:
            if status is None:
                self._tasks.pop(task, None)
            elif _safe(self._tasks.get(task), status):
                self._tasks[task] = status

    def _apply_topic(self, connector: str, topic: str, value: dict[str, Any] | None) -> None:
        with self._lock:
            if value is None:
                self._topics.get(connector, {}).pop(topic, None)
            else:
                self._topics.setdefault(connector, {}).setdefault(topic, value)

    def connector(self, name: str) -> Status | None:
        with self._lock:
            s = self._connectors.get(name)
            return dict(s) if s else None

    def task(self, task: TaskId) -> Status | None:
        with self._lock:
            s = self._tasks.get(task)
            return dict(s) if s else None

    def tasks(self, connector: str) -> dict[TaskId, Status]:
        with self._lock:
            return {t: dict(s) for t, s in self._tasks.items() if t.connector == connector}

    def topics(self, connector: str) -> list[str]:
        with self._lock:
            return sorted(self._topics.get(connector, {}))


def _topic_value(connector: str, topic: str, task: int) -> dict[str, Any]:
    return {"topic": {"name": topic, "connector": connector, "task": task,
                      "discoverTimestamp": int(time.time() * 1000)}}


class KafkaStatusStore(MemoryStatusStore):
    """Statuses in the status topic (module doc)."""

    def __init__(self, client_config: dict[str, Any], topic: str, *, partitions: int = 5,
                 replication_factor: int = -1, timeout: float = 30.0) -> None:
        super().__init__()
        from spool.connect.kafka_log import KafkaLog

        self.topic = topic
        self.timeout = timeout
        self._log = KafkaLog(client_config, topic, partitions=partitions,
                             replication_factor=replication_factor, on_record=self._record)

    def start(self) -> None:
        self._log.start()

    def stop(self) -> None:
        self._log.stop()

    def flush(self) -> None:
        self._log.flush(self.timeout)

    def read_to_end(self, timeout: float | None = None) -> None:
        self._log.read_to_end(self.timeout if timeout is None else timeout)

    def _send(self, key: str, value: Any) -> None:
        self._log.send(key.encode(), None if value is None
                       else json.dumps(value, separators=(",", ":")).encode())

    def put_connector(self, name: str, status: Status) -> None:
        self._send(f"status-connector-{name}", status)

    def put_task(self, task: TaskId, status: Status) -> None:
        self._send(f"status-task-{task.connector}-{task.task}", status)

    def put_topic(self, connector: str, topic: str, task: int = 0) -> None:
        if topic not in self.topics(connector):
            self._send(f"status-topic-{topic}:connector-{connector}",
                       _topic_value(connector, topic, task))

    def reset_topics(self, connector: str) -> None:
        """Tombstones for the connector's topics, read back before it returns."""
        for topic in self.topics(connector):
            self._send(f"status-topic-{topic}:connector-{connector}", None)
        self.flush()
        self.read_to_end()

    def remove_task(self, task: TaskId) -> None:
        self._send(f"status-task-{task.connector}-{task.task}", None)

    def remove_connector(self, name: str, task_count: int | None = None) -> None:
        known = {t.task for t in self.tasks(name)} | set(range(task_count or 0))
        self._send(f"status-connector-{name}", None)
        for n in sorted(known):
            self._send(f"status-task-{name}-{n}", None)
        self.reset_topics(name)

    def _record(self, key: bytes | None, value: bytes | None, partition: int,
                offset: int) -> None:
        if key is None:
            return
        k = key.decode(errors="replace")
        try:
            v = json.loads(value) if value is not None else None
        except ValueError:
            return
        if v is not None and not isinstance(v, dict):
            return
        if k.startswith("status-connector-"):
            self._apply_connector(k[len("status-connector-"):], v)
        elif k.startswith("status-task-"):
            name, _, n = k[len("status-task-"):].rpartition("-")
            if name and n.isdigit():
                self._apply_task(TaskId(name, int(n)), v)
        elif k.startswith("status-topic-") and ":connector-" in k:
            topic, _, connector = k[len("status-topic-"):].rpartition(":connector-")
            self._apply_topic(connector, topic, v)
