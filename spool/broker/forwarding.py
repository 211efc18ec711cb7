"""Admin requests that change metadata, forwarded to the active controller (cluster mode).

On a broker in a cluster (``broker.view.clustered``), CreateTopics (19),
DeleteTopics (20), CreatePartitions (37), AlterConfigs (33),
IncrementalAlterConfigs (44), ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46), UpdateFeatures (57), CreateAcls (30), DeleteAcls (31),
AlterUserScramCredentials (51) and AlterClientQuotas (49) are the controller's to
decide, as in Kafka (its
``ForwardingManager``): the handler sends the request, at the client's version,
over the ``ControllerChannel`` to the active controller's controller listener,
and answers with the controller's reply unchanged. The controller validates,
places replicas, commits the records; this broker (like every other) learns the
result from the metadata log.

No controller known, or the one known not answering (killed: the election
has not named the next yet), is retried until ``request.timeout.ms`` is spent
(``ControllerChannel.send_until``, Kafka's channel manager); then every topic
or resource of the request gets REQUEST_TIMED_OUT (retriable), as Kafka's
forwarding answers a timeout. A controller that lost leadership meanwhile
answers NOT_CONTROLLER itself; that reply goes to the client as it is
(retriable: the client retries, by then this broker knows the new leader).

Authorization. Kafka's broker wraps what it forwards in an Envelope that carries the
client's principal, and the controller checks that principal. Spool forwards the request
itself, over the broker's own connection, so the controller cannot know the client: the
handler checks the client's ACLs BEFORE forwarding and sends only what is allowed
(``spool.broker.admin_authz``; the refusals are put back in request order), and that check
is the one that counts. The controller trusts a caller allowed CLUSTER_ACTION (a broker)
as Kafka trusts an Envelope's sender, and checks anyone else itself.

``forward_and_catch_up`` (the security writes: CreateAcls, DeleteAcls,
AlterUserScramCredentials, AlterClientQuotas) then asks the active controller for its
high watermark (DescribeQuorum) and waits, up to ``request.timeout.ms``, until this
broker has applied the metadata up to it: a client that writes through a broker and
then describes through the same broker reads its own write (Kafka's broker answers
before its image has the records; the wait costs one round trip per admin write).

``create_topic_via_controller`` is the same path for topics the broker creates
on its own: auto-creation (Metadata) and the internal topics of the
coordinators.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from spool.broker.controller_channel import ControllerUnavailable
from spool.protocol._generated import (
    AlterClientQuotasResponse,
    AlterConfigsResponse,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsResponse,
    CreateAclsResponse,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsResponse,
    DeleteTopicsResponse,
    DescribeQuorumRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsResponse,
    UpdateFeaturesResponse,
)
from spool.protocol._generated import alter_client_quotas_response as acq
from spool.protocol._generated import alter_partition_reassignments_response as aprr
from spool.protocol._generated import describe_quorum_request as dq_req
from spool.protocol._generated import elect_leaders_response as elr
from spool.protocol._generated.alter_configs_response import AlterConfigsResourceResponse
from spool.protocol._generated.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from spool.protocol._generated.create_acls_response import AclCreationResult
from spool.protocol._generated.create_partitions_response import CreatePartitionsTopicResult
from spool.protocol._generated.create_topics_request import CreatableTopic, CreatableTopicConfig
from spool.protocol._generated.create_topics_response import CreatableTopicResult
from spool.protocol._generated.delete_acls_response import DeleteAclsFilterResult
from spool.protocol._generated.delete_topics_response import DeletableTopicResult
from spool.protocol._generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from spool.protocol.errors import Errors, KafkaError

log = logging.getLogger("spool.broker.forwarding")

CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = (
    19, 20, 33, 37, 44)
ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 43, 45, 46
UPDATE_FEATURES = 57
DESCRIBE_QUORUM = 55
METADATA_TOPIC = "__cluster_metadata"
CREATE_ACLS, DELETE_ACLS, ALTER_CLIENT_QUOTAS, ALTER_USER_SCRAM_CREDENTIALS = 30, 31, 49, 51
CREATE_TOPICS_VERSION = 7


def elect_leaders_error(req: Any, code: int, message: str | None) -> ElectLeadersResponse:
    """ElectLeaders answered ``code`` for every partition it names (top level if none)."""
    if req.topic_partitions is None:
        return ElectLeadersResponse(throttle_time_ms=0, error_code=code,
                                    replica_election_results=[])
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        elr.ReplicaElectionResult(topic=t.topic, partition_result=[
            elr.PartitionResult(partition_id=p, error_code=code, error_message=message)
            for p in t.partitions]) for t in req.topic_partitions])


def alter_reassignments_error(req: Any, code: int, message: str | None
                              ) -> AlterPartitionReassignmentsResponse:
    """AlterPartitionReassignments refused whole: the top-level error, as Kafka's
    ``getErrorResponse`` (and each partition too, for clients that read only those)."""
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message,
        allow_replication_factor_change=req.allow_replication_factor_change,
        responses=[aprr.ReassignableTopicResponse(name=t.name, partitions=[
            aprr.ReassignablePartitionResponse(partition_index=p.partition_index,
                                               error_code=code, error_message=message)
            for p in t.partitions]) for t in req.topics])


def _error_response(api_key: int, version: int, req: Any, code: int, message: str) -> Any:
    if api_key == CREATE_TOPICS:
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            CreatableTopicResult(name=t.name, error_code=code, error_message=message,
                                 num_partitions=-1, replication_factor=-1, configs=None)
            for t in req.topics])
    if api_key == DELETE_TOPICS:
        targets = ([(t.name, t.topic_id) for t in req.topics] if version >= 6
                   else [(n, None) for n in req.topic_names])
        return DeleteTopicsResponse(throttle_time_ms=0, responses=[
            DeletableTopicResult(name=n, error_code=code, error_message=message,
                                 **({} if tid is None else {"topic_id": tid}))
            for n, tid in targets])
    if api_key == CREATE_PARTITIONS:
        return CreatePartitionsResponse(throttle_time_ms=0, results=[
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in req.topics])
    if api_key == ALTER_CONFIGS:
        return AlterConfigsResponse(throttle_time_ms=0, responses=[
            AlterConfigsResourceResponse(error_code=code, error_message=message,
                                         resource_type=r.resource_type,
                                         resource_name=r.resource_name)
            for r in req.resources])
    if api_key == INCREMENTAL_ALTER_CONFIGS:
        return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
            IncrementalResourceResponse(error_code=code, error_message=message,
                                        resource_type=r.resource_type,
                                        resource_name=r.resource_name)
            for r in req.resources])
    if api_key == ELECT_LEADERS:
        return elect_leaders_error(req, code, message)
    if api_key == ALTER_PARTITION_REASSIGNMENTS:
        return alter_reassignments_error(req, code, message)
    if api_key == LIST_PARTITION_REASSIGNMENTS:
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code,
                                                  error_message=message, topics=[])
    if api_key == UPDATE_FEATURES:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code,
                                      error_message=message, results=[])
    if api_key == CREATE_ACLS:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            AclCreationResult(error_code=code, error_message=message) for _ in req.creations])
    if api_key == DELETE_ACLS:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
            for _ in req.filters])
    if api_key == ALTER_USER_SCRAM_CREDENTIALS:
        users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
            for u in users])
    if api_key == ALTER_CLIENT_QUOTAS:
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
            acq.EntryData(error_code=code, error_message=message, entity=[
                acq.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity]) for entry in req.entries])
    raise ValueError(f"api key {api_key} is not forwarded")


async def forward(ctx: Any, req: Any) -> Any:
    """The active controller's reply to ``req`` (module doc), or REQUEST_TIMED_OUT."""
    return (await _send(ctx, req))[0]


