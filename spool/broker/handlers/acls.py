"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-3: the ACLs of the metadata log.

As Kafka's ``AclApis``: DescribeAcls needs DESCRIBE on the cluster, CreateAcls and
DeleteAcls ALTER (else CLUSTER_AUTHORIZATION_FAILED: DescribeAcls' top-level error,
every creation's or filter's result for the others). Without an authorizer
(``authorizer.class.name`` unset) the three answer SECURITY_DISABLED, as Kafka's do.
The rules of creating, matching and deleting are ``spool.security.acl_ops``'.

Where the ACLs live decides who writes them (``UpdateFeatures``' pattern): a single
node writes its metadata store (``Broker.change_security``); a cluster broker forwards
CreateAcls and DeleteAcls to the active controller (``spool.broker.forwarding``), which
commits the records through Raft (``handlers.security_controller``); every broker
then learns them from the metadata log, the forwarding one before it answers
(``forward_and_catch_up``). DescribeAcls answers from the broker's own
``security_image``.
"""

from __future__ import annotations

from spool.broker.authz import allowed_cluster
from spool.broker.forwarding import change_security
from spool.broker.registry import handles
from spool.protocol._generated import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from spool.protocol._generated.create_acls_response import AclCreationResult
from spool.protocol._generated.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
)
from spool.protocol._generated.describe_acls_response import AclDescription, DescribeAclsResource
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.security import acl_ops
from spool.security.acls import AclBinding

NOT_AUTHORIZED = "Cluster authorization failed."
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"


def bindings_of(req: CreateAclsRequest) -> list[AclBinding]:
    return [acl_ops.binding_of(c.resource_type, c.resource_name, c.resource_pattern_type,
                               c.principal, c.host, c.operation, c.permission_type)
            for c in req.creations]


def filters_of(req: DeleteAclsRequest) -> list[acl_ops.AclFilter]:
    return [acl_ops.filter_of(f.resource_type_filter, f.resource_name_filter,
                              f.pattern_type_filter, f.principal_filter, f.host_filter,
                              f.operation, f.permission_type) for f in req.filters]


def create_response(results: list[KafkaError | None]) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        AclCreationResult(error_code=0, error_message=None) if e is None
        else AclCreationResult(error_code=e.code, error_message=e.message) for e in results])


def create_error(req: CreateAclsRequest, error: KafkaError) -> CreateAclsResponse:
    return create_response([error] * len(req.creations))


def delete_response(results: list[KafkaError | list[AclBinding]]) -> DeleteAclsResponse:
    out = []
    for r in results:
        if isinstance(r, KafkaError):
            out.append(DeleteAclsFilterResult(error_code=r.code, error_message=r.message,
                                              matching_acls=[]))
        else:
            out.append(DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
                DeleteAclsMatchingAcl(
                    error_code=0, error_message=None, resource_type=b.resource_type,
                    resource_name=b.resource_name, pattern_type=b.pattern_type,
                    principal=b.principal, host=b.host, operation=b.operation,
                    permission_type=b.permission_type) for b in r]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=out)


def delete_error(req: DeleteAclsRequest, error: KafkaError) -> DeleteAclsResponse:
    return delete_response([error] * len(req.filters))


def _describe_error(code: int, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                resources=[])


def _refusal(ctx, op: AclOperation, no_authorizer: str) -> KafkaError | None:
    """The error every part of the request gets, if the request may not run at all."""
    if not allowed_cluster(ctx, op):
        return KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED)
    if ctx.broker.authorizer is None:
        return KafkaError(Errors.SECURITY_DISABLED, no_authorizer)
    return None


@handles(29, 1, 3)
async def describe_acls(ctx, req: DescribeAclsRequest) -> DescribeAclsResponse:
    refused = _refusal(ctx, AclOperation.DESCRIBE, NO_AUTHORIZER_DESCRIBE)
    if refused is not None:
        return _describe_error(refused.code, refused.message)
    f = acl_ops.filter_of(req.resource_type_filter, req.resource_name_filter,
                          req.pattern_type_filter, req.principal_filter, req.host_filter,
                          req.operation, req.permission_type)
    message = f.unknown()
    if message is not None:
        return _describe_error(Errors.INVALID_REQUEST, message)
    matched = [b for _, b in acl_ops.matching(ctx.broker.security_image, f)]
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, resources=[
            DescribeAclsResource(resource_type=rtype, resource_name=name, pattern_type=ptype,
                                 acls=[AclDescription(principal=b.principal, host=b.host,
                                                      operation=b.operation,
                                                      permission_type=b.permission_type)
                                       for b in acls])
            for (rtype, name, ptype), acls in acl_ops.group_by_resource(matched)])


@handles(30, 1, 3)
async def create_acls(ctx, req: CreateAclsRequest) -> CreateAclsResponse:
    refused = _refusal(ctx, AclOperation.ALTER, NO_AUTHORIZER)
    if refused is not None:
        return create_error(req, refused)
    bindings = bindings_of(req)
    return await change_security(
        ctx, req, lambda image: _created(acl_ops.create_acls(image, bindings)), create_error)


def _created(result):
    records, results = result
    return records, create_response(results)


@handles(31, 1, 3)
async def delete_acls(ctx, req: DeleteAclsRequest) -> DeleteAclsResponse:
    refused = _refusal(ctx, AclOperation.ALTER, NO_AUTHORIZER)
    if refused is not None:
        return delete_error(req, refused)
    filters = filters_of(req)
    return await change_security(
        ctx, req, lambda image: _deleted(acl_ops.delete_acls(image, filters)), delete_error)


def _deleted(result):
    records, results = result
    return records, delete_response(results)
