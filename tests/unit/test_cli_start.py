"""``spool`` starts without importing its commands, lists them all, and Ctrl-C is one line.

The command table (``spool.cli.main.COMMANDS``) is what ``spool --help`` shows without
importing a command module: these tests hold it to the real commands' help, hold
``spool --help`` to the table, check that a ``spool --help`` process loaded no command
module (nor the generated protocol classes, nor confluent-kafka), and interrupt
``spool produce`` at points of its start-up with SIGINT.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import spool
from spool.cli.lazy import INTERRUPTED, load_command
from spool.cli.main import COMMANDS

ROOT = Path(spool.__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300", "NO_COLOR": "1"}


def _first_paragraph(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("entry", COMMANDS, ids=[c.name for c in COMMANDS])
def test_table_help_is_the_commands_own(entry):
    cmd = load_command(entry)
    assert cmd.name == entry.name
    assert " ".join(entry.help.split()) == _first_paragraph(cmd.short_help or cmd.help)


def test_every_command_module_is_in_the_table():
    targets = {c.target.partition(":")[0] for c in COMMANDS}
    groups = {f"spool.cli.{p.stem}" for p in (ROOT / "spool" / "cli").glob("*.py")
              if re.search(r"^app = typer\.Typer\(", p.read_text(), re.M)}
    assert groups <= targets


# One `spool --help` process; it then prints the modules it had loaded.
_HELP_AND_MODULES = """
import json, sys
from spool.cli.main import app
try:
    app(["--help"], prog_name="spool")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture(scope="module")
def help_run():
    out = subprocess.run([sys.executable, "-c", _HELP_AND_MODULES], capture_output=True,
                         text=True, env=ENV, timeout=120, check=True).stdout
    text, _, modules = out.rpartition("\n[")
    return text, set(json.loads("[" + modules))


def test_help_lists_every_command_with_its_help(help_run):
    text, _ = help_run
    rows = {}
    for line in text.splitlines():
        m = re.fullmatch(r"([a-z][a-z-]*) {2,}(\S.*)", line.strip(" │|"))
        if m:
            rows[m.group(1)] = " ".join(m.group(2).split())
    for entry in COMMANDS:
        assert rows.get(entry.name) == " ".join(entry.help.split()), entry.name
    assert "broker" in rows and "version" in rows


def test_help_imports_no_command(help_run):
    _, modules = help_run
    commands = {c.target.partition(":")[0] for c in COMMANDS}
    assert not modules & commands
    assert not {m for m in modules if m.startswith("spool.protocol._generated")}
    assert "confluent_kafka" not in modules
    assert "spool.cli.common" not in modules


# Ctrl-C at points of `spool produce`'s start-up, each seen as the moment Python reports
# (-X importtime) having imported that module: typer (before the command group exists),
# spool.cli.common (while the command's module loads), confluent_kafka (the command's own
# imports); and once the command has connected to the "broker" (a socket that listens and
# never answers, so the command waits for its metadata).
def _ctrl_c_as_in_a_terminal() -> None:
    """The child's SIGINT as a terminal's command has it: a test run started in the
    background (``cmd &``, CI) ignores SIGINT, its children inherit that, and a process that
    starts with SIGINT ignored rightly keeps ignoring it (the guard then stays out)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("after", ["typer._click", "spool.cli.common", "confluent_kafka", None])
def test_ctrl_c_during_start_up_is_one_line_and_130(after):
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "spool.cli.main", "produce", "t",
             "-b", f"127.0.0.1:{port}", "--timeout", "60"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
            preexec_fn=_ctrl_c_as_in_a_terminal)
        lines = []
        try:
            if after is None:
                assert select.select([silent], [], [], 60)[0], "spool produce never connected"
            else:
                for line in proc.stderr:
                    lines.append(line)
                    if line.rsplit("|", 1)[-1].strip() == after:
                        break
            proc.send_signal(signal.SIGINT)
            _, rest = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
    said = [ln.strip() for ln in lines + rest.splitlines()
            if ln.strip() and not ln.startswith("import time:")]
    assert said == [INTERRUPTED]
    assert proc.returncode == 130
