"""Commands registered by name, imported when they run: what keeps ``spool`` quick to start.

Contract:

- ``LazyCommand(name, target, help)``: ``target`` is ``"module:attribute"``, either a
  ``typer.Typer`` (a command group, as ``app.add_typer(attribute, name=name)`` would add it)
  or a command function (as ``app.command(name)(attribute)``). ``help`` is the one line
  ``spool --help`` shows for it: the first paragraph of the real command's help
  (tests/unit/test_cli_start.py checks that they agree).
- ``lazy_typer(commands, **typer_kwargs)`` is a ``typer.Typer`` whose click group lists every
  lazy command (after the ones registered on it the usual way) and imports a command's
  module only when that command is resolved: to run it, or to show its own ``--help``.
  ``spool --help`` imports none of them.
- Ctrl-C at any moment of a ``spool`` run is one line on stderr (``spool: interrupted``)
  and exit status 130, never a traceback: ``interrupt_guard()`` covers the imports before
  the group exists (``spool.cli.main`` calls it first), the group turns a
  KeyboardInterrupt raised while parsing, loading a command or running it into that line
  (commands that handle Ctrl-C themselves, through ``spool.cli.common.cli_command``,
  have already said so and exit 130 as they are).
- The group is also ``spool.cli.usage.OneLineUsageErrors``: a usage error anywhere in the
  tree is one line on stderr and exit 2.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, NamedTuple

INTERRUPTED = "spool: interrupted"


def _say_interrupted() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while leaving: quiet
    except ValueError:  # not the main thread
        pass
    try:
        sys.stderr.write(f"{INTERRUPTED}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _exit_interrupted(signum: int, frame: object) -> None:
    _say_interrupted()
    os._exit(130)  # nothing to clean up yet: only imports have run


def _is_spool_command() -> bool:
    """This process is the ``spool`` command (its script, or ``python -m spool.cli.main``)."""
    if os.path.basename(sys.argv[0]).removesuffix(".exe") == "spool":
        return True
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "spool.cli.main"


class interrupt_guard:  # noqa: N801 - used as a statement-like context manager
    """While imports run: Ctrl-C is one line and exit 130 (restores the handler after).

    Only in the ``spool`` command's own process (main thread, Python's default SIGINT
    handler); elsewhere (a test suite importing the CLI) it does nothing.
    """

    def __enter__(self) -> interrupt_guard:
        self._prev: Any = None
        if (_is_spool_command() and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._prev = signal.signal(signal.SIGINT, _exit_interrupted)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)


with interrupt_guard():
    import typer
    from typer.core import TyperCommand, TyperGroup
    from typer.main import get_command_from_info, get_group_from_info
    from typer.models import CommandInfo, TyperInfo

    from spool.cli.usage import OneLineUsageErrors


class LazyCommand(NamedTuple):
    name: str
    target: str  # "module:attribute"
    help: str


def load_command(entry: LazyCommand, *, pretty_exceptions_short: bool = True,
                 rich_markup_mode: Any = "rich", suggest_commands: bool = True) -> Any:
    """The click command ``entry`` names, built as typer would have built it eagerly."""
    module, _, attr = entry.target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    if isinstance(obj, typer.Typer):
        return get_group_from_info(
            TyperInfo(obj, name=entry.name), pretty_exceptions_short=pretty_exceptions_short,
            rich_markup_mode=rich_markup_mode, suggest_commands=suggest_commands)
    return get_command_from_info(
        CommandInfo(name=entry.name, callback=obj),
        pretty_exceptions_short=pretty_exceptions_short, rich_markup_mode=rich_markup_mode)


class _Placeholder(TyperCommand):
    """What a lazy command is until it runs: a name and a line of help."""

    def __init__(self, entry: LazyCommand) -> None:
        super().__init__(name=entry.name, help=entry.help)
        self.entry = entry


class _Commands(MutableMapping[str, Any]):
    """A group's commands by name; reading one (``[name]``, ``get``, ``items()``,
    ``values()``) loads it if it is still a placeholder, listing names does not."""

    def __init__(self, group: LazyGroup, commands: Mapping[str, Any]) -> None:
        self.group, self.raw = group, dict(commands)

    def __getitem__(self, name: str) -> Any:
        cmd = self.raw[name]
        if isinstance(cmd, _Placeholder):
            cmd = self.raw[name] = load_command(
                cmd.entry, pretty_exceptions_short=self.group.pretty_exceptions_short,
                rich_markup_mode=self.group.rich_markup_mode,
                suggest_commands=self.group.suggest_commands)
        return cmd

    def __setitem__(self, name: str, cmd: Any) -> None:
        self.raw[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self.raw[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __contains__(self, name: object) -> bool:
        return name in self.raw


class LazyGroup(TyperGroup):
    """A TyperGroup whose lazy commands are placeholders until resolved (see module doc)."""

    lazy: Sequence[LazyCommand] = ()
    pretty_exceptions_short: bool = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        commands = dict(self.commands)
        for entry in self.lazy:
            commands.setdefault(entry.name, _Placeholder(entry))
        self.commands = _Commands(self, commands)
        self._listing = 0

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands.raw)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            return None
        return self.commands.raw[cmd_name] if self._listing else self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing += 1
        try:
            return super().format_help(ctx, formatter)
        finally:
            self._listing -= 1

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            _say_interrupted()
            raise typer.Exit(130) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _say_interrupted()
            raise typer.Exit(130) from None


class _LazyTyper(typer.Typer):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except KeyboardInterrupt:  # between the group's guards (rare): still one line
            _say_interrupted()
            sys.exit(130)


def lazy_typer(commands: Sequence[LazyCommand], **kwargs: Any) -> typer.Typer:
    """A ``typer.Typer`` (kwargs as Typer's) that also has ``commands``, loaded when used."""
    names = [c.name for c in commands]
    if len(set(names)) != len(names):
        raise ValueError(f"a command is registered twice: {sorted(names)}")
    cls: Callable[..., Any] = type("SpoolGroup", (OneLineUsageErrors, LazyGroup), {
        "lazy": tuple(commands),
        "pretty_exceptions_short": kwargs.get("pretty_exceptions_short", True)})
    return _LazyTyper(cls=cls, **kwargs)
