"""A real broker process for tests: start, kill -9, restart on the same port and data."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tests.helpers.child_proc import ChildProcess

_LISTEN = re.compile(rb"listening on ([0-9a-fA-F.:]+):(\d+)(?: \((\w+)\))?")
_HTTP = re.compile(rb"listening on (http://\S+) \((\w+)\)")


class BrokerProcess(ChildProcess):
    """``spool broker`` in a child process with its data in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        *,
        log_level: str | None = "WARNING",  # None: no --log-level (the log.level key's)
        log_format: str = "text",
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.log_level = log_level
        self.log_format = log_format
        self.preexec_fn = preexec_fn  # runs in the child before exec (e.g. setrlimit)
        # A fault file: run tests.helpers.faulty_broker (coordinator appends fail or kill on cue).
        self.faults: Path | None = None
        self.port = 0  # the first listener's
        self.listener_ports: dict[str, int] = {}  # every listener's, by name
        # the HTTP endpoints' http://host:port by what they are: admin, metrics (the first
        # metrics listener), console, registry; as the broker prints them on stdout
        self.http_urls: dict[str, str] = {}
        self.stdout_lines: list[str] = []  # what it printed on stdout, line by line
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        ov = {
            "log.dirs": str(self.data_dir),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        level = ["--log-level", self.log_level] if self.log_level is not None else []
        cmd = [sys.executable, "-m", "spool.cli.main", "broker", *level,
               "--log-format", self.log_format, "--strict-config"]
        if self.faults is not None:
            cmd = [sys.executable, "-m", "tests.helpers.faulty_broker", "--faults", str(self.faults),
                   *level]
        for k, v in ov.items():
            cmd += ["--override", f"{k}={v}"]
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, preexec_fn=self.preexec_fn
        )
        log.close()
        found: list[int] = []
        ports: dict[str, int] = {}
        urls: dict[str, str] = {}
        expected = max(1, len([x for x in ov["listeners"].split(",") if x.strip()]))
        http_expected = (len([x for x in ov.get("metrics.listeners", "").split(",") if x.strip()])
                         + bool(ov.get("spool.admin.http.listener"))
                         + bool(ov.get("console.listeners"))
                         + bool(ov.get("schema.registry.listeners")))
        http_seen: list[str] = []
        printed: list[str] = []
        self.stdout_lines = printed

        def read() -> None:
            assert self.proc and self.proc.stdout
            for line in self.proc.stdout:
                printed.append(line.decode(errors="replace").rstrip("\n"))
                h = _HTTP.search(line)
                if h:
                    urls.setdefault(h.group(2).decode(), h.group(1).decode())
                    http_seen.append(h.group(1).decode())
                    continue
                m = _LISTEN.search(line)
                if m:
                    if m.group(3):
                        ports[m.group(3).decode()] = int(m.group(2))
                    found.append(int(m.group(2)))

        threading.Thread(target=read, daemon=True).start()
        self.wait_ready("broker", lambda: len(found) >= expected
                        and len(http_seen) >= http_expected, timeout)
        self.port = found[0]
        self.listener_ports = dict(ports)
        self.http_urls = dict(urls)
        return self

    def restart(self) -> BrokerProcess:
        self.kill()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
