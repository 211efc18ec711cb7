"""A real ``spool connect`` worker process for tests, and Kafka Connect's REST API as tests
speak it.

``ConnectProcess(work_dir, worker_props, *, standalone=False, connector_files=(),
overrides=(), name="connect")`` writes ``worker_props`` to ``work_dir/<name>.properties``
(``listeners`` defaults to ``http://127.0.0.1:0``: the worker binds a free port and
advertises it) and runs ``spool connect --config FILE [--override k=v ...] [--standalone
FILES...]`` in a child whose ``PYTHONPATH`` starts with this checkout (so the child runs
the code under test), stderr to ``work_dir/<name>.log``. ``start`` returns once the child
printed ``spool connect listening on http://HOST:PORT`` (``url``); ``kill`` is kill -9,
``stop`` SIGTERM and the exit code; ``restart`` starts it again on the same port (so its
worker id is unchanged) after a kill or stop.

``call(method, path, body=None)`` is one request to this worker (``Answer``: status, the
parsed JSON or the text, headers; error statuses included, never an exception);
``wait_until(fn, timeout)`` polls ``fn`` until it returns something truthy (and returns
it); ``wait_running(name, tasks)`` waits until the connector and ``tasks`` tasks report
RUNNING and returns the status. ``distributed_props(bootstrap, group)`` is a worker config
for a test: its own group id and internal topics, short flush and session timeouts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from tests.helpers import http
from tests.helpers.child_proc import ChildProcess
from tests.helpers.http import Answer

_LINE = re.compile(r"spool connect listening on (http://\S+)")
_ROOT = Path(__file__).resolve().parents[2]  # this checkout: the code the child must run
T = TypeVar("T")


def call(url: str, method: str, path: str, body: Any = None, *,
         headers: dict[str, str] | None = None, **kw: Any) -> Answer:
    """``http.call`` asking for JSON (Accept: application/json unless ``headers`` say)."""
    return http.call(url, method, path, body, headers={"Accept": "application/json",
                                                       **(headers or {})}, **kw)


def wait_until(fn: Callable[[], T], timeout: float = 30.0, interval: float = 0.2,
               what: str = "condition") -> T:
    """``fn()``'s first truthy answer; AssertionError after ``timeout`` with the last one."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = fn()
        except (OSError, urllib.error.URLError) as e:  # a worker restarting
            last = e
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout} s; last: {last!r}")
        time.sleep(interval)


def distributed_props(bootstrap: str, group: str, **extra: str) -> dict[str, str]:
    """A distributed worker's config of a test's own: group ``group``, topics
    ``<group>-configs/-offsets/-status``, replication factor 1, flush every 500 ms,
    session timeout 6 s (heartbeats every second), JSON converters without schemas."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "status.storage.partitions": "1",
        "offset.flush.interval.ms": "500",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "rebalance.timeout.ms": "10000",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        **extra,
    }


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class ConnectProcess(ChildProcess):
    """``spool connect`` in a child (module doc)."""

    def __init__(self, work_dir: Path, worker_props: dict[str, str], *,
                 standalone: bool = False, connector_files: Iterable[Path | str] = (),
                 overrides: Iterable[str] = (), name: str = "connect",
                 log_level: str | None = None) -> None:
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.worker_props = {"listeners": "http://127.0.0.1:0", **worker_props}
        self.standalone = standalone
        self.connector_files = [str(f) for f in connector_files]
        self.overrides = list(overrides)
        self.name = name
        self.log_level = log_level
        self.config_path = self.work_dir / f"{name}.properties"
        self.log_path = self.work_dir / f"{name}.log"
        self.url = ""
        self.stdout_lines: list[str] = []
        self.proc: subprocess.Popen | None = None

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1]) if self.url else 0

    @property
    def worker_id(self) -> str:
        return self.url.removeprefix("http://")

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "spool.cli.main", "connect", "--config",
               str(self.config_path)]
        for o in self.overrides:
            cmd += ["--override", o]
        if self.log_level:
            cmd += ["--log-level", self.log_level]
        if self.standalone:
            cmd += ["--standalone", *self.connector_files]
        return cmd

    def start(self, timeout: float = 60.0) -> ConnectProcess:
        write_properties(self.config_path, self.worker_props)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        self.url = ""
        found: list[str] = []
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=log,
                                         env=env, cwd=str(_ROOT))

        def read() -> None:
            assert self.proc and self.proc.stdout
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace")
                self.stdout_lines.append(line)
                m = _LINE.search(line)
                if m:
                    found.append(m.group(1))

        threading.Thread(target=read, daemon=True).start()
        self.wait_ready(f"spool connect ({self.name})", lambda: bool(found), timeout)
        self.url = found[0]
        return self

    def restart(self, timeout: float = 60.0) -> ConnectProcess:
        """Start again after ``kill``/``stop``, on the port it had (same worker id)."""
        if self.url:
            self.worker_props["listeners"] = self.url
        return self.start(timeout)

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Answer:
        return call(self.url, method, path, body, **kw)

    def wait_running(self, name: str, tasks: int, timeout: float = 60.0) -> dict[str, Any]:
        """The connector's status once it and ``tasks`` tasks are RUNNING."""
        def ready() -> dict[str, Any] | None:
            a = self.call("GET", f"/connectors/{name}/status")
            if a.status != 200:
                return None
            s = a.body
            ok = (s["connector"]["state"] == "RUNNING" and len(s["tasks"]) == tasks
                  and all(t["state"] == "RUNNING" for t in s["tasks"]))
            return s if ok else None
        return wait_until(ready, timeout, what=f"{name} RUNNING with {tasks} tasks")
