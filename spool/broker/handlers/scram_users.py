"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0.

As Kafka's ``KafkaApis``/``ControllerApis``: describing needs DESCRIBE on the cluster
(else the top-level CLUSTER_AUTHORIZATION_FAILED, and each named user's result too),
altering needs ALTER (else every user of the request, sorted, gets it). No authorizer:
allowed. The rules (duplicates, mechanisms, iterations, missing credentials) are
``spool.security.scram_ops``'. A single node writes its metadata store; a cluster
broker forwards AlterUserScramCredentials to the active controller, which commits the
records through Raft (``handlers.security_controller``). Describing answers from the
broker's ``security_image``: mechanisms and iterations, never salts or keys.
"""

from __future__ import annotations

from spool.broker.authz import allowed_cluster
from spool.broker.forwarding import change_security
from spool.broker.registry import handles
from spool.protocol._generated import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from spool.protocol._generated.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from spool.protocol._generated.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.security import scram_ops

NOT_AUTHORIZED = "Cluster authorization failed."


def changes_of(req: AlterUserScramCredentialsRequest
               ) -> tuple[list[scram_ops.Deletion], list[scram_ops.Upsertion]]:
    return ([scram_ops.Deletion(d.name, d.mechanism) for d in req.deletions],
            [scram_ops.Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                                 bytes(u.salted_password)) for u in req.upsertions])


def alter_response(results: list[tuple[str, KafkaError | None]]
                   ) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        AlterUserScramCredentialsResult(user=user, error_code=0 if e is None else e.code,
                                        error_message=None if e is None else e.message)
        for user, e in results])


def alter_error(req: AlterUserScramCredentialsRequest, error: KafkaError
                ) -> AlterUserScramCredentialsResponse:
    """Every user of the request, sorted, with ``error`` (Kafka's getErrorResponse)."""
    users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
    return alter_response([(u, error) for u in users])


@handles(50, 0, 0)
async def describe_user_scram_credentials(ctx, req: DescribeUserScramCredentialsRequest
                                          ) -> DescribeUserScramCredentialsResponse:
    if not allowed_cluster(ctx, AclOperation.DESCRIBE):
        code = Errors.CLUSTER_AUTHORIZATION_FAILED
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=code, error_message=NOT_AUTHORIZED, results=[
                DescribeUserScramCredentialsResult(user="", error_code=code,
                                                   error_message=NOT_AUTHORIZED,
                                                   credential_infos=[])
                for _ in req.users or ()])
    users = None if req.users is None else [u.name for u in req.users]
    described = scram_ops.describe_credentials(ctx.broker.security_image, users)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=[
            DescribeUserScramCredentialsResult(
                user=d.user, error_code=0 if d.error is None else d.error.code,
                error_message=None if d.error is None else d.error.message,
                credential_infos=[CredentialInfo(mechanism=m, iterations=i)
                                  for m, i in d.credentials])
            for d in described])


@handles(51, 0, 0)
async def alter_user_scram_credentials(ctx, req: AlterUserScramCredentialsRequest
                                       ) -> AlterUserScramCredentialsResponse:
    if not allowed_cluster(ctx, AclOperation.ALTER):
        return alter_error(req, KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                                           NOT_AUTHORIZED))
    deletions, upsertions = changes_of(req)

    def plan(image):
        records, results = scram_ops.alter_credentials(image, deletions, upsertions)
        return records, alter_response(results)

    return await change_security(ctx, req, plan, alter_error)
