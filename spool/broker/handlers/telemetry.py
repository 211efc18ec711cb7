"""GetTelemetrySubscriptions (71), PushTelemetry (72) and ListConfigResources (74).

71 and 72 are KIP-714's client telemetry, answered by the broker's
``ClientMetricsManager`` (``spool.broker.telemetry``). A client instance is described
by its client_id (request header), its software name and version (what its ApiVersions
v3+ said on this connection) and the connection's source address and port.

ListConfigResources (Kafka's ``handleListConfigResources``, KIP-1142): v0 lists the
CLIENT_METRICS resources only (it was ListClientMetricsResources); v1 lists the
resource types asked for, or all it supports when none is given: TOPIC (2, every
topic), BROKER (4) and BROKER_LOGGER (8) (the live brokers, by id), CLIENT_METRICS (16)
and GROUP (32: the groups with configs set). A type outside those
fails the request with UNSUPPORTED_VERSION, as Kafka's.

Authorization (Kafka's): ListConfigResources needs DESCRIBE_CONFIGS on the cluster, else
the top-level CLUSTER_AUTHORIZATION_FAILED and no resources; the telemetry APIs are
answered to anyone.
"""

from __future__ import annotations

from spool.broker.admin_authz import cluster_allowed
from spool.broker.registry import handles
from spool.cluster.client_metrics import CLIENT_METRICS_RESOURCE
from spool.protocol._generated import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from spool.protocol._generated.list_config_resources_response import ConfigResource
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
LISTED_TYPES = (GROUP, CLIENT_METRICS_RESOURCE, BROKER_LOGGER, BROKER, TOPIC)  # Kafka's order


def client_attributes(ctx) -> dict[str, str]:
    """What a subscription's ``match`` patterns see of this client."""
    name, version = getattr(ctx.conn, "client_software", ("", ""))
    peer = ctx.conn.peer or ("", "")
    return {"client_id": ctx.client_id, "client_software_name": name,
            "client_software_version": version, "client_source_address": str(peer[0]),
            "client_source_port": str(peer[1]) if len(peer) > 1 else ""}


@handles(71, 0, 0)
async def get_telemetry_subscriptions(ctx, req: GetTelemetrySubscriptionsRequest
                                      ) -> GetTelemetrySubscriptionsResponse:
    return ctx.broker.client_metrics.get_subscriptions(req, client_attributes(ctx))


@handles(72, 0, 0)
async def push_telemetry(ctx, req: PushTelemetryRequest) -> PushTelemetryResponse:
    return ctx.broker.client_metrics.push(req, client_attributes(ctx))


@handles(74, 0, 1)
async def list_config_resources(ctx, req: ListConfigResourcesRequest
                                ) -> ListConfigResourcesResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(throttle_time_ms=0,
                                           error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                           config_resources=[])
    supported = (CLIENT_METRICS_RESOURCE,) if ctx.api_version == 0 else LISTED_TYPES
    wanted = set(req.resource_types or ()) if ctx.api_version >= 1 else set()
    wanted = wanted or set(supported)
    if not wanted <= set(supported):
        return ListConfigResourcesResponse(throttle_time_ms=0,
                                           error_code=Errors.UNSUPPORTED_VERSION,
                                           config_resources=[])
    view = ctx.broker.view
    out: list[ConfigResource] = []
    for rtype in LISTED_TYPES:
        if rtype not in wanted:
            continue
        if rtype == CLIENT_METRICS_RESOURCE:
            names = sorted(view.resource_configs(CLIENT_METRICS_RESOURCE))
        elif rtype in (BROKER, BROKER_LOGGER):
            names = [str(b.node_id) for b in view.brokers(ctx.listener_name)]
        elif rtype == TOPIC:
            names = view.topic_names()
        else:
            names = sorted(view.resource_configs(GROUP))
        out += [ConfigResource(resource_name=n, resource_type=rtype) for n in names]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=0, config_resources=out)
