"""KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat (68) 0-1, ConsumerGroupDescribe
(69) 0-1.

ConsumerGroupHeartbeat runs ``spool.coordinator.consumer_ops.heartbeat`` through
``broker.groups.call`` (records appended and replicated before the answer; a failed append
reverts the group and answers COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR).
v0 lets the coordinator pick the member id of a joining member; from v1 (KIP-1082) the client
names it. ``subscribed_topic_regex`` is read from v1 and resolved by the broker.
When ``group.coordinator.rebalance.protocols`` lacks ``consumer`` both answer
UNSUPPORTED_VERSION, as Kafka, and ApiVersions leaves them out.

ConsumerGroupDescribe answers, per group: its state (Empty, Assigning, Reconciling,
Stable), group epoch, assignment epoch, assignor, and per member its epoch, subscription,
current assignment and target assignment (topics named); a group that does not exist or is
not a consumer group is GROUP_ID_NOT_FOUND with Kafka's message. v1 adds ``member_type``
(1: consumer protocol, 0: a classic member of the group, ``spool.coordinator.consumer_classic``).

With an authorizer (``spool.broker.authz``), as Kafka's ``KafkaApis``: the heartbeat needs
READ on the group (else GROUP_AUTHORIZATION_FAILED, nothing done) and DESCRIBE on each
subscribed topic name (else TOPIC_AUTHORIZATION_FAILED naming them); a regex subscription
gets only the matching topics the principal may DESCRIBE; Describe needs DESCRIBE
on each group (GROUP_AUTHORIZATION_FAILED for that group) and DESCRIBE on the topics its
members subscribe to or are assigned (TOPIC_AUTHORIZATION_FAILED for that group);
``include_authorized_operations`` adds the group's operations.
"""

from __future__ import annotations

import uuid

from spool.broker.authz import allowed, allowed_names, authorized_operations
from spool.broker.group_protocols import consumer_enabled
from spool.broker.registry import handles
from spool.coordinator import consumer_ops
from spool.coordinator.consumer_group import ConsumerGroup, Partitions
from spool.coordinator.consumer_ops import HeartbeatAnswer, HeartbeatRequest
from spool.protocol._generated import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from spool.protocol._generated import consumer_group_describe_response as d
from spool.protocol._generated import consumer_group_heartbeat_response as h
from spool.protocol.acl import OMITTED, AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError

MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1  # ConsumerGroupDescribe v1: Kafka's MemberType


def _error(code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=code,
                                          error_message=message, member_id=None, member_epoch=0,
                                          heartbeat_interval_ms=0, assignment=None)


def _sorted(parts: Partitions) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))]


@handles(68, 0, 1)
async def consumer_group_heartbeat(ctx, req: ConsumerGroupHeartbeatRequest
                                   ) -> ConsumerGroupHeartbeatResponse:
    broker = ctx.broker
    if not consumer_enabled(broker):
        return _error(Errors.UNSUPPORTED_VERSION)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _error(Errors.GROUP_AUTHORIZATION_FAILED)
    names = list(req.subscribed_topic_names or ())
    if names and broker.authorizer is not None:
        seen = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        denied = sorted({n for n in names if n not in seen})
        if denied:
            return _error(Errors.TOPIC_AUTHORIZATION_FAILED,
                          f"The following topics are not authorized: {', '.join(denied)}.")
    hr = HeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=(None if req.subscribed_topic_names is None
                                else tuple(req.subscribed_topic_names)),
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor,
        owned=(None if req.topic_partitions is None else
               tuple((tp.topic_id, tuple(tp.partitions)) for tp in req.topic_partitions)),
        client_id=ctx.client_id or "", client_host=f"/{ctx.conn.host}", version=ctx.api_version,
        describable=None if broker.authorizer is None else (
            lambda names: allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                        log_denied=False)))
    groups = broker.groups
    await groups.topic.ensure()  # created in the executor, never on the loop
    coord = groups.coordinator
    answer = groups.topic.coordinator_error(req.group_id) or await groups.call(
        [req.group_id], lambda: consumer_ops.heartbeat(coord, hr))
    if isinstance(answer, KafkaError):
        return _error(answer.code)
    assert isinstance(answer, HeartbeatAnswer)
    if answer.error:
        return _error(answer.error, answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = h.Assignment(topic_partitions=[
            h.TopicPartitions(topic_id=t, partitions=ps) for t, ps in _sorted(answer.assignment)])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=answer.member_id,
        member_epoch=answer.member_epoch, heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=assignment)


def _described_error(group_id: str, code: int, message: str | None = None) -> d.DescribedGroup:
    return d.DescribedGroup(error_code=code, error_message=message, group_id=group_id,
                            group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                            members=[], authorized_operations=OMITTED)


def describe(coord, group_id: str, topic_name) -> d.DescribedGroup:
    """One group's ConsumerGroupDescribe entry (``topic_name``: topic id -> name or None)."""
    group = coord.groups.get(group_id)
    if group is None:
        return _described_error(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    if not isinstance(group, ConsumerGroup):
        return _described_error(group_id, Errors.GROUP_ID_NOT_FOUND,
                                f"Group {group_id} is not a consumer group.")

    def assignment(parts: Partitions) -> d.Assignment:
        return d.Assignment(topic_partitions=[
            d.TopicPartitions(topic_id=t, topic_name=topic_name(t) or "", partitions=ps)
            for t, ps in _sorted(parts)])

    members = [d.Member(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
        member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=assignment(m.assigned), target_assignment=assignment(
            group.target.get(m.member_id, {})),
        member_type=MEMBER_TYPE_CONSUMER if m.classic is None else MEMBER_TYPE_CLASSIC)
        for _, m in sorted(group.members.items())]
    assignor = (group.preferred_assignor(group.members.values())
                or consumer_ops.assignors(coord)[0])
    return d.DescribedGroup(error_code=0, error_message=None, group_id=group_id,
                            group_state=group.state.value, group_epoch=group.group_epoch,
                            assignment_epoch=group.assignment_epoch, assignor_name=assignor,
                            members=members, authorized_operations=OMITTED)


def _topics_of(entry: d.DescribedGroup) -> set[str]:
    names: set[str] = set()
    for m in entry.members:
        names.update(m.subscribed_topic_names)
        for a in (m.assignment, m.target_assignment):
            names.update(tp.topic_name for tp in a.topic_partitions if tp.topic_name)
    return names


@handles(69, 0, 1)
async def consumer_group_describe(ctx, req: ConsumerGroupDescribeRequest
                                  ) -> ConsumerGroupDescribeResponse:
    broker = ctx.broker
    if not consumer_enabled(broker):
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            _described_error(g, Errors.UNSUPPORTED_VERSION) for g in req.group_ids])
    coord = broker.groups.coordinator
    out = []
    for gid in req.group_ids:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(_described_error(gid, Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        err = broker.groups.topic.coordinator_error(gid)
        if err is not None:
            out.append(_described_error(gid, err.code))
            continue
        entry = describe(coord, gid, broker.view.topic_name)
        if entry.error_code == 0 and broker.authorizer is not None:
            names = _topics_of(entry)
            seen = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, sorted(names))
            denied = sorted(names - set(seen))
            if denied:
                out.append(_described_error(
                    gid, Errors.TOPIC_AUTHORIZATION_FAILED,
                    f"The group has described topic(s) that the client is not authorized to "
                    f"describe: {', '.join(denied)}."))
                continue
        if entry.error_code == 0 and req.include_authorized_operations:
            entry.authorized_operations = authorized_operations(ctx, ResourceType.GROUP, gid)
        out.append(entry)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)
