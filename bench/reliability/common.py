"""Shared pieces of the reliability scripts: broker process, samplers, probes, results.

* ``Broker(data_dir, overrides)``: a ``spool broker`` child process (via
  ``tests.helpers.broker_proc``) on an ephemeral 127.0.0.1 port; ``.pid``,
  ``.tracebacks()`` counts lines containing ``Traceback`` in its stderr log,
  ``.timed_start()`` returns the seconds until it listens.
* ``rss(pid)`` / ``fds(pid)``: resident memory (bytes) and open descriptors
  from /proc; ``Sampler(pid, every)`` records both in a thread, and what the descriptors
  are whenever their count jumps 500 above its maximum so far (``surges``).
* ``probe(bootstrap, timeout)``: one ApiVersions v0 on a fresh connection;
  seconds until the answer, or None when none came within ``timeout``.
* ``started_broker(name, args)``: a started ``Broker`` on a fresh temporary data
  directory with the ``--override``s; stopped on exit and its log kept as
  ``<args.out>/<name>-broker.log``.
* ``raise_nofile()``: soft RLIMIT_NOFILE up to the hard limit (for this process
  and the children it starts).
* ``write_result(out_dir, name, result)``: ``<out_dir>/<name>.json`` with the
  commit measured (HEAD when the script started), the command line, the machine's load and core count.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.helpers.broker_proc import BrokerProcess

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "docs" / "reliability"
# ApiVersions v0, correlation id 0x7fff0000, client id "probe"
_PROBE = struct.pack(">hhih", 18, 0, 0x7FFF0000, 5) + b"probe"
PROBE_FRAME = struct.pack(">i", len(_PROBE)) + _PROBE


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid: int, top: int = 5) -> list[tuple[str, int]]:
    """The ``top`` most common targets of ``pid``'s descriptors (digits folded to N)."""
    import collections
    import re

    counts: collections.Counter[str] = collections.Counter()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                counts[re.sub(r"\d+", "N", os.readlink(f"/proc/{pid}/fd/{fd}"))] += 1
    return counts.most_common(top)


def mib(n: float) -> float:
    return round(n / (1 << 20), 1)


