"""What every ``spool`` client command shares: options, clients, errors, output.

Contract:

- Every client command takes ``--bootstrap-server``/``-b`` (default
  ``127.0.0.1:9092``, environment ``SPOOL_BOOTSTRAP``); see :data:`Bootstrap`.
- Commands are wrapped in :func:`cli_command`. Whatever goes wrong leaves as
  exactly ONE line on stderr, ``spool: <what happened> (<ERROR_NAME>)``, and a
  non-zero exit status: 1 for a failed operation, 2 for bad usage, 130 for
  Ctrl-C. No traceback reaches the user. A closed stdout (``| head``) ends
  the command quietly. A command line that does not parse (an unknown option, a bad
  value, a missing argument) is one line too, before the command runs:
  ``spool <command>: <what is wrong> (try 'spool <command> --help')``, exit 2
  (``spool.cli.usage``, for the whole tree).
- Every client command takes ``--command-config FILE`` (environment
  ``SPOOL_COMMAND_CONFIG``; see :data:`CommandConfigOpt`): Kafka's client security
  properties, read and checked by ``spool.cli.command_config`` before the command
  connects (a bad file is one line and exit 1). :func:`command_config` is the
  running command's (None without the option).
- Every client command (every command with ``--command-config``) also takes
  ``-X KEY=VALUE`` (``--client-property``, repeatable, kcat's spelling): librdkafka
  settings for the command's clients, applied by :func:`client_config` after
  everything else, so they win. :func:`cli_command` adds the option to the
  command's signature itself: a command needs no parameter for it. A setting
  librdkafka does not know is one line naming it (exit 1); a command that builds
  no confluent-kafka client says on stderr that the settings were not used.
- Clients are confluent-kafka's, configured by :func:`client_config` (which adds
  the command config's librdkafka settings): librdkafka's own log lines are
  silenced (set ``SPOOL_CLIENT_DEBUG=1`` to see them) so that the one-line rule
  holds.
- Error names are Kafka's (``Errors.java``: UNKNOWN_TOPIC_OR_PARTITION,
  MESSAGE_TOO_LARGE, NOT_LEADER_OR_FOLLOWER, ...) whatever librdkafka calls them;
  librdkafka's local conditions keep their ``_NAME`` (``_TRANSPORT``,
  ``_TIMED_OUT``); see :func:`error_name`.
- :func:`reach` gives up on a bootstrap that refuses connections, does not
  resolve or does not speak Kafka after :data:`UNREACHABLE_AFTER` seconds ("cannot
  reach a broker at ..."), and on one that never answers after about 10 s (Java's
  ``socket.connection.setup.timeout.ms``, set on every client), instead of waiting
  out the command's whole timeout.
- :func:`check_topic_name` refuses an illegal topic name before connecting, with
  the rule it breaks (Kafka's sentence, exit 2).
- Output: :func:`print_table` draws a rich table when stdout is a terminal
  and whitespace-aligned plain text otherwise; :func:`print_json` writes one
  JSON document for scripts.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigSource

from spool.cli import command_config as _cc
from spool.protocol.errors import error_name as _kafka_error_name
from spool.util.topic_names import illegal_topic_reason

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# spool.net logs failed authentications; a command reports them as its one line instead
logging.getLogger("spool.net").addHandler(logging.NullHandler())

Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "-b",
        envvar="SPOOL_BOOTSTRAP",
        help="host:port of a broker (comma-separated list allowed).",
    ),
]
AdminTimeout = Annotated[
    float,
    typer.Option("--timeout", min=0.1, help="Seconds to wait for the broker before giving up."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
CommandConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--command-config",
        envvar="SPOOL_COMMAND_CONFIG",
        metavar="FILE",
        help="Client security properties (security.protocol, ssl.*, sasl.*), as Kafka's tools "
        "take them.",
    ),
]

ClientProps = Annotated[
    list[str] | None,
    typer.Option(
        "-X",
        "--client-property",
        metavar="KEY=VALUE",
        help="A librdkafka client setting, e.g. -X message.max.bytes=2000000 (repeatable).",
    ),
]

# A bootstrap that refuses connections (or does not resolve) is reported after this many
# seconds, however long the command's timeout: librdkafka reconnects with backoff meanwhile,
# so a broker that is just starting still gets in.
UNREACHABLE_AFTER = 3.0
CONNECTION_SETUP_TIMEOUT_MS = 10_000

# Errors that mean "no broker answered", reported with the bootstrap address.
_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
}

# Readable phrasings of common errors; ``{s}`` is the subject (a topic name).
_PHRASES: dict[int, str] = {
    KafkaError.TOPIC_ALREADY_EXISTS: "topic '{s}' already exists",
    KafkaError.UNKNOWN_TOPIC_OR_PART: "topic '{s}' does not exist",
    KafkaError._UNKNOWN_TOPIC: "topic '{s}' does not exist",
    KafkaError._UNKNOWN_PARTITION: "'{s}': unknown partition",
}

# librdkafka's local codes that mean a broker error: reported under Kafka's name
_LOCAL_AS_KAFKA = {
    KafkaError._UNKNOWN_TOPIC: "UNKNOWN_TOPIC_OR_PARTITION",
    KafkaError._UNKNOWN_PARTITION: "UNKNOWN_TOPIC_OR_PARTITION",
    KafkaError._MSG_TIMED_OUT: "_MSG_TIMED_OUT",
}


def error_name(err: KafkaError) -> str:
    """Kafka's name for ``err`` (``Errors.java``), librdkafka's ``_NAME`` for a local one."""
    code = err.code()
    if code in _LOCAL_AS_KAFKA:
        return _LOCAL_AS_KAFKA[code]
    if code >= 0:
        name = _kafka_error_name(code)
        if not name.startswith("UNKNOWN_CODE_"):
            return name
    return err.name()


class CliError(Exception):
    """A failure already phrased for the user: one line, and an exit status."""

    def __init__(self, message: str, code: int = 1, error_name: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.error_name = error_name  # the Kafka error's name, when there was one


F = TypeVar("F", bound=Callable[..., Any])


def _clean(text: str) -> str:
    """librdkafka's text without its 'Broker: '/'Local: ' prefix or final period."""
    for prefix in ("Broker: ", "Local: "):
        text = text.replace(prefix, "")
    return " ".join(text.split()).rstrip(".")


