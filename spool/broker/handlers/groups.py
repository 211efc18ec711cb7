"""Classic group membership and administration: JoinGroup (11) 0-9, SyncGroup (14) 0-5,
Heartbeat (12) 0-4, LeaveGroup (13) 0-5, DescribeGroups (15) 0-6, ListGroups (16) 0-5,
DeleteGroups (42) 0-2: Kafka 4.2's newest versions.

Each handler translates the request into a coordinator operation, runs it
through ``broker.groups.execute``/``call`` (records appended, replicated and
replayed, then replies released; a failed append reverts the operation and answers
COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR) and translates the reply into the response of
the request's version. JoinGroup and SyncGroup park on a future that a later operation
resolves (rebalance complete, leader's assignment); the wait is an
``await``, so the connection's reader and every other connection go on.
Handlers whose operation may append first await ``broker.groups.topic.ensure()``:
``__consumer_offsets`` is created in the executor, never on the loop.
JoinGroup is advertised from v0 (librdkafka's feature checks want it);
v0-3 never get MEMBER_ID_REQUIRED (that round trip is v4+). JoinGroup v8's ``reason``
(KIP-800) goes to the log; v9 (KIP-814): a static leader that rejoins a Stable group
without changing its protocols gets the members and ``skip_assignment`` (below v9 it
is answered as a follower). DescribeGroups v6 (KIP-1043): a group that does not exist is
GROUP_ID_NOT_FOUND with a message (Dead and no error below v6); with
``include_authorized_operations`` (v3+) a described group carries the operations of
``spool.broker.authz``.

With an authorizer (``spool.broker.authz``), as Kafka's ``KafkaApis``: JoinGroup, SyncGroup,
Heartbeat and LeaveGroup need READ on the group (else the request's error response,
GROUP_AUTHORIZATION_FAILED, nothing done); DescribeGroups DESCRIBE on each group and
DeleteGroups DELETE on each (GROUP_AUTHORIZATION_FAILED for that group); ListGroups lists
every group to a principal with DESCRIBE on the cluster, else only the groups it may
DESCRIBE.
"""

from __future__ import annotations

import asyncio

from spool.broker.authz import allowed, allowed_cluster, allowed_names, authorized_operations
from spool.broker.group_runtime import UNAVAILABLE
from spool.broker.handlers.share_groups import delete_share_states
from spool.broker.registry import handles
from spool.coordinator import JoinRequest, JoinResult, SyncResult
from spool.coordinator.admin import delete_groups, describe_group, list_groups
from spool.protocol._generated import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from spool.protocol._generated.delete_groups_response import DeletableGroupResult
from spool.protocol._generated.describe_groups_response import DescribedGroup, DescribedGroupMember
from spool.protocol._generated.join_group_response import JoinGroupResponseMember
from spool.protocol._generated.leave_group_response import MemberResponse
from spool.protocol._generated.list_groups_response import ListedGroup
from spool.protocol.acl import OMITTED, AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError


def _may_read(ctx, group_id: str) -> bool:
    return allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id)


async def _parked(ctx, group_id: str, call) -> object:
    """Run ``call(reply)`` on the coordinator and await the reply it (or a later op) gives."""
    await ctx.broker.groups.topic.ensure()  # created in the executor, never on the loop
    err = ctx.broker.groups.topic.coordinator_error(group_id)
    if err is not None:
        return err
    fut = asyncio.get_running_loop().create_future()

    def reply(value) -> None:
        if not fut.done():
            fut.set_result(value)

    if not ctx.broker.groups.execute([group_id], lambda: call(reply)) and not fut.done():
        reply(UNAVAILABLE)  # reverted: the request is parked nowhere any more
    return await fut


@handles(11, 0, 9)
async def join_group(ctx, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    jr = JoinRequest(
        group_id=req.group_id, member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        client_id=ctx.client_id, client_host=f"/{ctx.conn.host}", require_known_member_id=v >= 4,
        reason=req.reason if v >= 8 else None, supports_skip_assignment=v >= 9,
    )
    coord = ctx.broker.groups.coordinator
    if not _may_read(ctx, req.group_id):
        res = JoinResult(Errors.GROUP_AUTHORIZATION_FAILED)
    else:
        res = await _parked(ctx, req.group_id, lambda reply: coord.join_group(jr, reply))
    if isinstance(res, KafkaError):
        res = JoinResult(res.code, member_id=req.member_id)
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=res.error, generation_id=res.generation,
        protocol_type=res.protocol_type, member_id=res.member_id, leader=res.leader,
        protocol_name=res.protocol_name if v >= 7 else (res.protocol_name or ""),
        skip_assignment=res.skip_assignment,
        members=[JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                         metadata=m.metadata) for m in res.members],
    )


