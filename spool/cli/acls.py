"""``spool acls add|list|remove``: ACLs as Kafka's ``kafka-acls.sh`` manages them.

    spool acls add    --allow-principal User:alice [--allow-host H] --operation Read \\
                      --topic orders [--group g] [--cluster] [--transactional-id t] \\
                      [--resource-pattern-type literal|prefixed]
    spool acls add    --producer|--consumer [--idempotent] --allow-principal ... --topic ...
    spool acls list   [resources] [--resource-pattern-type ...|any|match] [--principal P]
    spool acls remove [resources] [principals, hosts, operations] [--force]

Contract (Kafka's AclCommand, over confluent-kafka's AdminClient: CreateAcls and
DeleteAcls; DescribeAcls v1-3 over ``spool.cli.wire``, as confluent-kafka 2.16 drops
its top-level error):

- Resources: ``--topic``, ``--group``, ``--transactional-id`` (repeatable; ``*`` is
  every resource of the type) and ``--cluster``, each under
  ``--resource-pattern-type`` (default literal; ``add`` takes literal or prefixed,
  ``list``/``remove`` also ``any`` and ``match``).
- Entries: every ``--allow-principal`` x ``--allow-host`` (default ``*``) x
  ``--operation`` (repeatable, default All) as ALLOW, the same for ``--deny-*`` as
  DENY. Operation names as Kafka spells them (``Read``, ``READ``,
  ``IdempotentWrite``); an operation the resource type does not support is refused
  as Kafka refuses it. ``--producer`` is WRITE, DESCRIBE, CREATE on topics and WRITE,
  DESCRIBE on transactional ids (``--idempotent``: IDEMPOTENT_WRITE on the cluster);
  ``--consumer`` is READ, DESCRIBE on topics and READ on groups.
- ``add`` prints, per resource, Kafka's lines (``<TAB>``: a tab; a space ends the
  first and last line)::

      Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
       <TAB>(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

  ``list`` prints ``Current ACLs for resource `...`:`` blocks (every ACL without a
  resource; ``--principal`` keeps that principal's, under ``ACLs for principal
  `User:alice```); ``--json``: one array of ``{"resource_type", "resource_name",
  "pattern_type", "principal", "host", "operation", "permission_type"}`` (Kafka's enum
  names); ``add --json`` prints the ACLs it added in that form, ``remove --json`` the
  ACLs the broker deleted (its questions then go to stderr). ``remove`` without
  principals deletes every ACL of each resource filter, with them the entries named; it
  asks ``(y/n)`` on stdin unless ``--force``.
  Entries and resources are printed sorted.
- Failures are one ``spool:`` line with Kafka's error name (e.g.
  CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED on a broker without an authorizer);
  bad usage is exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Annotated, Any, NamedTuple

import typer
from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclBindingFilter

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    cli_command,
    fail,
    print_json,
    result,
)
from spool.protocol._generated import DescribeAclsRequest
from spool.protocol.acl import SUPPORTED_OPERATIONS, AclOperation, ResourceType
from spool.security.acls import WILDCARD, AclPermissionType, PatternType
from spool.security.principal import KafkaPrincipal

app = typer.Typer(help="Add, list and remove ACLs (kafka-acls).", no_args_is_help=True)

CLUSTER_NAME = "kafka-cluster"
NEWLINE = "\n"


class Pattern(NamedTuple):
    """A resource pattern (add) or pattern filter (list, remove); ``name`` None: any."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
                f"patternType={self.pattern_type.name})")