def _connection_text(err: KafkaError) -> str:
    """librdkafka's connection error without its ``host:port/bootstrap: `` prefix and
    ``(after Nms in state S)`` suffix."""
    text = re.sub(r"^\S+/(bootstrap|\d+): ", "", err.str())
    text = re.sub(r" \(after \d+ms in state \w+\)", "", text)
    if err.code() == KafkaError._ALL_BROKERS_DOWN:  # librdkafka's "1/1 brokers are down"
        text = "no connection could be set up (refused, closed, or no answer in time)"
    if "Invalid response size" in text:  # e.g. an HTTP server's "HTTP" read as a length
        text = ("what answered there does not speak Kafka's protocol: "
                + text.replace(": increase receive.message.max.bytes", ""))
    return _clean(text)


def error_line(err: KafkaError, subject: str | None = None, bootstrap: str | None = None) -> str:
    """One readable line (without the ``spool:`` prefix) for a Kafka error."""
    code, name = err.code(), error_name(err)
    if code in _UNREACHABLE and bootstrap:
        return f"cannot reach a broker at {bootstrap}: {_connection_text(err)} ({name})"
    if code in _PHRASES and subject is not None:
        return f"{_PHRASES[code].format(s=subject)} ({name})"
    text = _clean(err.str())
    where = f"'{subject}': " if subject is not None else ""
    return f"{where}{text} ({name})"


