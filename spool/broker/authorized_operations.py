"""What a request's principal may do to one resource: the ``*_authorized_operations`` answer.

``authorized_operations(ctx, resource_type, name)`` is the one place Metadata (topics,
cluster), DescribeCluster and DescribeGroups ask, when the request sets
``include_*_authorized_operations``. Spool has no authorizer yet, and Kafka without one
(``authorizer`` unset, ``AuthHelper.authorizedOperations``) allows everything: the answer
is every operation the resource type supports (``spool.protocol.acl.SUPPORTED_OPERATIONS``)
as a bitfield: 3576 for a topic (READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS
ALTER_CONFIGS), 3400 for a group, 8096 for the cluster. The authorizer (issue 16) replaces
this function's body with the subset it allows ``ctx``'s principal, as Kafka asks its
authorizer for each supported operation on the LITERAL resource ``name``.
"""

from __future__ import annotations

from spool.protocol.acl import SUPPORTED_OPERATIONS, ResourceType, to_bitfield

CLUSTER_NAME = "kafka-cluster"  # Kafka's name of the one CLUSTER resource


def authorized_operations(ctx, resource_type: ResourceType, name: str) -> int:
    """The bitfield of operations ``ctx``'s principal may perform on the resource."""
    return to_bitfield(SUPPORTED_OPERATIONS[resource_type])