class Entry(NamedTuple):
    """An access control entry (Kafka's AccessControlEntry)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name})")


# ---- parsing the options (pure)


def pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# what an ACL can name here (CreateTokens/DescribeTokens go with delegation-token and user
# resources, which confluent-kafka's AdminClient cannot send)
OPERATIONS = [op for op in AclOperation if AclOperation.ALL <= op <= AclOperation.IDEMPOTENT_WRITE]


def parse_operation(text: str) -> AclOperation:
    """``Read``/``READ``/``IdempotentWrite``/``IDEMPOTENT_WRITE`` as Kafka's SecurityUtils
    takes them (and any other case: ``read``, ``idempotentwrite``)."""
    wanted = text.strip().replace("_", "").upper()
    for op in OPERATIONS:
        if wanted == op.name.replace("_", ""):
            return op
    names = ", ".join(pascal(o.name) for o in OPERATIONS)
    fail(f"unknown operation '{text}' (valid: {names})", 2)


def parse_pattern_type(text: str) -> PatternType:
    for pt in (PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH):
        if text.strip().upper() == pt.name:
            return pt
    fail(f"Unknown resource-pattern-type: {text} (literal, prefixed, any, match)", 2)


def parse_principal(text: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text.strip()))
    except ValueError:
        fail(f"expected a string in format principalType:principalName but got {text}", 2)


def resource_filters(topics: Iterable[str], groups: Iterable[str], cluster: bool,
                     transactional_ids: Iterable[str], pattern_type: PatternType,
                     required: bool = True) -> list[Pattern]:
    out = [Pattern(ResourceType.TOPIC, t.strip(), pattern_type) for t in topics]
    if cluster:
        if pattern_type == PatternType.PREFIXED:
            fail("--cluster takes --resource-pattern-type literal (the cluster has one name)", 2)
        out.append(Pattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    out += [Pattern(ResourceType.GROUP, g.strip(), pattern_type) for g in groups]
    out += [Pattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in transactional_ids]
    if not out and required:
        fail("You must provide at least one resource: --topic <topic> or --cluster or "
             "--group <group> or --transactional-id <id>", 2)
    return list(dict.fromkeys(out))


class Principals(NamedTuple):
    allow: list[str]
    deny: list[str]
    allow_hosts: list[str]
    deny_hosts: list[str]


def entries(who: Principals, operations: Iterable[AclOperation]) -> set[Entry]:
    """Kafka's getAcl: principals x hosts (``*`` when a principal has none) x operations."""
    out: set[Entry] = set()
    for principals, hosts, perm in ((who.allow, who.allow_hosts, AclPermissionType.ALLOW),
                                    (who.deny, who.deny_hosts, AclPermissionType.DENY)):
        hosts = [h.strip() for h in hosts] or ([WILDCARD] if principals else [])
        out |= {Entry(p, h, op, perm) for p in principals for h in hosts for op in operations}
    return out


def plan(filters: list[Pattern], who: Principals, operations: list[AclOperation],
         producer: bool = False, consumer: bool = False,
         idempotent: bool = False) -> dict[Pattern, set[Entry]]:
    """Each resource (filter) with the entries to add or remove (Kafka's
    getResourceFilterToAcls), operations checked against the resource type."""
    out: dict[Pattern, set[Entry]] = {}
    if not producer and not consumer:
        out = {f: entries(who, operations) for f in filters}
    if producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = entries(who, [AclOperation.WRITE, AclOperation.DESCRIBE,
                                       AclOperation.CREATE])
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = entries(who, [AclOperation.WRITE, AclOperation.DESCRIBE])
        if idempotent:
            cluster = Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
            out[cluster] = entries(who, [AclOperation.IDEMPOTENT_WRITE])
    if consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = out.get(f, set()) | entries(who, [AclOperation.READ,
                                                           AclOperation.DESCRIBE])
            elif f.resource_type == ResourceType.GROUP:
                out[f] = out.get(f, set()) | entries(who, [AclOperation.READ])
    for f, acls in out.items():
        valid = SUPPORTED_OPERATIONS[f.resource_type] | {AclOperation.ALL}
        if {a.operation for a in acls} - valid:
            names = ", ".join(sorted(pascal(o.name) for o in valid))
            fail(f"ResourceType {f.resource_type.name} only supports operations {names}", 2)
    return out


