"""``spool groups``: the Kafka consumer-groups tool's abilities.

- ``list [--state S]... [--json]``: group ids (a table with state and type on
  a terminal; ``--json``: ``[{"group", "state", "type"}]``).
- ``describe GROUP [--json]``: state, assignor, members (member id, client
  id, host, instance id, assignment) and, per partition with a committed
  offset or an owner, the committed offset, log end offset and lag
  (``log_end_offset - committed``; unknown without a commit). ``--json``:
  ``{"group", "state", "assignor", "members": [...], "offsets": [...]}``.
- ``reset-offsets GROUP --topic T (--to-earliest | --to-latest |
  --to-datetime T | --to-offset N | --shift-by N) [--execute]``: prints the
  plan (topic, partition, new offset); only ``--execute`` commits it. Like
  Kafka's tool it refuses unless the group is inactive (Empty or unknown),
  and clamps targets into ``[log start, log end]``. ``--to-datetime``:
  ISO-8601 or epoch ms; the first offset at or after it, else the end.
- ``delete GROUP...``: delete inactive groups (NON_EMPTY_GROUP otherwise).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    cli_command,
    is_tty,
    print_json,
    print_table,
    result,
)

app = typer.Typer(help="List, describe, reset and delete consumer groups.", no_args_is_help=True)

_STATES = {s.name.lower().replace("_", ""): s for s in ConsumerGroupState}
_STATE_NAMES = {
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.EMPTY: "Empty",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.UNKNOWN: "Unknown",
}


def _state_name(state: Any) -> str:
    return _STATE_NAMES.get(state, str(state))


def _state_filter(names: list[str] | None) -> set[ConsumerGroupState]:
    out = set()
    for n in names or []:
        key = n.lower().replace("_", "").replace("rebalance", "rebalancing")
        if key not in _STATES:
            raise CliError(f"unknown group state '{n}'", 2)
        out.add(_STATES[key])
    return out


@app.command("list")
@cli_command
def list_(
    state: Annotated[list[str] | None, typer.Option("--state", help="Only groups in this state.")] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List consumer groups."""
    admin = admin_client(bootstrap, timeout)
    states = _state_filter(state)
    listed = result(admin.list_consumer_groups(states=states, request_timeout=timeout),
                    "groups", timeout)
    rows = sorted(({"group": g.group_id, "state": _state_name(g.state),
                    "type": "consumer" if g.is_simple_consumer_group is False else "simple"}
                   for g in listed.valid), key=lambda r: r["group"])
    if json:
        print_json(rows)
    elif is_tty():
        print_table(["Group", "State", "Type"], [[r["group"], r["state"], r["type"]] for r in rows])
    else:
        for r in rows:
            print(r["group"])


def _end_offsets(admin: AdminClient, parts: list[tuple[str, int]], spec: OffsetSpec,
                 timeout: float) -> dict[tuple[str, int], int]:
    if not parts:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in parts},
                                 request_timeout=timeout)
    return {(tp.topic, tp.partition): result(f, tp.topic, timeout).offset
            for tp, f in futures.items()}


def _committed(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], Any]:
    req = ConsumerGroupTopicPartitions(group)
    got = result(admin.list_consumer_group_offsets([req], request_timeout=timeout)[group], group,
                 timeout)
    return {(tp.topic, tp.partition): tp for tp in got.topic_partitions or [] if tp.offset >= 0}


def _describe(admin: AdminClient, group: str, timeout: float) -> dict:
    d = result(admin.describe_consumer_groups([group], request_timeout=timeout)[group], group,
               timeout)
    members = []
    owner: dict[tuple[str, int], str] = {}
    for m in d.members:
        assigned = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        owner.update({tp: m.member_id for tp in assigned})
        members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                        "instance_id": m.group_instance_id,
                        "assignment": [{"topic": t, "partition": p} for t, p in assigned]})
    committed = _committed(admin, group, timeout)
    parts = sorted(set(committed) | set(owner))
    ends = _end_offsets(admin, parts, OffsetSpec.latest(), timeout)
    offsets = []
    for tp in parts:
        c = committed.get(tp)
        end = ends.get(tp, -1)
        offsets.append({
            "topic": tp[0], "partition": tp[1], "committed": c.offset if c else None,
            "metadata": (c.metadata or "") if c else None, "log_end_offset": end,
            "lag": max(end - c.offset, 0) if c and end >= 0 else None,
            "member_id": owner.get(tp),
        })
    return {"group": group, "state": _state_name(d.state), "assignor": d.partition_assignor or "",
            "members": members, "offsets": offsets}


