"""spool.security.authorizer: Kafka's StandardAuthorizer rules, case by case and against a
brute-force reading of them (Hypothesis), and its index following SecurityImage changes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spool.protocol._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as Rt
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.authorizer import (
    STANDARD_AUTHORIZER_CLASS,
    StandardAuthorizer,
    configured,
    parse_super_users,
)
from spool.security.image import SecurityImage, acl_record

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def image(*bindings: AclBinding) -> SecurityImage:
    return SecurityImage().replay(acl_record(uuid.uuid4(), b) for b in bindings)


def acl(name="foo", op=Op.READ, perm=ALLOW, pattern=LIT, principal=ALICE, host="*",
        rtype=Rt.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def check(img, op=Op.READ, name="foo", principal=ALICE, host=HOST, rtype=Rt.TOPIC,
          authorizer=None) -> bool:
    return (authorizer or StandardAuthorizer()).authorize(img, principal, host, op, rtype, name)


def test_no_acls_denies_by_default_and_allow_everyone_allows():
    assert not check(image())
    assert check(image(), authorizer=StandardAuthorizer(allow_everyone_if_no_acl_found=True))


def test_allow_everyone_only_where_no_acl_applies_to_the_resource():
    everyone = StandardAuthorizer(allow_everyone_if_no_acl_found=True)
    img = image(acl("foo", principal=BOB))
    assert not check(img, authorizer=everyone)  # foo has an ACL (bob's): alice is denied
    assert check(img, name="bar", authorizer=everyone)  # bar has none
    assert check(img, principal=BOB, authorizer=everyone)


def test_literal_matches_the_exact_name_only():
    img = image(acl("foo"))
    assert check(img, name="foo")
    assert not check(img, name="foobar")
    assert not check(img, name="fo")


def test_prefixed_matches_names_starting_with_it():
    img = image(acl("fo", pattern=PRE))
    assert check(img, name="fo")
    assert check(img, name="foobar")
    assert not check(img, name="f")
    assert not check(img, name="bar")


def test_wildcard_literal_matches_every_name_of_its_type_only():
    img = image(acl("*"))
    assert check(img, name="anything")
    assert not check(img, name="anything", rtype=Rt.GROUP)


def test_prefixed_star_is_a_prefix_not_a_wildcard():
    img = image(acl("*", pattern=PRE))
    assert not check(img, name="foo")
    assert check(img, name="*foo")


def test_deny_beats_allow_at_any_pattern():
    assert not check(image(acl("foo"), acl("f", pattern=PRE, perm=DENY)))
    assert not check(image(acl("f", pattern=PRE), acl("foo", perm=DENY)))
    assert not check(image(acl("foo"), acl("*", perm=DENY)))
    assert not check(image(acl("foo"), acl("foo", perm=DENY, principal="User:*")))


def test_deny_of_another_operation_or_principal_or_host_does_not_deny():
    assert check(image(acl("foo"), acl("foo", op=Op.WRITE, perm=DENY)))
    assert check(image(acl("foo"), acl("foo", perm=DENY, principal=BOB)))
    assert check(image(acl("foo"), acl("foo", perm=DENY, host="10.9.9.9")))


def test_principal_wildcard_and_host_match():
    img = image(acl("foo", principal="User:*", host=HOST))
    assert check(img, principal=BOB)
    assert not check(img, host="10.0.0.2")


def test_principal_type_is_part_of_the_name():
    assert not check(image(acl("foo", principal="Group:alice")))


def test_implied_operations_for_allow_only():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert check(image(acl(op=op)), op=Op.DESCRIBE), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        assert check(image(acl(op=op)), op=Op.DESCRIBE) == (op == Op.DESCRIBE), op
    assert check(image(acl(op=Op.ALTER_CONFIGS)), op=Op.DESCRIBE_CONFIGS)
    assert not check(image(acl(op=Op.DESCRIBE)), op=Op.READ)
    # a DENY of READ does not deny DESCRIBE (Kafka: the rule is for ALLOW only)
    assert check(image(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)), op=Op.DESCRIBE)


def test_all_allows_and_denies_every_operation():
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS):
        assert check(image(acl(op=Op.ALL)), op=op)
        assert not check(image(acl(op=Op.ALL, perm=DENY), acl(op=op)), op=op)


def test_super_users_pass_even_a_deny():
    su = StandardAuthorizer(super_users=[ALICE])
    assert check(image(acl("foo", perm=DENY, op=Op.ALL)), authorizer=su)
    assert not check(image(), principal=BOB, authorizer=su)


def test_parse_super_users_as_kafka():
    assert parse_super_users(" User:a ; User:b;;") == {"User:a", "User:b"}
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("alice")


def test_configured_from_broker_keys():
    assert configured({}) is None
    assert configured({"authorizer.class.name": ""}) is None
    a = configured({"authorizer.class.name": STANDARD_AUTHORIZER_CLASS,
                    "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"})
    assert a is not None and a.super_users == {"User:admin"}
    assert a.allow_everyone_if_no_acl_found
    with pytest.raises(ValueError, match="AclAuthorizer"):
        configured({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})


def test_a_changed_image_is_seen_and_the_old_decision_forgotten():
    authz = StandardAuthorizer()
    allow_id, deny_id = uuid.uuid4(), uuid.uuid4()
    first = SecurityImage().replay([acl_record(allow_id, acl("foo"))])
    assert check(first, authorizer=authz)
    denied = first.replay([acl_record(deny_id, acl("foo", perm=DENY))])
    assert not check(denied, authorizer=authz)
    again = denied.replay([RemoveAccessControlEntryRecord(id=deny_id)])
    assert check(again, authorizer=authz)
    assert not check(denied, authorizer=authz)  # an older image still decides by its ACLs


def test_authorized_operations_of_a_topic():
    img = image(acl("foo", op=Op.WRITE), acl("foo", op=Op.ALTER_CONFIGS))
    ops = StandardAuthorizer().authorized_operations(img, ALICE, HOST, Rt.TOPIC, "foo")
    assert ops == {Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}


# ---- authorize_by_resource_type (KIP-679), Kafka's AuthorizerTest cases

def by_type(img, op=Op.WRITE, principal=ALICE, authorizer=None) -> bool:
    return (authorizer or StandardAuthorizer()).authorize_by_resource_type(
        img, principal, HOST, op, Rt.TOPIC)


def test_by_resource_type():
    assert not by_type(image())
    assert by_type(image(), authorizer=StandardAuthorizer(allow_everyone_if_no_acl_found=True))
    assert by_type(image(acl("t1", op=Op.WRITE)))
    assert not by_type(image(acl("t1", op=Op.READ)))
    assert by_type(image(acl("t1", op=Op.ALL)))
    assert not by_type(image(acl("t1", op=Op.WRITE), acl("t1", op=Op.WRITE, perm=DENY)))
    assert not by_type(image(acl("t1", op=Op.WRITE), acl("t", op=Op.WRITE, perm=DENY,
                                                          pattern=PRE)))
    # a literal deny does not dominate a prefixed allow
    assert by_type(image(acl("t", op=Op.WRITE, pattern=PRE),
                         acl("t", op=Op.WRITE, perm=DENY)))
    assert not by_type(image(acl("t1", op=Op.WRITE), acl("*", op=Op.WRITE, perm=DENY)))
    assert by_type(image(acl("t1", op=Op.WRITE, principal="User:*")))
    assert not by_type(image(acl("t1", op=Op.WRITE)), principal=BOB)
    assert by_type(image(acl("*", op=Op.WRITE)))
    assert by_type(image(acl("x", op=Op.ALL, perm=DENY)), principal=ALICE,
                   authorizer=StandardAuthorizer(super_users=[ALICE]))


# ---- against a brute-force model of Kafka's rules

NAMES = ["", "f", "fo", "foo", "foob", "foobar", "bar", "*"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = ["*", HOST, "10.0.0.2"]
OPS = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS,
       Op.DESCRIBE_CONFIGS, Op.ALL, Op.CREATE]

bindings = st.builds(
    AclBinding, st.sampled_from([Rt.TOPIC, Rt.GROUP]), st.sampled_from(NAMES),
    st.sampled_from([LIT, PRE]), st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS),
    st.sampled_from(OPS), st.sampled_from([ALLOW, DENY]))


def model(acls, principal, host, op, rtype, name, default) -> bool:
    def pattern_applies(b):
        if b.resource_type != rtype:
            return False
        if b.pattern_type == LIT:
            return b.resource_name in (name, "*")
        return name.startswith(b.resource_name)

    def entry_matches(b):
        if b.principal not in (principal, "User:*") or b.host not in (host, "*"):
            return False
        if b.operation in (op, Op.ALL):
            return True
        if b.permission_type != ALLOW:
            return False
        if op == Op.DESCRIBE:
            return b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
        return op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS

    applying = [b for b in acls if pattern_applies(b)]
    matching = [b for b in applying if entry_matches(b)]
    if any(b.permission_type == DENY for b in matching):
        return False
    if matching:
        return True
    return default if not applying else False


@settings(max_examples=400, deadline=None)
@given(acls=st.lists(bindings, max_size=12), principal=st.sampled_from([ALICE, BOB]),
       host=st.sampled_from([HOST, "10.0.0.2"]),
       op=st.sampled_from([o for o in OPS if o != Op.ALL]),
       rtype=st.sampled_from([Rt.TOPIC, Rt.GROUP]),
       name=st.sampled_from([n for n in NAMES if n] + ["fox", "b"]),
       default=st.booleans())
def test_agrees_with_the_rules_read_plainly(acls, principal, host, op, rtype, name, default):
    authz = StandardAuthorizer(allow_everyone_if_no_acl_found=default)
    img = image(*acls)
    expected = model(acls, principal, host, op, rtype, name, default)
    assert authz.authorize(img, principal, host, op, rtype, name) == expected
    assert authz.authorize(img, principal, host, op, rtype, name) == expected  # memoised


def test_a_denial_is_logged_once_as_kafkas_audit_line(caplog):
    authz = StandardAuthorizer()
    img = image(acl("foo", principal=BOB))
    with caplog.at_level("INFO", logger="spool.authorizer"):
        assert not authz.authorize(img, ALICE, HOST, Op.WRITE, Rt.TOPIC, "foo")
        assert not authz.authorize(img, ALICE, HOST, Op.WRITE, Rt.TOPIC, "foo")  # memoised
        assert not authz.authorize(img, ALICE, HOST, Op.READ, Rt.TOPIC, "bar", log_denied=False)
        assert authz.authorize(img, BOB, HOST, Op.READ, Rt.TOPIC, "foo")
    assert [r.getMessage() for r in caplog.records] == [
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.1 on resource "
        "= Topic:LITERAL:foo"]


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.one_of(
    st.tuples(st.just("add"), bindings),
    st.tuples(st.just("remove"), st.integers(0, 20)),
    st.tuples(st.just("check"), st.sampled_from([ALICE, BOB]),
              st.sampled_from([o for o in OPS if o != Op.ALL]))), max_size=30))
def test_one_authorizer_follows_a_changing_image(steps):
    """The same authorizer across images (as a broker keeps it): its index and memo never
    answer for ACLs that are gone or miss ones that came."""
    authz = StandardAuthorizer()
    img, live = SecurityImage(), {}
    for step in steps:
        if step[0] == "add":
            acl_id = uuid.uuid4()
            img, live[acl_id] = img.replay([acl_record(acl_id, step[1])]), step[1]
        elif step[0] == "remove" and live:
            acl_id = sorted(live)[step[1] % len(live)]
            img = img.replay([RemoveAccessControlEntryRecord(id=acl_id)])
            del live[acl_id]
        elif step[0] == "check":  # every name, for one principal and operation
            _, principal, op = step
            for name in NAMES[1:]:
                assert authz.authorize(img, principal, HOST, op, Rt.TOPIC, name) == model(
                    live.values(), principal, HOST, op, Rt.TOPIC, name, False), name