def check_usage(action: str, producer: bool, consumer: bool, idempotent: bool,
                operations: list[str] | None, who: Principals, topics: list[str],
                groups: list[str], cluster: bool, transactional_ids: list[str]) -> None:
    """Kafka's AclCommandOptions.checkArgs for the options this tool has."""
    if (producer or consumer) and (operations or who.deny or who.deny_hosts):
        fail("--producer/--consumer take no --operation, --deny-principal or --deny-host", 2)
    if producer and not topics:
        fail("With --producer you must specify a --topic", 2)
    if idempotent and not producer:
        fail("The --idempotent option is only available if --producer is set", 2)
    if consumer and (not topics or not groups
                     or (not producer and (cluster or transactional_ids))):
        fail("With --consumer you must specify a --topic and a --group and no --cluster or "
             "--transactional-id option should be specified.", 2)


# ---- confluent-kafka


def _binding(p: Pattern, e: Entry) -> CkAclBinding:
    return CkAclBinding(int(p.resource_type), p.name, int(p.pattern_type), e.principal, e.host,
                        int(e.operation), int(e.permission_type))


def _filter(p: Pattern, e: Entry | None) -> AclBindingFilter:
    if e is None:
        return AclBindingFilter(int(p.resource_type), p.name, int(p.pattern_type), None, None,
                                int(AclOperation.ANY), int(AclPermissionType.ANY))
    return AclBindingFilter(int(p.resource_type), p.name, int(p.pattern_type), e.principal,
                            e.host, int(e.operation), int(e.permission_type))


async def _describe(admin: wire.WireAdmin, filters: list[Pattern]) -> dict[Pattern, set[Entry]]:
    """DescribeAcls per filter (over the wire: confluent-kafka 2.16 drops DescribeAcls'
    top-level error, so a refused list would print as an empty one)."""
    found: dict[Pattern, set[Entry]] = {}
    for f in filters:
        resp = await admin.request(DescribeAclsRequest(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
            pattern_type_filter=int(f.pattern_type), principal_filter=None, host_filter=None,
            operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY)), 3)
        if resp.error_code:
            raise wire.refused(resp.error_code, resp.error_message)
        for r in resp.resources:
            pattern = Pattern(ResourceType(r.resource_type), r.resource_name,
                              PatternType(r.pattern_type))
            found.setdefault(pattern, set()).update(
                Entry(a.principal, a.host, AclOperation(a.operation),
                      AclPermissionType(a.permission_type)) for a in r.acls)
    return found


def _block(head: str, acls: Iterable[Entry]) -> str:
    lines = NEWLINE.join("\t" + str(e) for e in sorted(acls, key=_entry_key))
    return f"{head}: {NEWLINE} {lines} {NEWLINE}"


def _entry_key(e: Entry) -> tuple:
    return (e.principal, e.host, int(e.permission_type), int(e.operation))


def _pattern_key(p: Pattern) -> tuple:
    return (int(p.resource_type), p.name or "", int(p.pattern_type))


# ---- commands

TopicOpt = Annotated[list[str] | None, typer.Option(
    "--topic", help="A topic (repeatable; '*': every topic).")]
GroupOpt = Annotated[list[str] | None, typer.Option(
    "--group", help="A consumer group (repeatable; '*': every group).")]
ClusterOpt = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
TxnOpt = Annotated[list[str] | None, typer.Option(
    "--transactional-id", help="A transactional id (repeatable; '*': every one).")]
PatternOpt = Annotated[str, typer.Option(
    "--resource-pattern-type", metavar="literal|prefixed|any|match",
    help="How resource names match (add: literal or prefixed; list/remove also any, match).")]
OperationOpt = Annotated[list[str] | None, typer.Option(
    "--operation", help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
    "DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable; default All).")]
