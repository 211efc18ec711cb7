"""The rules of CreateAcls/DeleteAcls/DescribeAcls, AlterUserScramCredentials/
DescribeUserScramCredentials, AlterClientQuotas/DescribeClientQuotas and ``--add-scram``
(Kafka's AclControlManager, ScramControlManager, ClientQuotaControlManager, ScramParser),
on SecurityImages."""

from __future__ import annotations

import base64
import itertools
from uuid import UUID

import pytest

from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as RT
from spool.protocol.errors import Errors
from spool.security import acl_ops, quota_ops, scram_ops
from spool.security.acls import AclBinding
from spool.security.acls import AclPermissionType as Perm
from spool.security.acls import PatternType as PT
from spool.security.image import SecurityImage
from spool.security.scram import ScramMechanism, credential_from_password, salted_password
from spool.security.scram_args import AddScramError, parse_add_scram

ALLOW = Perm.ALLOW


def ids():
    counter = itertools.count(1)
    return lambda: UUID(int=next(counter))


def b(name="orders", pt=PT.LITERAL, principal="User:alice", op=Op.READ, rt=RT.TOPIC,
      perm=ALLOW, host="*"):
    return AclBinding(rt, name, pt, principal, host, op, perm)


def create(image, bindings):
    records, results = acl_ops.create_acls(image, bindings, new_id=ids())
    return image.replay(records), records, results