@app.command()
@cli_command
def describe(
    group: Annotated[str, typer.Argument(help="The group id.")],
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Show a group's state, members, committed offsets and lag."""
    doc = _describe(admin_client(bootstrap, timeout), group, timeout)
    if json:
        print_json(doc)
        return
    print(f"group {doc['group']}: {doc['state']}, {len(doc['members'])} members"
          + (f", assignor {doc['assignor']}" if doc["assignor"] else ""))
    by_id = {m["member_id"]: m for m in doc["members"]}
    rows = []
    for o in doc["offsets"]:
        m = by_id.get(o["member_id"] or "", {})
        rows.append([o["topic"], o["partition"], _dash(o["committed"]), o["log_end_offset"],
                     _dash(o["lag"]), o["member_id"] or "-", m.get("host", "-"),
                     m.get("client_id", "-")])
    idle = [m for m in doc["members"] if not m["assignment"]]
    rows += [["-", "-", "-", "-", "-", m["member_id"], m["host"], m["client_id"]] for m in idle]
    print_table(["Topic", "Partition", "Committed", "Log end", "Lag", "Member", "Host", "Client"],
                rows)


def _dash(v: Any) -> Any:
    return "-" if v is None else v


def _parse_time(text: str) -> int:
    s = text.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        return int(datetime.fromisoformat(s).timestamp() * 1000)
    except ValueError:
        raise CliError(f"bad --to-datetime '{text}': expected ISO-8601 or epoch ms", 2) from None


@app.command("reset-offsets")
@cli_command
def reset_offsets(
    group: Annotated[str, typer.Argument(help="The group id.")],
    topic: Annotated[str, typer.Option("--topic", help="The topic whose offsets to reset.")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_datetime: Annotated[str | None, typer.Option("--to-datetime")] = None,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the plan (else dry run).")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Plan (and with --execute, commit) new offsets for an inactive group."""
    given = [to_earliest, to_latest, to_datetime is not None, to_offset is not None,
             shift_by is not None]
    if sum(given) != 1:
        raise CliError("give exactly one of --to-earliest, --to-latest, --to-datetime, "
                       "--to-offset, --shift-by", 2)
    admin = admin_client(bootstrap, timeout)
    d = result(admin.describe_consumer_groups([group], request_timeout=timeout)[group], group, timeout)
    if d.state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        raise CliError(f"offsets of group '{group}' can only be reset while it is inactive, "
                       f"but it is {_state_name(d.state)}: stop its consumers first", 1)
    md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if md is None or md.error is not None:
        raise CliError(f"topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)", 1)
    parts = [(topic, p) for p in sorted(md.partitions)]
    start = _end_offsets(admin, parts, OffsetSpec.earliest(), timeout)
    end = _end_offsets(admin, parts, OffsetSpec.latest(), timeout)
    if to_earliest:
        target = dict(start)
    elif to_latest:
        target = dict(end)
    elif to_datetime is not None:
        found = _end_offsets(admin, parts, OffsetSpec.for_timestamp(_parse_time(to_datetime)), timeout)
        target = {tp: (o if o >= 0 else end[tp]) for tp, o in found.items()}
    elif to_offset is not None:
        target = {tp: to_offset for tp in parts}
    else:
        committed = _committed(admin, group, timeout)
        target = {tp: (committed[tp].offset if tp in committed else end[tp]) + shift_by
                  for tp in parts}
    plan = [{"topic": t, "partition": p, "offset": min(max(target[(t, p)], start[(t, p)]), end[(t, p)])}
            for t, p in parts]
    if execute:
        req = ConsumerGroupTopicPartitions(
            group, [TopicPartition(r["topic"], r["partition"], r["offset"]) for r in plan])
        result(admin.alter_consumer_group_offsets([req], request_timeout=timeout)[group], group,
               timeout)
    if json:
        print_json(plan)
    else:
        print_table(["Topic", "Partition", "New offset"],
                    [[r["topic"], r["partition"], r["offset"]] for r in plan])
    typer.echo(f"offsets of group '{group}' " + ("reset" if execute else
                                                 "not changed: dry run, add --execute"), err=True)


@app.command()
@cli_command
def delete(
    groups: Annotated[list[str], typer.Argument(help="Group ids.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Delete inactive groups and their committed offsets."""
    admin = admin_client(bootstrap, timeout)
    futures = admin.delete_consumer_groups(groups, request_timeout=timeout)
    for g in groups:
        result(futures[g], g, timeout)
        typer.echo(f"group '{g}' deleted", err=True)
