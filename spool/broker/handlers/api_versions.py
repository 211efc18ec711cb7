"""ApiVersions (18): the supported API ranges, derived from the handler registry.

On a controller listener it lists the controller plane's APIs, elsewhere the broker's."""

from __future__ import annotations

from spool.broker.registry import BROKER_PLANE, CONTROLLER_PLANE, advertised, handles
from spool.protocol._generated import ApiVersionsRequest, ApiVersionsResponse
from spool.protocol._generated.api_versions_response import ApiVersion


@handles(18, 0, 4, listeners=(BROKER_PLANE, CONTROLLER_PLANE))
async def api_versions(ctx, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                  for k, lo, hi in advertised(ctx.plane)],
        throttle_time_ms=0,
    )
