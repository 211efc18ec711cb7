"""InitProducerId (22): a producer id and epoch for idempotent and transactional producers.

Advertised 0-6. Without a ``transactional_id`` every call gets a fresh
producer id with epoch 0, as Kafka answers (also when a v3+ client passes its
current id and epoch to bump it after an error, KIP-360: a new id is the
bumped identity). With one, the transaction coordinator answers (fencing the
previous instance, see ``spool.broker.txn_runtime``). v5 only adds
TRANSACTION_ABORTABLE to the errors a client may get. v6 (KIP-939) asks for
two-phase commit: Spool has none, so ``enable2_pc`` is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and ``keep_prepared_txn`` UNSUPPORTED_VERSION, as
Kafka answers with ``transaction.two.phase.commit.enable`` off; the ongoing
transaction fields stay -1.

With an authorizer (``spool.broker.authz``), as Kafka: a transactional id needs WRITE on
it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
IDEMPOTENT_WRITE on the cluster or, KIP-679, WRITE on some topic (else
CLUSTER_AUTHORIZATION_FAILED). Checked first; nothing is allocated when refused.
"""

from __future__ import annotations

from spool.broker.authz import allowed, allowed_by_resource_type, allowed_cluster
from spool.broker.registry import handles
from spool.protocol._generated import InitProducerIdRequest, InitProducerIdResponse
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError


@handles(22, 0, 6)
async def init_producer_id(ctx, req: InitProducerIdRequest) -> InitProducerIdResponse:
    broker = ctx.broker
    try:
        if broker.authorizer is not None:
            _authorize(ctx, req.transactional_id)
        if ctx.api_version >= 6:
            _check_two_phase_commit(req)
        if req.transactional_id is None:
            pid, epoch = broker.producer_ids.next_id(), 0
        else:
            await broker.transactions.topic.ensure()  # created in the executor, not the loop
            pid, epoch = await broker.transactions.init_producer_id(
                req.transactional_id, req.transaction_timeout_ms,
                req.producer_id if ctx.api_version >= 3 else -1,
                req.producer_epoch if ctx.api_version >= 3 else -1)
    except KafkaError as e:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=e.code,
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                  producer_epoch=epoch)


def _check_two_phase_commit(req: InitProducerIdRequest) -> None:
    if req.enable2_pc:
        raise KafkaError(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         "two-phase commit (KIP-939) is not enabled on this broker")
    if req.keep_prepared_txn:
        raise KafkaError(Errors.UNSUPPORTED_VERSION, "keepPreparedTxn is not supported")


def _authorize(ctx, transactional_id: str | None) -> None:
    if transactional_id is not None:
        if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            raise KafkaError(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not (allowed_cluster(ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False)
              or allowed_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        raise KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED)
