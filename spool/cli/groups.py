"""``spool groups``: the Kafka consumer-groups (and groups) tool's abilities.

- ``list [--type classic|consumer|share]... [--state S]... [--json]``: group ids
  (ListGroups v5 to every broker: a table with type, protocol and state on a terminal;
  ``--json``: ``[{"group", "type", "protocol", "state"}]``, type classic, consumer
  (KIP-848) or share (KIP-932)).
- ``describe GROUP [--json] [--admin-endpoint H:P]...``: what the group's type shows
  (the coordinator is asked ConsumerGroupDescribe, then ShareGroupDescribe, then the
  classic DescribeGroups):
  classic: state, assignor, members (member id, client id, host, instance id,
  assignment) and, per partition with a committed offset or an owner, the committed
  offset, log end offset and lag (``log_end_offset - committed``; unknown without a
  commit). ``--json``: ``{"group", "type": "classic", "state", "assignor",
  "members": [...], "offsets": [...]}``.
  consumer (KIP-848): state, group and assignment epochs, assignor, and per member its
  epoch, subscription and both its current assignment and its target assignment (they
  differ while it reconciles), then the offsets as for classic. ``--json`` members carry
  ``member_epoch``, ``subscribed_topics``, ``subscribed_regex``, ``assignment`` and
  ``target_assignment``.
  share (KIP-932): state, epochs, members (epoch, client, host, subscription, assigned
  partitions), the share-partition start offsets (null until the partition's leader first
  writes the state) and lag (DescribeShareGroupOffsets) and,
  with ``--admin-endpoint`` (the ``spool.admin.http.listener`` of the partitions'
  leaders; repeatable), the in-flight records: ranges of offsets with their state
  (AVAILABLE, ACQUIRED by a member until a lock deadline, ACKNOWLEDGED, ARCHIVED) and
  delivery count. No Kafka API lists in-flight records; without an endpoint
  ``in_flight`` is null.
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

from spool.cli import group_describe, group_wire, wire
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


# Kafka's group states: classic, consumer (KIP-848) and share groups (KIP-932)
_ALL_STATES = {s.lower(): s for s in ("PreparingRebalance", "CompletingRebalance", "Stable",
                                      "Empty", "Dead", "Assigning", "Reconciling")}


def _state_filter(names: list[str] | None) -> list[str]:
    out = []
    for n in names or []:
        key = n.lower().replace("_", "").replace("rebalancing", "rebalance")
        if key not in _ALL_STATES:
            raise CliError(f"unknown group state '{n}' (expected one of "
                           f"{', '.join(_ALL_STATES.values())})", 2)
        out.append(_ALL_STATES[key])
    return out


def _type_filter(names: list[str] | None) -> list[str]:
    for n in names or []:
        if n not in group_wire.GROUP_TYPES:
            raise CliError(f"unknown group type '{n}' (expected classic, consumer or share)", 2)
    return sorted(set(names or []))


@app.command("list")
@cli_command
def list_(
    type_: Annotated[list[str] | None, typer.Option(
        "--type", help="Only groups of this type: classic, consumer or share (repeatable).")
    ] = None,
    state: Annotated[list[str] | None, typer.Option("--state", help="Only groups in this state.")] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List groups (classic, consumer-protocol and share groups)."""
    types, states = _type_filter(type_), _state_filter(state)
    listed = wire.run(bootstrap, timeout,
                      lambda admin: group_wire.list_groups(admin, types, states, timeout))
    rows = [{"group": g.group_id, "type": g.group_type or "classic",
             "protocol": g.protocol_type, "state": g.group_state} for g in listed]
    if json:
        print_json(rows)
    elif is_tty():
        print_table(["Group", "Type", "Protocol", "State"],
                    [[r["group"], r["type"], r["protocol"] or "-", r["state"]] for r in rows])
    else:
        for r in rows:
            print(r["group"])


def log_offsets(admin: AdminClient, parts: list[tuple[str, int]], spec: OffsetSpec,
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
    offsets = _offsets(admin, group, owner, timeout)
    return {"group": group, "type": "classic", "state": _state_name(d.state),
            "assignor": d.partition_assignor or "", "members": members, "offsets": offsets}


def _offsets(admin: AdminClient, group: str, owner: dict[tuple[str, int], str],
             timeout: float) -> list[dict]:
    committed = _committed(admin, group, timeout)
    parts = sorted(set(committed) | set(owner))
    ends = log_offsets(admin, parts, OffsetSpec.latest(), timeout)
    out = []
    for tp in parts:
        c = committed.get(tp)
        end = ends.get(tp, -1)
        out.append({
            "topic": tp[0], "partition": tp[1], "committed": c.offset if c else None,
            "metadata": (c.metadata or "") if c else None, "log_end_offset": end,
            "lag": max(end - c.offset, 0) if c and end >= 0 else None,
            "member_id": owner.get(tp),
        })
    return out


@app.command()
@cli_command
def describe(
    group: Annotated[str, typer.Argument(help="The group id.")],
    json: JsonFlag = False,
    admin_endpoint: Annotated[list[str] | None, typer.Option(
        "--admin-endpoint", help="host:port of a broker's spool.admin.http.listener, to show "
        "a share group's in-flight records (repeatable: the partition leaders').")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Show a group's state, members, assignments, committed offsets and lag."""
    kind, described = wire.run(bootstrap, timeout, lambda a: group_describe.probe(
        a, group, timeout))
    if kind == "consumer":
        doc = group_describe.consumer_doc(described)
        doc["offsets"] = _offsets(admin_client(bootstrap, timeout), group, {
            (a["topic"], a["partition"]): m["member_id"]
            for m in doc["members"] for a in m["assignment"]}, timeout)
        return group_describe.show_consumer(doc, json)
    if kind == "share":
        doc = group_describe.share_doc(*described)
        if admin_endpoint:
            doc["in_flight"] = group_describe.in_flight(admin_endpoint, group, timeout)
        return group_describe.show_share(doc, json)
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
    start = log_offsets(admin, parts, OffsetSpec.earliest(), timeout)
    end = log_offsets(admin, parts, OffsetSpec.latest(), timeout)
    if to_earliest:
        target = dict(start)
    elif to_latest:
        target = dict(end)
    elif to_datetime is not None:
        found = log_offsets(admin, parts, OffsetSpec.for_timestamp(_parse_time(to_datetime)), timeout)
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
