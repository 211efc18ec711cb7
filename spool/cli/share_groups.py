"""``spool share-groups``: Kafka's kafka-share-groups tool's offset reset (KIP-932).

- ``reset-offsets --group G --topic T (--to-earliest | --to-latest | --to-offset N)
  [--execute] [--json]``: the new share-partition start offsets of every partition of
  ``T`` (the log start, the log end, or N clamped into ``[log start, log end]``), printed
  as a plan (topic, partition, new start offset); only ``--execute`` sets them
  (AlterShareGroupOffsets to the group's coordinator). Like Kafka's tool it refuses a
  group that has members: the coordinator's NON_EMPTY_GROUP, or, before anything is
  sent, a group whose ShareGroupDescribe state is not Empty ("share group 'G' is not
  empty: it is Stable (NON_EMPTY_GROUP)"), exit 1. Any other refusal of the coordinator
  (a group of another type...) is the command's error, named as Kafka names it.
- ``delete-offsets --group G --topic T...``: forget the group's share state of whole
  topics (DeleteShareGroupOffsets; Kafka's ``--delete-offsets``): the next consumption
  starts at ``share.auto.offset.reset`` again. Refused for a group with members, as above.
  ``--json``: ``{"group", "topics": [topic]}`` instead of the line on stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer
from confluent_kafka.admin import OffsetSpec

from spool.cli import group_wire, wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    cli_command,
    no_such_topic,
    print_json,
    print_table,
)
from spool.cli.groups import log_offsets

app = typer.Typer(help="Share groups (KIP-932): reset or delete their start offsets.",
                  no_args_is_help=True)


async def _check_empty(admin: wire.WireAdmin, group: str, timeout: float) -> None:
    coord = await group_wire.coordinator(admin, group, timeout)
    try:
        described = await group_wire.describe_share_group(coord, group)
    finally:
        await coord.client.close()
    if described is not None and described.group_state != "Empty":
        raise CliError(f"share group '{group}' is not empty: it is {described.group_state} "
                       f"with {len(described.members)} members; stop its consumers first "
                       "(NON_EMPTY_GROUP)", 1, "NON_EMPTY_GROUP")


async def _at_coordinator(admin: wire.WireAdmin, group: str, timeout: float, op) -> None:
    coord = await group_wire.coordinator(admin, group, timeout)
    try:
        await op(coord)
    finally:
        await coord.client.close()


@app.command("reset-offsets")
@cli_command
def reset_offsets(
    group: Annotated[str, typer.Option("--group", help="The share group id.")],
    topic: Annotated[str, typer.Option("--topic", help="The topic whose start offsets to set.")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Set them (else dry run).")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Plan (and with --execute, set) a share group's start offsets on a topic."""
    if sum([to_earliest, to_latest, to_offset is not None]) != 1:
        raise CliError("give exactly one of --to-earliest, --to-latest, --to-offset", 2)
    wire.run(bootstrap, timeout, lambda a: _check_empty(a, group, timeout))
    admin = admin_client(bootstrap, timeout)
    md = admin.list_topics(timeout=timeout).topics.get(topic)  # one topic's could create it
    if md is None or md.error is not None:
        raise no_such_topic(topic)
    parts = [(topic, p) for p in sorted(md.partitions)]
    start = log_offsets(admin, parts, OffsetSpec.earliest(), timeout)
    end = log_offsets(admin, parts, OffsetSpec.latest(), timeout)
    target = start if to_earliest else end if to_latest else dict.fromkeys(parts, to_offset)
    plan = {p: min(max(target[(t, p)], start[(t, p)]), end[(t, p)]) for t, p in parts}
    if execute:
        wire.run(bootstrap, timeout, lambda a: _at_coordinator(
            a, group, timeout,
            lambda coord: group_wire.alter_share_group_offsets(coord, group, topic, plan)))
    rows = [{"topic": topic, "partition": p, "start_offset": o} for p, o in plan.items()]
    if json:
        print_json(rows)
    else:
        print_table(["Topic", "Partition", "New start offset"],
                    [[r["topic"], r["partition"], r["start_offset"]] for r in rows])
    typer.echo(f"start offsets of share group '{group}' " + (
        "set" if execute else "not changed: dry run, add --execute"), err=True)


@app.command("delete-offsets")
@cli_command
def delete_offsets(
    group: Annotated[str, typer.Option("--group", help="The share group id.")],
    topic: Annotated[list[str], typer.Option("--topic", help="A topic (repeatable).")],
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Delete a share group's start offsets and state of whole topics.

    --json: {"group", "topics": [topic]}."""
    wire.run(bootstrap, timeout, lambda a: _check_empty(a, group, timeout))
    wire.run(bootstrap, timeout, lambda a: _at_coordinator(
        a, group, timeout,
        lambda coord: group_wire.delete_share_group_offsets(coord, group, list(topic))))
    if json:
        print_json({"group": group, "topics": list(topic)})
        return
    typer.echo(f"share state of group '{group}' deleted for {', '.join(topic)}", err=True)