def test_create_acls_validates_each_and_skips_existing_ones():
    image, records, results = create(SecurityImage(), [
        b(), b(),  # the second is the first again: success, no record
        b(rt=RT.CLUSTER, name="other"), b(name=""), b(rt=RT.ANY), b(pt=PT.MATCH),
        b(op=Op.ANY), b(perm=Perm.ANY), b(name="orders-", pt=PT.PREFIXED)])
    assert len(records) == 2
    assert [None if e is None else (e.code, e.message) for e in results] == [
        None, None,
        (Errors.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (Errors.INVALID_REQUEST, "Invalid empty resource name"),
        (Errors.INVALID_REQUEST, "Invalid resourceType ANY"),
        (Errors.INVALID_REQUEST, "Invalid patternType MATCH"),
        (Errors.INVALID_REQUEST, "Invalid operation ANY"),
        (Errors.INVALID_REQUEST, "Invalid permissionType ANY"),
        None]
    again, records, _ = create(image, [b()])
    assert records == [] and again is image


def test_unknown_wire_codes_read_as_unknown():
    binding = acl_ops.binding_of(99, "t", 3, "User:a", "*", 3, 3)
    assert binding.resource_type == RT.UNKNOWN
    assert acl_ops.validate_new_acl(binding).message == "Invalid resourceType UNKNOWN"


def test_filters_match_as_kafka_does():
    image, _, _ = create(SecurityImage(), [
        b("orders"), b("*"), b("ord", pt=PT.PREFIXED), b("orders", principal="User:bob"),
        b("orders", rt=RT.GROUP), b("orders", op=Op.WRITE, perm=Perm.DENY)])

    def names(**kw):
        f = acl_ops.AclFilter(**{"resource_type": RT.ANY, "resource_name": None,
                                 "pattern_type": PT.ANY, "principal": None, "host": None,
                                 "operation": Op.ANY, "permission_type": Perm.ANY, **kw})
        return sorted((x.resource_type.name, x.resource_name, x.pattern_type.name,
                       x.principal[5:], x.operation.name)
                      for _, x in acl_ops.matching(image, f))

    assert len(names()) == 6
    assert names(resource_type=RT.TOPIC, resource_name="orders", pattern_type=PT.MATCH,
                 principal="User:alice", operation=Op.READ) == [
        ("TOPIC", "*", "LITERAL", "alice", "READ"),
        ("TOPIC", "ord", "PREFIXED", "alice", "READ"),
        ("TOPIC", "orders", "LITERAL", "alice", "READ")]
    assert names(resource_name="ord") == [("TOPIC", "ord", "PREFIXED", "alice", "READ")]
    assert names(resource_name="ord", pattern_type=PT.LITERAL) == []
    assert names(permission_type=Perm.DENY) == [("TOPIC", "orders", "LITERAL", "alice", "WRITE")]
    assert names(resource_type=RT.GROUP) == [
        ("GROUP", "orders", "LITERAL", "alice", "READ")]


def test_delete_acls_removes_each_match_once_and_refuses_unknown_filters():
    image, _, _ = create(SecurityImage(), [b("a"), b("b")])
    anything = acl_ops.AclFilter(RT.ANY, None, PT.ANY, None, None, Op.ANY, Perm.ANY)
    only_a = anything._replace(resource_name="a")
    records, results = acl_ops.delete_acls(image, [
        only_a, anything, anything._replace(pattern_type=PT.UNKNOWN),
        anything._replace(operation=Op.UNKNOWN)])
    assert len(records) == 2 and image.replay(records).acls == {}
    assert [r if isinstance(r, list) else (r.code, r.message) for r in results] == [
        [b("a")], [b("a"), b("b")],
        (Errors.INVALID_REQUEST, "Unknown patternFilter."),
        (Errors.INVALID_REQUEST, "Unknown entryFilter.")]


SHA256 = int(ScramMechanism.SCRAM_SHA_256)


def up(name="alice", mech=SHA256, iterations=4096, password="pw", salt=b"salt"):
    m = ScramMechanism(mech) if mech in (1, 2) else ScramMechanism.SCRAM_SHA_256
    return scram_ops.Upsertion(name, mech, iterations, salt,
                               salted_password(m, password, salt, iterations))


def test_alter_scram_credentials_rules():
    image = SecurityImage()
    records, results = scram_ops.alter_credentials(image, [], [up()])
    image = image.replay(records)
    assert results == [("alice", None)]
    assert image.scram[("alice", ScramMechanism.SCRAM_SHA_256)] == credential_from_password(
        ScramMechanism.SCRAM_SHA_256, "pw", 4096, b"salt")

    records, results = scram_ops.alter_credentials(
        image,
        [scram_ops.Deletion("alice", SHA256), scram_ops.Deletion("bob", SHA256),
         scram_ops.Deletion("carol", 2), scram_ops.Deletion("carol", 2)],
        [up("alice"), up("dan", iterations=4095), up("erin", iterations=16385),
         up("", iterations=4096), up("fay", mech=3), up("gus")])
    assert [(u, None if e is None else (e.code, e.message)) for u, e in results] == [
        ("gus", None),
        ("bob", (Errors.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")),
        ("carol", (Errors.RESOURCE_NOT_FOUND,
                   "Attempt to delete a user credential that does not exist")),
        ("alice", (Errors.DUPLICATE_RESOURCE,
                   "A user credential cannot be altered twice in the same request")),
        ("dan", (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
        ("erin", (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")),
        ("", (Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")),
        ("fay", (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))]
    image = image.replay(records)
    assert sorted(image.scram) == [("alice", ScramMechanism.SCRAM_SHA_256),
                                   ("gus", ScramMechanism.SCRAM_SHA_256)]


def test_describe_scram_credentials():
    image = SecurityImage()
    records, _ = scram_ops.alter_credentials(
        image, [], [up("alice"), up("bob", mech=2, iterations=8192)])
    image = image.replay(records)
    records, _ = scram_ops.alter_credentials(image, [], [up("alice", mech=2, iterations=5000)])
    image = image.replay(records)
    everyone = scram_ops.describe_credentials(image, None)
    assert [(d.user, d.error, d.credentials) for d in everyone] == [
        ("alice", None, [(1, 4096), (2, 5000)]), ("bob", None, [(2, 8192)])]
    named = scram_ops.describe_credentials(image, ["bob", "zed", "alice", "alice"])
    assert [(d.user, d.error and (d.error.code, d.error.message)) for d in named] == [
        ("bob", None),
        ("zed", (Errors.RESOURCE_NOT_FOUND,
                 "Attempt to describe a user credential that does not exist: zed")),
        ("alice", (Errors.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the "
                                              "same user twice in a single request: alice"))]


def alt(entity, *ops):
    return quota_ops.Alteration(entity, [quota_ops.QuotaOp(k, v, v is None) for k, v in ops])


def test_alter_quotas_validates_entities_keys_and_values():
    image = SecurityImage()
    records, results = quota_ops.alter_quotas(image, [
        alt([("user", "alice")], ("producer_byte_rate", 1024.0), ("request_percentage", 12.5)),
        alt([("client-id", None), ("user", None)], ("consumer_byte_rate", 2048.0)),
        alt([], ("producer_byte_rate", 1.0)),
        alt([("group", "g")], ("producer_byte_rate", 1.0)),
        alt([("user", "")], ("producer_byte_rate", 1.0)),
        alt([("ip", "10.0.0.1"), ("user", "bob")], ("connection_creation_rate", 1.0)),
        alt([("ip", "not-an-ip")], ("connection_creation_rate", 1.0)),
        alt([("ip", "10.0.0.1")], ("producer_byte_rate", 1.0)),
        alt([("user", "bob")], ("producer_byte_rate", 0.0)),
        alt([("user", "carl")], ("producer_byte_rate", 1.5)),
        alt([("user", "dora")], ("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)),
        alt([("user", "alice")], ("consumer_byte_rate", 1.0)),
        alt([("ip", None)], ("connection_creation_rate", 10.0)),
    ])
    assert [(dict(e), None if r is None else r.message) for e, r in results] == [
        ({"user": "alice"}, "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"),
        ({"client-id": None, "user": None}, None),
        ({}, "Invalid empty client quota entity"),
        ({"group": "g"}, "Unhandled client quota entity type: group"),
        ({"user": ""}, "Empty user not supported"),
        ({"ip": "10.0.0.1", "user": "bob"}, "Invalid quota entity combination, IP entity "
                                            "shouldnot be combined with User or ClientId"),
        ({"ip": "not-an-ip"}, "not-an-ip is not a valid IP or resolvable host."),
        ({"ip": "10.0.0.1"}, "Invalid configuration key producer_byte_rate"),
        ({"user": "bob"}, "Quota producer_byte_rate must be greater than 0"),
        ({"user": "carl"}, "producer_byte_rate cannot be a fractional value."),
        ({"user": "dora"}, "Ignoring duplicate entity ClientQuotaEntity(entries={user=dora})"),
        ({"ip": None}, None)]
    assert all(r is None or r.code == Errors.INVALID_REQUEST for _, r in results)
    image = image.replay(records)
    # Kafka keeps the first alteration's records of an entity named twice
    # a type named twice, one of them <default> (Hypothesis found it: the key's sort
    # compared a name with None and the broker's handler crashed)
    records2, dup = quota_ops.alter_quotas(image, [
        alt([("user", "a"), ("user", None)], ("producer_byte_rate", 1.0))])
    assert records2 == [] and [(r.code, r.message) for _, r in dup] == [
        (Errors.INVALID_REQUEST, "Invalid client quota entity, duplicate entity entry user")]
    assert dict(image.quotas) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("client-id", None), ("user", None)): {"consumer_byte_rate": 2048.0},
        (("ip", None),): {"connection_creation_rate": 10.0}}
    # only changes are written; removing an absent key writes nothing
    records, results = quota_ops.alter_quotas(image, [
        alt([("user", "alice")], ("producer_byte_rate", 1024.0), ("request_percentage", None),
            ("consumer_byte_rate", None))])
    assert results == [((("user", "alice"),), None)]
    assert [(r.key, r.remove) for r in records] == [("request_percentage", True)]


def test_describe_quotas_filters():
    image = SecurityImage()
    records, _ = quota_ops.alter_quotas(image, [
        alt([("user", "alice")], ("producer_byte_rate", 1.0)),
        alt([("user", "alice"), ("client-id", "app")], ("producer_byte_rate", 2.0)),
        alt([("user", None)], ("producer_byte_rate", 3.0)),
        alt([("client-id", "app")], ("producer_byte_rate", 4.0))])
    image = image.replay(records)

    def find(*components, strict=False):
        found = quota_ops.describe_quotas(
            image, [quota_ops.Component(*c) for c in components], strict)
        return sorted(v["producer_byte_rate"] for _, v in found)

    assert find() == [1.0, 2.0, 3.0, 4.0]
    assert find(strict=True) == []
    assert find(("user", 0, "alice")) == [1.0, 2.0]
    assert find(("user", 0, "alice"), strict=True) == [1.0]
    assert find(("user", 1, None)) == [3.0]
    assert find(("user", 2, None), strict=True) == [1.0, 3.0]
    assert find(("client-id", 2, None), ("user", 2, None)) == [2.0]
    for components, code, message in [
        ([("", 0, "x")], Errors.INVALID_REQUEST, "Invalid empty entity type."),
        ([("user", 2, None), ("user", 0, "a")], Errors.INVALID_REQUEST,
         "Entity type user cannot appear more than once in the filter."),
        ([("group", 2, None)], Errors.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([("user", 0, None)], Errors.INVALID_REQUEST,
         "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([("user", 1, "a")], Errors.INVALID_REQUEST,
         "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([("ip", 2, None), ("user", 2, None)], Errors.INVALID_REQUEST,
         "Invalid entity filter component combination. IP filter component should not be "
         "used with user or clientId filter component."),
    ]:
        with pytest.raises(Exception) as info:
            quota_ops.describe_quotas(image, [quota_ops.Component(*c) for c in components],
                                      False)
        assert (info.value.code, info.value.message) == (code, message)


def test_add_scram_arguments_as_kafka_storage_reads_them():
    rec = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert (rec.name, rec.mechanism, rec.iterations) == ("alice", 1, 4096)
    expected = credential_from_password(ScramMechanism.SCRAM_SHA_256, "alice-secret", 4096,
                                        rec.salt)
    assert (rec.stored_key, rec.server_key) == (expected.stored_key, expected.server_key)

    salt = b"0123456789"
    salted = salted_password(ScramMechanism.SCRAM_SHA_512, "pw", salt, 8192)
    rec = parse_add_scram(
        f'SCRAM-SHA-512=[name="bob",iterations=8192,salt={base64.b64encode(salt).decode()},'
        f'saltedpassword={base64.b64encode(salted).decode()}]')
    assert (rec.name, rec.mechanism, rec.iterations, rec.salt) == ("bob", 2, 8192, salt)
    assert rec.stored_key == credential_from_password(
        ScramMechanism.SCRAM_SHA_512, "pw", 8192, salt).stored_key

    for arg, message in [
        ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
        ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not "
                                            "supported."),
        ("SCRAM-SHA-256=name=a]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-256=[name=a", "Expected configuration string to end with ]"),
        ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' "
                                   "to add-scram"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with "
                                                      "'saltedpassword' to add-scram"),
        ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=x]", "Failed to parse iterations count: x"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=4000]",
         "The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-256"),
        ("SCRAM-SHA-256=[name=a,password=b,salt=%%%]", "Failed to decode given salt: %%%"),
        ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ]:
        with pytest.raises(AddScramError) as info:
            parse_add_scram(arg)
        assert str(info.value) == message
