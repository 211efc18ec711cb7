"""spool.broker.admin_authz with the real StandardAuthorizer: DeleteTopics' truth table
(by name and by id), CreateTopics' cluster-or-topic rule, the config resources' ACL
resources and errors, and how run_allowed splits a request and puts the answers back."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from spool.broker import admin_authz
from spool.broker.handlers import controller
from spool.protocol._generated import CreateTopicsRequest, CreateTopicsResponse, ElectLeadersRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.create_topics_response import CreatableTopicResult
from spool.protocol._generated.elect_leaders_request import TopicPartitions
from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as Rt
from spool.protocol.errors import Errors, KafkaError
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.authorizer import StandardAuthorizer
from spool.security.image import SecurityImage, acl_record

ALICE = "User:alice"
TAF = Errors.TOPIC_AUTHORIZATION_FAILED
KNOWN = uuid.uuid4()


def ctx(*grants: tuple, deny: tuple = ()):
    """alice's request context; ``grants`` are (resource type, name, op[, pattern])."""
    def binding(g, perm):
        rtype, name, op, *pattern = g
        return AclBinding(rtype, name, pattern[0] if pattern else PatternType.LITERAL, ALICE,
                          "*", op, perm)
    bindings = [binding(g, AclPermissionType.ALLOW) for g in grants]
    bindings += [binding(d, AclPermissionType.DENY) for d in deny]
    image = SecurityImage().replay(acl_record(uuid.uuid4(), b) for b in bindings)
    view = SimpleNamespace(topic_name=lambda tid: "t" if tid == KNOWN else None)
    return SimpleNamespace(broker=SimpleNamespace(authorizer=StandardAuthorizer(),
                                                  security_image=image, view=view),
                           conn=SimpleNamespace(principal=ALICE, host="10.0.0.1"))


def deletes(c) -> list[tuple[str | None, int] | None]:
    """DeleteTopics' answer for: "t" by name, a missing name, t by id, an unknown id."""
    targets = [("t", None), ("missing", None), (None, KNOWN), (None, uuid.uuid4())]
    return [None if r is None else (r.name, r.error_code)
            for r in admin_authz.delete_topics_refusals(c, targets)]


@pytest.mark.parametrize(("grants", "deny", "expected"), [
    ((), (), [("t", TAF), ("missing", TAF), (None, TAF), (None, Errors.UNKNOWN_TOPIC_ID)]),
    (((Rt.CLUSTER, "kafka-cluster", Op.DELETE),), (), [None, None, None, None]),
    (((Rt.TOPIC, "t", Op.DESCRIBE),), (),
     [("t", TAF), ("missing", TAF), ("t", TAF), (None, Errors.UNKNOWN_TOPIC_ID)]),
    (((Rt.TOPIC, "t", Op.DELETE),), (),
     [None, ("missing", TAF), None, (None, Errors.UNKNOWN_TOPIC_ID)]),
    (((Rt.TOPIC, "*", Op.DELETE),), (), [None, None, None, (None, Errors.UNKNOWN_TOPIC_ID)]),
    # by name DESCRIBE is needed too; by id DELETE is enough (ControllerApis.deleteTopics)
    (((Rt.TOPIC, "t", Op.DELETE),), ((Rt.TOPIC, "t", Op.DESCRIBE),),
     [("t", TAF), ("missing", TAF), None, (None, Errors.UNKNOWN_TOPIC_ID)]),
])
def test_delete_topics_refusals(grants, deny, expected):
    assert deletes(ctx(*grants, deny=deny)) == expected


def test_create_topics_needs_create_on_the_cluster_or_each_topic():
    req = CreateTopicsRequest(topics=[CreatableTopic(name=n) for n in ("app-a", "b", "app-c")])

    def checks(c):
        refusals, describable = admin_authz.create_topics_checks(c, req)
        return [None if r is None else r.error_code for r in refusals], describable

    assert checks(ctx()) == ([TAF, TAF, TAF], set())
    assert checks(ctx((Rt.CLUSTER, "kafka-cluster", Op.CREATE))) == ([None, None, None], set())
    assert checks(ctx((Rt.TOPIC, "app-", Op.CREATE, PatternType.PREFIXED),
                      (Rt.TOPIC, "b", Op.ALTER_CONFIGS))) == ([None, TAF, None], {"b"})