def kafka_error(exc: KafkaException | KafkaError, subject: str | None = None) -> CliError:
    """Wrap a confluent-kafka failure as a :class:`CliError` (a line and exit 1)."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if not isinstance(err, KafkaError):
        return CliError(str(err) or type(exc).__name__)
    return CliError(error_line(err, subject, _current_bootstrap), 1, error_name(err))


_current_bootstrap: str | None = None
_current_command_config: _cc.CommandConfig | None = None
_current_client_props: dict[str, str] = {}
_client_props_used = False


def command_config() -> _cc.CommandConfig | None:
    """The running command's ``--command-config``, parsed and checked (None if not given)."""
    return _current_command_config


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def no_such_topic(topic: str, hint: str = "") -> CliError:
    """Kafka's UNKNOWN_TOPIC_OR_PARTITION for a whole topic, as every command says it:
    ``topic 't' does not exist (UNKNOWN_TOPIC_OR_PARTITION)``, then ``hint``."""
    return CliError(f"topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION){hint}", 1,
                    "UNKNOWN_TOPIC_OR_PARTITION")


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"spool: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so exit-time flushes are quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def cli_command(fn: F) -> F:
    """Run a command so that every failure ends as one stderr line and an exit status.

    A client command (one with a ``command_config`` parameter) gets ``-X KEY=VALUE``
    too: the option is added to the signature typer reads (module docstring)."""
    takes_props = "command_config" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        global _current_bootstrap, _current_command_config, _current_client_props
        global _client_props_used
        props = kwargs.pop("client_property", None) if takes_props else None
        _current_bootstrap = kwargs.get("bootstrap")
        _current_command_config = None
        _current_client_props = {}
        _client_props_used = False
        _auth_failures.clear()
        try:
            _current_client_props = _parse_client_props(props)
            if kwargs.get("command_config"):
                try:
                    _current_command_config = _cc.load(kwargs["command_config"])
                except _cc.CommandConfigError as e:
                    raise CliError(str(e)) from None
            out = fn(*args, **kwargs)
            if _current_client_props and not _client_props_used:
                _say("note: this command builds no librdkafka client; -X settings not used")
            return out
        except (typer.Exit, typer.Abort):
            raise
        except CliError as e:
            _say(str(e))
            raise typer.Exit(e.code) from None
        except KafkaException as e:
            line = str(kafka_error(e))
            err = e.args[0] if e.args else None
            if (isinstance(err, KafkaError) and err.code() == KafkaError._INVALID_ARG
                    and _current_client_props):
                line = f"bad -X setting: {line}"
            _say(line)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            _say("interrupted")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            _silence_stdout()
            raise typer.Exit(0) from None
        except Exception as e:  # the one-line rule holds even for our own bugs
            _say(f"unexpected error: {type(e).__name__}: {e}")
            raise typer.Exit(1) from None

    if takes_props:
        sig = inspect.signature(fn, eval_str=True)
        param = inspect.Parameter("client_property", inspect.Parameter.KEYWORD_ONLY,
                                  default=None, annotation=ClientProps)
        params = list(sig.parameters.values())
        # keyword-only after the others; typer reads names, not positions
        run.__signature__ = sig.replace(parameters=[*params, param])  # type: ignore[attr-defined]
        run.__annotations__ = {**getattr(fn, "__annotations__", {}),
                               "client_property": ClientProps}
    return run  # type: ignore[return-value]


def _parse_client_props(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"bad -X '{item}': expected KEY=VALUE (a librdkafka setting)", 2)
        out[key.strip()] = value
    return out


def client_props() -> dict[str, str]:
    """The running command's ``-X`` settings (empty without the option)."""
    return dict(_current_client_props)


def check_topic_name(name: str) -> None:
    """Refuse an illegal topic name before connecting: Kafka's rule, as one line (exit 2)."""
    reason = illegal_topic_reason(name)
    if reason is not None:
        raise CliError(f"{reason} (INVALID_TOPIC_EXCEPTION)", 2, "INVALID_TOPIC_EXCEPTION")


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka configuration for ``bootstrap`` with librdkafka logs silenced,
    the command config's security settings, then ``extra``, then the ``-X`` settings."""
    global _client_props_used
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "spool-cli"}
    if not os.environ.get("SPOOL_CLIENT_DEBUG"):
        conf["log_level"] = 0
    if _current_command_config is not None:
        conf.update(_current_command_config.librdkafka())
    conf["error_cb"] = _on_error
    # Java's default (librdkafka's is 30 s): a bootstrap that never answers a connection
    # attempt is given up on after 10 s
    conf["socket.connection.setup.timeout.ms"] = CONNECTION_SETUP_TIMEOUT_MS
    conf.update(extra)
    conf.update(_current_client_props)
    _client_props_used = True
    return conf


def admin_client(bootstrap: str, timeout: float) -> AdminClient:
    """An AdminClient that has already reached a broker within ``timeout`` seconds."""
    admin = AdminClient(client_config(bootstrap))
    reach(admin, timeout)
    return admin


_AUTH_CODES = {KafkaError._AUTHENTICATION, KafkaError._SSL}
_auth_failures: list[KafkaError] = []


