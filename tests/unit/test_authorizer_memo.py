"""spool.security.authorizer's memo of decisions: one authorizer asked again and again (as a
broker asks it for every request) must decide each (principal, host, operation, resource)
on its own, never answer with a decision memoised for another host, principal, operation or
resource. Found by mutation (docs: the security mutation report): a memo key without the
host let a host-specific DENY through once the same principal was allowed from elsewhere."""

from __future__ import annotations

import uuid

from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as Rt
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.authorizer import StandardAuthorizer
from spool.security.image import SecurityImage, acl_record

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"


def image(*bindings: AclBinding) -> SecurityImage:
    return SecurityImage().replay(acl_record(uuid.uuid4(), b) for b in bindings)


def acl(name: str, op: Op, perm: AclPermissionType, principal: str = ALICE,
        host: str = "*", rtype: Rt = Rt.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, principal, host, op, perm)


def test_a_decision_for_one_host_is_not_reused_for_another():
    img = image(acl("orders", Op.READ, ALLOW), acl("orders", Op.READ, DENY, host="10.0.0.2"))
    authorizer = StandardAuthorizer()
    # the same principal, operation and topic, from the allowed host first, then the denied
    assert authorizer.authorize(img, ALICE, "10.0.0.1", Op.READ, Rt.TOPIC, "orders")
    assert not authorizer.authorize(img, ALICE, "10.0.0.2", Op.READ, Rt.TOPIC, "orders")
    # and the other way round on a fresh authorizer
    authorizer = StandardAuthorizer()
    assert not authorizer.authorize(img, ALICE, "10.0.0.2", Op.READ, Rt.TOPIC, "orders")
    assert authorizer.authorize(img, ALICE, "10.0.0.1", Op.READ, Rt.TOPIC, "orders")


def test_a_decision_is_not_reused_across_principal_operation_type_or_name():
    img = image(acl("orders", Op.READ, ALLOW), acl("orders", Op.WRITE, DENY),
                acl("orders", Op.READ, ALLOW, rtype=Rt.GROUP))
    authorizer = StandardAuthorizer()
    host = "10.0.0.1"
    asked = [  # (principal, op, type, name) -> expected, asked in this order on one authorizer
        ((ALICE, Op.READ, Rt.TOPIC, "orders"), True),
        ((BOB, Op.READ, Rt.TOPIC, "orders"), False),
        ((ALICE, Op.WRITE, Rt.TOPIC, "orders"), False),
        ((ALICE, Op.READ, Rt.TOPIC, "orders2"), False),
        ((ALICE, Op.READ, Rt.GROUP, "orders"), True),
        ((ALICE, Op.READ, Rt.TRANSACTIONAL_ID, "orders"), False),
    ]
    for (principal, op, rtype, name), expected in asked * 2:  # twice: the memo answers
        assert authorizer.authorize(img, principal, host, op, rtype, name) is expected, \
            (principal, op, rtype, name)
