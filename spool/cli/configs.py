"""``spool configs describe|alter``: topic, broker and group configuration.

Contract (Kafka's kafka-configs semantics, over confluent-kafka's AdminClient):

- The resource is chosen with exactly one of ``--topic NAME``,
  ``--broker ID`` (an id the cluster's metadata lists) or ``--group ID`` (a
  KIP-848/KIP-932 group config resource: ``consumer.session.timeout.ms``,
  ``share.auto.offset.reset``...; the group need not exist), or with Kafka's
  spelling ``--entity-type topics|brokers|groups --entity-name NAME``. Kafka's
  cluster-wide broker defaults (the empty broker name) are not offered:
  confluent-kafka refuses a ConfigResource with an empty name.
- ``describe [--all] [--json]``: DescribeConfigs. By default only the
  entries that are not defaults (source other than DEFAULT_CONFIG, i.e.
  overrides: DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG,
  GROUP_CONFIG (Kafka's admin client calls it DYNAMIC_GROUP_CONFIG), ...); ``--all``
  lists every entry. Each entry shows name, value, source
  (the enum name Kafka uses, e.g. ``DYNAMIC_TOPIC_CONFIG``), read-only and
  sensitive flags. ``--json`` prints an array of ``{"name", "value",
  "source", "read_only", "sensitive", "default"}``.
- ``alter --add-config k=v,k2=v2 --delete-config k``: IncrementalAlterConfigs
  with SET and DELETE operations (both options repeatable; a value holding
  commas goes in square brackets: ``cleanup.policy=[compact,delete]``).
  ``--add-config-file FILE``: the entries to set from a Java properties file (Kafka's
  option; values are taken whole, commas included), instead of ``--add-config``.
  A value the broker refuses fails the command with the broker's line, which names
  the key and what it accepts (``retention.ms=abc: expected an integer >= -1
  (INVALID_CONFIG)``). ``--json``: ``{"resource": {"type": "topic"|"broker"|"group",
  "name"}, "set": {k: v}, "deleted": [k]}`` instead of the line on stderr.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    cli_command,
    config_source,
    fail,
    is_tty,
    parse_names,
    parse_pairs,
    print_json,
    print_table,
    result,
)
from spool.util.properties import parse_properties

app = typer.Typer(help="Describe and alter topic, broker and group configs.",
                  no_args_is_help=True)

TopicOpt = Annotated[str | None, typer.Option("--topic", help="A topic's configs.")]
BrokerOpt = Annotated[str | None, typer.Option("--broker", help="A broker's configs (its id).")]
GroupOpt = Annotated[str | None, typer.Option(
    "--group", help="A group's configs (KIP-848/KIP-932 group configs).")]
EntityTypeOpt = Annotated[str | None, typer.Option(
    "--entity-type", help="Kafka's spelling: topics, brokers or groups (with --entity-name).")]
EntityNameOpt = Annotated[str | None, typer.Option("--entity-name", help="With --entity-type.")]
_ENTITY_TYPES = {"topics": "topic", "brokers": "broker", "groups": "group"}


def _resource(topic: str | None, broker: str | None, group: str | None = None,
              entity_type: str | None = None, entity_name: str | None = None
              ) -> ConfigResource:
    if (entity_type is None) != (entity_name is None):
        fail("--entity-type and --entity-name go together", 2)
    if entity_type is not None:
        if entity_type not in _ENTITY_TYPES:
            fail(f"bad --entity-type '{entity_type}': expected topics, brokers or groups", 2)
        given = {"topic": topic, "broker": broker, "group": group}
        if any(v is not None for v in given.values()):
            fail("give --entity-type/--entity-name or --topic/--broker/--group, not both", 2)
        given[_ENTITY_TYPES[entity_type]] = entity_name
        topic, broker, group = given["topic"], given["broker"], given["group"]
    if sum(v is not None for v in (topic, broker, group)) != 1:
        fail("name exactly one of --topic NAME, --broker ID or --group ID", 2)
    if topic is not None:
        return ConfigResource(ResourceType.TOPIC, topic)
    if group is not None:
        if not group:
            fail("bad --group '': a group id is not empty", 2)
        return ConfigResource(ResourceType.GROUP, group)
    if not str(broker).isdigit():
        fail(f"bad --broker '{broker}': expected a broker id (a number)", 2)
    return ConfigResource(ResourceType.BROKER, str(broker))


def _admin(res: ConfigResource, bootstrap: str, timeout: float) -> AdminClient:
    """An admin client, having checked that a broker resource names a known broker."""
    admin = admin_client(bootstrap, timeout)
    if res.restype == ResourceType.BROKER:
        known = sorted(admin.list_topics(timeout=timeout).brokers)
        if int(res.name) not in known:
            fail(f"broker {res.name} is not in the cluster (brokers: {known})")
    return admin


def _label(res: ConfigResource) -> str:
    kind = {ResourceType.TOPIC: "topic", ResourceType.GROUP: "group"}.get(res.restype, "broker")
    return f"{kind} '{res.name}'"


@app.command()
@cli_command
def describe(
    topic: TopicOpt = None,
    broker: BrokerOpt = None,
    group: GroupOpt = None,
    entity_type: EntityTypeOpt = None,
    entity_name: EntityNameOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Include default values too.")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Show a topic's, broker's or group's configuration."""
    res = _resource(topic, broker, group, entity_type, entity_name)
    admin = _admin(res, bootstrap, timeout)
    entries = result(admin.describe_configs([res], request_timeout=timeout)[res], res.name)
    rows = [_entry_doc(e) for e in sorted(entries.values(), key=lambda e: e.name)]
    if not all_:
        rows = [r for r in rows if r["source"] != "DEFAULT_CONFIG"]
    if json:
        print_json(rows)
        return
    print_table(
        ["Name", "Value", "Source", "ReadOnly", "Sensitive"],
        [
            [
                r["name"],
                "<hidden>" if r["sensitive"] else r["value"],
                r["source"],
                _yes(r["read_only"]),
                _yes(r["sensitive"]),
            ]
            for r in rows
        ],
        title=f"Configs of {_label(res)}" if is_tty() else None,
    )


