"""Wire requests in, wire responses out: the controller's APIs as Kafka's ``ControllerApis``.

Each function takes the generated request message (and what the shell knows: the
time, the offset the next record will get), asks the ``QuorumController`` for the
write and returns a ``ControllerResult`` whose reply is the generated response
message: errors the controller raises become the response's ``error_code`` (and
``error_message`` where the response has one), with no records. The caller appends
``result.records``, replays them once committed, then sends ``result.reply``.

    broker_registration(c, BrokerRegistrationRequest, next_offset, now_ms)
    broker_heartbeat(c, BrokerHeartbeatRequest, now_ms)
    unregister_broker(c, UnregisterBrokerRequest)
    allocate_producer_ids(c, AllocateProducerIdsRequest)
    delete_topics(c, DeleteTopicsRequest, version)   # v6+ by name or id, else names

CreateTopics, CreatePartitions, AlterConfigs and IncrementalAlterConfigs take their
request as they are: ``c.create_topics(req)`` and so on; AlterPartition takes its
version too: ``c.alter_partition(req, version)``.
"""

from __future__ import annotations

from spool.cluster.controller import QuorumController
from spool.cluster.image import Endpoint
from spool.cluster.ops import ControllerResult
from spool.protocol._generated import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from spool.protocol.errors import KafkaError


def broker_registration(c: QuorumController, req: BrokerRegistrationRequest, next_offset: int,
                        now_ms: int) -> ControllerResult[BrokerRegistrationResponse]:
    """BrokerRegistration (62). ``next_offset``: where the first record will land."""
    try:
        result = c.register_broker(
            broker_id=req.broker_id, cluster_id=req.cluster_id,
            incarnation_id=req.incarnation_id,
            listeners=[Endpoint(x.name, x.host, x.port, x.security_protocol)
                       for x in req.listeners],
            rack=req.rack,
            features=[(f.name, f.min_supported_version, f.max_supported_version)
                      for f in req.features],
            next_offset=next_offset, now_ms=now_ms)
    except KafkaError as e:
        return ControllerResult([], BrokerRegistrationResponse(
            throttle_time_ms=0, error_code=e.code, broker_epoch=-1))
    return ControllerResult(result.records, BrokerRegistrationResponse(
        throttle_time_ms=0, error_code=0, broker_epoch=result.reply.broker_epoch))


def broker_heartbeat(c: QuorumController, req: BrokerHeartbeatRequest, now_ms: int
                     ) -> ControllerResult[BrokerHeartbeatResponse]:
    """BrokerHeartbeat (63)."""
    try:
        result = c.heartbeat(broker_id=req.broker_id, broker_epoch=req.broker_epoch,
                             want_fence=req.want_fence, want_shutdown=req.want_shut_down,
                             current_metadata_offset=req.current_metadata_offset,
                             now_ms=now_ms)
    except KafkaError as e:
        return ControllerResult([], BrokerHeartbeatResponse(
            throttle_time_ms=0, error_code=e.code, is_caught_up=False, is_fenced=True,
            should_shut_down=False))
    r = result.reply
    return ControllerResult(result.records, BrokerHeartbeatResponse(
        throttle_time_ms=0, error_code=0, is_caught_up=r.is_caught_up, is_fenced=r.is_fenced,
        should_shut_down=r.should_shut_down))


def unregister_broker(c: QuorumController, req: UnregisterBrokerRequest
                      ) -> ControllerResult[UnregisterBrokerResponse]:
    """UnregisterBroker (64)."""
    try:
        result = c.unregister_broker(req.broker_id)
    except KafkaError as e:
        return ControllerResult([], UnregisterBrokerResponse(
            throttle_time_ms=0, error_code=e.code, error_message=e.message))
    return ControllerResult(result.records, UnregisterBrokerResponse(
        throttle_time_ms=0, error_code=0, error_message=None))


def allocate_producer_ids(c: QuorumController, req: AllocateProducerIdsRequest
                          ) -> ControllerResult[AllocateProducerIdsResponse]:
    """AllocateProducerIds (67)."""
    try:
        result = c.allocate_producer_ids(req.broker_id, req.broker_epoch)
    except KafkaError as e:
        return ControllerResult([], AllocateProducerIdsResponse(
            throttle_time_ms=0, error_code=e.code, producer_id_start=-1, producer_id_len=0))
    block = result.reply
    return ControllerResult(result.records, AllocateProducerIdsResponse(
        throttle_time_ms=0, error_code=0, producer_id_start=block.first_producer_id,
        producer_id_len=block.size))


def delete_topics(c: QuorumController, req: DeleteTopicsRequest, version: int
                  ) -> ControllerResult[DeleteTopicsResponse]:
    """DeleteTopics (20): v6+ names topics by name or id, older versions by name."""
    if version >= 6:
        targets = [(t.name, None if t.name is not None else t.topic_id) for t in req.topics]
    else:
        targets = [(n, None) for n in req.topic_names]
    return c.delete_topics(targets)
