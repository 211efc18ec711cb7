"""``spool schemas register|list|get|check|config|mode|delete``: a registry's subjects.

Contract (over Confluent's REST API, ``spool.registry.client``; any Confluent-compatible
registry will do, ``spool registry`` or the broker's ``schema.registry.listeners``):

- Every command takes ``--url`` (default ``http://127.0.0.1:8081``, environment
  ``SPOOL_REGISTRY_URL``; ``http://user:password@host:port`` for basic auth),
  ``--timeout`` (seconds per request) and ``--json``.
- A schema is given as a FILE argument (``-``: stdin) or ``--schema TEXT``; its type is
  ``--type`` (AVRO, JSON or PROTOBUF), by default PROTOBUF for a ``.proto`` file and AVRO
  otherwise. ``--reference NAME=SUBJECT:VERSION`` (repeatable) names another subject's
  version the schema refers to (an Avro full name, a .proto import path).
- ``register SUBJECT FILE``: prints the schema's id (the existing one when the subject
  already has this schema). ``--json``: ``{"subject", "id"}``.
- ``list``: the subjects, one a line (``--prefix P``, ``--deleted`` to include
  soft-deleted ones); ``list SUBJECT``: its versions. ``--json``: the array.
- ``get SUBJECT [VERSION]`` (default latest) or ``get --id N``: the schema text on stdout
  as the registry keeps it. ``--json``: the registry's object (``subject``, ``version``,
  ``id``, ``schemaType``, ``schema``, ``references``; by id: ``schema``, ``schemaType``,
  ``references``).
- ``check SUBJECT FILE [--version V | --all]``: whether the schema may be registered
  against version V (default latest) or against every version the subject's
  compatibility level asks for (``--all``). Prints ``compatible`` or ``incompatible``
  then the registry's reasons, one a line; exit 0 when compatible, 3 when not.
  ``--json``: ``{"subject", "is_compatible", "messages"}``.
- ``config [SUBJECT]``: the compatibility level (a subject's falls back to the global
  one); ``--set LEVEL`` changes it, ``--delete`` removes the subject's own.
  ``--json``: ``{"subject" (null: global), "compatibility"}``.
- ``mode [SUBJECT]``: the mode (READWRITE, READONLY: writes refused, IMPORT: schemas
  registered with their ids), a subject's falling back to the global one; ``--set MODE``
  (``--force``: IMPORT where schemas exist), ``--delete`` the subject's own.
  ``--json``: ``{"subject", "mode"}``.
- ``delete SUBJECT [VERSION] [--permanent]``: soft delete (permanent: only after a soft
  delete, as Confluent's rule). Prints the deleted versions. ``--json``:
  ``{"subject", "deleted": [version], "permanent"}``.
- An error answer is one line on stderr, the registry's own message then its
  ``error_code`` (``spool: Subject 'x' not found. (error_code 40401)``), exit 1; so is a
  registry that does not answer (``spool: cannot reach the schema registry at URL:
  Connection refused``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from spool.cli.common import CliError, JsonFlag, cli_command, print_json
from spool.registry.client import DEFAULT_URL, RegistryClient, RegistryClientError

INCOMPATIBLE_EXIT = 3
TYPES = ("AVRO", "JSON", "PROTOBUF")

app = typer.Typer(help="Register, list, get, check and delete schemas in a schema registry.",
                  no_args_is_help=True)

Url = Annotated[
    str,
    typer.Option("--url", envvar="SPOOL_REGISTRY_URL",
                 help="The schema registry (http://host:port)."),
]
Timeout = Annotated[
    float, typer.Option("--timeout", min=0.1, help="Seconds to wait for each answer."),
]
SchemaFile = Annotated[
    str | None,
    typer.Argument(help="The schema's file ('-': stdin); or give --schema.", show_default=False),
]
SchemaText = Annotated[str | None, typer.Option("--schema", help="The schema's text.")]
SchemaType = Annotated[
    str | None,
    typer.Option("--type", "-t", help="AVRO, JSON or PROTOBUF (default: PROTOBUF for a "
                 ".proto file, else AVRO)."),
]
References = Annotated[
    list[str] | None,
    typer.Option("--reference", "-r", metavar="NAME=SUBJECT:VERSION",
                 help="A schema this one refers to (repeatable)."),
]


def _client(url: str, timeout: float) -> RegistryClient:
    try:
        return RegistryClient(url, timeout)
    except RegistryClientError as e:
        raise CliError(str(e), 2) from None


def _ask(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A registry call; its failure as the command's one line."""
    try:
        return fn(*args, **kwargs)
    except RegistryClientError as e:
        raise CliError(str(e)) from None


