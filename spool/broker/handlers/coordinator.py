"""FindCoordinator (10): the leader of the key's internal topic partition.

key_type 0 (group): the leader of the group's ``__consumer_offsets``
partition, after making sure the topic exists. key_type 1 (transaction): the
leader of the transactional id's ``__transaction_state`` partition, likewise.
The leader and its endpoint (on the listener the request came in on) come
from the broker's ``MetadataView``; on a single node that is this node. A
partition with no live leader is COORDINATOR_NOT_AVAILABLE (retriable). v4 batches keys
(``coordinator_keys``); v5 (KIP-890) only lets clients accept TRANSACTION_ABORTABLE, which
this lookup never answers. key_type 2 (share, KIP-932) exists from v6 (below it:
INVALID_REQUEST): the key is ``groupId:topicId:partition`` and its coordinator the leader of
its ``__share_group_state`` partition (``spool.share.coordinator.partition_for``); brokers
ask it (CLUSTER_ACTION on the cluster with an authorizer, else
CLUSTER_AUTHORIZATION_FAILED). Any other key type: INVALID_REQUEST.

With an authorizer (``spool.broker.authz``) a group key needs DESCRIBE on the group
(else GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), checked first, as Kafka's ``getCoordinator``.

Creating an internal topic (50 partitions by default) runs in the executor,
off the event loop (``spool.broker.internal_topic``); the request awaits it, and
if the topic is still not complete (its creation failed) the answer is
COORDINATOR_NOT_AVAILABLE (retriable), as Kafka answers while the topic loads.

Advertising this API also matters on its own: librdkafka enables lz4 only
when the broker advertises FindCoordinator.
"""

from __future__ import annotations

from spool.broker.authz import allowed, allowed_cluster
from spool.broker.registry import handles
from spool.protocol._generated import FindCoordinatorRequest, FindCoordinatorResponse
from spool.protocol._generated.find_coordinator_response import Coordinator
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors


async def _lookup(ctx, key: str, key_type: int, listener: str | None
                  ) -> tuple[int, str | None, int, str, int]:
    """(error, message, node_id, host, port) for one key."""
    broker = ctx.broker
    if broker.authorizer is not None:
        if key_type == 0 and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return Errors.GROUP_AUTHORIZATION_FAILED, GROUP_DENIED, -1, "", -1
        if key_type == 1 and not allowed(ctx, AclOperation.DESCRIBE,
                                         ResourceType.TRANSACTIONAL_ID, key):
            return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TXN_DENIED, -1, "", -1
    if key_type == 1:
        if not key:
            return Errors.INVALID_REQUEST, "empty transactional id", -1, "", -1
        topic = broker.transactions.topic
    elif key_type == 0:
        if not key:
            return Errors.INVALID_GROUP_ID, "empty group id", -1, "", -1
        topic = broker.groups.topic
    elif key_type == SHARE:
        if ctx.api_version < 6:
            return Errors.INVALID_REQUEST, "key type 2 (share) needs v6", -1, "", -1
        if broker.authorizer is not None and not allowed_cluster(ctx,
                                                                 AclOperation.CLUSTER_ACTION):
            return Errors.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED, -1, "", -1
        if not key:
            return Errors.INVALID_REQUEST, "empty share-partition key", -1, "", -1
        topic = broker.share_state.topic
    else:
        return Errors.INVALID_REQUEST, f"unknown key type {key_type}", -1, "", -1
    if not await topic.ensure():
        return Errors.COORDINATOR_NOT_AVAILABLE, f"{topic.name} is being created", -1, "", -1
    leader = broker.view.partition(topic.name, topic.partition_for(key))
    node = broker.view.broker(leader.leader, listener) if leader is not None else None
    if node is None:  # no live leader: retriable, as Kafka answers
        return (Errors.COORDINATOR_NOT_AVAILABLE, f"{topic.name} has no leader for {key!r}",
                -1, "", -1)
    return 0, None, node.node_id, node.host, node.port


SHARE = 2  # key_type of a share-group state key (KIP-932)
GROUP_DENIED = "Group authorization failed."  # Kafka's messages of the errors
TXN_DENIED = "Transactional Id authorization failed."
CLUSTER_DENIED = "Cluster authorization failed."


@handles(10, 0, 6)
async def find_coordinator(ctx, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    listener = ctx.listener_name
    if ctx.api_version >= 4:
        coordinators = []
        for k in req.coordinator_keys:
            code, msg, node, host, port = await _lookup(ctx, k, req.key_type, listener)
            coordinators.append(Coordinator(key=k, node_id=node, host=host, port=port,
                                            error_code=code, error_message=msg))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code, msg, node, host, port = await _lookup(ctx, req.key, req.key_type, listener)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                                   node_id=node, host=host, port=port)
