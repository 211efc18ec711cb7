"""ApiVersions (18): the supported API ranges, derived from the handler registry.

On a controller listener it lists the controller plane's APIs, elsewhere the broker's.

APIs of a group protocol the broker does not serve are left out
(``spool.broker.group_protocols``: KIP-848's 68/69, KIP-932's share APIs).

v3+ also carries the feature flags (``spool.cluster.features``), as Kafka's
``ApiVersionManager``: ``supported_features`` (this node's ranges; below v4, features
whose minimum is 0 are left out, KAFKA-17492), ``finalized_features`` (the cluster's
levels, level 0 left out, min = max = the level) and ``finalized_features_epoch`` (the
metadata offset they are as of). A broker reads them from its view; a controller-only
node (or a cluster node before its first image) from its controller's image.
"""

from __future__ import annotations

from spool.broker.group_protocols import hidden_apis
from spool.broker.registry import BROKER_PLANE, CONTROLLER_PLANE, advertised, handles
from spool.cluster import features
from spool.protocol._generated import ApiVersionsRequest, ApiVersionsResponse
from spool.protocol._generated.api_versions_response import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)


def finalized(broker) -> tuple[dict[str, int], int]:
    """(finalized levels, their epoch) as this node knows them ({}, -1 when it knows none)."""
    view = broker.view
    quorum = getattr(broker, "quorum", None)
    if view is not None and (view.clustered or quorum is None):
        return view.finalized_features(), view.features_epoch()
    runtime = None if quorum is None else getattr(quorum, "controller", None)
    if runtime is not None:
        image = runtime.controller.image
        return dict(image.features), image.offset
    return {}, -1


@handles(18, 0, 4, listeners=(BROKER_PLANE, CONTROLLER_PLANE))
async def api_versions(ctx, req: ApiVersionsRequest) -> ApiVersionsResponse:
    hidden = hidden_apis(ctx.broker) if ctx.plane == BROKER_PLANE else frozenset()
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                  for k, lo, hi in advertised(ctx.plane) if k not in hidden],
        throttle_time_ms=0,
    )
    if ctx.api_version >= 3:  # the client's software, for telemetry subscriptions' match
        ctx.conn.client_software = (req.client_software_name or "",
                                    req.client_software_version or "")
        levels, epoch = finalized(ctx.broker)
        resp.supported_features = [
            SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
            for n, lo, hi in features.supported() if ctx.api_version >= 4 or lo > 0]
        resp.finalized_features = [
            FinalizedFeatureKey(name=n, min_version_level=lvl, max_version_level=lvl)
            for n, lvl in sorted(levels.items()) if lvl != 0]
        resp.finalized_features_epoch = epoch
    return resp
