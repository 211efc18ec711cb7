"""A real ``spool registry`` process for tests: start, kill -9, stop; and a tiny HTTP client."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

_LINE = re.compile(r"spool registry listening on (http://\S+) \(registry\)")
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryProcess:
    """``spool registry --bootstrap-server B --listen http://127.0.0.1:0`` in a child."""

    def __init__(self, bootstrap: str, log_path: Path, *extra: str) -> None:
        self.bootstrap = bootstrap
        self.log_path = Path(log_path)
        self.extra = list(extra)
        self.url = ""
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> RegistryProcess:
        cmd = [sys.executable, "-m", "spool.cli.main", "registry", "--bootstrap-server",
               self.bootstrap, "--listen", "http://127.0.0.1:0", *self.extra]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
        found: list[str] = []

        def read() -> None:
            assert self.proc and self.proc.stdout
            for line in self.proc.stdout:
                m = _LINE.search(line.decode(errors="replace"))
                if m:
                    found.append(m.group(1))

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found:
            if self.proc.poll() is not None:
                raise RuntimeError(f"registry exited with {self.proc.returncode}: "
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"registry did not start: {self.log_tail()}")
            time.sleep(0.02)
        self.url = found[0]
        return self

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """kill -9: no leaving the group, no goodbye."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for a clean exit; its exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode


def call(method: str, url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    """One REST call as a client makes it: (status, decoded JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": MEDIA_TYPE,
                                              "Accept": MEDIA_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