AllowOpt = Annotated[list[str] | None, typer.Option(
    "--allow-principal", help="Type:name allowed (repeatable), e.g. User:alice, User:*.")]
DenyOpt = Annotated[list[str] | None, typer.Option(
    "--deny-principal", help="Type:name denied (repeatable); deny beats allow.")]
AllowHostOpt = Annotated[list[str] | None, typer.Option(
    "--allow-host", help="Host of the allowed principals (repeatable; default *).")]
DenyHostOpt = Annotated[list[str] | None, typer.Option(
    "--deny-host", help="Host of the denied principals (repeatable; default *).")]
ProducerOpt = Annotated[bool, typer.Option(
    "--producer", help="A producer's ACLs: WRITE, DESCRIBE, CREATE on the topics.")]
ConsumerOpt = Annotated[bool, typer.Option(
    "--consumer", help="A consumer's ACLs: READ, DESCRIBE on the topics, READ on the groups.")]
IdempotentOpt = Annotated[bool, typer.Option(
    "--idempotent", help="With --producer: IDEMPOTENT_WRITE on the cluster.")]


def _principals(allow, deny, allow_host, deny_host) -> Principals:
    return Principals([parse_principal(p) for p in allow or []],
                      [parse_principal(p) for p in deny or []],
                      list(allow_host or []), list(deny_host or []))