def _schema(file: str | None, text: str | None, kind: str | None) -> tuple[str, str]:
    """(schema text, type) from the FILE argument or --schema."""
    if (file is None) == (text is None):
        raise CliError("give the schema as a FILE argument ('-': stdin) or --schema TEXT, "
                       "one of them", 2)
    if text is None:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text()  # type: ignore[arg-type]
        except OSError as e:
            raise CliError(f"cannot read {file}: {e.strerror or e}", 2) from None
    if kind is None:
        kind = "PROTOBUF" if file and file.endswith(".proto") else "AVRO"
    kind = kind.upper()
    if kind not in TYPES:
        raise CliError(f"--type must be one of {', '.join(TYPES)}, not {kind!r}", 2)
    if not text.strip():
        raise CliError("the schema is empty", 2)
    return text, kind


def _references(items: list[str] | None) -> list[dict[str, Any]]:
    out = []
    for item in items or []:
        name, eq, rest = item.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not (eq and colon and name and subject and version.isdigit()):
            raise CliError(f"bad --reference {item!r}: expected NAME=SUBJECT:VERSION", 2)
        out.append({"name": name, "subject": subject, "version": int(version)})
    return out


def _setting(subject: str | None, new: str | None, delete: bool, json: bool, what: str,
             key: str, get: Callable[[str | None], str], change: Callable[[str], str],
             remove: Callable[[str], Any]) -> None:
    """``config`` and ``mode``: print the setting (``what``, ``key`` in --json), global or
    a subject's, after ``--set`` (``change``) or ``--delete`` (``remove``) if asked."""
    if new is not None and delete:
        raise CliError("give --set or --delete, not both", 2)
    if delete:
        if subject is None:
            raise CliError(f"--delete removes a subject's {what}: name the SUBJECT", 2)
        _ask(remove, subject)
        value = _ask(get, subject)
    elif new is not None:
        value = _ask(change, new.upper())
    else:
        value = _ask(get, subject)
    if json:
        print_json({"subject": subject, key: value})
    else:
        typer.echo(value)


