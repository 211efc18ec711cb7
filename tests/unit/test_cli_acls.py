"""``spool acls``: kafka-acls.sh's options turned into ACL bindings, and Kafka's printing."""

from __future__ import annotations

import pytest
import typer

from spool.cli import acls
from spool.cli.acls import Entry, Pattern, Principals
from spool.cli.common import CliError
from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as Rt
from spool.security.acls import AclPermissionType as Perm
from spool.security.acls import PatternType as Pt

ALLOW, DENY = Perm.ALLOW, Perm.DENY


def test_operation_names_as_kafka_spells_them() -> None:
    assert [acls.parse_operation(n) for n in ("Read", "READ", "IdempotentWrite",
                                              "DESCRIBE_CONFIGS", "All", "describe")] == [
        Op.READ, Op.READ, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_CONFIGS, Op.ALL, Op.DESCRIBE]
    with pytest.raises(CliError, match="unknown operation 'Any'") as info:
        acls.parse_operation("Any")
    assert info.value.code == 2


def test_principals_times_hosts_times_operations() -> None:
    who = Principals(["User:alice", "User:bob"], ["User:eve"], ["10.0.0.1"], [])
    topic = Pattern(Rt.TOPIC, "orders", Pt.PREFIXED)
    assert acls.plan([topic], who, [Op.READ, Op.WRITE]) == {topic: {
        Entry("User:alice", "10.0.0.1", Op.READ, ALLOW),
        Entry("User:alice", "10.0.0.1", Op.WRITE, ALLOW),
        Entry("User:bob", "10.0.0.1", Op.READ, ALLOW),
        Entry("User:bob", "10.0.0.1", Op.WRITE, ALLOW),
        Entry("User:eve", "*", Op.READ, DENY),
        Entry("User:eve", "*", Op.WRITE, DENY),
    }}


def test_producer_and_consumer_convenience() -> None:
    who = Principals(["User:app"], [], [], [])
    filters = acls.resource_filters(["t"], ["g"], False, ["tx"], Pt.LITERAL)
    got = acls.plan(filters, who, [], producer=True, consumer=True, idempotent=True)

    def ops(pattern: Pattern) -> set[Op]:
        return {e.operation for e in got[pattern]}

    assert ops(Pattern(Rt.TOPIC, "t", Pt.LITERAL)) == {Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ}
    assert ops(Pattern(Rt.GROUP, "g", Pt.LITERAL)) == {Op.READ}
    assert ops(Pattern(Rt.TRANSACTIONAL_ID, "tx", Pt.LITERAL)) == {Op.WRITE, Op.DESCRIBE}
    assert ops(Pattern(Rt.CLUSTER, "kafka-cluster", Pt.LITERAL)) == {Op.IDEMPOTENT_WRITE}


def test_unsupported_operation_for_the_resource_type_is_refused() -> None:
    who = Principals(["User:a"], [], [], [])
    with pytest.raises(CliError, match="^ResourceType GROUP only supports operations All, "
                                       "AlterConfigs, Delete, Describe, DescribeConfigs, Read$"):
        acls.plan([Pattern(Rt.GROUP, "g", Pt.LITERAL)], who, [Op.WRITE])


def test_usage_rules() -> None:
    with pytest.raises(CliError, match="You must provide at least one resource"):
        acls.resource_filters([], [], False, [], Pt.LITERAL)
    assert acls.resource_filters([], [], False, [], Pt.ANY, required=False) == []
    with pytest.raises(CliError, match="--cluster takes --resource-pattern-type literal"):
        acls.resource_filters([], [], True, [], Pt.PREFIXED)
    with pytest.raises(CliError, match="expected a string in format principalType:principal"):
        acls.parse_principal("alice")
    with pytest.raises(CliError, match="Unknown resource-pattern-type: exact"):
        acls.parse_pattern_type("exact")
    who = Principals(["User:a"], [], [], [])
    with pytest.raises(CliError, match="With --consumer you must specify a --topic and a "
                                       "--group"):
        acls.check_usage("add", False, True, False, None, who, ["t"], [], False, [])
    with pytest.raises(CliError, match="--idempotent option is only available if --producer"):
        acls.check_usage("add", False, False, True, None, who, ["t"], [], False, [])


def test_printed_as_kafka_prints_them() -> None:
    pattern = Pattern(Rt.TOPIC, "orders", Pt.LITERAL)
    block = acls._block(f"Adding ACLs for resource `{pattern}`", [
        Entry("User:bob", "*", Op.WRITE, ALLOW), Entry("User:alice", "*", Op.READ, ALLOW)])
    assert block == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) \n")
    assert str(Pattern(Rt.ANY, None, Pt.MATCH)) == (
        "ResourcePattern(resourceType=ANY, name=<any>, patternType=MATCH)")


def test_add_refuses_a_filter_pattern_type_before_connecting(capsys) -> None:
    with pytest.raises(typer.Exit) as info:
        acls.add(allow_principal=["User:a"], topic=["t"], resource_pattern_type="match",
                 bootstrap="127.0.0.1:1")
    assert info.value.exit_code == 2
    assert capsys.readouterr().err == (
        "spool: A '--resource-pattern-type' value of 'match' is not valid when adding acls.\n")
