"""What the tests' server processes share: ``ChildProcess``.

A subclass sets ``self.proc`` (the ``subprocess.Popen``, stderr to ``self.log_path``) and
calls ``wait_ready(what, ready, timeout)``: it returns once ``ready()`` is true, raises
``RuntimeError`` with the log's tail if the child exits first or ``timeout`` passes (the
child then killed). ``log_tail`` is the end of its log, ``kill`` kill -9, ``stop`` SIGTERM
and a wait for a clean exit (kill -9 after ``timeout``), returning the exit code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class ChildProcess:
    proc: subprocess.Popen | None
    log_path: Path

    def wait_ready(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {self.proc.returncode}: "
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{what} did not start: {self.log_tail()}")
            time.sleep(0.02)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """kill -9: no flush, no clean shutdown, no goodbye."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for a clean exit; the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode
