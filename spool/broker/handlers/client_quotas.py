"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1: quotas in the metadata log.

As Kafka's ``KafkaApis``/``ControllerApis``: describing needs DESCRIBE_CONFIGS on the
cluster (else the top-level CLUSTER_AUTHORIZATION_FAILED, no entries), altering
ALTER_CONFIGS (else every entry gets it). No authorizer: allowed. The rules (entity
types and combinations, keys, values, what a filter matches) are
``spool.security.quota_ops``'. ``validate_only`` checks and writes nothing. A single
node writes its metadata store; a cluster broker forwards AlterClientQuotas to the
active controller, which commits the records through Raft
(``handlers.security_controller``). Describing answers from ``broker.security_image``;
the quota manager (``spool.security.quotas``) reads the same image.
"""

from __future__ import annotations

from spool.broker.authz import allowed_cluster
from spool.broker.forwarding import change_security
from spool.broker.registry import handles
from spool.protocol._generated import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from spool.protocol._generated import alter_client_quotas_response as acq
from spool.protocol._generated import describe_client_quotas_response as dcq
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.security import quota_ops

NOT_AUTHORIZED = "Cluster authorization failed."


def alterations_of(req: AlterClientQuotasRequest) -> list[quota_ops.Alteration]:
    return [quota_ops.Alteration([(e.entity_type, e.entity_name) for e in entry.entity],
                                 [quota_ops.QuotaOp(o.key, o.value, o.remove)
                                  for o in entry.ops])
            for entry in req.entries]


def alter_response(results) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        acq.EntryData(error_code=0 if e is None else e.code,
                      error_message=None if e is None else e.message,
                      entity=[acq.EntityData(entity_type=t, entity_name=n) for t, n in entity])
        for entity, e in results])


def alter_error(req: AlterClientQuotasRequest, error: KafkaError) -> AlterClientQuotasResponse:
    """Every entry of the request with ``error`` (Kafka's getErrorResponse)."""
    return alter_response([([(e.entity_type, e.entity_name) for e in entry.entity], error)
                           for entry in req.entries])


@handles(48, 0, 1)
async def describe_client_quotas(ctx, req: DescribeClientQuotasRequest
                                 ) -> DescribeClientQuotasResponse:
    if not allowed_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=NOT_AUTHORIZED, entries=None)
    components = [quota_ops.Component(c.entity_type, c.match_type, c.match)
                  for c in req.components]
    try:
        found = quota_ops.describe_quotas(ctx.broker.security_image, components,
                                          bool(req.strict))
    except KafkaError as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=e.code,
                                            error_message=e.message, entries=None)
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=0, error_message=None, entries=[
            dcq.EntryData(
                entity=[dcq.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                values=[dcq.ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in found])


@handles(49, 0, 1)
async def alter_client_quotas(ctx, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not allowed_cluster(ctx, AclOperation.ALTER_CONFIGS):
        return alter_error(req, KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                                           NOT_AUTHORIZED))
    alterations = alterations_of(req)

    def plan(image):
        records, results = quota_ops.alter_quotas(image, alterations)
        return ([] if req.validate_only else records), alter_response(results)

    return await change_security(ctx, req, plan, alter_error)
