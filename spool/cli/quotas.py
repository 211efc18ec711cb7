"""``spool quotas set|describe``: client quotas, as ``kafka-configs.sh`` manages them.

    spool quotas set      --user alice [--client-id app] --add-config producer_byte_rate=1048576
    spool quotas set      --user-defaults --delete-config consumer_byte_rate
    spool quotas describe [--user alice | --user-defaults] [--client-id app | --client-defaults]

Contract (Kafka's ConfigCommand for ``--entity-type users/clients``; confluent-kafka has
no client-quota call, so over ``spool.cli.wire``: DescribeClientQuotas v0-1,
AlterClientQuotas v0-1):

- The entity: ``--user NAME`` or ``--user-defaults`` (the default user) and/or
  ``--client-id NAME`` or ``--client-defaults``; ``set`` needs one, ``describe``
  without any lists every quota.
- ``set``: ``--add-config k=v,...`` (doubles) and ``--delete-config k`` (repeatable),
  keys among producer_byte_rate, consumer_byte_rate, request_percentage,
  controller_mutation_rate (else exit 2, as Kafka's "Only quota configs ..."); deleting
  a key the entity has no value for is refused ("Invalid config(s): k", exit 1), as Kafka
  checks it against DescribeClientQuotas first. Prints ``Completed updating config for
  user alice.`` (``... default config for users in the cluster.``); ``--json``:
  ``{"entity": {type: name}, "set": {key: value}, "removed": [key, ...]}``.
- ``describe``: Kafka's line per entity (a strict match on the entity named; without
  one, every entity with quotas), entities and keys sorted::

      Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0

  values printed as Java prints a double (``1.048576E7`` from 10^7 up); ``--json``:
  ``[{"entity": {"user": "alice", "client-id": null}, "quotas": {...}}]`` (null: the
  default).
- Errors in the answer (e.g. CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST) are one
  ``spool:`` line with Kafka's error name, exit 1.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    fail,
    parse_names,
    parse_pairs,
    print_json,
)
from spool.protocol._generated import AlterClientQuotasRequest, DescribeClientQuotasRequest
from spool.protocol._generated.alter_client_quotas_request import EntityData, EntryData, OpData
from spool.protocol._generated.describe_client_quotas_request import ComponentData

app = typer.Typer(help="Client quotas per user and client id (kafka-configs).",
                  no_args_is_help=True)

USER, CLIENT_ID = "user", "client-id"
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
MATCH_EXACT, MATCH_DEFAULT = 0, 1  # (2, SPECIFIED: any named entity of the type)
_LABEL = {USER: "user-principal", CLIENT_ID: "client-id"}

UserOpt = Annotated[str | None, typer.Option("--user", help="A user's quotas.")]
UserDefaultsOpt = Annotated[bool, typer.Option(
    "--user-defaults", help="The default user's quotas.")]
ClientIdOpt = Annotated[str | None, typer.Option("--client-id", help="A client id's quotas.")]
ClientDefaultsOpt = Annotated[bool, typer.Option(
    "--client-defaults", help="The default client id's quotas.")]

# an entity: ((entity_type, name or None for the default), ...) in Kafka's order: user first
Entity = tuple[tuple[str, str | None], ...]


def entity(user: str | None, user_defaults: bool, client_id: str | None,
           client_defaults: bool) -> Entity:
    """The entity the options name (empty: none)."""
    if user is not None and user_defaults:
        fail("give --user NAME or --user-defaults, not both", 2)
    if client_id is not None and client_defaults:
        fail("give --client-id NAME or --client-defaults, not both", 2)
    out: list[tuple[str, str | None]] = []
    if user is not None or user_defaults:
        out.append((USER, None if user_defaults else user))
    if client_id is not None or client_defaults:
        out.append((CLIENT_ID, None if client_defaults else client_id))
    return tuple(out)


def parse_ops(add: list[str] | None, delete: list[str] | None) -> dict[str, float | None]:
    """{key: value to set, or None to remove}; bad keys or values: exit 2."""
    sets, removes = parse_pairs(add), parse_names(delete)
    for key in [*sets, *removes]:
        if key not in QUOTA_KEYS:
            fail(f"Only quota configs can be added or deleted for users and clients. "
                 f"Unexpected config names: {key} ({', '.join(QUOTA_KEYS)})", 2)
    both = sorted(set(sets) & set(removes))
    if both:
        fail(f"'{both[0]}' is both added and deleted", 2)
    out: dict[str, float | None] = {}
    for key, text in sets.items():
        try:
            out[key] = float(text)
        except ValueError:
            fail(f"Cannot parse quota configuration value for {key}: {text}", 2)
    out.update({key: None for key in removes})
    return out


def java_double(value: float) -> str:
    """``Double.toString``: ``1048576.0``, ``0.5``, ``1.0E7``, ``1.0E-4``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "e" not in text else format(Decimal(text), "f")
    sign, digits, exp = Decimal(repr(float(value))).normalize().as_tuple()
    exponent = len(digits) + int(exp) - 1
    mantissa = str(digits[0]) + "." + ("".join(map(str, digits[1:])) or "0")
    return ("-" if sign else "") + f"{mantissa}E{exponent}"


