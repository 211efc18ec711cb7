"""``spool topics create|list|describe|alter|delete``: topic administration.

Contract (Kafka's kafka-topics semantics, over confluent-kafka's AdminClient):

- ``create NAME --partitions N --replication-factor R --config k=v ...
  [--if-not-exists] [--validate-only]``: CreateTopics. Partitions and
  replication factor default to the broker's (``num.partitions``,
  ``default.replication.factor``). An existing topic is an error
  (TOPIC_ALREADY_EXISTS) unless ``--if-not-exists``. ``--json``: ``{"topic", "created"
  (false: it existed, with --if-not-exists; or --validate-only), "validate_only",
  "partitions", "replication_factor" (as asked; null: the broker's default), "configs"}``.
- ``list [--internal] [--json]``: topic names from Metadata (internal topics
  only with ``--internal``). ``--json`` prints an array of
  ``{"name", "partitions", "replication_factor", "internal"}``.
- ``describe [NAME ...] [--json]``: each topic's id and partitions (leader,
  replicas, ISR, offline replicas; adding/removing replicas while a reassignment
  runs) as kafka-topics --describe prints them, and its configuration overrides
  (DescribeConfigs entries whose source is DYNAMIC_TOPIC_CONFIG). No names: every
  non-internal topic. ``--json`` prints an array of ``{"name", "topic_id",
  "internal", "replication_factor", "partitions": [{"partition", "leader" (-1:
  none), "replicas", "isr", "offline", "adding", "removing"}], "configs": {k: v}}``.
  Partitions come from Metadata v12 over ``spool.cli.wire`` (confluent-kafka does
  not expose offline replicas), reassignments from ListPartitionReassignments.
- ``under-replicated [NAME ...] [--json]``: the partitions whose ISR is smaller
  than their replicas (less the replicas a reassignment is adding, as Kafka's
  --under-replicated-partitions), one kafka-topics line each (``--json``: an array
  of ``{"topic", "partition", ...}``, ``[]`` for none); a count on stderr. Exit 0
  when there is none, 3 when some are listed, 1 when the cluster cannot be asked.
- ``alter NAME --partitions N``: CreatePartitions (the count only grows). ``--json``:
  ``{"topic", "partitions"}``.
- ``delete NAME ... [--if-exists]``: DeleteTopics. ``--json``: ``{"deleted": [name],
  "absent": [name]}`` (absent: did not exist, with ``--if-exists``).
- ``trim NAME --before-offset N [--partition P ...]`` or ``trim --offset-json-file
  FILE`` (Kafka's kafka-delete-records file: ``{"partitions": [{"topic", "partition",
  "offset"}], "version": 1}``): DeleteRecords, moving each partition's log start
  offset up to N (``-1``: the high watermark, deleting every record). Prints
  ``Topic Partition LowWatermark`` per partition (``--json``: an array of
  ``{"topic", "partition", "low_watermark"}``); a partition the broker refused is a
  line on stderr (e.g. an offset past the high watermark, OFFSET_OUT_OF_RANGE) and
  exit 1, the others are still trimmed. A file naming a partition twice is refused,
  as Kafka's tool refuses it, before anything is asked.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from spool.cli import partitions
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    check_topic_name,
    cli_command,
    config_source,
    is_tty,
    no_such_topic,
    parse_pairs,
    print_json,
    print_table,
    result,
)

UNDER_REPLICATED_EXIT = 3  # `under-replicated` found some (0: none, 1: could not ask)

app = typer.Typer(help="Create, list, describe, alter and delete topics.", no_args_is_help=True)


@app.command()
@cli_command
def create(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", min=1, help="Partition count.")
    ] = None,
    replication_factor: Annotated[
        int | None, typer.Option("--replication-factor", "-r", min=1, help="Replicas each.")
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", help="k=v topic config (repeatable, or k=v,k2=v2)."),
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed quietly if the topic exists.")
    ] = False,
    validate_only: Annotated[
        bool, typer.Option("--validate-only", help="Ask the broker to check, not create.")
    ] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Create a topic.

    --json: {"topic", "created", "validate_only", "partitions", "replication_factor",
    "configs"}."""
    check_topic_name(name)
    configs = parse_pairs(config)
    new = NewTopic(
        name,
        num_partitions=partitions if partitions is not None else -1,
        replication_factor=replication_factor if replication_factor is not None else -1,
        config=configs,
    )
    admin = admin_client(bootstrap, timeout)
    futures = admin.create_topics(
        [new], operation_timeout=timeout, request_timeout=timeout, validate_only=validate_only
    )
    created = not validate_only
    try:
        result(futures[name], name)
    except CliError as e:
        if not (if_not_exists and e.error_name == "TOPIC_ALREADY_EXISTS"):
            raise
        created = False
        if not json:
            return
    if json:
        print_json({"topic": name, "created": created, "validate_only": validate_only,
                    "partitions": partitions, "replication_factor": replication_factor,
                    "configs": configs})
        return
    verb = "would be created" if validate_only else "created"
    typer.echo(f"topic '{name}' {verb}", err=True)


