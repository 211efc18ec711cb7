"""Every usage error of every ``spool`` command is one line on stderr and exit 2.

The tests walk the whole command tree (``spool.cli.main.app``, every group, command and
subcommand, loaded as ``spool`` would load it) and run each command in-process
(tests.helpers.cli) with an option it does not have, each group with a command it does
not have, and every option that takes a number with a value that is not one. Nothing
reaches a broker: the command line is refused before a command's body runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

import spool
from spool.cli.main import app
from tests.helpers.cli import spool_cli

ENV = {**os.environ, "PYTHONPATH": str(Path(spool.__file__).resolve().parents[1])}


def _tree() -> tuple[list[tuple[str, ...]], list[tuple[tuple[str, ...], object]]]:
    """(group paths, [(command path, command)]) of the whole tree, root group first."""
    groups: list[tuple[str, ...]] = []
    commands: list[tuple[tuple[str, ...], object]] = []

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        if isinstance(cmd, TyperGroup):
            groups.append(path)
            for name in cmd.list_commands(None):  # type: ignore[arg-type]
                walk(cmd.commands[name], (*path, name))
        else:
            commands.append((path, cmd))

    walk(typer.main.get_command(app), ())
    return groups, commands


GROUPS, COMMANDS = _tree()
NUMBER_OPTIONS = [
    (path, param) for path, cmd in COMMANDS for param in cmd.params  # type: ignore[attr-defined]
    if param.param_type_name == "option"
    and param.type_descriptor.annotation in (int, float, list[int])
]


def _one_line(res: subprocess.CompletedProcess, path: tuple[str, ...]) -> str:
    """The run's single stderr line, after checking its shape and exit status."""
    command = " ".join(("spool", *path))
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert line.startswith(f"{command}: "), line
    assert line.endswith(f" (try '{command} --help')"), line
    return line[len(command) + 2:-len(f" (try '{command} --help')")]


def test_the_tree_is_walked_whole():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"broker", "version", "topics create", "users scram set", "perf consume",
            "consume", "cluster up"} <= names
    assert len(COMMANDS) > 50 and ("users", "scram") in GROUPS
    assert NUMBER_OPTIONS


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_unknown_option(path):
    res = spool_cli(*path, "--no-such-option")
    assert _one_line(res, path) == "no such option --no-such-option"


@pytest.mark.parametrize("path", GROUPS, ids=lambda p: " ".join(("spool", *p)))
def test_unknown_command(path):
    res = spool_cli(*path, "no-such-command")
    assert _one_line(res, path) == "no such command 'no-such-command'"


@pytest.mark.parametrize(
    ("path", "param"), NUMBER_OPTIONS,
    ids=[" ".join((*p, o.opts[0])) for p, o in NUMBER_OPTIONS])
def test_number_option_given_a_word(path, param):
    opt = param.opts[0]
    res = spool_cli(*path, opt, "many")
    what = "an integer" if param.type_descriptor.annotation in (int, list[int]) else "a number"
    longs = [o for o in param.opts if o.startswith("--")]
    assert _one_line(res, path) == f"{(longs or param.opts)[0]}: must be {what}, not 'many'"


@pytest.mark.parametrize(("args", "expected"), [
    ("topics create --partitions 0 t", "--partitions: must be at least 1, not '0'"),
    ("topics create", "missing argument NAME"),
    ("users scram set alice", "missing option --user"),
    ("topics list --timeout", "--timeout needs a value"),
    ("topics list --json=yes", "--json takes no value"),
    ("topics list extra", "unexpected argument 'extra'"),
    ("topics list --bootstrap", "no such option --bootstrap; did you mean --bootstrap-server?"),
    ("produce --acks 2 t", "--acks: must be one of 0, 1, all, -1, not '2'"),
    ("consume --isolation-level dirty t",
     "--isolation-level: must be one of read_uncommitted, read_committed, not 'dirty'"),
    ("broker --log-format xml", "--log-format: 'xml' is not one of text, json"),
    ("topcs", "no such command 'topcs'; did you mean 'topics'?"),
])
def test_what_is_wrong_in_plain_words(args, expected):
    argv = tuple(args.split())
    # the command the line names: the longest command path argv starts with (spool itself
    # for an unknown command)
    path = max((p for p, _ in COMMANDS if argv[:len(p)] == p), key=len, default=())
    assert _one_line(spool_cli(*argv), path) == expected


def test_a_group_without_its_command_prints_its_help():
    res = spool_cli("topics")
    assert res.returncode == 2
    assert "create" in res.stdout + res.stderr and "Usage" in res.stdout + res.stderr


def test_spool_process_usage_error_is_one_line():
    """The same through a real process: nothing else on stderr, exit status 2."""
    res = subprocess.run([sys.executable, "-m", "spool.cli.main", "topics", "create", "-p",
                          "x", "t"], capture_output=True, text=True, timeout=120, env=ENV)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("spool topics create: --partitions: must be an integer, not 'x' "
                          "(try 'spool topics create --help')\n")
