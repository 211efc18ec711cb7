"""``spool groups``: the Kafka consumer-groups (and groups) tool's abilities.

- ``list [--type classic|consumer|share]... [--state S]... [--json]``: group ids
  (ListGroups v5 to every broker: a table with type, protocol and state on a terminal;
  ``--json``: ``[{"group", "type", "protocol", "state"}]``, type classic, consumer
  (KIP-848) or share (KIP-932)).
- ``describe GROUP... | --all-groups [--offsets | --members | --state] [--json]
  [--admin-endpoint H:P]...``: what the group's type shows (the coordinator is asked
  ConsumerGroupDescribe, then ShareGroupDescribe, then the classic DescribeGroups);
  ``--all-groups``: every classic and consumer group (ListGroups), as Kafka's tool. The
  default view (``--offsets``):
  classic: state, assignor, members (member id, client id, host, instance id,
  assignment) and, per partition with a committed offset or an owner, the committed
  offset, log end offset and lag (``log_end_offset - committed``); an assigned partition
  without a commit shows committed and lag ``-`` (JSON null), as Kafka's tool.
  ``--json``: ``{"group", "type": "classic", "state", "assignor", "members": [...],
  "offsets": [...], "coordinator": {"id", "host", "port"}}``.
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
  ``--members``: per member its client, host, number of partitions and assignment
  (JSON: ``{"group", "type", "state", "members"}``); ``--state``: one row per group with
  its coordinator ``host:port (id)``, assignor, state and member count (JSON: ``{"group",
  "type", "state", "assignor", "coordinator", "members": N}``). Text views note on
  stderr a group with no active members or none at all. JSON is one document for one
  named group, a list for several or ``--all-groups``.
- ``reset-offsets GROUP (--topic T[:P,P...]... | --all-topics | --from-file CSV)
  (--to-earliest | --to-latest | --to-current | --to-datetime T | --by-duration D |
  --to-offset N | --shift-by N) [--execute] [--export | --json]``: prints the plan
  (topic, partition, new offset); only ``--execute`` commits it (``--dry-run``, Kafka's
  spelling of the default, is accepted). Like Kafka's tool it
  refuses unless the group is inactive (Empty or unknown), and clamps targets into
  ``[log start, log end]``. ``--all-topics``: the partitions the group has committed
  offsets for. ``--to-current``: the committed offset, the log end without one.
  ``--to-datetime``: ISO-8601 or epoch ms; ``--by-duration``: now minus an ISO-8601
  duration (Java's ``Duration.parse``: ``PT1H30M``, ``P1D``); both the first offset at or
  after that time, else the end. ``--shift-by`` without a committed offset shifts from the
  log end. ``--export`` prints the plan as Kafka's CSV, ``topic,partition,offset`` per
  line; ``--from-file`` reads it back (or Kafka's multi-group ``group,topic,partition,
  offset``, keeping GROUP's lines) as the targets.
- ``delete-offsets GROUP --topic T[:P,P...]... [--json]``: OffsetDelete of those
  partitions' committed offsets (a bare topic: all its partitions); a table of each
  partition's status (``Successful`` or the error name; JSON ``[{"topic", "partition",
  "error"}]``). The group must not be subscribed to the topic (GROUP_SUBSCRIBED_TO_TOPIC
  per partition: the table, then one line and exit 1); an unknown group is
  GROUP_ID_NOT_FOUND.
- ``delete GROUP... [--json]``: delete inactive groups (NON_EMPTY_GROUP otherwise);
  ``--json``: ``{"deleted": [group]}`` instead of a line per group on stderr.

Every command that names groups takes them positionally or, as Kafka's
kafka-consumer-groups and ``spool share-groups`` do, with ``--group``/``-g`` (repeatable
for ``describe`` and ``delete``). Neither, or both naming different groups, is a usage
error (one line, exit 2).
"""

from __future__ import annotations

import csv
import re
import sys
import time
from collections.abc import Callable
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
    no_such_topic,
    print_json,
    print_table,
    result,
)
from spool.protocol.errors import error_name

app = typer.Typer(help="List, describe, reset and delete consumer groups.", no_args_is_help=True)

