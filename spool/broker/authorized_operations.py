"""What a request's principal may do to one resource: the ``*_authorized_operations`` answer.

``authorized_operations(ctx, resource_type, name)`` is the one place Metadata (topics,
cluster), DescribeCluster, DescribeGroups and DescribeTopicPartitions ask, when the
request sets ``include_*_authorized_operations``. It is ``spool.broker.authz``'s: with no
authorizer (``authorizer.class.name`` unset) every operation the resource type supports
(``spool.protocol.acl.SUPPORTED_OPERATIONS``: 3576 for a topic, 3400 for a group, 8096 for
the cluster), as Kafka's ``AuthHelper.authorizedOperations``; with one, the subset it
allows the principal on the LITERAL resource ``name``.
"""

from __future__ import annotations

from spool.broker.authz import CLUSTER_NAME, authorized_operations

__all__ = ["CLUSTER_NAME", "authorized_operations"]
