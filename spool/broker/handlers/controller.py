"""The controller's APIs on controller listeners (Kafka's ``ControllerApis``).

BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AllocateProducerIds,
CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, AlterPartition (a leader's ISR change,
``spool.cluster.alter_partition``), ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments (a read, run as a write without records so only
the active controller answers): each one is one write of this node's
``ControllerRuntime`` (computed from the committed image, appended through
Raft, answered once committed and replayed: ``spool.broker.controller_runtime``).
A node that is not the active controller, or that loses leadership before
the write commits, answers NOT_CONTROLLER in every place the response has
an error code (Kafka's error; clients and brokers then find the new
controller and retry).

Authorization, as Kafka's ControllerApis (``spool.broker.admin_authz``): what brokers send
(BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds) needs
CLUSTER_ACTION on the cluster, UnregisterBroker, ElectLeaders and
AlterPartitionReassignments ALTER, ListPartitionReassignments DESCRIBE; refused, the
request is answered CLUSTER_AUTHORIZATION_FAILED wherever it has an error code, and
nothing is written. ElectLeaders, the reassignments, CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs and IncrementalAlterConfigs come from brokers that forward
them after checking the client (Spool has no Envelope): a caller allowed CLUSTER_ACTION is
not checked again (a broker need not hold ALTER itself); anyone else is checked here, per
topic or resource where the broker checks so.
"""

from __future__ import annotations

import logging

from spool.broker import admin_authz
from spool.broker.admin_authz import MESSAGES, cluster_allowed, trusted_forwarder
from spool.broker.forwarding import alter_reassignments_error, elect_leaders_error
from spool.broker.handlers.partition_admin import elect_leaders_refused, list_reassignments_refused
from spool.broker.registry import CONTROLLER_PLANE, handles
from spool.cluster import controller_apis as apis
from spool.cluster.ops import ControllerResult
from spool.protocol._generated import (
    AllocateProducerIdsResponse,
    AlterConfigsResponse,
    AlterPartitionResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsResponse,
    UnregisterBrokerResponse,
)
from spool.protocol._generated.alter_configs_response import (
    AlterConfigsResourceResponse as AlterResult,
)
from spool.protocol._generated.create_partitions_response import CreatePartitionsTopicResult
from spool.protocol._generated.create_topics_response import CreatableTopicResult
from spool.protocol._generated.delete_topics_response import DeletableTopicResult
from spool.protocol._generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalAlterResult,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.util.logs import fields

_CONTROLLER = (CONTROLLER_PLANE,)
_O = AclOperation
REFUSED = Errors.CLUSTER_AUTHORIZATION_FAILED

log = logging.getLogger(__name__)


def _allowed(ctx, op: AclOperation) -> bool:
    """A trusted forwarder (CLUSTER_ACTION: it checked its client), or a caller allowed
    ``op`` on the cluster."""
    return trusted_forwarder(ctx) or cluster_allowed(ctx, op)


async def _write(ctx, op, refuse, required: AclOperation | None = None):
    """Run ``op`` as one controller write; ``refuse(code, message)`` builds the answer when
    it cannot run (not the active controller, leadership lost) or the caller may not
    ``required`` the cluster (a trusted forwarder may: module doc)."""
    if required is not None and not _allowed(ctx, required):
        return refuse(REFUSED, MESSAGES[REFUSED])
    quorum = getattr(ctx.broker, "quorum", None)
    runtime = None if quorum is None else quorum.controller
    if runtime is None:
        return refuse(Errors.NOT_CONTROLLER, "this node runs no controller")
    try:
        return await runtime.write(op)
    except KafkaError as e:
        return refuse(e.code, e.message)


@handles(62, 0, 4, listeners=_CONTROLLER)
async def broker_registration(ctx, req):
    return await _write(
        ctx, lambda c, offset, now: apis.broker_registration(c, req, offset, now),
        lambda code, _m: BrokerRegistrationResponse(error_code=code, broker_epoch=-1),
        _O.CLUSTER_ACTION)


@handles(63, 0, 1, listeners=_CONTROLLER)
async def broker_heartbeat(ctx, req):
    return await _write(
        ctx, lambda c, _offset, now: apis.broker_heartbeat(c, req, now),
        lambda code, _m: BrokerHeartbeatResponse(error_code=code, is_caught_up=False,
                                                 is_fenced=True, should_shut_down=False),
        _O.CLUSTER_ACTION)


@handles(64, 0, 0, listeners=_CONTROLLER)
async def unregister_broker(ctx, req):
    return await _write(
        ctx, lambda c, _offset, _now: apis.unregister_broker(c, req),
        lambda code, msg: UnregisterBrokerResponse(error_code=code, error_message=msg),
        _O.ALTER)


@handles(67, 0, 0, listeners=_CONTROLLER)
async def allocate_producer_ids(ctx, req):
    return await _write(
        ctx, lambda c, _offset, _now: apis.allocate_producer_ids(c, req),
        lambda code, _m: AllocateProducerIdsResponse(error_code=code, producer_id_start=-1,
                                                     producer_id_len=0),
        _O.CLUSTER_ACTION)


async def _checked(ctx, req, field: str, refusals, empty, results_field: str, write):
    """A forwarded API: a trusted forwarder's request runs whole; anyone else's only for the
    items not refused (module doc)."""
    if trusted_forwarder(ctx):
        return await write(req)
    return await admin_authz.run_allowed(req, field, refusals(), empty, results_field, write)