GroupOpt = Annotated[list[str] | None, typer.Option(
    "--group", "-g", help="A group id (Kafka's spelling of the argument; repeatable).",
    show_default=False)]
OneGroupOpt = Annotated[str | None, typer.Option(
    "--group", "-g", help="The group id (Kafka's spelling of the argument).",
    show_default=False)]


def named_groups(positional: list[str] | None, option: list[str] | None) -> list[str]:
    """The groups named positionally or by ``--group`` (both only if they agree)."""
    if positional and option and positional != option:
        raise CliError("name the groups positionally or with --group, not both", 2)
    return list(positional or option or [])


def named_group(positional: str | None, option: str | None) -> str:
    """The one group named positionally or by ``--group`` (both only if they agree)."""
    if positional is None and option is None:
        raise CliError("name the group: GROUP or --group GROUP", 2)
    if positional is not None and option is not None and positional != option:
        raise CliError(f"two groups named: '{positional}' and --group '{option}'", 2)
    return positional if positional is not None else option  # type: ignore[return-value]


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


def _group_doc(bootstrap: str, group: str, timeout: float,
               admin_endpoint: list[str] | None, admin: Callable[[], AdminClient]) -> dict:
    """One group's document, whatever its type (the module doc's ``describe``); ``admin``
    gives the command's one AdminClient (made on first use)."""
    kind, described, coord = wire.run(bootstrap, timeout, lambda a: group_describe.probe(
        a, group, timeout))
    if kind == "consumer":
        doc = group_describe.consumer_doc(described)
        doc["offsets"] = _offsets(admin(), group, {
            (a["topic"], a["partition"]): m["member_id"]
            for m in doc["members"] for a in m["assignment"]}, timeout)
    elif kind == "share":
        doc = group_describe.share_doc(*described)
        if admin_endpoint:
            doc["in_flight"] = group_describe.in_flight(admin_endpoint, group, timeout)
    else:
        doc = _describe(admin(), group, timeout)
    doc["coordinator"] = coord
    return doc


def _view(doc: dict, view: str) -> dict:
    """The part of a group's document that ``--members`` / ``--state`` show."""
    if view == "members":
        return {k: doc[k] for k in ("group", "type", "state", "members")}
    if view == "state":
        return {"group": doc["group"], "type": doc["type"], "state": doc["state"],
                "assignor": doc["assignor"], "coordinator": doc["coordinator"],
                "members": len(doc["members"])}
    return doc