@pytest.mark.parametrize(("config_type", "name", "grant", "error"), [
    (2, "t", (Rt.TOPIC, "t", Op.ALTER_CONFIGS), TAF),
    (4, "1", (Rt.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS), Errors.CLUSTER_AUTHORIZATION_FAILED),
    (8, "1", (Rt.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS), Errors.CLUSTER_AUTHORIZATION_FAILED),
    (16, "sub", (Rt.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS),
     Errors.CLUSTER_AUTHORIZATION_FAILED),
    (32, "g", (Rt.GROUP, "g", Op.ALTER_CONFIGS), Errors.GROUP_AUTHORIZATION_FAILED),
])
def test_config_resources_are_checked_on_their_acl_resource(config_type, name, grant, error):
    with pytest.raises(KafkaError) as e:
        admin_authz.check_config_resource(ctx(), Op.ALTER_CONFIGS, config_type, name)
    assert e.value.code == error and e.value.message == admin_authz.MESSAGES[error]
    admin_authz.check_config_resource(ctx(grant), Op.ALTER_CONFIGS, config_type, name)
    admin_authz.check_config_resource(ctx(), Op.ALTER_CONFIGS, 99, name)  # not an ACL matter


def test_run_allowed_sends_only_the_allowed_items_and_answers_in_request_order():
    req = CreateTopicsRequest(topics=[CreatableTopic(name=n) for n in "abcd"])
    refused = CreatableTopicResult(name="x", error_code=TAF)
    sent: list[list[str]] = []

    async def run(sub):
        sent.append([t.name for t in sub.topics])
        return CreateTopicsResponse(topics=[CreatableTopicResult(name=t.name) for t in sub.topics])

    def answer(refusals):
        reply = asyncio.run(admin_authz.run_allowed(req, "topics", refusals,
                                                    CreateTopicsResponse(), "topics", run))
        return [t.name for t in reply.topics]

    assert answer([None, refused, None, refused]) == ["a", "x", "c", "x"]
    assert answer([refused] * 4) == ["x"] * 4
    assert answer([None] * 4) == ["a", "b", "c", "d"]
    assert sent == [["a", "c"], ["a", "b", "c", "d"]]  # nothing sent when all are refused
    assert [t.name for t in req.topics] == ["a", "b", "c", "d"]  # the request is untouched


class _Runtime:
    """A controller runtime whose writes are only counted."""

    def __init__(self) -> None:
        self.writes = 0

    async def write(self, op):
        self.writes += 1
        return "written"


@pytest.mark.parametrize(("principal", "grant", "answered"), [
    ("User:broker", Op.CLUSTER_ACTION, "written"),  # a forwarding broker: trusted
    ("User:alice", Op.ALTER, "written"),  # a client allowed ALTER itself
    ("User:alice", Op.DESCRIBE, Errors.CLUSTER_AUTHORIZATION_FAILED),
])
def test_controller_elect_leaders_trusts_a_forwarder_and_checks_anyone_else(
        principal, grant, answered):
    image = SecurityImage().replay([acl_record(uuid.uuid4(), AclBinding(
        Rt.CLUSTER, "kafka-cluster", PatternType.LITERAL, principal, "*", grant,
        AclPermissionType.ALLOW))])
    runtime = _Runtime()
    c = SimpleNamespace(broker=SimpleNamespace(
        authorizer=StandardAuthorizer(), security_image=image,
        quorum=SimpleNamespace(controller=runtime)),
        conn=SimpleNamespace(principal=principal, host="10.0.0.1"))
    req = ElectLeadersRequest(election_type=0, timeout_ms=1000, topic_partitions=[
        TopicPartitions(topic="t", partitions=[0])])
    got = asyncio.run(controller.elect_leaders(c, req))
    if answered == "written":
        assert (got, runtime.writes) == ("written", 1)
    else:
        assert (got.error_code, got.replica_election_results[0].partition_result[0].error_code,
                runtime.writes) == (answered, answered, 0)
