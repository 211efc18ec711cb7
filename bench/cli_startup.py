"""Start-up time of the ``spool`` command: wall time of a process that runs it to its exit.

    python -m bench.cli_startup [--runs 10] [--against PATH ...] [--no-write]

Each command runs as the ``spool`` console script does (``from spool.cli.main import app;
app()``) in a new interpreter, ``--runs`` times; wall time median and min-max, and median CPU
time (user + system of the child), in ms. The first two rows
are the floor: an interpreter that does nothing, and one that imports typer (which every
command needs). ``--against PATH`` (repeatable) also times the same commands with ``PATH``
(another checkout, e.g. ``git archive OLD | tar -x -C PATH``) first on ``PYTHONPATH``, in
columns before this checkout's, the checkouts taking turns run by run so that all see the
same load. Written between ``<!-- cli-startup:begin -->``
and ``<!-- cli-startup:end -->`` in docs/BENCHMARKS.md unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.report import write_section

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- cli-startup:begin -->", "<!-- cli-startup:end -->"

SPOOL = "import sys; from spool.cli.main import app; sys.argv[0] = 'spool'; sys.exit(app())"
CASES: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("python -c 'import typer'", ["-c", "import typer"]),
    ("spool --version", ["-c", SPOOL, "--version"]),
    ("spool --help", ["-c", SPOOL, "--help"]),
    ("spool topics list --help", ["-c", SPOOL, "topics", "list", "--help"]),
    ("spool produce --help", ["-c", SPOOL, "produce", "--help"]),
]


def _once(root: Path, args: list[str]) -> tuple[float, float]:
    """(wall ms, CPU ms: user + system) of one run."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=root, timeout=120)
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return (t1 - t0) * 1000, cpu * 1000


def _cell(runs: list[tuple[float, float]]) -> str:
    wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
    return (f"{statistics.median(wall):,.0f} ({min(wall):,.0f}-{max(wall):,.0f}) "
            f"| {statistics.median(cpu):,.0f}")


def _label(root: Path) -> str:
    """The checkout's commit (``+`` if it has changes), or its directory's name."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True).stdout.strip()
    if not (root / ".git").exists():
        return root.name
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short=12", "HEAD") + ("+" if dirty else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--against", type=Path, action="append", default=[],
                    help="another checkout to time beside this one (repeatable)")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    roots = [p.resolve() for p in a.against] + [ROOT]
    times: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    for _ in range(a.runs):
        for name, args in CASES:
            for root in roots:
                times.setdefault((root, name), []).append(_once(root, args))
    load = os.getloadavg()[0]
    head = "| command | " + " | ".join(f"`{_label(r)}` wall ms | CPU ms" for r in roots) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(roots)]
    for name, _args in CASES:
        lines.append(f"| `{name}` | " + " | ".join(_cell(times[(r, name)]) for r in roots) + " |")
    table = "\n".join(lines)
    print(table)
    if a.no_write:
        return
    text = "\n".join([
        "## CLI start-up (`python -m bench.cli_startup`)",
        "",
        f"A new interpreter running the command to its exit: wall time, median (min-max) of "
        f"{a.runs} runs, and the median CPU time (user + system, steadier than wall time on "
        f"a loaded machine), on 2 shared cores (load average {load:.1f} at the end), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. The first two rows are the floor.",
        "",
        table,
        "",
        "Columns: the `--against` checkouts, then this one. `spool.cli.main` imports no "
        "command module: `spool.cli.lazy` registers each command from one table in "
        "`spool/cli/main.py` (name, module:attribute, help line) and imports the module only "
        "when that command runs or shows its own help. `spool.protocol._generated` imports a "
        "message module on first use of its class (module `__getattr__`, `LazyMap` "
        "registries): a command that talks the Kafka protocol itself (`topics`, `acls`, ...) "
        "no longer imports all ~240 of them. What is left in `produce --help` is mostly "
        "confluent-kafka and rich (typer's help formatting); "
        "`python -X importtime -m spool.cli.main ARGS` shows where a command's time goes.",
        "",
    ])
    write_section(PAGE, BEGIN, END, text)


if __name__ == "__main__":
    main()