@app.command()
@cli_command
def describe(
    groups: Annotated[list[str] | None, typer.Argument(help="Group ids.", show_default=False)
                      ] = None,
    all_groups: Annotated[bool, typer.Option(
        "--all-groups", help="Every classic and consumer group of the cluster.")] = False,
    members: Annotated[bool, typer.Option(
        "--members", help="Members: client, host, number of partitions, assignment.")] = False,
    state: Annotated[bool, typer.Option(
        "--state", help="State, coordinator, assignor and member count.")] = False,
    offsets: Annotated[bool, typer.Option(
        "--offsets", help="Committed offsets, log end offsets and lag (the default).")] = False,
    group: GroupOpt = None,
    json: JsonFlag = False,
    admin_endpoint: Annotated[list[str] | None, typer.Option(
        "--admin-endpoint", help="host:port of a broker's spool.admin.http.listener, to show "
        "a share group's in-flight records (repeatable: the partition leaders').")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Show groups' state, members, assignments, committed offsets and lag."""
    groups = named_groups(groups, group)
    if bool(groups) == all_groups:
        raise CliError("name the groups to describe or give --all-groups (not both)", 2)
    if members + state + offsets > 1:
        raise CliError("give at most one of --members, --state, --offsets", 2)
    view = "members" if members else "state" if state else "offsets"
    if all_groups:
        listed = wire.run(bootstrap, timeout, lambda admin: group_wire.list_groups(
            admin, ["classic", "consumer"], [], timeout))
        groups = [g.group_id for g in listed
                  if g.group_type == "consumer" or g.protocol_type in ("consumer", "")]
    docs = []
    # one AdminClient for every group: a client made and destroyed per group (hundreds under
    # --all-groups) aborted the process inside librdkafka's admin code now and then
    # (rd_kafka_admin_response_parse: Assertion 'rko_result' failed)
    clients: list[AdminClient] = []

    def admin() -> AdminClient:
        if not clients:
            clients.append(admin_client(bootstrap, timeout))
        return clients[0]

    for g in groups or []:
        try:
            docs.append(_view(_group_doc(bootstrap, g, timeout, admin_endpoint, admin), view))
        except UnicodeDecodeError as e:  # a string field the client cannot decode (not UTF-8)
            if not all_groups:
                raise CliError(f"group '{g}': its description is not valid UTF-8 "
                               f"({e.reason})") from None
            typer.echo(f"spool: group '{g}' left out: its description is not valid UTF-8 "
                       f"({e.reason})", err=True)
    if json:
        print_json(docs if all_groups or len(docs) != 1 else docs[0])
        return
    if view == "state":
        print_table(["Group", "Coordinator (ID)", "Assignor", "State", "#Members"],
                    [[d["group"], _coordinator(d["coordinator"]), d["assignor"] or "-",
                      d["state"], d["members"]] for d in docs])
        return
    for i, doc in enumerate(docs):
        if i:
            print()
        _show(doc, view)


def _coordinator(c: dict) -> str:
    return f"{c['host']}:{c['port']} ({'-' if c['id'] is None else c['id']})"


def _show(doc: dict, view: str) -> None:
    """One group's text view (offsets or members); stderr notes an empty or unknown group."""
    if doc["state"] in ("Dead", "Unknown") and not doc["members"] and not doc.get("offsets"):
        typer.echo(f"group '{doc['group']}' does not exist", err=True)
    elif doc["state"] == "Empty":
        typer.echo(f"group '{doc['group']}' has no active members", err=True)
    if view == "members":
        print(f"group {doc['group']}: {doc['state']}, {len(doc['members'])} members")
        print_table(["Member", "Instance", "Host", "Client", "#Partitions", "Assignment"],
                    [[m["member_id"], _dash(m.get("instance_id")), m["host"], m["client_id"],
                      len(m["assignment"]), group_describe.short(m["assignment"])]
                     for m in doc["members"]])
        return
    if doc["type"] == "consumer":
        return group_describe.show_consumer(doc, False)
    if doc["type"] == "share":
        return group_describe.show_share(doc, False)
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


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+(?:[.,]\d{0,9})?)S)?)?", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PT1H30M``, ``P1DT2H``,
    ``PT0.5S``, ``-PT10M``) in milliseconds."""
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.groups()[1:]) or text.strip().upper().endswith("T"):
        raise CliError(f"bad --by-duration '{text}': expected an ISO-8601 duration "
                       "PnDTnHnMn.nS, e.g. PT1H30M or P1D", 2)
    sign, d, h, mi, sec = m.groups()
    ms = (int(d or 0) * 86_400_000 + int(h or 0) * 3_600_000 + int(mi or 0) * 60_000
          + round(float((sec or "0").replace(",", ".")) * 1000))
    return -ms if sign == "-" else ms


def parse_topic_partitions(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    """``["t", "u:0,2"]`` -> ``[("t", None), ("u", [0, 2])]`` (Kafka's ``--topic`` spelling)."""
    out: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        try:
            nums = [int(p) for p in parts.split(",") if p.strip()] if sep else None
        except ValueError:
            nums = []
        if not topic or nums == []:
            raise CliError(f"bad --topic '{spec}': expected TOPIC or TOPIC:P[,P...]", 2)
        out.append((topic, nums))
    return out


def resolve_partitions(admin: AdminClient, specs: list[str],
                       timeout: float) -> list[tuple[str, int]]:
    """The partitions ``--topic`` names: every partition of a bare topic. The topic and the
    partitions must exist (asked of every topic's metadata, which creates none)."""
    out: set[tuple[str, int]] = set()
    known = admin.list_topics(timeout=timeout).topics
    for topic, nums in parse_topic_partitions(specs):
        md = known.get(topic)
        if md is None or md.error is not None:
            raise no_such_topic(topic)
        missing = sorted(set(nums or []) - set(md.partitions))
        if missing:
            raise CliError(f"partition {topic}-{missing[0]} does not exist (topic '{topic}' has "
                           f"{len(md.partitions)} partitions) (UNKNOWN_TOPIC_OR_PARTITION)", 1,
                           "UNKNOWN_TOPIC_OR_PARTITION")
        out.update((topic, p) for p in (nums if nums is not None else md.partitions))
    return sorted(out)


def read_plan(path: str, group: str) -> dict[tuple[str, int], int]:
    """A reset plan in Kafka's CSV (``topic,partition,offset``, or ``group,topic,partition,
    offset`` for several groups): ``group``'s rows."""
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    except OSError as e:
        raise CliError(f"cannot read --from-file {path}: {e.strerror}", 1) from None
    plan: dict[tuple[str, int], int] = {}
    for n, row in enumerate(rows, 1):
        if len(row) not in (3, 4):
            raise CliError(f"{path}:{n}: expected topic,partition,offset or "
                           "group,topic,partition,offset", 2)
        if len(row) == 4 and row[0] != group:
            continue
        topic, part, offset = row[-3:]
        try:
            plan[(topic, int(part))] = int(offset)
        except ValueError:
            raise CliError(f"{path}:{n}: partition and offset must be integers", 2) from None
    if not plan:
        raise CliError(f"{path}: no reset plan for group '{group}'", 1)
    return plan


@app.command("reset-offsets")
@cli_command
def reset_offsets(
    group_arg: Annotated[str | None, typer.Argument(
        metavar="GROUP", help="The group id (or --group).", show_default=False)] = None,
    group: OneGroupOpt = None,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="TOPIC or TOPIC:P,P... to reset (repeatable).")] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="Every partition the group has a committed offset for.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_current: Annotated[bool, typer.Option(
        "--to-current", help="The committed offset (the log end without one).")] = False,
    to_datetime: Annotated[str | None, typer.Option("--to-datetime")] = None,
    by_duration: Annotated[str | None, typer.Option(
        "--by-duration", help="The first offset at or after now minus this ISO-8601 duration "
        "(PT1H30M, P1D).")] = None,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by")] = None,
    from_file: Annotated[str | None, typer.Option(
        "--from-file", help="A plan in Kafka's CSV: topic,partition,offset per line (as "
        "--export writes it).")] = None,
    export: Annotated[bool, typer.Option(
        "--export", help="Print the plan as Kafka's CSV (for --from-file).")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the plan (else dry run).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only print the plan (the default; Kafka's spelling).")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Plan (and with --execute, commit) new offsets for an inactive group."""
    group = named_group(group_arg, group)
    if execute and dry_run:
        raise CliError("give --dry-run or --execute, not both", 2)
    given = [to_earliest, to_latest, to_current, to_datetime is not None,
             by_duration is not None, to_offset is not None, shift_by is not None,
             from_file is not None]
    if sum(given) != 1:
        raise CliError("give exactly one of --to-earliest, --to-latest, --to-current, "
                       "--to-datetime, --by-duration, --to-offset, --shift-by, --from-file", 2)
    if from_file is None and bool(topic) == all_topics:
        raise CliError("give --topic or --all-topics (one of them)", 2)
    if from_file is not None and (topic or all_topics):
        raise CliError("--from-file names its partitions: no --topic or --all-topics", 2)
    if export and json:
        raise CliError("give at most one of --export, --json", 2)
    duration_ms = parse_duration(by_duration) if by_duration is not None else None
    at_ms = _parse_time(to_datetime) if to_datetime is not None else None
    admin = admin_client(bootstrap, timeout)
    d = result(admin.describe_consumer_groups([group], request_timeout=timeout)[group], group, timeout)
    if d.state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        raise CliError(f"offsets of group '{group}' can only be reset while it is inactive, "
                       f"but it is {_state_name(d.state)}: stop its consumers first", 1)
    committed = _committed(admin, group, timeout)
    requested = read_plan(from_file, group) if from_file is not None else None
    if requested is not None:
        parts = resolve_partitions(admin, [f"{t}:{p}" for t, p in sorted(requested)], timeout)
    elif all_topics:
        parts = sorted(committed)
    else:
        parts = resolve_partitions(admin, topic or [], timeout)
    start = log_offsets(admin, parts, OffsetSpec.earliest(), timeout)
    end = log_offsets(admin, parts, OffsetSpec.latest(), timeout)
    if requested is not None:
        target = requested
    elif to_earliest:
        target = dict(start)
    elif to_latest:
        target = dict(end)
    elif to_current:
        target = {tp: committed[tp].offset if tp in committed else end[tp] for tp in parts}
    elif at_ms is not None or duration_ms is not None:
        when = at_ms if at_ms is not None else int(time.time() * 1000) - (duration_ms or 0)
        found = log_offsets(admin, parts, OffsetSpec.for_timestamp(when), timeout)
        target = {tp: (o if o >= 0 else end[tp]) for tp, o in found.items()}
    elif to_offset is not None:
        target = {tp: to_offset for tp in parts}
    else:
        target = {tp: (committed[tp].offset if tp in committed else end[tp]) + (shift_by or 0)
                  for tp in parts}
    plan = [{"topic": t, "partition": p, "offset": min(max(target[(t, p)], start[(t, p)]), end[(t, p)])}
            for t, p in parts]
    if execute and plan:
        req = ConsumerGroupTopicPartitions(
            group, [TopicPartition(r["topic"], r["partition"], r["offset"]) for r in plan])
        result(admin.alter_consumer_group_offsets([req], request_timeout=timeout)[group], group,
               timeout)
    if json:
        print_json(plan)
    elif export:
        out = csv.writer(sys.stdout, lineterminator="\n")
        for r in plan:
            out.writerow([r["topic"], r["partition"], r["offset"]])
    else:
        print_table(["Topic", "Partition", "New offset"],
                    [[r["topic"], r["partition"], r["offset"]] for r in plan])
    typer.echo(f"offsets of group '{group}' " + ("reset" if execute else
                                                 "not changed: dry run, add --execute"), err=True)


@app.command("delete-offsets")
@cli_command
def delete_offsets(
    group_arg: Annotated[str | None, typer.Argument(
        metavar="GROUP", help="The group id (or --group).", show_default=False)] = None,
    group: OneGroupOpt = None,
    *,
    topic: Annotated[list[str], typer.Option(
        "--topic", help="TOPIC or TOPIC:P,P... whose committed offsets to delete (repeatable).")],
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Delete a group's committed offsets of some topics or partitions (OffsetDelete)."""
    group = named_group(group_arg, group)
    parts = resolve_partitions(admin_client(bootstrap, timeout), topic, timeout)

    async def body(admin: wire.WireAdmin) -> list[tuple[str, int, int]]:
        coord = await group_wire.coordinator(admin, group, timeout)
        try:
            return await group_wire.delete_offsets(coord, group, parts)
        finally:
            await coord.client.close()

    done = wire.run(bootstrap, timeout, body)
    rows = [{"topic": t, "partition": p, "error": error_name(c) if c else None}
            for t, p, c in done]
    if json:
        print_json(rows)
    else:
        print_table(["Topic", "Partition", "Status"],
                    [[r["topic"], r["partition"], r["error"] or "Successful"] for r in rows])
    failed = [r for r in rows if r["error"]]
    if failed:
        f = failed[0]
        raise CliError(f"offsets of {len(failed)} of {len(rows)} partitions not deleted: "
                       f"{f['topic']}-{f['partition']}: {f['error']}"
                       + (" (the group's members consume the topic)"
                          if f["error"] == "GROUP_SUBSCRIBED_TO_TOPIC" else ""),
                       1, f["error"])
    typer.echo(f"offsets of group '{group}' deleted", err=True)


@app.command()
@cli_command
def delete(
    groups: Annotated[list[str] | None, typer.Argument(
        help="Group ids (or --group).", show_default=False)] = None,
    group: GroupOpt = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Delete inactive groups and their committed offsets.

    --json: {"deleted": [group]}."""
    groups = named_groups(groups, group)
    if not groups:
        raise CliError("name the groups to delete: GROUP... or --group GROUP...", 2)
    admin = admin_client(bootstrap, timeout)
    futures = admin.delete_consumer_groups(groups, request_timeout=timeout)
    for g in groups:
        result(futures[g], g, timeout)
        if not json:
            typer.echo(f"group '{g}' deleted", err=True)
    if json:
        print_json({"deleted": groups})