async def forward_and_catch_up(ctx: Any, req: Any) -> Any:
    """``forward(ctx, req)``, then this broker's metadata caught up (module doc); a
    request no controller answered is REQUEST_TIMED_OUT at once, without the wait."""
    resp, answered = await _send(ctx, req)
    if answered:
        await catch_up_with_controller(ctx.broker)
    return resp


async def change_security(ctx: Any, req: Any, plan: Callable[[Any], tuple[list, Any]],
                          error: Callable[[Any, KafkaError], Any]) -> Any:
    """A write of ACLs, SCRAM credentials or client quotas: on a cluster forwarded (and
    caught up with); on a single node ``broker.change_security(plan)``, where ``plan``
    maps the SecurityImage to (records, response); a KafkaError is ``error(req, e)``."""
    broker = ctx.broker
    if broker.view.clustered:
        return await forward_and_catch_up(ctx, req)
    try:
        return await broker.change_security(plan)
    except KafkaError as e:
        return error(req, e)


async def _send(ctx: Any, req: Any) -> tuple[Any, bool]:
    """(the controller's reply, True), or (REQUEST_TIMED_OUT for every part, False)."""
    broker = ctx.broker
    api_key = ctx.header.api_key
    try:
        return await broker.controller_channel.send_until(api_key, ctx.api_version, req,
                                                          broker.request_timeout_s), True
    except ControllerUnavailable as e:
        log.info("%s not forwarded: %s", type(req).__name__, e)
        return _error_response(api_key, ctx.api_version, req, Errors.REQUEST_TIMED_OUT,
                               str(e)), False


async def catch_up_with_controller(broker: Any) -> None:
    """Until this broker has applied every record the active controller had committed
    when asked; gives up quietly (logged) after ``request.timeout.ms``."""
    role = getattr(broker, "role", None)
    if role is None or broker.controller_channel is None:
        return
    timeout = broker.request_timeout_s
    req = DescribeQuorumRequest(topics=[dq_req.TopicData(
        topic_name=METADATA_TOPIC, partitions=[dq_req.PartitionData(partition_index=0)])])
    try:
        resp = await broker.controller_channel.send_until(DESCRIBE_QUORUM, 0, req, timeout)
        p = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
        if resp.error_code or p is None or p.error_code:
            log.debug("no high watermark from the controller: %s", resp)
            return
        async with asyncio.timeout(timeout):
            await role.publisher.wait_applied(p.high_watermark - 1)
    except (ControllerUnavailable, TimeoutError) as e:
        log.info("metadata not caught up with the controller after a write: %s", e)


async def create_topic_via_controller(broker: Any, name: str, partitions: int = -1,
                                      replication_factor: int = -1,
                                      configs: dict[str, str] | None = None) -> None:
    """Ask the active controller to create ``name``; KafkaError with its answer's error
    (TOPIC_ALREADY_EXISTS included: callers decide), REQUEST_TIMED_OUT if none answers."""
    req = CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        assignments=[], configs=[CreatableTopicConfig(name=k, value=v)
                                 for k, v in (configs or {}).items()])],
        timeout_ms=int(broker.request_timeout_s * 1000), validate_only=False)
    try:
        resp = await broker.controller_channel.send_until(
            CREATE_TOPICS, CREATE_TOPICS_VERSION, req, broker.request_timeout_s)
    except ControllerUnavailable as e:
        raise KafkaError(Errors.REQUEST_TIMED_OUT, str(e)) from e
    result = resp.topics[0]
    if result.error_code:
        raise KafkaError(result.error_code, result.error_message or "")
