"""Kafka's ACL vocabulary: operation and resource type codes, what each resource type supports.

The codes are Kafka's (``AclOperation``, ``ResourceType``); ``SUPPORTED_OPERATIONS``
is Kafka's ``AclEntry.supportedOperations``: the operations an ACL on a resource of
that type can grant. ``to_bitfield`` packs operations as the ``*_authorized_operations``
fields of Metadata, DescribeCluster, DescribeGroups and DescribeTopicPartitions carry
them (bit ``code`` set for each operation, Kafka's ``Utils.to32BitField``).
``OMITTED`` (INT32_MIN) is the schemas' default: operations not asked for.
"""

from __future__ import annotations

from enum import IntEnum

OMITTED = -(2**31)


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS,
                                   _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                     _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


def to_bitfield(operations) -> int:
    """The int32 with bit ``op`` set for each operation (Kafka's ``Utils.to32BitField``)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits - (1 << 32) if bits >= 1 << 31 else bits
