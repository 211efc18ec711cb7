"""FindCoordinator (10): advertised now, answered COORDINATOR_NOT_AVAILABLE until the
group and transaction coordinators exist.

Why advertise it before it works: librdkafka enables lz4 only when the broker
advertises FindCoordinator, and otherwise silently sends lz4 batches
uncompressed. COORDINATOR_NOT_AVAILABLE is retriable, so a client that does
want a group waits (and says so in its log) instead of failing hard.
"""

from __future__ import annotations

from spool.broker.registry import handles
from spool.protocol._generated import FindCoordinatorRequest, FindCoordinatorResponse
from spool.protocol._generated.find_coordinator_response import Coordinator
from spool.protocol.errors import Errors

MESSAGE = "the group and transaction coordinators are not built yet"


@handles(10, 0, 4)
async def find_coordinator(ctx, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    code = Errors.COORDINATOR_NOT_AVAILABLE
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[
                Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=MESSAGE)
                for k in req.coordinator_keys
            ],
        )
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=code, error_message=MESSAGE, node_id=-1, host="", port=-1
    )
