"""Usage errors as one line: what the ``spool`` group does with a bad command line.

Contract:

- A command line the command tree cannot parse (an unknown command or option, a value an
  option or argument cannot take, a missing argument or required option, an extra
  argument, an option without its value) leaves as exactly ONE line on stderr and exit
  status 2, whatever the command or subcommand:
  ``spool topics create: --partitions: must be an integer, not 'x' (try 'spool topics
  create --help')``: the command's path, what is wrong with which option or argument in
  plain words, and where to read more. Never typer's multi-line box, never pydantic's
  wording ("Input should be a valid integer, unable to parse string as an integer").
- Any other error click/typer would report itself (a file it could not open) is one line
  too, ``<command path>: <message>``, with click's exit status.
- A group run without its command still prints its help (``no_args_is_help``).
- :class:`OneLineUsageErrors` is a mixin for the root group class (``spool.cli.lazy``
  puts it first in ``SpoolGroup``'s bases): every subcommand's parsing and running
  happens inside the root group's ``make_context``/``invoke``, so it covers the whole tree
  once. :func:`usage_line` is the line, for tests.
"""

from __future__ import annotations

import re
import sys
from types import TracebackType
from typing import Any

import typer
from typer._click.core import Context
from typer._click.exceptions import (
    BadOptionUsage,
    BadParameter,
    ClickException,
    MissingParameter,
    NoArgsIsHelpError,
    NoSuchOption,
    UsageError,
)

# pydantic's error types (typer converts values with pydantic) in plain words: what the
# value must be; {limit} is the bound from the error's context
_MUST_BE = {
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "int_type": "an integer",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "greater_than_equal": "at least {ge}",
    "greater_than": "more than {gt}",
    "less_than_equal": "at most {le}",
    "less_than": "less than {lt}",
    "finite_number": "a finite number",
}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _plain(text: str) -> str:
    """click's sentence as a clause: first letter lower-cased, no final period."""
    text = _one_line(text).rstrip(".")
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[:1].lower() + text[1:]
    return text


def _param_name(param: Any) -> str:
    """``--partitions`` for an option (its first long name), ``NAME`` for an argument."""
    if getattr(param, "param_type_name", None) == "argument":
        return str(getattr(param, "metavar", None) or param.name or "argument").upper()
    opts = list(getattr(param, "opts", None) or [])
    longs = [o for o in opts if o.startswith("--")]
    return (longs or opts or [str(param.name)])[0]


def _choices(param: Any) -> list[str] | None:
    desc = getattr(param, "type_descriptor", None)
    choices = getattr(desc, "choices", None) if desc is not None else None
    if not choices:
        return None
    return [str(getattr(c, "value", c)) for c in choices]


def _bad_value(e: BadParameter) -> str:
    """What is wrong with the value, in plain words (without the parameter's name)."""
    param = e.param
    cause = e.__cause__
    errors = cause.errors() if cause is not None and hasattr(cause, "errors") else None
    if errors:
        err = errors[0]
        value = err.get("input")
        shown = f"'{value}'" if isinstance(value, str) else repr(value)
        choices = _choices(param)
        if choices is not None:
            return f"must be one of {', '.join(choices)}, not {shown}"
        must = _MUST_BE.get(err.get("type", ""))
        if must is not None:
            try:
                must = must.format(**(err.get("ctx") or {}))
            except (KeyError, IndexError):
                pass
            return f"must be {must}, not {shown}"
        msg = str(err.get("msg", cause))
        msg = msg.removeprefix("Value error, ").replace("Input should be", "must be")
        return f"{_plain(msg)}, not {shown}" if msg.startswith("must be") else _plain(msg)
    return _plain(e.message)


def _what(e: UsageError) -> str:
    """What is wrong with the command line, naming the option or argument."""
    if isinstance(e, MissingParameter) and e.param is not None:
        kind = "argument" if e.param.param_type_name == "argument" else "option"
        line = f"missing {kind} {_param_name(e.param)}"
        choices = _choices(e.param)
        return f"{line} (one of {', '.join(choices)})" if choices else line
    if isinstance(e, BadParameter) and e.param is not None:
        return f"{_param_name(e.param)}: {_bad_value(e)}"
    if isinstance(e, NoSuchOption):
        line = f"no such option {e.option_name}"
        if e.possibilities:
            maybe = sorted(e.possibilities)
            line += f"; did you mean {' or '.join(maybe)}?"
        return line
    if isinstance(e, BadOptionUsage):
        msg = e.message
        m = re.fullmatch(r"Option '(.+)' requires (an argument|(\d+) arguments)\.", msg)
        if m:
            return f"{m[1]} needs {'a value' if m[3] is None else m[3] + ' values'}"
        m = re.fullmatch(r"Option '(.+)' does not take a value\.", msg)
        if m:
            return f"{m[1]} takes no value"
        return _plain(msg)
    m = re.fullmatch(r"Got unexpected extra argument\(s\) \((.*)\)", e.message)
    if m:
        extra = m[1].split()
        return (f"unexpected argument '{extra[0]}'" if len(extra) == 1
                else f"unexpected arguments {' '.join(extra)}")
    m = re.fullmatch(r"No such command '(.+?)'\.(?: Did you mean (.+)\?)?", _one_line(e.message))
    if m:
        line = f"no such command '{m[1]}'"
        return line + (f"; did you mean {m[2].replace(', ', ' or ')}?" if m[2] else "")
    if e.message == "Missing command.":
        return "missing a command"
    return _plain(e.format_message())


def _context_of(e: BaseException) -> Context | None:
    """The context of the command whose parsing failed: the error's own, else the
    innermost one on its traceback (click's parser raises some errors without it)."""
    ctx = getattr(e, "ctx", None)
    if isinstance(ctx, Context):
        return ctx
    found = None
    tb: TracebackType | None = e.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals.get("ctx")
        if isinstance(local, Context):
            found = local
        tb = tb.tb_next
    return found


def usage_line(e: ClickException) -> str:
    """The one line (without its newline) a usage or click error leaves on stderr."""
    ctx = _context_of(e)
    path = ctx.command_path if ctx is not None else "spool"
    if not isinstance(e, UsageError):
        return f"{path}: {_plain(e.format_message())}"
    hint = ""
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        hint = f" (try '{path} {ctx.help_option_names[0]}')"
    return f"{path}: {_what(e)}{hint}"


def _report(e: ClickException) -> typer.Exit:
    try:
        sys.stderr.write(usage_line(e) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return typer.Exit(e.exit_code)


class OneLineUsageErrors:
    """Root group mixin: every usage error of the tree below it as one line (module doc)."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)  # type: ignore[misc]
        except NoArgsIsHelpError:
            raise
        except ClickException as e:
            raise _report(e) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except NoArgsIsHelpError:
            raise
        except ClickException as e:
            raise _report(e) from None