@handles(14, 0, 5)
async def sync_group(ctx, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    coord = ctx.broker.groups.coordinator
    if not _may_read(ctx, req.group_id):
        return SyncGroupResponse(throttle_time_ms=0,
                                 error_code=Errors.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    res = await _parked(ctx, req.group_id, lambda reply: coord.sync_group(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
        assignments, reply))
    if isinstance(res, KafkaError):
        res = SyncResult(res.code)
    return SyncGroupResponse(throttle_time_ms=0, error_code=res.error, protocol_type=res.protocol_type,
                             protocol_name=res.protocol_name, assignment=res.assignment)


@handles(12, 0, 4)
async def heartbeat(ctx, req: HeartbeatRequest) -> HeartbeatResponse:
    if not _may_read(ctx, req.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    instance = req.group_instance_id if ctx.api_version >= 3 else None
    coord = ctx.broker.groups.coordinator
    # A heartbeat writes nothing, so there is no group state to checkpoint.
    groups = ctx.broker.groups
    code = groups.topic.coordinator_error(req.group_id) or await groups.call(
        [], lambda: coord.heartbeat(req.group_id, req.generation_id, req.member_id, instance))
    if isinstance(code, KafkaError):
        code = code.code
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


@handles(13, 0, 5)
async def leave_group(ctx, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not _may_read(ctx, req.group_id):  # Kafka's error response: no members
        return LeaveGroupResponse(throttle_time_ms=0,
                                  error_code=Errors.GROUP_AUTHORIZATION_FAILED, members=[])
    if ctx.api_version < 3:
        members = [(req.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    coord = ctx.broker.groups.coordinator
    await ctx.broker.groups.topic.ensure()
    groups = ctx.broker.groups
    codes = groups.topic.coordinator_error(req.group_id) or await groups.call(
        [req.group_id], lambda: coord.leave_group(req.group_id, members))
    if isinstance(codes, KafkaError):
        codes = [codes.code] * len(members)
    if ctx.api_version < 3:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes[0])
    return LeaveGroupResponse(throttle_time_ms=0, error_code=0, members=[
        MemberResponse(member_id=mid, group_instance_id=inst, error_code=code)
        for (mid, inst), code in zip(members, codes, strict=True)
    ])


@handles(15, 0, 6)
async def describe_groups(ctx, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coord = ctx.broker.groups.coordinator
    groups = []
    topic = ctx.broker.groups.topic
    v = ctx.api_version
    for gid in req.groups:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            groups.append(_group_error(gid, Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        err = topic.coordinator_error(gid)
        if err is not None:
            groups.append(_group_error(gid, err.code))
            continue
        d = describe_group(coord, gid)
        if v >= 6 and d.state == "Dead":  # KIP-1043: an unknown group is an error from v6
            other = coord.groups.get(gid)  # a group of another type is not described here
            message = (f"Group {gid} is not a classic group." if other is not None
                       and other.type != "classic" else f"Group {gid} not found.")
            groups.append(_group_error(gid, Errors.GROUP_ID_NOT_FOUND, message))
            continue
        groups.append(DescribedGroup(
            error_code=0, group_id=gid, group_state=d.state, protocol_type=d.protocol_type,
            protocol_data=d.protocol,
            authorized_operations=(authorized_operations(ctx, ResourceType.GROUP, gid)
                                   if v >= 3 and req.include_authorized_operations else OMITTED),
            members=[DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment,
            ) for m in d.members],
        ))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


def _group_error(group_id: str, code: int, message: str | None = None) -> DescribedGroup:
    return DescribedGroup(error_code=code, error_message=message, group_id=group_id,
                          group_state="Dead" if code == Errors.GROUP_ID_NOT_FOUND else "",
                          protocol_type="", protocol_data="", members=[],
                          authorized_operations=OMITTED)


@handles(16, 0, 5)
async def list_groups_handler(ctx, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    rows = list_groups(ctx.broker.groups.coordinator,
                       req.states_filter if v >= 4 else None, req.types_filter if v >= 5 else None)
    topic = ctx.broker.groups.topic  # in a cluster: the groups this broker coordinates
    rows = [r for r in rows if topic.coordinator_error(r[0]) is None]
    if ctx.broker.authorizer is not None and not allowed_cluster(ctx, AclOperation.DESCRIBE,
                                                                 log_denied=False):
        seen = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                             [r[0] for r in rows], log_denied=False)
        rows = [r for r in rows if r[0] in seen]
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[
        ListedGroup(group_id=g, protocol_type=t, group_state=s, group_type=kind)
        for g, t, s, kind in rows
    ])


@handles(42, 0, 2)
async def delete_groups_handler(ctx, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    await ctx.broker.groups.topic.ensure()
    topic = ctx.broker.groups.topic
    permitted = allowed_names(ctx, AclOperation.DELETE, ResourceType.GROUP, req.groups_names)
    result = {g: Errors.GROUP_AUTHORIZATION_FAILED for g in req.groups_names
              if g not in permitted}
    result.update({g: err.code for g in req.groups_names
                   if g not in result and (err := topic.coordinator_error(g)) is not None})
    result.update(await delete_share_states(ctx, [g for g in req.groups_names
                                                  if g not in result]))
    names = [g for g in req.groups_names if g not in result]
    if names:
        # consumer and share groups' records apply at once: checkpoint the groups
        codes = await ctx.broker.groups.call(
            names, lambda: delete_groups(ctx.broker.groups.coordinator, names))
        if isinstance(codes, KafkaError):
            codes = [codes.code] * len(names)
        result.update(zip(names, codes, strict=True))
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeletableGroupResult(group_id=g, error_code=result[g]) for g in req.groups_names
    ])