def describe_line(ent: Entity, quotas: dict[str, float]) -> str:
    who = ", ".join(f"{_LABEL[t]} '{n}'" if n is not None else f"the default {_LABEL[t]}"
                    for t, n in ent)
    values = ", ".join(f"{k}={java_double(v)}" for k, v in sorted(quotas.items()))
    return f"Quota configs for {who} are {values}"


def _order(ent: Entity) -> Entity:
    return tuple(sorted(ent, key=lambda c: (c[0] != USER, c[0])))


def _components(ent: Entity) -> list[ComponentData]:
    return [ComponentData(entity_type=t, match_type=MATCH_DEFAULT if n is None else MATCH_EXACT,
                          match=n) for t, n in ent]


async def _describe(admin: wire.WireAdmin, components: list[ComponentData],
                    strict: bool) -> dict[Entity, dict[str, float]]:
    resp = await admin.request(DescribeClientQuotasRequest(components=components, strict=strict),
                               1)
    if resp.error_code:
        raise wire.refused(resp.error_code, resp.error_message)
    return {_order(tuple((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in resp.entries or []}


@app.command("set")
@cli_command
def set_(
    user: UserOpt = None,
    user_defaults: UserDefaultsOpt = False,
    client_id: ClientIdOpt = None,
    client_defaults: ClientDefaultsOpt = False,
    add_config: Annotated[list[str] | None, typer.Option(
        "--add-config", help="producer_byte_rate=1048576,consumer_byte_rate=... "
        "(repeatable).")] = None,
    delete_config: Annotated[list[str] | None, typer.Option(
        "--delete-config", help="Quota keys to remove (repeatable).")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
    json: JsonFlag = False,
) -> None:
    """Set or remove quotas of a user, a client id, or both (AlterClientQuotas).

    --json: {"entity", "set": {key: value}, "removed": [key, ...]}."""
    ent = entity(user, user_defaults, client_id, client_defaults)
    if not ent:
        fail("name the entity: --user NAME, --user-defaults, --client-id NAME or "
             "--client-defaults", 2)
    ops = parse_ops(add_config, delete_config)
    if not ops:
        fail("nothing to set: give --add-config k=v and/or --delete-config k", 2)

    async def body(admin: wire.WireAdmin) -> Any:
        removes = sorted(k for k, v in ops.items() if v is None)
        if removes:
            current = (await _describe(admin, _components(ent), True)).get(_order(ent), {})
            missing = [k for k in removes if k not in current]
            if missing:
                raise CliError(f"Invalid config(s): {','.join(missing)} (INVALID_CONFIG)", 1,
                               "INVALID_CONFIG")
        req = AlterClientQuotasRequest(entries=[EntryData(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in ent],
            ops=[OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                 for k, v in sorted(ops.items())])], validate_only=False)
        return await admin.request(req, 1)

    resp = wire.run(bootstrap, timeout, body)
    for entry in resp.entries:
        if entry.error_code:
            raise wire.refused(entry.error_code, entry.error_message)
    if json:
        print_json({"entity": dict(ent),
                    "set": {k: v for k, v in sorted(ops.items()) if v is not None},
                    "removed": sorted(k for k, v in ops.items() if v is None)})
        return
    kind, name = ent[0]
    plural = {USER: "users", CLIENT_ID: "clients"}[kind]
    if name is None:
        print(f"Completed updating default config for {plural} in the cluster.")
    else:
        print(f"Completed updating config for {plural[:-1]} {name}.")


@app.command()
@cli_command
def describe(
    user: UserOpt = None,
    user_defaults: UserDefaultsOpt = False,
    client_id: ClientIdOpt = None,
    client_defaults: ClientDefaultsOpt = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Describe quotas (DescribeClientQuotas): of the entity named, or every one."""
    ent = entity(user, user_defaults, client_id, client_defaults)
    components = _components(ent)

    async def body(admin: wire.WireAdmin) -> dict[Entity, dict[str, float]]:
        return await _describe(admin, components, bool(components))

    found = wire.run(bootstrap, timeout, body)
    rows = sorted(found.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]])
    if json:
        print_json([{"entity": dict(e), "quotas": dict(sorted(q.items()))} for e, q in rows])
        return
    for e, q in rows:
        print(describe_line(e, q))
