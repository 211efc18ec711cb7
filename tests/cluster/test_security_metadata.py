"""ACLs, SCRAM credentials and client quotas on a real 3-node cluster: a change made through
any broker is forwarded to the active controller, committed through Raft, and seen by every
broker (each answers from its own image); credentials given at format time
(``spool storage format --add-scram``) are there from the first start; everything survives
the active controller's kill -9 (it is in the metadata log, not in one node's memory)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from spool.protocol._generated import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeUserScramCredentialsRequest,
)
from spool.protocol._generated import alter_client_quotas_request as acq
from spool.protocol._generated.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from spool.protocol._generated.create_acls_request import AclCreation
from spool.security.scram import ScramMechanism, salted_password
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(300)

SHA256 = ScramMechanism.SCRAM_SHA_256
ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)


def seen_by(bootstrap: str) -> tuple | str:
    """(ACLs, SCRAM users, quotas) as one broker answers them, from its own image."""
    try:
        acls = request_once(bootstrap, 29, 3, DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
        scram = request_once(bootstrap, 50, 0, DescribeUserScramCredentialsRequest(users=None))
        quotas = request_once(bootstrap, 48, 1, DescribeClientQuotasRequest(components=[],
                                                                            strict=False))
    except OSError as e:
        return f"unreachable: {e}"
    return (
        sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation,
                a.permission_type) for r in acls.resources for a in r.acls),
        sorted((r.user, sorted((c.mechanism, c.iterations) for c in r.credential_infos))
               for r in scram.results),
        sorted((tuple((e.entity_type, e.entity_name) for e in q.entity),
                sorted((v.key, v.value) for v in q.values)) for q in quotas.entries or []))


def test_changes_through_any_broker_reach_every_broker(cluster_factory):
    cluster = cluster_factory(
        overrides={"authorizer.class.name":
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                   "super.users": "User:ANONYMOUS"},
        format_args=["--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"]).start()
    cluster.wait_formed()
    b1, b2, b3 = cluster.brokers

    def everywhere(expected: tuple, what: str) -> None:
        def check() -> bool | str:
            seen = {n.node_id: seen_by(n.bootstrap) for n in cluster.brokers if n.alive}
            return True if all(s == expected for s in seen.values()) else repr(seen)
        cluster.wait_until(what, check, timeout=30)

    everywhere(([], [("admin", [(2, 4096)])], []), "the bootstrap credential everywhere")

    clients = {n.node_id: AdminClient({"bootstrap.servers": n.bootstrap}) for n in (b1, b2)}
    # the writes go through the raw codec to the broker named (librdkafka picks a broker
    # itself: AlterUserScramCredentials goes to the controller broker it knows of)
    read = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                      "*", AclOperation.READ, AclPermissionType.ALLOW)
    write = AclBinding(ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED, "User:bob",
                       "*", AclOperation.WRITE, AclPermissionType.DENY)
    resp = request_once(b1.bootstrap, 30, 3, CreateAclsRequest(creations=[AclCreation(
        resource_type=b.restype.value, resource_name=b.name,
        resource_pattern_type=b.resource_pattern_type.value, principal=b.principal,
        host=b.host, operation=b.operation.value, permission_type=b.permission_type.value)
        for b in (read, write)]))
    assert [(r.error_code, r.error_message) for r in resp.results] == [(0, None), (0, None)]
    # the broker that forwarded a write answers it at once (it caught up before replying)
    acls = [(2, "orders", 3, "User:alice", 3, 3), (2, "orders-", 4, "User:bob", 4, 2)]
    assert seen_by(b1.bootstrap)[0] == acls
    resp = request_once(b2.bootstrap, 51, 0, AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="admin", mechanism=2)],
        upsertions=[ScramCredentialUpsertion(
            name="alice", mechanism=1, iterations=8192, salt=b"salt",
            salted_password=salted_password(SHA256, "alice-secret", b"salt", 8192))]))
    assert sorted((r.user, r.error_code) for r in resp.results) == [("admin", 0), ("alice", 0)]
    assert seen_by(b2.bootstrap)[1] == [("alice", [(1, 8192)])]
    resp = request_once(b3.bootstrap, 49, 1, AlterClientQuotasRequest(entries=[acq.EntryData(
        entity=[acq.EntityData(entity_type="user", entity_name="alice")],
        ops=[acq.OpData(key="producer_byte_rate", value=1048576.0, remove=False)])],
        validate_only=False))
    assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None)]
    assert seen_by(b3.bootstrap)[2] == [((("user", "alice"),),
                                         [("producer_byte_rate", 1048576.0)])]

    expected = (
        acls,
        [("alice", [(1, 8192)])],
        [((("user", "alice"),), [("producer_byte_rate", 1048576.0)])])
    everywhere(expected, "every change on every broker")

    # the answers come from the metadata log: the active controller's kill -9 loses nothing
    active = cluster.active_controller()
    assert active is not None
    cluster.nodes[active.leader_id].kill()
    cluster.wait_until("a new active controller",
                       lambda: (s := cluster.active_controller()) is not None
                       and s.leader_id != active.leader_id, timeout=60)
    (f,) = clients[b1.node_id if b1.node_id != active.leader_id else b2.node_id].delete_acls(
        [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                          AclOperation.ANY, AclPermissionType.ANY)]).values()
    assert f.result(timeout=60) == [write]
    cluster.nodes[active.leader_id].start()
    everywhere((expected[0][:1], *expected[1:]), "the deletion everywhere, the restarted node too")
