"""Spark drivers as real processes: start an example pipeline, kill -9 its whole tree.

``start_driver(module, args, log)`` runs ``python -m <module> <args>`` from the
repository root in its own process group (the driver's JVM and Python
workers are its children), appending stdout and stderr to ``log``.
``kill_tree(proc)`` SIGKILLs that group and reaps the driver: the crash an
exactly-once test provokes. ``SPARK_MASTER`` / ``SPARK_REMOTE`` in ``env``
choose where the pipeline runs (``examples.common.add_spark``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_driver(module: str, args: list[str], log: Path,
                 env: dict[str, str] | None = None) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 - the child keeps its own descriptor
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args], cwd=ROOT, stdout=out, stderr=out,
            start_new_session=True, env={**os.environ, **(env or {})},
        )
    finally:
        out.close()


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the driver's whole process group (JVM, Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
