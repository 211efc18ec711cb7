"""What the ACL tests share: an authorizing broker, ACL bindings, a request as a PLAIN user.

- ``STANDARD_AUTHORIZER``: Kafka's ``authorizer.class.name`` for StandardAuthorizer.
- ``authorizing_broker(data_dir, users, overrides)``: a started ``SecureBroker``
  (SASL_PLAINTEXT, PLAIN ``users`` plus admin, a super user), StandardAuthorizer,
  ``allow.everyone.if.no.acl.found`` false, one partition for the offsets and transaction
  state topics; ``overrides``: more broker keys. The caller stops it.
- ``binding(rtype, name, op, user, host=, deny=, prefixed=)``: a confluent-kafka AclBinding
  for ``User:<user>``; ``grant(admin, *bindings)`` creates them and waits.
- ``plain_request(host, port, user, password, message, version)``: ``message`` sent as
  ``user`` (SASL_PLAINTEXT, PLAIN) with Spool's own ``NodeClient``: the decoded response.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AclBinding, AclPermissionType, AdminClient, ResourcePatternType

from spool.net.client import NodeClient
from spool.security.client_config import ClientSecurity
from tests.helpers.secure_broker import SecureBroker

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def authorizing_broker(data_dir: Path, users: dict[str, str],
                       overrides: dict[str, str] | None = None) -> SecureBroker:
    """A started broker authorizing PLAIN principals (module docstring)."""
    broker = SecureBroker(data_dir, plain_users=users, mechanisms=("PLAIN",),
                          overrides={"authorizer.class.name": STANDARD_AUTHORIZER,
                                     "super.users": "User:admin",
                                     "offsets.topic.num.partitions": "1",
                                     "transaction.state.log.num.partitions": "1",
                                     **(overrides or {})})
    broker.start()
    return broker


def binding(rtype: Any, name: str, op: Any, user: str = "alice", *, host: str = "*",
            deny: bool = False, prefixed: bool = False) -> AclBinding:
    return AclBinding(rtype, name,
                      ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
                      f"User:{user}", host, op,
                      AclPermissionType.DENY if deny else AclPermissionType.ALLOW)


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for f in admin.create_acls(list(bindings), request_timeout=15).values():
        f.result()


def plain_request(host: str, port: int, user: str, password: str, message: Any, version: int,
                  *, request_timeout_ms: int = 30000, client_id: str = "acl-test") -> Any:
    """One request as ``user`` over SASL PLAIN, its decoded response."""
    security = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              username=user, password=password)

    async def go() -> Any:
        client = NodeClient(host, port, security=security, client_id=client_id,
                            request_timeout_ms=request_timeout_ms)
        try:
            return await client.request(message, version)
        finally:
            await client.close()

    return asyncio.run(go())