@app.command()
@cli_command
def register(
    subject: Annotated[str, typer.Argument(help="The subject (e.g. TOPIC-value).")],
    file: SchemaFile = None,
    schema: SchemaText = None,
    schema_type: SchemaType = None,
    reference: References = None,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """Register a schema under a subject and print its id.

    --json: {"subject", "id"}."""
    text, kind = _schema(file, schema, schema_type)
    refs = _references(reference)
    schema_id = _ask(_client(url, timeout).register, subject, text, kind, refs)
    if json:
        print_json({"subject": subject, "id": schema_id})
    else:
        typer.echo(schema_id)


@app.command("list")
@cli_command
def list_(
    subject: Annotated[str | None, typer.Argument(help="List this subject's versions.",
                                                  show_default=False)] = None,
    prefix: Annotated[str | None, typer.Option("--prefix", help="Subjects starting so.")] = None,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include soft-deleted ones.")] = False,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """List the subjects, or a subject's versions.

    --json: the array of subjects (or versions)."""
    client = _client(url, timeout)
    if subject is None:
        items = _ask(client.subjects, deleted, prefix)
    else:
        items = _ask(client.versions, subject, deleted)
    if json:
        print_json(items)
        return
    for item in items:
        typer.echo(item)


@app.command()
@cli_command
def get(
    subject: Annotated[str | None, typer.Argument(help="The subject.", show_default=False)] = None,
    version: Annotated[str, typer.Argument(help="A version number or 'latest'.")] = "latest",
    schema_id: Annotated[int | None, typer.Option("--id", min=1,
                                                  help="Get the schema with this id.")] = None,
    deleted: Annotated[bool, typer.Option("--deleted",
                                          help="A soft-deleted version too.")] = False,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """Print a subject's version (default latest) or the schema with an id.

    --json: the registry's object (subject, version, id, schemaType, schema, references)."""
    client = _client(url, timeout)
    if (subject is None) == (schema_id is None):
        raise CliError("give a SUBJECT [VERSION] or --id N, one of them", 2)
    if schema_id is not None:
        doc = _ask(client.by_id, schema_id)
    else:
        doc = _ask(client.version, subject, version, deleted)
    doc.setdefault("schemaType", "AVRO")
    if json:
        print_json(doc)
    else:
        typer.echo(doc["schema"])


@app.command()
@cli_command
def check(
    subject: Annotated[str, typer.Argument(help="The subject.")],
    file: SchemaFile = None,
    schema: SchemaText = None,
    schema_type: SchemaType = None,
    reference: References = None,
    version: Annotated[str, typer.Option("--version", help="The version to check against "
                                         "(a number or 'latest').")] = "latest",
    every: Annotated[bool, typer.Option("--all", help="Against every version the subject's "
                                        "compatibility level asks for.")] = False,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """Check whether a schema may be registered under a subject (exit 3 if not).

    --json: {"subject", "is_compatible", "messages"}."""
    text, kind = _schema(file, schema, schema_type)
    refs = _references(reference)
    answer = _ask(_client(url, timeout).check, subject, text, kind, refs,
                  None if every else version)
    ok, messages = bool(answer.get("is_compatible")), list(answer.get("messages") or [])
    if json:
        print_json({"subject": subject, "is_compatible": ok, "messages": messages})
    else:
        typer.echo("compatible" if ok else "incompatible")
        for line in messages:
            typer.echo(f"  {line}")
    if not ok:
        raise typer.Exit(INCOMPATIBLE_EXIT)


@app.command()
@cli_command
def config(
    subject: Annotated[str | None, typer.Argument(help="A subject (default: the global "
                                                  "level).", show_default=False)] = None,
    set_level: Annotated[str | None, typer.Option(
        "--set", metavar="LEVEL", help="NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, "
        "FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE.")] = None,
    delete: Annotated[bool, typer.Option("--delete", help="Remove the subject's own level "
                                         "(the global one applies).")] = False,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """Print or change the compatibility level, global or a subject's.

    --json: {"subject", "compatibility"}."""
    client = _client(url, timeout)
    _setting(subject, set_level, delete, json, "level", "compatibility", client.get_config,
             lambda v: client.set_config(v, subject), client.delete_config)


@app.command()
@cli_command
def mode(
    subject: Annotated[str | None, typer.Argument(help="A subject (default: the global "
                                                  "mode).", show_default=False)] = None,
    set_mode: Annotated[str | None, typer.Option(
        "--set", metavar="MODE", help="READWRITE, READONLY or IMPORT.")] = None,
    force: Annotated[bool, typer.Option("--force", help="IMPORT even where schemas "
                                        "exist.")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Remove the subject's own mode "
                                         "(the global one applies).")] = False,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """Print or change the mode (READWRITE, READONLY, IMPORT), global or a subject's.

    --json: {"subject", "mode"}."""
    client = _client(url, timeout)
    _setting(subject, set_mode, delete, json, "mode", "mode", client.get_mode,
             lambda v: client.set_mode(v, subject, force), client.delete_mode)


@app.command()
@cli_command
def delete(
    subject: Annotated[str, typer.Argument(help="The subject.")],
    version: Annotated[str | None, typer.Argument(help="Only this version (a number or "
                                                  "'latest').", show_default=False)] = None,
    permanent: Annotated[bool, typer.Option("--permanent", help="Delete for good (after a "
                                            "soft delete).")] = False,
    json: JsonFlag = False,
    url: Url = DEFAULT_URL,
    timeout: Timeout = 30.0,
) -> None:
    """Delete a subject or one of its versions (soft, or --permanent).

    --json: {"subject", "deleted", "permanent"}."""
    client = _client(url, timeout)
    if version is None:
        deleted = list(_ask(client.delete_subject, subject, permanent))
    else:
        deleted = [_ask(client.delete_version, subject, version, permanent)]
    if json:
        print_json({"subject": subject, "deleted": deleted, "permanent": permanent})
        return
    for v in deleted:
        typer.echo(v)