class Broker(BrokerProcess):
    """BrokerProcess with the figures the reliability scripts record."""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def timed_start(self, timeout: float = 120.0) -> float:
        t0 = time.monotonic()
        self.start(timeout)
        return time.monotonic() - t0

    def tracebacks(self) -> int:
        try:
            with open(self.log_path, "rb") as f:
                return sum(1 for line in f if b"Traceback" in line)
        except OSError:
            return 0

    def log_lines(self, needle: bytes, limit: int = 5) -> list[str]:
        out: list[str] = []
        with contextlib.suppress(OSError), open(self.log_path, "rb") as f:
            for line in f:
                if needle in line:
                    out.append(line.decode(errors="replace").rstrip()[:300])
                    if len(out) >= limit:
                        break
        return out

    def log_bytes(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0


def probe(bootstrap: str, timeout: float = 5.0) -> float | None:
    host, port = bootstrap.rsplit(":", 1)
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall(PROBE_FRAME)
            buf = b""
            while len(buf) < 4:
                chunk = s.recv(4 - len(buf))
                if not chunk:
                    return None
                buf += chunk
            size = struct.unpack(">i", buf)[0]
            got = 0
            while got < size:
                chunk = s.recv(min(65536, size - got))
                if not chunk:
                    return None
                got += len(chunk)
    except OSError:
        return None
    return round(time.monotonic() - t0, 4)


class Sampler:
    """RSS and descriptor count of ``pid`` every ``every`` seconds, in a thread."""

    def __init__(self, pid: int, every: float = 1.0, data_dir: Path | None = None) -> None:
        self.pid = pid
        self.data_dir = data_dir
        self.every = every
        # (seconds since start, rss, fds, entries in data_dir: partition dirs, incl. -delete)
        self.samples: list[tuple[float, int, int, int]] = []
        self.surges: list[dict[str, Any]] = []  # descriptors up 500+ on the max: what they are
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def sample(self) -> tuple[int, int] | None:
        try:
            r, f = rss(self.pid), fds(self.pid)
        except (OSError, ValueError):
            return None
        t = time.monotonic() - self._t0
        parts = 0
        if self.data_dir is not None:
            with contextlib.suppress(OSError):
                parts = len(os.listdir(self.data_dir))
        if self.samples and f > max(s[2] for s in self.samples) + 500:
            self.surges.append({"at_s": round(t), "fds": f, "dirs": parts,
                                "top": fd_targets(self.pid)})
        self.samples.append((t, r, f, parts))
        return r, f

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def stop(self) -> list[tuple[float, int, int, int]]:
        self._stop.set()
        self._thread.join()
        self.sample()
        return self.samples


class Prober:
    """An ApiVersions probe on a fresh connection every ``every`` s; unanswered = a hang."""

    def __init__(self, bootstrap: str, every: float = 5.0, timeout: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.every = every
        self.timeout = timeout
        self.latencies: list[float] = []
        self.unanswered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Prober:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            got = probe(self.bootstrap, self.timeout)
            if got is None:
                self.unanswered += 1
            else:
                self.latencies.append(got)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        lat = sorted(self.latencies)
        return {
            "probes": len(lat) + self.unanswered,
            "unanswered": self.unanswered,
            "timeout_s": self.timeout,
            "latency_median_s": round(statistics.median(lat), 3) if lat else None,
            "latency_max_s": round(lat[-1], 3) if lat else None,
        }


def percentile(values: list[float], p: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":!docs"],  # results being rewritten are not the code
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def keep_log(broker: BrokerProcess, dest: Path, limit: int = 32 * 1024) -> None:
    """Copy the head and tail of a broker's log (at most ``limit`` bytes of each) to ``dest``."""
    try:
        data = broker.log_path.read_bytes()
    except OSError:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    if len(data) > 2 * limit:
        data = data[:limit] + b"\n[... %d bytes cut ...]\n" % (len(data) - 2 * limit) + data[-limit:]
    dest.write_bytes(data)


@contextlib.contextmanager
def started_broker(name: str, args: Any, stop_timeout: float = 20.0) -> Iterator[Broker]:
    """A started broker on a fresh temporary data dir with ``args.override``; on exit it is
    stopped (``stop_timeout``) and its log kept as ``<args.out>/<name>-broker.log``."""
    with tempfile.TemporaryDirectory(prefix=f"spool-{name}-") as tmp:
        broker = Broker(Path(tmp) / "data", parse_overrides(args.override))
        broker.start()
        try:
            yield broker
        finally:
            broker.stop(timeout=stop_timeout)
            keep_log(broker, args.out / f"{name}-broker.log")


COMMIT_AT_START = commit()  # the code a script imported, even if HEAD moves while it runs


def write_result(out_dir: Path, name: str, result: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "script": name,
        "command": "python -m " + " ".join([f"bench.reliability.{name}", *sys.argv[1:]]),
        "commit": COMMIT_AT_START,
        "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "cores": os.cpu_count(),
        "loadavg_at_end": os.getloadavg()[0],
        **result,
    }
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n")
    return path


def kill_loop_main(argv: list[str] | None, *, name: str, doc_default: Path, quick_kills: int,
                   description: str, run: Callable[[Path, int], dict[str, Any]],
                   write_doc: Callable[[dict[str, Any], Path], None],
                   ok: Callable[[dict[str, Any], int], bool]) -> int:
    """The command line of a kill loop (``--kills``, ``--quick``, ``--out``, ``--doc``): run
    it in a temporary dir, write its JSON result, the doc page when the result goes to the
    default place or a doc was named; exit 0 when ``ok(result, kills)``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help=f"CI size: {quick_kills} kills")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--doc", type=Path, default=doc_default)
    args = ap.parse_args(argv)
    kills = quick_kills if args.quick else args.kills
    with tempfile.TemporaryDirectory(prefix=f"spool-{name}-") as tmp:
        result = run(Path(tmp), kills)
    path = write_result(args.out, name, result)
    result = json.loads(path.read_text())  # with the commit and machine write_result adds
    if args.out == DEFAULT_OUT or args.doc != doc_default:
        write_doc(result, args.doc)
        print(f"wrote {path} and {args.doc}")
    return 0 if ok(result, kills) else 1


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        k, _, v = p.partition("=")
        out[k] = v
    return out