_down: list[KafkaError] = []
_transport: list[KafkaError] = []


def _on_error(err: KafkaError) -> None:
    """librdkafka's error callback: keep authentication and TLS failures and "all brokers
    down" for :func:`reach`."""
    if err.code() in _AUTH_CODES or "SSL handshake failed" in err.str():
        _auth_failures.append(err)
    elif err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        _down.append(err)
    else:  # why the connection failed: refused, timed out, not Kafka at that port...
        _transport.append(err)


def reach(client: Any, timeout: float, topic: str | None = None,
          subject: str | None = None) -> Any:
    """``client.list_topics(topic)`` within ``timeout`` seconds, but a failed SASL or TLS
    authentication ends it at once, as one line naming it (librdkafka would retry it until
    the timeout and then report only a transport failure), and a bootstrap whose every
    broker refuses connections (or does not resolve) ends it after
    :data:`UNREACHABLE_AFTER` seconds."""
    started = time.monotonic()
    deadline = started + timeout
    _down.clear()
    _transport.clear()
    while True:
        step = max(0.05, min(0.5, deadline - time.monotonic()))
        try:
            return client.list_topics(topic, timeout=step)
        except KafkaException as e:
            client.poll(0)  # serves the error callback
            if _auth_failures:
                raise auth_error(_auth_failures[0]) from None
            now = time.monotonic()
            if _down and now - started >= min(UNREACHABLE_AFTER, timeout):
                why = (_transport or _down)[-1]
                raise CliError(f"cannot reach a broker at {_current_bootstrap}: "
                               f"{_connection_text(why)} ({error_name(why)})", 1,
                               error_name(why)) from None
            if now >= deadline:
                raise kafka_error(e, subject) from None


def auth_error(err: KafkaError) -> CliError:
    """A failed authentication as one line: the broker's reason and Kafka's error name."""
    text = re.sub(r"^\w+://\S+?: ", "", err.str())  # librdkafka's "sasl_ssl://host:port/id: "
    text = re.sub(r" \(after \d+ms in state \w+\)$", "", text)
    name = "SASL_AUTHENTICATION_FAILED" if "SASL" in text else err.name()
    return CliError(f"authentication failed at {_current_bootstrap}: {_clean(text)} ({name})", 1,
                    name)


def result(future: Future, subject: str | None = None, timeout: float | None = None) -> Any:
    """The value of an admin future; its failure as a :class:`CliError` about ``subject``."""
    try:
        return future.result(timeout=timeout)
    except KafkaException as e:
        raise kafka_error(e, subject) from None
    except TimeoutError:
        raise CliError(
            f"'{subject}': no answer from the broker in time (_TIMED_OUT)", 1, "_TIMED_OUT"
        ) from None


def config_source(entry: Any) -> ConfigSource:
    """A ConfigEntry's source as the enum (the C layer sometimes hands back an int)."""
    src = entry.source
    return src if isinstance(src, ConfigSource) else ConfigSource(int(src))


def parse_pairs(items: Iterable[str] | None, what: str = "config") -> dict[str, str]:
    """``["k1=v1,k2=v2", "k3=[a,b]"]`` -> ``{"k1": "v1", "k2": "v2", "k3": "a,b"}``.

    Each item is a comma-separated list of ``key=value``; a value that itself
    holds commas is written in square brackets (Kafka's kafka-configs rule).
    """
    out: dict[str, str] = {}
    for item in items or []:
        for part in _split_top_level(item):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                fail(f"bad {what} '{part}': expected key=value", 2)
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key] = value
    return out


def parse_names(items: Iterable[str] | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]`` (empty names dropped)."""
    return [n.strip() for item in items or [] for n in item.split(",") if n.strip()]


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
) -> None:
    """A rich table on a terminal; plain aligned columns (header first) otherwise."""
    cells = [["" if c is None else str(c) for c in row] for row in rows]
    if is_tty():
        from rich.console import Console
        from rich.table import Table

        console = Console()
        if title:
            console.print(title, style="bold", highlight=False, markup=False)
        table = Table(*columns)
        for row in cells:
            table.add_row(*row)
        console.print(table)
        return
    if title:
        print(title)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    for row in [list(columns), *cells]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=None, ensure_ascii=False))
