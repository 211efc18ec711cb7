"""The active controller's side of CreateAcls (30), DeleteAcls (31),
AlterUserScramCredentials (51) and AlterClientQuotas (49), on the controller listener.

A cluster broker checks the client's ACLs (and, for ACLs, that an authorizer is
configured), then forwards the request here (``spool.broker.forwarding``). The
active controller computes the records from its image (``QuorumController``'s
``create_acls``, ``delete_acls``, ``alter_user_scram_credentials``,
``alter_client_quotas``: ``spool.security``'s rules), commits them through Raft and
answers once they are committed: every broker then replays them into its
``security_image``. A node that is not the active controller answers NOT_CONTROLLER
(retriable: the forwarding broker tries the next one). A failure of the whole write
(POLICY_VIOLATION for too many records, NOT_CONTROLLER when leadership is lost) is
each entry's error.

Authorization (Kafka's ControllerApis): a caller allowed CLUSTER_ACTION (a broker that
forwarded the request after checking its client: Spool has no Envelope) is trusted;
anyone else, such as a client on a controller listener, needs ALTER on the cluster
(CreateAcls, DeleteAcls, AlterUserScramCredentials) or ALTER_CONFIGS (AlterClientQuotas),
else every entry is CLUSTER_AUTHORIZATION_FAILED and nothing is written
(``spool.broker.admin_authz``).
"""

from __future__ import annotations

from spool.broker.admin_authz import cluster_allowed, refused, trusted_forwarder
from spool.broker.handlers import acls, client_quotas, scram_users
from spool.broker.registry import CONTROLLER_PLANE, handles
from spool.cluster.ops import ControllerResult
from spool.protocol._generated import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError


async def _write(ctx, compute, answer, fail, required: AclOperation = AclOperation.ALTER):
    """Commit ``compute(controller)``'s records; ``answer(reply)`` once committed, or
    ``fail(KafkaError)`` for the whole request (a caller neither trusted nor allowed
    ``required`` on the cluster: module doc)."""
    if not (trusted_forwarder(ctx) or cluster_allowed(ctx, required)):
        return fail(refused(Errors.CLUSTER_AUTHORIZATION_FAILED))
    quorum = getattr(ctx.broker, "quorum", None)
    runtime = None if quorum is None else quorum.controller
    if runtime is None:
        return fail(KafkaError(Errors.NOT_CONTROLLER, "this node runs no controller"))

    def op(c, _offset, _now) -> ControllerResult:
        try:
            result = compute(c)
        except KafkaError as e:
            return ControllerResult([], fail(e))
        return ControllerResult(result.records, answer(result.reply))

    try:
        return await runtime.write(op)
    except KafkaError as e:
        return fail(e)


@handles(30, 1, 3, listeners=(CONTROLLER_PLANE,))
async def create_acls_on_controller(ctx, req: CreateAclsRequest) -> CreateAclsResponse:
    bindings = acls.bindings_of(req)
    return await _write(ctx, lambda c: c.create_acls(bindings), acls.create_response,
                        lambda e: acls.create_error(req, e))


@handles(31, 1, 3, listeners=(CONTROLLER_PLANE,))
async def delete_acls_on_controller(ctx, req: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = acls.filters_of(req)
    return await _write(ctx, lambda c: c.delete_acls(filters), acls.delete_response,
                        lambda e: acls.delete_error(req, e))


@handles(51, 0, 0, listeners=(CONTROLLER_PLANE,))
async def alter_user_scram_credentials_on_controller(
        ctx, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    deletions, upsertions = scram_users.changes_of(req)
    return await _write(ctx, lambda c: c.alter_user_scram_credentials(deletions, upsertions),
                        scram_users.alter_response, lambda e: scram_users.alter_error(req, e))


@handles(49, 0, 1, listeners=(CONTROLLER_PLANE,))
async def alter_client_quotas_on_controller(ctx, req: AlterClientQuotasRequest
                                            ) -> AlterClientQuotasResponse:
    alterations = client_quotas.alterations_of(req)
    return await _write(
        ctx, lambda c: c.alter_client_quotas(alterations, validate_only=bool(req.validate_only)),
        client_quotas.alter_response, lambda e: client_quotas.alter_error(req, e),
        AclOperation.ALTER_CONFIGS)
