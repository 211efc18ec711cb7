"""Startup of the embedded broker (``spool.testing``): from the call to the first successful
Metadata, in a thread and in a process; and of ``running_cluster``.

    python -m bench.embedded [--runs 10] [--cluster-runs 2] [--no-write]

Each figure is the time from entering ``running_broker(...)`` (or
``running_cluster``) until a new confluent-kafka AdminClient's
``list_topics`` (Metadata) has answered, then the time to leave the block
(stop and remove the directory). Cases:

- thread, first of a process: a new interpreter that has imported
  confluent-kafka (a test suite's state) starts its first broker, so
  Spool's imports are counted (page cache warm: not a cold disk), with
  Spool's bytecode cached (``__pycache__``, as after ``pip install`` or a
  first run; written under a temporary ``PYTHONPYCACHEPREFIX`` here, not in
  the tree), and without it: a copy of ``spool/`` without ``__pycache__`` run
  with ``PYTHONDONTWRITEBYTECODE=1``, so every Spool module is compiled (a
  checkout whose environment sets that variable pays this in every process);
- thread, later: the next brokers of that process;
- process: ``isolation="process"`` (a ``spool broker`` child each time);
- cluster: ``running_cluster(nodes=3)``, ready when every node lists all
  three brokers and a controller.

Median and min-max over ``--runs`` (``--cluster-runs`` for the cluster), in
ms; written between ``<!-- embedded:begin -->`` and ``<!-- embedded:end -->``
in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.report import write_section

PAGE = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- embedded:begin -->", "<!-- embedded:end -->"

# One timed start, stop and teardown in this process; prints {"start": ms, "stop": ms}.
ONE = """
import json, sys, time
from confluent_kafka.admin import AdminClient

def timed(make):
    t0 = time.perf_counter()
    cm = make()
    bootstrap = cm.__enter__()
    AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    t1 = time.perf_counter()
    cm.__exit__(None, None, None)
    t2 = time.perf_counter()
    return {"start": (t1 - t0) * 1000, "stop": (t2 - t1) * 1000}
"""


ROOT = Path(__file__).resolve().parents[1]
# Where the children keep their bytecode (set by main): Spool's __pycache__ as installed.
_PYCACHE: dict[str, str] = {}


def _child(code: str, root: Path = ROOT, compiled: bool = True) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")])}
    if compiled:  # bytecode read and written under the bench's own prefix
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(_PYCACHE)
    else:  # the stdlib's and site-packages' caches as they are; Spool's compiled each time
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         check=True, env=env, timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def first_thread(source: Path | None = None) -> dict:
    """A new interpreter with confluent-kafka imported; Spool's import inside the timing.
    ``source``: a copy of the tree without bytecode, compiled in the child."""
    code = ONE + """
from spool.testing import running_broker
print(json.dumps(timed(running_broker)))  # the broker's modules are imported in there
"""
    if source is None:
        return _child(code)[0]
    return _child(code, source, compiled=False)[0]


def _source_copy(into: Path) -> Path:
    """``spool/`` copied without ``__pycache__`` (the bench's uncompiled Spool)."""
    shutil.copytree(ROOT / "spool", into / "spool",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


def broker_imports() -> float:
    """ms to import the broker's modules in a new interpreter with confluent-kafka imported."""
    code = ONE + """
t0 = time.perf_counter()
import uvloop, spool.broker.broker, spool.broker.handlers
print(json.dumps({"import": (time.perf_counter() - t0) * 1000}))
"""
    return _child(code)[0]["import"]


def many(kind: str, runs: int) -> list[dict]:
    make = {
        "thread": "testing.running_broker",
        "process": "lambda: testing.running_broker(isolation='process')",
        "cluster": "lambda: testing.running_cluster(nodes=3)",
    }[kind]
    warm = "timed(testing.running_broker)\n" if kind == "thread" else ""  # the imports
    code = (ONE + "from spool import testing\n" + warm
            + f"for _ in range({runs}):\n    print(json.dumps(timed({make})))\n")
    return _child(code)


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cluster-runs", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-embedded-"))
    _PYCACHE["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    first_thread()  # writes the bytecode the next runs read
    source = _source_copy(tmp / "source")
    rows = {
        "thread, first of a process (Spool's imports counted, bytecode cached)":
            [first_thread() for _ in range(max(3, args.runs // 2))],
        "thread, first of a process, Spool compiled from source (no bytecode cache)":
            [first_thread(source) for _ in range(max(3, args.runs // 2))],
        "thread, later brokers of the process": many("thread", args.runs),
        "process (`isolation=\"process\"`)": many("process", max(3, args.runs // 2)),
        "cluster of 3 processes (`running_cluster`)": many("cluster", args.cluster_runs),
    }
    lines = [
        "## Embedded broker startup (`python -m bench.embedded`)",
        "",
        "From entering `running_broker()` / `running_cluster()` (spool.testing) until a",
        "new confluent-kafka AdminClient's first Metadata has answered, and from there",
        "until the block has stopped the broker and removed its directory; ms, median",
        f"(min-max); load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        "(2 cores).",
        "",
        "| case | runs | to first Metadata | stop |",
        "|---|---|---|---|",
    ]
    for case, rs in rows.items():
        lines.append(f"| {case} | {len(rs)} | {summary([r['start'] for r in rs])} "
                     f"| {summary([r['stop'] for r in rs])} |")
    imports = [broker_imports() for _ in range(max(3, args.runs // 2))]
    shutil.rmtree(tmp, ignore_errors=True)
    lines += [
        "",
        f"Of the first thread's time, importing the broker takes {summary(imports)} ms: a",
        "process pays it (and the interpreter's start) for every broker, a thread once per",
        "test session. So `running_broker` runs the broker in a thread by default, and",
        "the pytest plugin's session broker costs a suite about one import of Spool;",
        "`isolation=\"process\"` is there for a broker a test kills or must not share",
        "the interpreter lock with.",
        "",
        "`Broker.start` itself (bind, load, coordinators) is ~6 ms of CPU and waits on no",
        "timer; a first broker's time is importing ~550 Spool modules, compiled when no",
        "bytecode is cached (an environment with `PYTHONDONTWRITEBYTECODE=1` and no",
        "`__pycache__` pays that in every process). Of a later broker's time ~50 ms in",
        "about half the runs is the client's: librdkafka drops its bootstrap connection",
        "once the first Metadata names the broker, and retries the application's",
        "request 50 ms later.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_section(PAGE, BEGIN, END, text)


if __name__ == "__main__":
    main()
