"""FindCoordinator (10): this broker coordinates every group and every transaction.

key_type 0 (group): this node, after making sure ``__consumer_offsets``
exists. key_type 1 (transaction): this node, after making sure
``__transaction_state`` exists. Any other key type: INVALID_REQUEST. v4 batches keys (``coordinator_keys``).

Creating an internal topic (50 partitions by default) runs in the executor,
off the event loop (``spool.broker.internal_topic``); the request awaits it, and
if the topic is still not complete (its creation failed) the answer is
COORDINATOR_NOT_AVAILABLE (retriable), as Kafka answers while the topic loads.

Advertising this API also matters on its own: librdkafka enables lz4 only
when the broker advertises FindCoordinator.
"""

from __future__ import annotations

from spool.broker.registry import handles
from spool.protocol._generated import FindCoordinatorRequest, FindCoordinatorResponse
from spool.protocol._generated.find_coordinator_response import Coordinator
from spool.protocol.errors import Errors


async def _lookup(broker, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node_id, host, port) for one key."""
    if key_type == 1:
        if not key:
            return Errors.INVALID_REQUEST, "empty transactional id", -1, "", -1
        topic = broker.transactions.topic
    elif key_type == 0:
        if not key:
            return Errors.INVALID_GROUP_ID, "empty group id", -1, "", -1
        topic = broker.groups.topic
    else:
        return Errors.INVALID_REQUEST, f"unknown key type {key_type}", -1, "", -1
    if not await topic.ensure():
        return Errors.COORDINATOR_NOT_AVAILABLE, f"{topic.name} is being created", -1, "", -1
    host, port = broker.advertised_address
    return 0, None, broker.node_id, host, port


@handles(10, 0, 4)
async def find_coordinator(ctx, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        coordinators = []
        for k in req.coordinator_keys:
            code, msg, node, host, port = await _lookup(ctx.broker, k, req.key_type)
            coordinators.append(Coordinator(key=k, node_id=node, host=host, port=port,
                                            error_code=code, error_message=msg))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code, msg, node, host, port = await _lookup(ctx.broker, req.key, req.key_type)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                                   node_id=node, host=host, port=port)