@app.command()
@cli_command
def add(
    allow_principal: AllowOpt = None,
    deny_principal: DenyOpt = None,
    allow_host: AllowHostOpt = None,
    deny_host: DenyHostOpt = None,
    operation: OperationOpt = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    cluster: ClusterOpt = False,
    transactional_id: TxnOpt = None,
    resource_pattern_type: PatternOpt = "literal",
    producer: ProducerOpt = False,
    consumer: ConsumerOpt = False,
    idempotent: IdempotentOpt = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Add ACLs (CreateAcls)."""
    ptype = parse_pattern_type(resource_pattern_type)
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        fail(f"A '--resource-pattern-type' value of '{ptype.name.lower()}' is not valid when "
             f"adding acls.", 2)
    who = _principals(allow_principal, deny_principal, allow_host, deny_host)
    topics, groups, txns = list(topic or []), list(group or []), list(transactional_id or [])
    check_usage("add", producer, consumer, idempotent, operation, who, topics, groups, cluster,
                txns)
    filters = resource_filters(topics, groups, cluster, txns, ptype)
    ops = [parse_operation(o) for o in operation or ["All"]]
    todo = plan(filters, who, ops, producer, consumer, idempotent)
    if any(not acls for acls in todo.values()):
        fail("You must specify one of: --allow-principal, --deny-principal when trying to add "
             "ACLs.", 2)
    admin = admin_client(bootstrap, timeout)
    for pattern in sorted(todo, key=_pattern_key):
        acls = todo[pattern]
        if not json:
            print(_block(f"Adding ACLs for resource `{pattern}`", acls))
        futures = admin.create_acls([_binding(pattern, e) for e in sorted(acls, key=_entry_key)],
                                    request_timeout=timeout)
        for fut in futures.values():
            result(fut, str(pattern.name))
    if json:
        print_json([_acl_doc(p, e) for p in sorted(todo, key=_pattern_key)
                    for e in sorted(todo[p], key=_entry_key)])


@app.command("list")
@cli_command
def list_(
    topic: TopicOpt = None,
    group: GroupOpt = None,
    cluster: ClusterOpt = False,
    transactional_id: TxnOpt = None,
    resource_pattern_type: PatternOpt = "literal",
    principal: Annotated[list[str] | None, typer.Option(
        "--principal", help="Only this principal's ACLs (repeatable).")] = None,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List ACLs (DescribeAcls): of the resources given, or every ACL."""
    ptype = parse_pattern_type(resource_pattern_type)
    filters = resource_filters(topic or [], group or [], cluster, transactional_id or [], ptype,
                               required=False)
    principals = [parse_principal(p) for p in principal or []]
    found = wire.run(bootstrap, timeout, lambda admin: _describe(
        admin, filters or [Pattern(ResourceType.ANY, None, PatternType.ANY)]))

    def show(by_pattern: dict[Pattern, set[Entry]]) -> None:
        for pattern in sorted(by_pattern, key=_pattern_key):
            print(_block(f"Current ACLs for resource `{pattern}`", by_pattern[pattern]))

    if json:
        print_json([_acl_doc(p, e) for p in sorted(found, key=_pattern_key)
                    for e in sorted(found[p], key=_entry_key)
                    if not principals or e.principal in principals])
        return
    if not principals:
        show(found)
        return
    for who in principals:
        print(f"ACLs for principal `{who}`")
        show({p: {e for e in acls if e.principal == who} for p, acls in found.items()
              if any(e.principal == who for e in acls)})


@app.command()
@cli_command
def remove(
    allow_principal: AllowOpt = None,
    deny_principal: DenyOpt = None,
    allow_host: AllowHostOpt = None,
    deny_host: DenyHostOpt = None,
    operation: OperationOpt = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    cluster: ClusterOpt = False,
    transactional_id: TxnOpt = None,
    resource_pattern_type: PatternOpt = "literal",
    producer: ProducerOpt = False,
    consumer: ConsumerOpt = False,
    idempotent: IdempotentOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Do not ask (y/n).")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Remove ACLs (DeleteAcls): the entries named, or every ACL of the resources."""
    ptype = parse_pattern_type(resource_pattern_type)
    who = _principals(allow_principal, deny_principal, allow_host, deny_host)
    topics, groups, txns = list(topic or []), list(group or []), list(transactional_id or [])
    check_usage("remove", producer, consumer, idempotent, operation, who, topics, groups,
                cluster, txns)
    filters = resource_filters(topics, groups, cluster, txns, ptype)
    ops = [parse_operation(o) for o in operation or ["All"]]
    todo = plan(filters, who, ops, producer, consumer, idempotent)
    admin = admin_client(bootstrap, timeout)
    removed: list[dict] = []
    for pattern in sorted(todo, key=_pattern_key):
        acls = todo[pattern]
        if acls:
            question = (f"Are you sure you want to remove ACLs: {NEWLINE} "
                        + NEWLINE.join("\t" + str(e) for e in sorted(acls, key=_entry_key))
                        + f" {NEWLINE} from resource filter `{pattern}`? (y/n)")
        else:
            question = (f"Are you sure you want to delete all ACLs for resource filter "
                        f"`{pattern}`? (y/n)")
        if not force and not _confirm(question, sys.stderr if json else sys.stdout):
            continue
        flts = [_filter(pattern, e) for e in sorted(acls, key=_entry_key)] or [
            _filter(pattern, None)]
        for fut in admin.delete_acls(flts, request_timeout=timeout).values():
            removed += [_binding_doc(b) for b in result(fut, str(pattern.name)) or []]
    if json:
        print_json(sorted(removed, key=lambda d: tuple(d.values())))


def _acl_doc(p: Pattern, e: Entry) -> dict:
    return {"resource_type": p.resource_type.name, "resource_name": p.name,
            "pattern_type": p.pattern_type.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission_type": e.permission_type.name}


def _binding_doc(b: CkAclBinding) -> dict:
    """An ACL the broker deleted (confluent-kafka's AclBinding), as ``_acl_doc`` has it:
    Kafka's names (confluent-kafka calls the cluster resource BROKER)."""
    return _acl_doc(Pattern(ResourceType(b.restype_int), b.name,
                            PatternType(b.resource_pattern_type_int)),
                    Entry(b.principal, b.host, AclOperation(b.operation_int),
                          AclPermissionType(b.permission_type_int)))


def _confirm(question: str, out: Any = None) -> bool:
    print(question, flush=True, file=out or sys.stdout)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"
