"""An ACL binding: Kafka's ``AclBinding`` (a resource pattern and an access control entry).

The codes are Kafka's, as the wire (CreateAcls, DescribeAcls, DeleteAcls) and the
metadata log's ``AccessControlEntryRecord`` carry them: ``PatternType`` (LITERAL 3,
PREFIXED 4; ANY 1 and MATCH 2 only in filters), ``AclPermissionType`` (DENY 2,
ALLOW 3; ANY 1 in filters), operations and resource types from
``spool.protocol.acl``. ``WILDCARD`` (``*``) as a LITERAL name matches every
resource of the type, as a principal every principal (``User:*``), as a host every
host.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from spool.protocol.acl import AclOperation, ResourceType

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclBinding(NamedTuple):
    """One ACL: ``principal`` may (ALLOW) or may not (DENY) do ``operation`` from ``host``
    on the resources ``resource_type``/``resource_name`` under ``pattern_type``."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an IP address
    operation: AclOperation
    permission_type: AclPermissionType