@app.command()
@cli_command
def alter(
    topic: TopicOpt = None,
    broker: BrokerOpt = None,
    group: GroupOpt = None,
    entity_type: EntityTypeOpt = None,
    entity_name: EntityNameOpt = None,
    add_config: Annotated[
        list[str] | None,
        typer.Option("--add-config", help="k=v,k2=v2 to set (repeatable)."),
    ] = None,
    add_config_file: Annotated[
        str | None,
        typer.Option("--add-config-file", metavar="FILE",
                     help="A properties file of configs to set (instead of --add-config)."),
    ] = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option("--delete-config", help="k or k1,k2 to reset to default (repeatable)."),
    ] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Set or delete configuration entries (IncrementalAlterConfigs).

    --json: {"resource": {"type", "name"}, "set": {k: v}, "deleted": [k]}."""
    res = _resource(topic, broker, group, entity_type, entity_name)
    if add_config and add_config_file is not None:
        fail("give --add-config or --add-config-file, not both", 2)
    sets = parse_pairs(add_config) if add_config_file is None else _read_file(add_config_file)
    deletes = parse_names(delete_config)
    if not sets and not deletes:
        fail("nothing to alter: give --add-config k=v, --add-config-file FILE and/or "
             "--delete-config k", 2)
    both = sorted(set(sets) & set(deletes))
    if both:
        fail(f"'{both[0]}' is both added and deleted", 2)
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
    target = ConfigResource(res.restype, res.name, incremental_configs=ops)
    admin = _admin(res, bootstrap, timeout)
    futures = admin.incremental_alter_configs([target], request_timeout=timeout)
    for fut in futures.values():
        result(fut, res.name)
    if json:
        kind, _, _ = _label(res).partition(" ")
        print_json({"resource": {"type": kind, "name": res.name}, "set": dict(sorted(sets.items())),
                    "deleted": sorted(deletes)})
        return
    typer.echo(f"configs of {_label(res)} altered", err=True)


def _read_file(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        fail(f"cannot read --add-config-file {path}: {e.strerror}")
    except UnicodeDecodeError:
        fail(f"cannot read --add-config-file {path}: not UTF-8 text")


def _entry_doc(e: Any) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "source": config_source(e).name,
        "read_only": bool(e.is_read_only),
        "sensitive": bool(e.is_sensitive),
        "default": bool(e.is_default),
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
