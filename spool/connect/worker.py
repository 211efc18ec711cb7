"""The worker: runs the connectors and tasks a herder assigns to this process (Kafka's
Worker and WorkerConnector).

``Worker(config, plugins, offsets, status)``; every method is thread-safe and blocks
(the herder calls them through ``asyncio.to_thread``):

- ``start_connector(name, props, target_state, on_reconfigure)``: the connector class
  (``connector.class`` through ``plugins``) instantiated, ``initialize(context)`` and,
  when the target state is STARTED, ``start(props)`` on the connector's own thread;
  returns once ``start`` has returned or raised (status RUNNING, PAUSED, or FAILED with
  the trace). ``context.request_task_reconfiguration()`` calls ``on_reconfigure(name)``;
  ``context.raise_error(e)`` fails the connector. A source connector with
  ``exactly.once.support=required`` fails when the worker's
  ``exactly.once.source.support`` is not ``enabled`` or the connector does not answer
  SUPPORTED (Kafka's messages).
- ``connector_task_configs(name, max_tasks)``: the connector's ``task_configs``, each with
  ``task.class`` (``module.Class``) and, for sinks, the connector's ``topics`` /
  ``topics.regex``, as Kafka; ConnectError when the connector is not running, or when it
  answers more than ``max_tasks`` configs (the connector then FAILED, as Kafka 3.8).
- ``stop_connector(name)``: ``stop()`` on its thread, status UNASSIGNED; returns once done
  (or after ``task.shutdown.graceful.timeout.ms``).
- ``set_target_state(name, state)``: PAUSED stops the connector (``stop()``) and pauses its
  tasks on this worker (statuses PAUSED); STARTED starts them again (RUNNING). STOPPED is
  the herder's: it stops them.
- ``start_task(task_id, connector_props, task_props, target_state)``: a
  ``source_task.WorkerSourceTask`` or ``sink_task.WorkerSinkTask`` on its own thread
  (status RUNNING or PAUSED once ``task.start`` returned, FAILED with the trace).
- ``stop_tasks(ids, timeout=None)``: all asked to stop at once, then each awaited up to
  ``task.shutdown.graceful.timeout.ms`` (5 s) in total; one still running then is
  abandoned ("Graceful stop of task ... failed"): it reports no further status.
- ``connectors()``, ``tasks()``, ``stop()`` (everything, tasks first).

``StatusListener`` receives each status change (states of ``herder.STATES``), and
``connector_topic(name, topic)`` the first time a task of this worker uses a topic
(KIP-558's active topics).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from spool.connect import api
from spool.connect.herder import TaskId
from spool.connect.sink_task import WorkerSinkTask
from spool.connect.source_task import WorkerSourceTask, _ms
from spool.connect.worker_task import WorkerTask

log = logging.getLogger(__name__)


class StatusListener:
    """What the worker reports to the herder (which writes connect-status or keeps them)."""

    def connector_status(self, name: str, state: str, trace: str | None = None) -> None:
        pass

    def task_status(self, task_id: TaskId, state: str, trace: str | None = None) -> None:
        pass

    def connector_topic(self, name: str, topic: str) -> None:
        """A task of connector ``name`` used ``topic`` for the first time here."""


class _Context(api.ConnectorContext):
    def __init__(self, wc: WorkerConnector) -> None:
        self._wc = wc

    def request_task_reconfiguration(self) -> None:
        self._wc.request_reconfiguration()

    def raise_error(self, error: Exception) -> None:
        self._wc.fail(error)


class WorkerConnector:
    """One connector on its thread: commands (start, pause, resume, stop) are queued to
    that thread and each awaited by the caller."""

    def __init__(self, name: str, props: dict[str, str], connector: api.Connector,
                 status: StatusListener, on_reconfigure: Callable[[str], None]) -> None:
        self.name = name
        self.props = props
        self.connector = connector
        self.status = status
        self.on_reconfigure = on_reconfigure
        self.state = "INIT"  # INIT, STARTED, PAUSED, FAILED, STOPPED
        self._cmds: list[tuple[str, threading.Event]] = []
        self._cond = threading.Condition()
        self.lock = threading.RLock()  # held around calls into the connector
        self._thread = threading.Thread(target=self._run, name=f"connect-connector-{name}",
                                        daemon=True)
        self._thread.start()

    def command(self, cmd: str, timeout: float | None) -> bool:
        done = threading.Event()
        with self._cond:
            self._cmds.append((cmd, done))
            self._cond.notify_all()
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._cmds:
                    self._cond.wait()
                cmd, done = self._cmds.pop(0)
            try:
                self._do(cmd)
            finally:
                done.set()
            if cmd == "stop":
                return

    def _do(self, cmd: str) -> None:
        with self.lock:
            try:
                if cmd == "init":
                    self.connector.initialize(_Context(self))
                elif cmd == "start" and self.state in ("INIT", "PAUSED"):
                    self.connector.start(dict(self.props))
                    self.state = "STARTED"
                    self._report("RUNNING")
                elif cmd == "pause":
                    if self.state == "STARTED":
                        self.connector.stop()
                    if self.state in ("INIT", "STARTED"):
                        self.state = "PAUSED"
                        self._report("PAUSED")
                elif cmd == "stop":
                    was = self.state
                    self.state = "STOPPED"
                    if was == "STARTED":
                        self.connector.stop()
                    if was != "FAILED":
                        self._report("UNASSIGNED")
            except Exception as e:
                self._failed(e)

    def fail(self, error: BaseException) -> None:
        with self.lock:
            self._failed(error)

    def _failed(self, error: BaseException) -> None:
        if self.state == "FAILED":
            return
        was, self.state = self.state, "FAILED"
        trace = "".join(traceback.format_exception(error))
        log.error("Connector %s failed:\n%s", self.name, trace)
        if was == "STARTED":
            try:
                self.connector.stop()
            except Exception:
                log.exception("Connector %s: stop() after failure raised", self.name)
        self._report("FAILED", trace)

    def request_reconfiguration(self) -> None:
        if self.state == "STARTED":
            try:
                self.on_reconfigure(self.name)
            except Exception:
                log.exception("Connector %s: task reconfiguration request failed", self.name)

    def _report(self, state: str, trace: str | None = None) -> None:
        try:
            self.status.connector_status(self.name, state, trace)
        except Exception:
            log.exception("Connector %s: status listener failed for %s", self.name, state)


class Worker:
    """Runs connectors and tasks (module doc)."""

    def __init__(self, config: Any, plugins: Any, offsets: Any, status: StatusListener) -> None:
        self.config = config
        self.plugins = plugins
        self.offsets = offsets
        self.status = status
        self._lock = threading.RLock()
        self._connectors: dict[str, WorkerConnector] = {}
        self._tasks: dict[TaskId, WorkerTask] = {}
        self._topics: set[tuple[str, str]] = set()
        self.graceful_timeout = _ms(config.get("task.shutdown.graceful.timeout.ms"), 5000)

    # ---- helpers the tasks use

    def connector_config(self, props: dict[str, str]) -> Any:
        from spool.connect.connector_config import ConnectorConfig
        return ConnectorConfig(props, self.plugins, self.config)

    def error_handler(self, cfg: Any, producer_config: dict[str, Any], task_id: TaskId) -> Any:
        from spool.connect.errors import ErrorHandler
        return ErrorHandler(cfg, producer_config, task_id)

    def connector_plugin(self, props: dict[str, str]) -> api.Connector:
        cls = self.plugins.load(props.get("connector.class", ""), "connector")
        return cls()

    def topic_used(self, connector: str, topic: str) -> None:
        with self._lock:
            if (connector, topic) in self._topics:
                return
            self._topics.add((connector, topic))
        try:
            self.status.connector_topic(connector, topic)
        except Exception:
            log.exception("status listener failed for topic %s of %s", topic, connector)

    # ---- connectors

    def start_connector(self, name: str, props: dict[str, str], target_state: str,
                        on_reconfigure: Callable[[str], None]) -> None:
        with self._lock:
            if name in self._connectors:
                raise api.ConnectError(f"Connector {name} already running on this worker")
        try:
            connector = self.connector_plugin(props)
        except Exception as e:
            trace = "".join(traceback.format_exception(e))
            log.error("Failed to start connector %s:\n%s", name, trace)
            self.status.connector_status(name, "FAILED", trace)
            return
        wc = WorkerConnector(name, dict(props), connector, self.status, on_reconfigure)
        with self._lock:
            self._connectors[name] = wc
        wc.command("init", None)
        if wc.state == "FAILED":
            return
        try:
            self._check_exactly_once(connector, props)
        except api.ConnectError as e:
            wc.fail(e)
            return
        wc.command("start" if target_state == "STARTED" else "pause", None)

    def _check_exactly_once(self, connector: api.Connector, props: dict[str, str]) -> None:
        if not isinstance(connector, api.SourceConnector):
            return
        if str(props.get("exactly.once.support", "requested")).strip().lower() != "required":
            return
        support = str(self.config.get("exactly.once.source.support") or "disabled").lower()
        if support != "enabled":
            raise api.ConnectError(
                "This worker does not support exactly-once source support "
                "(exactly.once.source.support is not 'enabled'), which is required by "
                "the connector's exactly.once.support=required")
        if connector.exactly_once_support(props) != api.ExactlyOnceSupport.SUPPORTED:
            raise api.ConnectError(
                "The connector does not support exactly-once semantics with the provided "
                "configuration.")

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        wc = self._connector(name)
        with wc.lock:
            if wc.state != "STARTED":
                raise api.ConnectError(f"Connector {name} is not running ({wc.state})")
            configs = wc.connector.task_configs(max_tasks)
            task_cls = wc.connector.task_class()
        if len(configs) > max_tasks:
            e = api.ConnectError(
                f"The connector {name} has generated {len(configs)} tasks, which is greater "
                f"than {max_tasks}, the maximum number of tasks it is configured to create.")
            wc.fail(e)  # as Kafka's TooManyTasksException: the connector FAILED
            raise e
        out = []
        for c in configs:
            tc = {str(k): str(v) for k, v in c.items()}
            tc["task.class"] = f"{task_cls.__module__}.{task_cls.__qualname__}"
            if isinstance(wc.connector, api.SinkConnector):
                for k in ("topics", "topics.regex"):
                    if k in wc.props:
                        tc[k] = wc.props[k]
            out.append(tc)
        return out

    def stop_connector(self, name: str) -> None:
        with self._lock:
            wc = self._connectors.pop(name, None)
        if wc is None:
            return
        if not wc.command("stop", self.graceful_timeout):
            log.error("Connector %s did not stop within %.1f s; abandoned", name,
                      self.graceful_timeout)

    def set_target_state(self, name: str, state: str) -> None:
        with self._lock:
            wc = self._connectors.get(name)
            tasks = [t for tid, t in self._tasks.items() if tid.connector == name]
        if wc is not None and state in ("STARTED", "PAUSED"):
            wc.command("start" if state == "STARTED" else "pause", None)
        if state in ("STARTED", "PAUSED"):
            for t in tasks:
                t.transition_to(state)

    def connectors(self) -> set[str]:
        with self._lock:
            return set(self._connectors)

    def connector_running(self, name: str) -> bool:
        with self._lock:
            wc = self._connectors.get(name)
        return wc is not None and wc.state == "STARTED"

    def _connector(self, name: str) -> WorkerConnector:
        with self._lock:
            wc = self._connectors.get(name)
        if wc is None:
            raise api.ConnectError(f"Connector {name} is not running on this worker")
        return wc

    # ---- tasks

    def start_task(self, task_id: TaskId, connector_props: dict[str, str],
                   task_props: dict[str, str], target_state: str) -> None:
        with self._lock:
            old = self._tasks.get(task_id)
            if old is not None and old.alive:
                raise api.ConnectError(f"Task {task_id} already running on this worker")
            kind = self._kind(connector_props)
            cls = WorkerSourceTask if kind == "source" else WorkerSinkTask
            task = cls(self, task_id, dict(connector_props), dict(task_props), self.status,
                       target_state)
            self._tasks[task_id] = task
        task.start()

    def _kind(self, connector_props: dict[str, str]) -> str:
        try:
            cls = self.plugins.load(connector_props.get("connector.class", ""), "connector")
        except Exception:
            return "sink" if ("topics" in connector_props
                              or "topics.regex" in connector_props) else "source"
        return "sink" if issubclass(cls, api.SinkConnector) else "source"

    def stop_tasks(self, ids: Iterable[TaskId], timeout: float | None = None) -> None:
        with self._lock:
            tasks = [(tid, self._tasks.pop(tid)) for tid in ids if tid in self._tasks]
        for _, t in tasks:
            t.stop()
        deadline = time.monotonic() + (self.graceful_timeout if timeout is None else timeout)
        for tid, t in tasks:
            if not t.await_stop(max(0.0, deadline - time.monotonic())):
                log.error("Graceful stop of task %s failed.", tid)
                t.cancel()

    def tasks(self) -> set[TaskId]:
        with self._lock:
            return set(self._tasks)

    def stop(self) -> None:
        self.stop_tasks(self.tasks())
        for name in self.connectors():
            self.stop_connector(name)
