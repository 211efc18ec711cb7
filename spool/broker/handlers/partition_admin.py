"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46)
on broker listeners.

In a cluster each goes to the active controller and its reply is the answer
(``spool.broker.forwarding``, as Kafka's brokers forward them); the controller
decides from its image (``spool.cluster.elections``, ``spool.cluster.reassignment``).

A single node has one broker, which leads every partition it has a log for:
ElectLeaders answers ELECTION_NOT_NEEDED for those (PREFERRED_LEADER_NOT_AVAILABLE /
ELIGIBLE_LEADERS_NOT_AVAILABLE for one whose log is not created yet),
UNKNOWN_TOPIC_OR_PARTITION for the rest; with no partitions named, nothing. A
reassignment can only name this broker: its own replica list succeeds and changes
nothing, any other broker is INVALID_REPLICA_ASSIGNMENT with the controller's
message, a cancel is NO_REASSIGNMENT_IN_PROGRESS; nothing is ever being reassigned.

Authorization (Kafka's ControllerApis, ``spool.broker.admin_authz``): ElectLeaders and
AlterPartitionReassignments need ALTER on the cluster, ListPartitionReassignments
DESCRIBE; refused, the whole request answers CLUSTER_AUTHORIZATION_FAILED at the top
level (and for each partition named, where the response lists them). A cluster broker
checks before it forwards: Spool forwards without Kafka's Envelope, so the controller
cannot check the client's principal and this check is the one that counts.
"""

from __future__ import annotations

from spool.broker.admin_authz import MESSAGES, cluster_allowed
from spool.broker.forwarding import alter_reassignments_error, elect_leaders_error, forward
from spool.broker.registry import handles
from spool.protocol._generated import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from spool.protocol._generated import alter_partition_reassignments_response as aprr
from spool.protocol._generated import elect_leaders_response as elr
from spool.protocol._generated import list_partition_reassignments_response as lprr
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors

UNCLEAN = 1
REFUSED = Errors.CLUSTER_AUTHORIZATION_FAILED


def elect_leaders_refused(req: ElectLeadersRequest) -> ElectLeadersResponse:
    """Kafka's ``ElectLeadersRequest.getErrorResponse``: top level and every partition named."""
    resp = elect_leaders_error(req, REFUSED, MESSAGES[REFUSED])
    resp.error_code = REFUSED
    return resp


def list_reassignments_refused(req: ListPartitionReassignmentsRequest
                               ) -> ListPartitionReassignmentsResponse:
    """Kafka's error response: top level; the topics asked about listed back, bare."""
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=REFUSED, error_message=MESSAGES[REFUSED],
        topics=[lprr.OngoingTopicReassignment(name=t.name, partitions=[
            lprr.OngoingPartitionReassignment(partition_index=i) for i in t.partition_indexes])
            for t in req.topics or []])


@handles(43, 0, 2)
async def elect_leaders(ctx, req: ElectLeadersRequest) -> ElectLeadersResponse:
    broker = ctx.broker
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return elect_leaders_refused(req)
    if broker.view.clustered:
        return await forward(ctx, req)
    results = []
    for t in req.topic_partitions or []:
        out = elr.ReplicaElectionResult(topic=t.topic, partition_result=[])
        results.append(out)
        for pid in t.partitions:
            p = broker.view.partition(t.topic, pid)
            if p is None:
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                msg = f"No such partition as {t.topic}-{pid}"
            elif p.leader < 0:
                code, msg = (Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE if req.election_type == UNCLEAN
                             else Errors.PREFERRED_LEADER_NOT_AVAILABLE), None
            else:
                code, msg = Errors.ELECTION_NOT_NEEDED, None
            out.partition_result.append(elr.PartitionResult(partition_id=pid, error_code=code,
                                                            error_message=msg))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0,
                                replica_election_results=results)


def _single_node_reassignment(broker, topic: str, pid: int, replicas) -> tuple[int, str | None]:
    if broker.view.partition(topic, pid) is None:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION, (
            f"Unable to find a topic named {topic}." if broker.view.partition_count(topic) == 0
            else f"Unable to find partition {topic}:{pid}.")
    if replicas is None:
        return Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
    if not replicas:
        return Errors.INVALID_REPLICA_ASSIGNMENT, (
            "The manual partition assignment includes an empty replica list.")
    for b in sorted(replicas):
        if b != broker.node_id:
            return Errors.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes broker {b}, but no such broker "
                f"is registered.")
    if len(replicas) > 1:
        return Errors.INVALID_REPLICA_ASSIGNMENT, (
            f"The manual partition assignment includes the broker {broker.node_id} more "
            f"than once.")
    return 0, None


@handles(45, 0, 1)
async def alter_partition_reassignments(
        ctx, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    broker = ctx.broker
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return alter_reassignments_error(req, REFUSED, MESSAGES[REFUSED])
    if broker.view.clustered:
        return await forward(ctx, req)
    responses = []
    for t in req.topics:
        out = aprr.ReassignableTopicResponse(name=t.name, partitions=[])
        responses.append(out)
        for p in t.partitions:
            code, msg = _single_node_reassignment(broker, t.name, p.partition_index, p.replicas)
            out.partitions.append(aprr.ReassignablePartitionResponse(
                partition_index=p.partition_index, error_code=code, error_message=msg))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=0, error_message=None,
        allow_replication_factor_change=req.allow_replication_factor_change,
        responses=responses)


@handles(46, 0, 0)
async def list_partition_reassignments(
        ctx, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return list_reassignments_refused(req)
    if ctx.broker.view.clustered:
        return await forward(ctx, req)
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0,
                                              error_message=None, topics=[])