@handles(19, 2, 7, listeners=_CONTROLLER)
async def create_topics(ctx, req):
    def write(sub):
        return _write(
            ctx, lambda c, _offset, _now: c.create_topics(sub),
            lambda code, msg: CreateTopicsResponse(topics=[
                CreatableTopicResult(name=t.name, error_code=code, error_message=msg,
                                     num_partitions=-1, replication_factor=-1, configs=None)
                for t in sub.topics]))

    if trusted_forwarder(ctx):
        return _log_created(req, await write(req))
    refusals, describable = admin_authz.create_topics_checks(ctx, req)
    reply = await admin_authz.run_allowed(req, "topics", refusals, CreateTopicsResponse(),
                                          "topics", write)
    admin_authz.hide_configs(reply.topics, describable)
    return _log_created(req, reply)


def _log_created(req, reply):
    """One line per topic this (active) controller created."""
    if not req.validate_only:
        for t in reply.topics:
            if t.error_code == 0:
                log.info("created topic %s with %d partitions, replication factor %d "
                         "(topic id %s)", t.name, t.num_partitions, t.replication_factor,
                         t.topic_id, extra=fields(topic=t.name, partitions=t.num_partitions,
                                                  replication_factor=t.replication_factor,
                                                  topic_id=str(t.topic_id)))
    return reply


def _log_deleted(reply):
    for t in reply.responses:
        if t.error_code == 0:
            log.info("deleted topic %s (topic id %s)", t.name, t.topic_id,
                     extra=fields(topic=t.name, topic_id=str(t.topic_id)))
    return reply


@handles(20, 1, 6, listeners=_CONTROLLER)
async def delete_topics(ctx, req):
    version = ctx.api_version
    field, targets = admin_authz.delete_topics_targets(req, version)

    def write(sub):
        def refuse(code, msg):
            if version >= 6:
                return DeleteTopicsResponse(responses=[
                    DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code,
                                         error_message=msg) for t in sub.topics])
            return DeleteTopicsResponse(responses=[
                DeletableTopicResult(name=n, error_code=code, error_message=msg)
                for n in sub.topic_names])

        return _write(ctx, lambda c, _offset, _now: apis.delete_topics(c, sub, version), refuse)

    return _log_deleted(await _checked(
        ctx, req, field, lambda: admin_authz.delete_topics_refusals(ctx, targets),
        DeleteTopicsResponse(), "responses", write))


@handles(37, 0, 3, listeners=_CONTROLLER)
async def create_partitions(ctx, req):
    def write(sub):
        return _write(
            ctx, lambda c, _offset, _now: c.create_partitions(sub),
            lambda code, msg: CreatePartitionsResponse(results=[
                CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=msg)
                for t in sub.topics]))

    return await _checked(ctx, req, "topics",
                          lambda: admin_authz.create_partitions_refusals(ctx, req),
                          CreatePartitionsResponse(), "results", write)


@handles(33, 0, 2, listeners=_CONTROLLER)
async def alter_configs(ctx, req):
    def write(sub):
        return _write(
            ctx, lambda c, _offset, _now: c.alter_configs(sub),
            lambda code, msg: AlterConfigsResponse(responses=[
                AlterResult(error_code=code, error_message=msg, resource_type=r.resource_type,
                            resource_name=r.resource_name) for r in sub.resources]))

    return await _checked(ctx, req, "resources",
                          lambda: admin_authz.config_refusals(ctx, req, _O.ALTER_CONFIGS,
                                                              AlterResult),
                          AlterConfigsResponse(), "responses", write)


@handles(44, 0, 1, listeners=_CONTROLLER)
async def incremental_alter_configs(ctx, req):
    def write(sub):
        return _write(
            ctx, lambda c, _offset, _now: c.incremental_alter_configs(sub),
            lambda code, msg: IncrementalAlterConfigsResponse(responses=[
                IncrementalAlterResult(error_code=code, error_message=msg,
                                       resource_type=r.resource_type,
                                       resource_name=r.resource_name) for r in sub.resources]))

    return await _checked(ctx, req, "resources",
                          lambda: admin_authz.config_refusals(ctx, req, _O.ALTER_CONFIGS,
                                                              IncrementalAlterResult),
                          IncrementalAlterConfigsResponse(), "responses", write)


@handles(43, 0, 2, listeners=_CONTROLLER)
async def elect_leaders(ctx, req):
    if not _allowed(ctx, _O.ALTER):
        return elect_leaders_refused(req)
    return await _write(ctx, lambda c, _offset, _now: c.elect_leaders(req),
                        lambda code, msg: elect_leaders_error(req, code, msg))


@handles(45, 0, 1, listeners=_CONTROLLER)
async def alter_partition_reassignments(ctx, req):
    return await _write(ctx, lambda c, _offset, _now: c.alter_partition_reassignments(req),
                        lambda code, msg: alter_reassignments_error(req, code, msg), _O.ALTER)


@handles(46, 0, 0, listeners=_CONTROLLER)
async def list_partition_reassignments(ctx, req):
    if not _allowed(ctx, _O.DESCRIBE):
        return list_reassignments_refused(req)
    return await _write(
        ctx, lambda c, _offset, _now: ControllerResult([], c.list_partition_reassignments(req)),
        lambda code, msg: ListPartitionReassignmentsResponse(error_code=code, error_message=msg,
                                                             topics=[]))


@handles(56, 0, 3, listeners=_CONTROLLER)
async def alter_partition(ctx, req):
    version = ctx.api_version
    return await _write(
        ctx, lambda c, _offset, _now: c.alter_partition(req, version),
        lambda code, _m: AlterPartitionResponse(throttle_time_ms=0, error_code=code, topics=[]),
        _O.CLUSTER_ACTION)
