"""The KRaft quorum's APIs: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot of
``__cluster_metadata`` on controller listeners; DescribeQuorum on both planes.

Each Raft request is translated 1:1 into the core's message
(``spool.cluster.raft.wire``), answered by this node's ``RaftDriver`` (a
Fetch with nothing new waits there up to its ``max_wait_ms`` for the log to
grow or the epoch to change) and translated back. A node that is not part
of a quorum (no ``process.roles``) serves none of this: these handlers are
registered on the controller plane only, which a single node does not have.

DescribeQuorum is answered by the quorum leader (Kafka's
``KafkaRaftClient.handleDescribeQuorumRequest``): leader, epoch, high
watermark, and per voter and observer its log end offset and the
wall-clock times of its last fetch and of when it last caught up. Another
controller answers NOT_LEADER_OR_FOLLOWER for the partition. On a broker
listener the request is forwarded to the active controller, as Kafka's
brokers do, and its answer returned (NOT_LEADER_OR_FOLLOWER while no leader
is known).

Authorization (Kafka's ControllerApis): Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot need CLUSTER_ACTION on the cluster, DescribeQuorum DESCRIBE; refused, the
response's top-level error_code is CLUSTER_AUTHORIZATION_FAILED. A broker checks
DescribeQuorum's caller before it forwards it; the controller takes a caller allowed
CLUSTER_ACTION (a broker forwarding) as checked (``spool.broker.admin_authz``).
"""

from __future__ import annotations

import logging

import spool.protocol._generated.describe_quorum_response as dq
from spool.broker.admin_authz import cluster_allowed, trusted_forwarder
from spool.broker.registry import BROKER_PLANE, CONTROLLER_PLANE, handles
from spool.cluster.raft import wire
from spool.net.client import ClientError, NodeClient
from spool.protocol._generated import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    VoteRequest,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError

log = logging.getLogger("spool.raft")

_CONTROLLER = (CONTROLLER_PLANE,)


def _driver(ctx):
    quorum = getattr(ctx.broker, "quorum", None)
    if quorum is None or quorum.driver.node is None:
        raise KafkaError(Errors.NOT_CONTROLLER, "the quorum is not started yet")
    return quorum.driver


async def _raft(ctx, api_key: int, req):
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return wire.error_response(api_key, Errors.CLUSTER_AUTHORIZATION_FAILED, ctx.api_version)
    try:
        driver = _driver(ctx)
        src, core_req = wire.from_wire_request(api_key, req, ctx.api_version)
        core_resp = await driver.handle_request(src, core_req)
    except (KafkaError, wire.NotMetadataPartition) as e:
        code = e.code if isinstance(e, KafkaError) else Errors.INVALID_REQUEST
        return wire.error_response(api_key, code, ctx.api_version)
    return wire.response_to_wire(core_req, core_resp, ctx.api_version)


@handles(52, 0, 2, listeners=_CONTROLLER)
async def vote(ctx, req: VoteRequest):
    return await _raft(ctx, wire.VOTE, req)


@handles(53, 0, 1, listeners=_CONTROLLER)
async def begin_quorum_epoch(ctx, req: BeginQuorumEpochRequest):
    return await _raft(ctx, wire.BEGIN_QUORUM_EPOCH, req)


@handles(54, 0, 1, listeners=_CONTROLLER)
async def end_quorum_epoch(ctx, req: EndQuorumEpochRequest):
    return await _raft(ctx, wire.END_QUORUM_EPOCH, req)


@handles(1, 12, 17, listeners=_CONTROLLER)
async def fetch_metadata_log(ctx, req: FetchRequest):
    return await _raft(ctx, wire.FETCH, req)


@handles(59, 0, 1, listeners=_CONTROLLER)
async def fetch_snapshot(ctx, req: FetchSnapshotRequest):
    return await _raft(ctx, wire.FETCH_SNAPSHOT, req)


# ---- DescribeQuorum


def _describe_error(code: int, message: str | None = None) -> DescribeQuorumResponse:
    p = dq.PartitionData(partition_index=0, error_code=code, error_message=message,
                         leader_id=-1, leader_epoch=-1, high_watermark=-1)
    return DescribeQuorumResponse(error_code=0, error_message=None, topics=[
        dq.TopicData(topic_name=wire.METADATA_TOPIC, partitions=[p])])


def _replica(r) -> dq.ReplicaState:
    return dq.ReplicaState(replica_id=r.replica_id, log_end_offset=r.log_end_offset,
                           last_fetch_timestamp=r.last_fetch_timestamp,
                           last_caught_up_timestamp=r.last_caught_up_timestamp)


@handles(55, 0, 2, listeners=(BROKER_PLANE, CONTROLLER_PLANE))
async def describe_quorum(ctx, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not ((ctx.plane == CONTROLLER_PLANE and trusted_forwarder(ctx))
            or cluster_allowed(ctx, AclOperation.DESCRIBE)):
        return DescribeQuorumResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                      error_message="Cluster authorization failed.", topics=[])
    try:
        driver = _driver(ctx)
    except KafkaError as e:
        return _describe_error(e.code, e.message)
    if ctx.plane == BROKER_PLANE:
        return await _forward_describe(ctx, driver, req)
    if (len(req.topics) != 1 or req.topics[0].topic_name != wire.METADATA_TOPIC
            or [p.partition_index for p in req.topics[0].partitions] != [0]):
        return _describe_error(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                               "only __cluster_metadata-0 has a quorum")
    try:
        hw, voters, observers = await driver.describe_quorum()
    except KafkaError as e:
        return _describe_error(Errors.NOT_LEADER_OR_FOLLOWER,
                               f"node {driver.node_id} is not the leader: {e.message}")
    p = dq.PartitionData(partition_index=0, error_code=0, error_message=None,
                         leader_id=driver.node_id, leader_epoch=driver.epoch,
                         high_watermark=hw, current_voters=[_replica(r) for r in voters],
                         observers=[_replica(r) for r in observers])
    nodes = []
    if ctx.api_version >= 2:
        name = ctx.broker.cluster.controller_listener_names[0]
        nodes = [dq.Node(node_id=n, listeners=[dq.Listener(name=name, host=h, port=port)])
                 for n, (h, port) in sorted(driver.voters.items())]
    return DescribeQuorumResponse(error_code=0, error_message=None, nodes=nodes, topics=[
        dq.TopicData(topic_name=wire.METADATA_TOPIC, partitions=[p])])


async def _forward_describe(ctx, driver, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    """A broker listener's DescribeQuorum goes to the active controller (Kafka forwards it)."""
    addr = driver.endpoint(driver.leader_id)
    if addr is None:
        return _describe_error(Errors.NOT_LEADER_OR_FOLLOWER, "no quorum leader is known")
    client = NodeClient(addr[0], addr[1], client_id=f"spool-forward-{driver.node_id}",
                        request_timeout_ms=driver.config.request_timeout_ms,
                        connect_timeout_ms=driver.config.request_timeout_ms,
                        security=ctx.broker.controller_security)
    try:
        return await client.request(req, ctx.api_version)
    except (ClientError, OSError) as e:
        return _describe_error(Errors.NOT_LEADER_OR_FOLLOWER, str(e))
    finally:
        await client.close()
