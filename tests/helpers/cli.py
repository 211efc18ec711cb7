"""``spool ...`` run in the test's own process, for CLI tests that make many calls.

``spool_cli(*args)`` invokes the real command tree (``spool.cli.main.app``, the same
typer app the ``spool`` script runs) with typer's ``CliRunner`` and returns a
``subprocess.CompletedProcess`` (``returncode``, ``stdout``, ``stderr`` kept apart), so
a test reads it as it would a child process's. It skips the ~0.9 s of interpreter
start and imports a subprocess pays per call; what it does not cover is the process
boundary itself (signals, a closed stdout), which the subprocess tests keep. Not for
``consume``: it installs a SIGTERM handler for its process, which would stay in the
test's.
"""

from __future__ import annotations

import subprocess

from typer.testing import CliRunner

from spool.cli.main import app


def spool_cli(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
    """``stdin``: what the command reads on its standard input (``produce``'s lines)."""
    res = CliRunner().invoke(app, list(args), input=stdin)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return subprocess.CompletedProcess(["spool", *args], res.exit_code, res.stdout, res.stderr)
