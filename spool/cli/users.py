"""``spool users scram set|describe|delete``: SCRAM credentials, as ``kafka-configs.sh``.

    spool users scram set      --user alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=s3cret]'
    spool users scram describe [--user alice ...]
    spool users scram delete   --user alice --delete-config SCRAM-SHA-512

Contract (Kafka's ConfigCommand for ``--entity-type users``: AlterUserScramCredentials
over confluent-kafka's AdminClient; DescribeUserScramCredentials v0 over
``spool.cli.wire``, as confluent-kafka 2.16 crashes (double free) on its top-level
error):

- ``set``: ``--add-config`` (repeatable; comma-separated; a value with commas in
  square brackets) takes ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` =
  ``[iterations=N,]password=P``; iterations default to 4096 (Kafka's default), and
  fewer than the mechanism's minimum (4096) are refused, as any other config name,
  before anything is sent (exit 2). The salt is random (the client's). Each mechanism
  goes in its own request (a KRaft controller answers DUPLICATE_RESOURCE to a user
  altered twice in one). Prints ``Completed updating config for user alice.``;
  ``--json`` prints ``{"user", "set": [{"mechanism", "iterations"}]}``.
- ``delete``: ``--delete-config`` names the mechanisms whose credential goes. Prints
  the same line; ``--json`` prints ``{"user", "deleted": [mechanism, ...]}``.
- ``describe``: per user (all users when none is named), Kafka's line
  ``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192``;
  ``--json`` prints ``[{"user", "credentials": [{"mechanism", "iterations"}]}]``.
  A named user without credentials is one ``spool:`` line with RESOURCE_NOT_FOUND,
  exit 1 (after the others are printed).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    cli_command,
    fail,
    parse_names,
    parse_pairs,
    print_json,
    result,
)
from spool.protocol._generated import DescribeUserScramCredentialsRequest
from spool.protocol._generated.describe_user_scram_credentials_request import UserName

app = typer.Typer(help="Users' credentials (kafka-configs --entity-type users).",
                  no_args_is_help=True)
scram = typer.Typer(help="SCRAM credentials: set, describe, delete.", no_args_is_help=True)
app.add_typer(scram, name="scram")

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
              "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # the wire's numbers
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)

UserOpt = Annotated[str, typer.Option("--user", help="The user (principal name).")]


def parse_credentials(specs: list[str] | None) -> dict[str, tuple[int, str]]:
    """``['SCRAM-SHA-256=[iterations=8192,password=p]']`` -> {mechanism: (iterations, pw)}."""
    out: dict[str, tuple[int, str]] = {}
    for name, value in parse_pairs(specs).items():
        if name not in MECHANISMS:
            fail(f"Only SCRAM credential configs can be added for users here. Unexpected config "
                 f"names: {name} (SCRAM-SHA-256, SCRAM-SHA-512)", 2)
        m = _CREDENTIAL.fullmatch(value)
        if m is None:
            fail(f"Invalid credential property {name}={value}", 2)
        iterations = DEFAULT_ITERATIONS if m.group(1) in (None, "-1") else int(m.group(1))
        if iterations < MIN_ITERATIONS:
            fail(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required "
                 f"for {name}", 2)
        out[name] = (iterations, m.group(2))
    return out


def parse_mechanisms(specs: list[str] | None) -> list[str]:
    names = parse_names(specs)
    for name in names:
        if name not in MECHANISMS:
            fail(f"Only SCRAM credential configs can be deleted for users here. Unexpected "
                 f"config names: {name} (SCRAM-SHA-256, SCRAM-SHA-512)", 2)
    return list(dict.fromkeys(names))


def _alter(alterations: list, user: str, bootstrap: str, timeout: float,
           done: dict[str, Any] | None = None) -> None:
    """One request per mechanism: a KRaft controller refuses a user altered twice in one
    AlterUserScramCredentials (DUPLICATE_RESOURCE), so kafka-configs' two-mechanism form
    goes as two requests, in the order given; the first failure stops the rest."""
    admin = admin_client(bootstrap, timeout)
    for alteration in alterations:
        for fut in admin.alter_user_scram_credentials([alteration],
                                                      request_timeout=timeout).values():
            result(fut, user)
    if done is not None:  # --json: what was done
        print_json({"user": user, **done})
        return
    print(f"Completed updating config for user {user}.")


@scram.command("set")
@cli_command
def set_(
    user: UserOpt,
    add_config: Annotated[list[str], typer.Option(
        "--add-config", help="SCRAM-SHA-256=\\[iterations=8192,password=...] (repeatable).")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
    json: JsonFlag = False,
) -> None:
    """Create or replace a user's SCRAM credentials (AlterUserScramCredentials).

    --json: {"user", "set": [{"mechanism", "iterations"}]}."""
    creds = parse_credentials(add_config)
    if not creds:
        fail("nothing to set: give --add-config SCRAM-SHA-256=[password=...]", 2)
    _alter([UserScramCredentialUpsertion(user, ScramCredentialInfo(MECHANISMS[m], it),
                                         pw.encode())
            for m, (it, pw) in creds.items()], user, bootstrap, timeout,
           {"set": [{"mechanism": m, "iterations": it} for m, (it, _) in creds.items()]}
           if json else None)


@scram.command()
@cli_command
def delete(
    user: UserOpt,
    delete_config: Annotated[list[str], typer.Option(
        "--delete-config", help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (repeatable).")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
    json: JsonFlag = False,
) -> None:
    """Delete a user's SCRAM credential of a mechanism (AlterUserScramCredentials).

    --json: {"user", "deleted": [mechanism, ...]}."""
    mechanisms = parse_mechanisms(delete_config)
    if not mechanisms:
        fail("nothing to delete: give --delete-config SCRAM-SHA-256", 2)
    _alter([UserScramCredentialDeletion(user, MECHANISMS[m]) for m in mechanisms], user,
           bootstrap, timeout, {"deleted": mechanisms} if json else None)


@scram.command()
@cli_command
def describe(
    user: Annotated[list[str] | None, typer.Option(
        "--user", help="A user (repeatable; default: every user with credentials).")] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Describe users' SCRAM credentials: mechanism and iterations, never secrets."""
    users = list(dict.fromkeys(user or [])) or None

    async def body(admin: wire.WireAdmin):
        return await admin.request(DescribeUserScramCredentialsRequest(
            users=None if users is None else [UserName(name=u) for u in users]), 0)

    resp = wire.run(bootstrap, timeout, body)
    if resp.error_code:  # (e.g. CLUSTER_AUTHORIZATION_FAILED: every user's result has it too)
        raise wire.refused(resp.error_code, resp.error_message)
    found: dict[str, list[tuple[str, int]]] = {}
    failed: CliError | None = None
    for r in resp.results:
        if r.error_code:  # the first failure is reported after the rest are printed
            failed = failed or wire.refused(r.error_code, r.error_message, f"'{r.user}'")
        else:
            found[r.user] = sorted((_MECHANISM_NAMES.get(c.mechanism, str(c.mechanism)),
                                    c.iterations) for c in r.credential_infos)
    rows = sorted(found.items())
    if json:
        print_json([{"user": u, "credentials": [{"mechanism": m, "iterations": i}
                                                for m, i in infos]} for u, infos in rows])
    else:
        for u, infos in rows:
            text = ", ".join(f"{m}=iterations={i}" for m, i in infos)
            print(f"SCRAM credential configs for user-principal '{u}' are {text}")
    if failed is not None:
        raise failed