@app.command("list")
@cli_command
def list_(
    internal: Annotated[bool, typer.Option("--internal", help="Include internal topics.")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List topics."""
    md = admin_client(bootstrap, timeout).list_topics(timeout=timeout)
    topics = sorted(
        (t for t in md.topics.values() if internal or not _is_internal(t)), key=lambda t: t.topic
    )
    rows = [
        {
            "name": t.topic,
            "partitions": len(t.partitions),
            "replication_factor": _replication_factor(t),
            "internal": _is_internal(t),
        }
        for t in topics
    ]
    if json:
        print_json(rows)
    elif is_tty():
        print_table(
            ["Topic", "Partitions", "Replication", "Internal"],
            [[r["name"], r["partitions"], r["replication_factor"], r["internal"]] for r in rows],
        )
    else:
        for r in rows:
            print(r["name"])


@app.command()
@cli_command
def describe(
    names: Annotated[list[str] | None, typer.Argument(help="Topics (default: all).")] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Show partitions (leader, replicas, ISR, offline replicas) and configuration overrides."""
    found = partitions.describe(bootstrap, timeout, names or None)
    wanted = names or sorted(n for n, t in found.items() if not t.internal)
    for name in wanted:
        partitions.check_exists(found, name)
    overrides = _overrides(admin_client(bootstrap, timeout), wanted, timeout)
    docs = [found[name].to_json(overrides[name]) for name in wanted]
    if json:
        print_json(docs)
    elif is_tty():
        for doc in docs:
            _print_rich(doc)
    else:
        for doc in docs:
            _print_plain(doc)


@app.command("under-replicated")
@cli_command
def under_replicated(
    names: Annotated[list[str] | None, typer.Argument(
        help="Topics to check (default: all, internal ones included).")] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List partitions whose ISR is smaller than their replica set.

    Exit status: 0 when there is none, 3 when some are listed, 1 when the cluster
    could not be asked (a script can tell "healthy" from "not" from "unknown")."""
    found = partitions.describe(bootstrap, timeout, names or None)
    for name in names or []:
        partitions.check_exists(found, name)
    rows = [(t, p) for _, t in sorted(found.items()) if t.error_code == 0
            for p in t.partitions if p.under_replicated]
    if json:
        print_json([{"topic": t.name, **p.to_json()} for t, p in rows])
    elif is_tty():
        print_table(["Topic", "Partition", "Leader", "Replicas", "ISR", "Offline"],
                    [[t.name, p.partition, _leader(p.leader), _ids(p.replicas), _ids(p.isr),
                      _ids(p.offline)] for t, p in rows])
    else:
        for t, p in rows:
            print(_partition_line(t.name, p))
    n = len(rows)
    typer.echo(f"{n} under-replicated partition{'s' if n != 1 else ''}" if n
               else "no under-replicated partitions", err=True)
    if rows:
        raise typer.Exit(UNDER_REPLICATED_EXIT)


@app.command()
@cli_command
def alter(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", min=1, help="The new, larger partition count.")
    ],
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Grow a topic's partition count (CreatePartitions)."""
    admin = admin_client(bootstrap, timeout)
    futures = admin.create_partitions(
        [NewPartitions(name, partitions)], operation_timeout=timeout, request_timeout=timeout
    )
    result(futures[name], name)
    if json:
        print_json({"topic": name, "partitions": partitions})
        return
    typer.echo(f"topic '{name}' now has {partitions} partitions", err=True)


@app.command()
@cli_command
def delete(
    names: Annotated[list[str], typer.Argument(help="Topics to delete.")],
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="Succeed quietly if a topic does not exist.")
    ] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Delete topics.

    --json: {"deleted": [name], "absent": [name]} (absent: with --if-exists)."""
    admin = admin_client(bootstrap, timeout)
    futures = admin.delete_topics(names, operation_timeout=timeout, request_timeout=timeout)
    done: dict[str, list[str]] = {"deleted": [], "absent": []}
    for name in names:
        try:
            result(futures[name], name)
        except CliError as e:
            if if_exists and e.error_name == "UNKNOWN_TOPIC_OR_PARTITION":
                done["absent"].append(name)
                continue
            raise
        done["deleted"].append(name)
        if not json:
            typer.echo(f"topic '{name}' deleted", err=True)
    if json:
        print_json(done)


@app.command()
@cli_command
def trim(
    name: Annotated[str | None, typer.Argument(help="Topic to trim.")] = None,
    before_offset: Annotated[
        int | None,
        typer.Option("--before-offset", min=-1,
                     help="Delete the records before this offset (-1: all, the high watermark)."),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option("--partition", "-p", min=0, help="Only this partition (repeatable)."),
    ] = None,
    offset_json_file: Annotated[
        str | None,
        typer.Option("--offset-json-file", metavar="FILE",
                     help="Offsets per partition, as kafka-delete-records takes them."),
    ] = None,
    json_: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Delete a topic's records before an offset (kafka-delete-records)."""
    if (offset_json_file is None) == (name is None):
        raise CliError("give either NAME with --before-offset or --offset-json-file", 2)
    if offset_json_file is not None:
        if before_offset is not None or partition:
            raise CliError("--offset-json-file takes no --before-offset or --partition", 2)
        wanted = _offsets_file(offset_json_file)
    else:
        assert name is not None
        check_topic_name(name)
        if before_offset is None:
            raise CliError("--before-offset is required with NAME", 2)
        wanted = []
    admin = admin_client(bootstrap, timeout)
    if name is not None:
        t = admin.list_topics(timeout=timeout).topics.get(name)  # one topic could create it
        if t is None or (t.error is not None and not t.partitions):
            raise no_such_topic(name)
        for p in partition or []:
            if p not in t.partitions:
                raise CliError(f"topic '{name}' has no partition {p} (it has "
                               f"{len(t.partitions)}) (UNKNOWN_TOPIC_OR_PARTITION)", 1)
        chosen = sorted(set(partition)) if partition else sorted(t.partitions)
        wanted = [TopicPartition(name, p, before_offset) for p in chosen]
    futures = admin.delete_records(wanted, request_timeout=timeout, operation_timeout=timeout)
    rows: list[dict[str, Any]] = []
    failed = 0
    for tp in sorted(wanted, key=lambda tp: (tp.topic, tp.partition)):
        fut = next(f for k, f in futures.items()
                   if (k.topic, k.partition) == (tp.topic, tp.partition))
        try:
            done = result(fut, f"{tp.topic}-{tp.partition}", timeout)
        except CliError as e:
            failed += 1
            line = str(e)
            if e.error_name == "OFFSET_OUT_OF_RANGE":
                line = (f"'{tp.topic}-{tp.partition}': offset {tp.offset} is beyond the high "
                        "watermark (OFFSET_OUT_OF_RANGE)")
            typer.echo(f"spool: {line}", err=True)
            continue
        rows.append({"topic": tp.topic, "partition": tp.partition,
                     "low_watermark": done.low_watermark})
    if json_:
        print_json(rows)
    elif rows:
        print_table(["Topic", "Partition", "LowWatermark"],
                    [[r["topic"], r["partition"], r["low_watermark"]] for r in rows])
    if failed:
        raise CliError(f"{failed} of {len(wanted)} partitions not trimmed")


def _offsets_file(path: str) -> list[TopicPartition]:
    """Kafka's offset JSON file (module docstring), checked."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}", 2) from None
    except ValueError:
        raise CliError(f"{path}: not JSON", 2) from None
    if not isinstance(doc, dict) or doc.get("version", 1) != 1:
        raise CliError(f"{path}: not supported version field value "
                       f"{doc.get('version') if isinstance(doc, dict) else doc!r}", 2)
    entries = doc.get("partitions")
    if not isinstance(entries, list):
        raise CliError(f"{path}: missing partitions field", 2)
    out: dict[tuple[str, int], TopicPartition] = {}
    dups: list[str] = []
    for e in entries:
        ok = (isinstance(e, dict) and isinstance(e.get("topic"), str)
              and type(e.get("partition")) is int and type(e.get("offset")) is int)
        if not ok:
            raise CliError(f"{path}: each partition needs \"topic\" (a string), "
                           f"\"partition\" and \"offset\" (integers): {json.dumps(e)}", 2)
        key = (e["topic"], e["partition"])
        if key in out:
            dups.append(f"{key[0]}-{key[1]}")
        out[key] = TopicPartition(e["topic"], e["partition"], e["offset"])
    if dups:
        raise CliError(f"{path}: offset json file contains duplicate topic partitions: "
                       f"{','.join(dups)}", 2)
    if not out:
        raise CliError(f"{path}: no partitions", 2)
    return list(out.values())


def _is_internal(t: Any) -> bool:
    return t.topic.startswith("__")


def _replication_factor(t: Any) -> int:
    return max((len(p.replicas) for p in t.partitions.values()), default=0)


def _overrides(admin: AdminClient, names: list[str], timeout: float) -> dict[str, dict[str, str]]:
    """Each topic's DYNAMIC_TOPIC_CONFIG entries, from one DescribeConfigs request."""
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, request_timeout=timeout)
    out = {}
    for res in resources:
        entries = result(futures[res], res.name)
        out[res.name] = {
            e.name: e.value
            for e in sorted(entries.values(), key=lambda e: e.name)
            if config_source(e) == ConfigSource.DYNAMIC_TOPIC_CONFIG
        }
    return out


def _fmt_configs(configs: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in configs.items())


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def _leader(leader: int) -> str:
    return "none" if leader < 0 else str(leader)


def _partition_line(topic: str, p: partitions.PartitionInfo) -> str:
    """One partition as kafka-topics --describe prints it, with offline replicas."""
    line = (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {_leader(p.leader)}"
            f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
    if p.adding or p.removing:
        line += f"\tAdding Replicas: {_ids(p.adding)}\tRemoving Replicas: {_ids(p.removing)}"
    return line + f"\tOffline: {_ids(p.offline)}"


def _print_plain(doc: dict[str, Any]) -> None:
    parts = doc["partitions"]
    print(
        f"Topic: {doc['name']}\tTopicId: {doc['topic_id']}\tPartitionCount: {len(parts)}"
        f"\tReplicationFactor: {doc['replication_factor']}"
        f"\tConfigs: {_fmt_configs(doc['configs'])}"
    )
    for p in parts:
        print(_partition_line(doc["name"], partitions.PartitionInfo.from_json(p)))


def _print_rich(doc: dict[str, Any]) -> None:
    configs = _fmt_configs(doc["configs"]) or "(none)"
    print_table(
        ["Partition", "Leader", "Replicas", "ISR", "Offline"],
        [
            [p["partition"], _leader(p["leader"]), _ids(p["replicas"]), _ids(p["isr"]),
             _ids(p["offline"])]
            for p in doc["partitions"]
        ],
        title=f"{doc['name']}  (id {doc['topic_id']}; config overrides: {configs})",
    )
