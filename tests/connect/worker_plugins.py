"""Connectors, a status recorder and a worker builder for the worker's tests.

The connectors are loaded by Python path (``tests.connect.worker_plugins:CountingSource``).
Tests talk to the task instances through ``RUNS[run]``: a ``Run`` (``props["run"]``)
collecting what the tasks saw and holding what they should do.

- ``CountingSource``: ``tasks.max`` tasks; task ``i`` produces ``{"task": i, "n": n}`` to
  ``topic`` with source partition ``{"task": i}`` and offset ``{"n": n}``, ``batch``
  records per poll, from the stored offset + 1 up to ``limit`` (then idles); it raises
  at ``fail.at`` (when set), raises RetriableError once at ``retry.at``, and gives a
  value no converter can write at ``poison.at`` (once).
- ``RecordingSink``: ``put`` appends to ``Run.records``; ``pre_commit`` answers
  ``Run.pre_commit(offsets)`` when set; ``put`` raises ``Run.put_errors`` in turn.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from spool.connect import api
from spool.connect.herder import TaskId
from spool.connect.worker import StatusListener, Worker


@dataclass
class Run:
    records: list[api.SinkRecord] = field(default_factory=list)
    committed: list[tuple[api.SourceRecord, api.RecordMetadata | None]] = field(
        default_factory=list)
    commits: int = 0
    opened: list[list[tuple[str, int]]] = field(default_factory=list)
    closed: list[list[tuple[str, int]]] = field(default_factory=list)
    pre_commit: Callable[[dict], dict] | None = None
    put_errors: list[Exception] = field(default_factory=list)
    on_open: Callable[[Any, list], None] | None = None
    started_with: list[dict] = field(default_factory=list)
    block_stop: threading.Event | None = None
    poison_once: bool = True
    resume: tuple[str, int] | None = None  # put() resumes this partition
    retry_once: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)


RUNS: dict[str, Run] = {}


def new_run() -> tuple[str, Run]:
    rid = uuid.uuid4().hex[:10]
    RUNS[rid] = Run()
    return rid, RUNS[rid]


class CountingSource(api.SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = props
        if props.get("connector.fail") == "start":
            raise api.ConnectError("connector refused to start")

    def task_class(self) -> type[api.Task]:
        return CountingSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        n = int(self.props.get("tasks.generated", max_tasks))
        return [{**self.props, "task.id": str(i)} for i in range(n)]

    def exactly_once_support(self, props: dict[str, str]) -> str | None:
        return api.ExactlyOnceSupport.SUPPORTED


class Unserializable:
    pass


class CountingSourceTask(api.SourceTask):
    def start(self, props: dict[str, str]) -> None:
        self.run = RUNS[props["run"]]
        self.run.started_with.append(props)
        self.topic = props["topic"]
        self.tid = int(props["task.id"])
        self.batch = int(props.get("batch", "10"))
        self.limit = int(props.get("limit", "-1"))
        self.fail_at = int(props.get("fail.at", "-1"))
        self.poison_at = int(props.get("poison.at", "-1"))
        self.retry_at = int(props.get("retry.at", "-1"))
        self.partition = {"task": self.tid}
        last = self.context.offset_storage_reader.offset(self.partition)
        self.next = last["n"] + 1 if last else 0
        self.stopped = threading.Event()

    def poll(self) -> list[api.SourceRecord]:
        if self.stopped.is_set():
            return []
        end = self.next + self.batch if self.limit < 0 else min(self.next + self.batch,
                                                                 self.limit)
        if self.next >= end:
            self.stopped.wait(0.05)
            return []
        out = []
        if self.next <= self.retry_at < end and self.run.retry_once:
            self.run.retry_once = False
            raise api.RetriableError("source busy")
        for n in range(self.next, end):
            if n == self.fail_at:
                raise api.ConnectError(f"task failed at {n}")
            value: Any = {"task": self.tid, "n": n}
            if n == self.poison_at and self.run.poison_once:
                self.run.poison_once = False
                value = {"task": self.tid, "n": Unserializable()}
            out.append(api.SourceRecord(
                self.topic, None, None, f"{self.tid}-{n}", None, value,
                headers=(api.Header("n", None, str(n)),),
                source_partition=self.partition, source_offset={"n": n}))
        self.next = end
        return out

    def commit_record(self, record: api.SourceRecord,
                      metadata: api.RecordMetadata | None) -> None:
        with self.run.lock:
            self.run.committed.append((record, metadata))

    def commit(self) -> None:
        with self.run.lock:
            self.run.commits += 1

    def stop(self) -> None:
        self.stopped.set()
        if self.run.block_stop is not None:
            self.run.block_stop.wait()


class StubbornSourceTask(CountingSourceTask):
    """Ignores stop(): poll blocks until ``Run.block_stop`` is set."""

    def poll(self) -> list[api.SourceRecord]:
        assert self.run.block_stop is not None
        self.run.block_stop.wait()
        return []

    def stop(self) -> None:
        pass


class StubbornSource(CountingSource):
    def task_class(self) -> type[api.Task]:
        return StubbornSourceTask


class RecordingSink(api.SinkConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[api.Task]:
        return RecordingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]


class RecordingSinkTask(api.SinkTask):
    def start(self, props: dict[str, str]) -> None:
        self.run = RUNS[props["run"]]
        self.run.started_with.append(props)

    def open(self, partitions: list[tuple[str, int]]) -> None:
        with self.run.lock:
            self.run.opened.append(list(partitions))
        if self.run.on_open is not None:
            self.run.on_open(self.context, partitions)

    def close(self, partitions: list[tuple[str, int]]) -> None:
        with self.run.lock:
            self.run.closed.append(list(partitions))

    def put(self, records: list[api.SinkRecord]) -> None:
        if self.run.resume is not None:
            self.context.resume(self.run.resume)
            self.run.resume = None
        if self.run.put_errors and records:
            err = self.run.put_errors.pop(0)
            if isinstance(err, api.RetriableError):
                self.context.timeout(50)
            raise err
        with self.run.lock:
            self.run.records.extend(records)

    def pre_commit(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        if self.run.pre_commit is not None:
            return self.run.pre_commit(offsets)
        return offsets


class StatusRecorder(StatusListener):
    """Every status reported, in order; ``wait_task``/``wait_connector`` block until a
    state is reached (or raise AssertionError with the history after ``timeout``)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.connectors: dict[str, list[tuple[str, str | None]]] = {}
        self.tasks: dict[TaskId, list[tuple[str, str | None]]] = {}
        self.topics: dict[str, list[str]] = {}

    def connector_status(self, name: str, state: str, trace: str | None = None) -> None:
        with self.cond:
            self.connectors.setdefault(name, []).append((state, trace))
            self.cond.notify_all()

    def task_status(self, task_id: TaskId, state: str, trace: str | None = None) -> None:
        with self.cond:
            self.tasks.setdefault(task_id, []).append((state, trace))
            self.cond.notify_all()

    def connector_topic(self, name: str, topic: str) -> None:
        with self.cond:
            self.topics.setdefault(name, []).append(topic)

    def task_state(self, task_id: TaskId) -> str | None:
        with self.cond:
            h = self.tasks.get(task_id)
            return h[-1][0] if h else None

    def wait_task(self, task_id: TaskId, state: str, timeout: float = 20.0) -> str | None:
        return self._wait(lambda: self.tasks.get(task_id), state, timeout, str(task_id))

    def wait_connector(self, name: str, state: str, timeout: float = 20.0) -> str | None:
        return self._wait(lambda: self.connectors.get(name), state, timeout, name)

    def _wait(self, get: Callable[[], Any], state: str, timeout: float,
              what: str) -> str | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                h = get()
                if h and h[-1][0] == state:
                    return h[-1][1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{what} never became {state}: {h}")
                self.cond.wait(left)


def wait_until(check: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


@contextmanager
def running_worker(bootstrap: str, **props: str) -> Iterator[tuple[Worker, StatusRecorder]]:
    """A distributed-mode Worker on the broker at ``bootstrap`` with its own group and
    internal topics (``props`` override Kafka's worker keys); stopped afterwards."""
    from spool.connect.offset_store import KafkaOffsetStore
    from spool.connect.plugins import Plugins
    from spool.connect.worker_config import WorkerConfig

    uid = uuid.uuid4().hex[:8]
    config = WorkerConfig.from_props({
        "bootstrap.servers": bootstrap, "group.id": f"connect-test-{uid}",
        "config.storage.topic": f"configs-{uid}", "offset.storage.topic": f"offsets-{uid}",
        "status.storage.topic": f"status-{uid}", "offset.storage.partitions": "3",
        "offset.flush.interval.ms": "200",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false", **props}, standalone=False)
    store = KafkaOffsetStore(config)
    store.start()
    status = StatusRecorder()
    worker = Worker(config, Plugins.discover(), store, status)
    try:
        yield worker, status
    finally:
        try:
            worker.stop()
        finally:
            store.stop()
