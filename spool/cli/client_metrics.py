"""``spool client-metrics``: telemetry subscriptions, as Kafka's ``kafka-client-metrics.sh``.

    spool client-metrics list
    spool client-metrics describe [--name N]
    spool client-metrics alter (--name N | --generate-name) [--metrics m1,m2] [--interval MS]
                               [--match k=regex,...]
    spool client-metrics delete --name N

CLIENT_METRICS resources (type 16, ``spool.cluster.client_metrics``) over the wire:
ListConfigResources v0, DescribeConfigs, IncrementalAlterConfigs (an empty value
deletes the key, as Kafka's tool does; ``delete`` deletes every key, which removes the
resource). Kafka's lines: ``Altered client metrics config for N.``, ``Deleted client
metrics config for N.``, ``Client metrics configs for N are:`` then ``  key=value``.
A refused change is its error on one ``spool:`` line and exit 1; bad options exit 2.
``--json``: ``list`` ``["name", ...]``, ``describe`` ``[{"name", "configs": {key: value}}]``,
``alter`` ``{"name"}`` (the generated one with ``--generate-name``), ``delete``
``{"name", "deleted": [the keys it had]}``.
"""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    fail,
    print_json,
)
from spool.protocol._generated import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)
from spool.protocol._generated.describe_configs_request import DescribeConfigsResource
from spool.protocol._generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)

CLIENT_METRICS = 16
SET, DELETE = 0, 1

app = typer.Typer(help="Client metrics (telemetry) subscriptions (kafka-client-metrics).",
                  no_args_is_help=True)
Name = Annotated[str | None, typer.Option("--name", help="The subscription's name.")]


async def _names(admin: wire.WireAdmin) -> list[str]:
    resp = await admin.request(ListConfigResourcesRequest(), 0)
    if resp.error_code:
        fail(wire.error_text(resp.error_code), 1)
    return [r.resource_name for r in resp.config_resources]


async def _configs(admin: wire.WireAdmin, name: str) -> list[tuple[str, str]]:
    resp = await admin.request(DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name,
                                           configuration_keys=None)],
        include_synonyms=False, include_documentation=False), 4)
    r = resp.results[0]
    if r.error_code:
        fail(f"{name}: {wire.error_text(r.error_code, r.error_message)}", 1)
    return [(c.name, c.value or "") for c in r.configs]


async def _alter(admin: wire.WireAdmin, name: str, ops: list[tuple[str, int, str]]) -> None:
    resp = await admin.request(IncrementalAlterConfigsRequest(validate_only=False, resources=[
        AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configs=[
            AlterableConfig(name=k, config_operation=op, value=v if op == SET else None)
            for k, op, v in ops])]), 1)
    r = resp.responses[0]
    if r.error_code:
        fail(f"{name}: {wire.error_text(r.error_code, r.error_message)}", 1)


@app.command("list")
@cli_command
def list_(bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, timeout: AdminTimeout = 30.0,
          command_config: CommandConfigOpt = None, json: JsonFlag = False) -> None:
    """List the client metrics resources."""
    names = wire.run(bootstrap, timeout, _names)
    if json:
        print_json(list(names))
        return
    for name in names:
        print(name)


@app.command()
@cli_command
def describe(name: Name = None, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
             timeout: AdminTimeout = 30.0, command_config: CommandConfigOpt = None,
             json: JsonFlag = False) -> None:
    """Show the configs of one client metrics resource (default: all)."""

    async def body(admin: wire.WireAdmin):
        names = [name] if name else await _names(admin)
        return [(n, await _configs(admin, n)) for n in names]

    described = wire.run(bootstrap, timeout, body)
    if json:
        print_json([{"name": n, "configs": dict(configs)} for n, configs in described])
        return
    for n, configs in described:
        print(f"Client metrics configs for {n} are:")
        for k, v in configs:
            print(f"  {k}={v}")


@app.command()
@cli_command
def alter(
    name: Name = None,
    generate_name: Annotated[bool, typer.Option(
        "--generate-name", help="Use a random UUID as the name.")] = False,
    metrics: Annotated[str | None, typer.Option(
        "--metrics", help="Metric name prefixes, comma-separated (* = all; '' deletes).")
    ] = None,
    interval: Annotated[int | None, typer.Option(
        "--interval", help="The push interval in milliseconds.")] = None,
    match: Annotated[str | None, typer.Option(
        "--match", help="key=regex,... the client must all match ('' deletes).")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
    json: JsonFlag = False,
) -> None:
    """Create or change a client metrics resource."""
    if generate_name == (name is not None):
        fail("give either --name or --generate-name", 2)
    entity = str(uuid.uuid4()) if generate_name else name
    given = {"interval.ms": None if interval is None else str(interval), "metrics": metrics,
             "match": match}
    ops = [(k, SET if v else DELETE, v) for k, v in given.items() if v is not None]
    if not ops:
        fail("nothing to alter: give --metrics, --interval or --match", 2)
    wire.run(bootstrap, timeout, lambda admin: _alter(admin, entity, ops))
    if json:
        print_json({"name": entity})
        return
    print(f"Altered client metrics config for {entity}.")


@app.command()
@cli_command
def delete(name: Annotated[str, typer.Option("--name", help="The subscription's name.")],
           bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, timeout: AdminTimeout = 30.0,
           command_config: CommandConfigOpt = None, json: JsonFlag = False) -> None:
    """Delete a client metrics resource (every key).

    --json: {"name", "deleted": [the keys it had]}."""

    async def body(admin: wire.WireAdmin) -> list[str]:
        configs = await _configs(admin, name)
        if configs:
            await _alter(admin, name, [(k, DELETE, "") for k, _ in configs])
        return sorted(k for k, _ in configs)

    deleted = wire.run(bootstrap, timeout, body)
    if json:
        print_json({"name": name, "deleted": deleted})
        return
    print(f"Deleted client metrics config for {name}.")
