"""ACL checks that the ACL matrix (test_acl_matrix_data / _admin) exercised only behind
another check, so that dropping them went unnoticed (found by breaking each check in turn:
docs in the commit messages). Each test here reaches the check on its own, on a real broker
(SASL_PLAINTEXT, PLAIN users, Kafka's StandardAuthorizer, admin a super user), as the
principal sees it on the wire, and checks that nothing happened.

- InitProducerId with a transactional id needs WRITE on the id. A client normally meets
  FindCoordinator first, which needs DESCRIBE on the id and refuses with the same error, so
  the matrix's librdkafka producer never reached InitProducerId: here alice may DESCRIBE
  the id (FindCoordinator answers) but not WRITE it.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from spool.net.client import NodeClient
from spool.protocol._generated import FindCoordinatorRequest, InitProducerIdRequest
from spool.protocol.errors import Errors
from spool.security.client_config import ClientSecurity
from tests.helpers.secure_broker import PLAIN_LOGIN, SecureBroker

pytestmark = pytest.mark.timeout(300)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"alice": "alice-secret"}
TXN_DENIED = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = SecureBroker(tmp_path_factory.mktemp("acl-gaps") / "data", plain_users=USERS,
                     mechanisms=("PLAIN",),
                     overrides={"authorizer.class.name": STANDARD, "super.users": "User:admin",
                                "offsets.topic.num.partitions": "1",
                                "transaction.state.log.num.partitions": "1"})
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient(broker.confluent("admin"))


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def grant(admin: AdminClient, rtype, name: str, op, user: str = "alice") -> None:
    binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                         AclPermissionType.ALLOW)
    for f in admin.create_acls([binding], request_timeout=15).values():
        f.result()


def raw(broker, user: str, message, version: int):
    """One request as ``user`` (PLAIN), its decoded response."""
    host, port = broker.bootstrap().split(":")
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_LOGIN} required username="{user}" '
                            f'password="{USERS.get(user, "admin-secret")}";'})

    async def go():
        c = NodeClient(host, int(port), security=security, client_id="acl-gaps")
        try:
            return await c.request(message, version)
        finally:
            await c.close()

    return asyncio.run(go())


def test_init_producer_id_needs_write_on_the_transactional_id(broker, admin):
    txn = _name("ipid")
    grant(admin, ResourceType.TRANSACTIONAL_ID, txn, AclOperation.DESCRIBE)
    # FindCoordinator passes with DESCRIBE...
    found = raw(broker, "alice", FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]), 4)
    assert [c.error_code for c in found.coordinators] == [0]
    # ...InitProducerId does not: it needs WRITE, and no producer id is given
    init = InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=60000,
                                 producer_id=-1, producer_epoch=-1)
    resp = raw(broker, "alice", init, 4)
    assert (resp.error_code, resp.producer_id) == (TXN_DENIED, -1)
    grant(admin, ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    resp = raw(broker, "alice", init, 4)
    assert resp.error_code == 0 and resp.producer_id >= 0
