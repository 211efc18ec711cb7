"""Share group membership and offsets admin (KIP-932): ShareGroupHeartbeat (76) v1,
ShareGroupDescribe (77) v1, DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91)
v0 and DeleteShareGroupOffsets (92) v0.

The heartbeat is ``spool.coordinator.share_ops.heartbeat`` run through
``broker.groups.call`` (records appended and replicated before the answer); the
partitions it marks initializing are initialized through ``broker.share_persister`` by
the runtime (``GroupRuntime.initialize_share_state``) after the answer. The group's
timeouts are its configs (``broker.group_configs``: ``share.session.timeout.ms``,
``share.heartbeat.interval.ms``, falling back to the ``group.share.*`` broker keys);
``group.share.max.size`` and ``group.share.max.groups`` bound it.

Offsets: a share group's "offset" is its share-partition start offset, kept by the share
coordinator: DescribeShareGroupOffsets reads it (``read_summary``; -1 for a partition with
no state); AlterShareGroupOffsets (an Empty group only: NON_EMPTY_GROUP) starts the state
again at the given offset (``initialize`` at the next state epoch) and records it
initialized; DeleteShareGroupOffsets (Empty only) deletes the state of whole topics and
forgets them. ``delete_share_states`` serves DeleteGroups (``handlers.groups``): the share
state of an Empty share group goes before its records.

``group.share.enable=false`` or ``group.coordinator.rebalance.protocols`` without ``share``
(``spool.broker.group_protocols``): every API here answers UNSUPPORTED_VERSION (and ApiVersions
does not advertise them). Authorization as Kafka's ``KafkaApis``: heartbeat READ group
(+ DESCRIBE on the subscribed topics: TOPIC_AUTHORIZATION_FAILED), describe DESCRIBE
group, DescribeShareGroupOffsets DESCRIBE group and topics, AlterShareGroupOffsets READ
group and topics, DeleteShareGroupOffsets DELETE group and READ topics.
"""

from __future__ import annotations

import asyncio
import uuid

from spool.broker.authz import allowed, allowed_names, authorized_operations
from spool.broker.group_protocols import share_enabled
from spool.broker.registry import handles
from spool.coordinator.share_assignor import NAME as ASSIGNOR
from spool.coordinator.share_group import ShareGroup
from spool.coordinator.share_ops import (
    ShareHeartbeat,
    ShareLimits,
    forget_topics,
    heartbeat,
    offsets_reset,
    share_group,
    share_partitions,
    validate,
)
from spool.protocol._generated import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from spool.protocol._generated import alter_share_group_offsets_response as alter_rsp
from spool.protocol._generated import delete_share_group_offsets_response as delete_rsp
from spool.protocol._generated import describe_share_group_offsets_response as offsets_rsp
from spool.protocol._generated import share_group_describe_response as describe_rsp
from spool.protocol._generated import share_group_heartbeat_response as hb_rsp
from spool.protocol.acl import OMITTED, AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError

DISABLED = KafkaError(Errors.UNSUPPORTED_VERSION, "share groups are not enabled")


def _limits(broker, group_id: str) -> ShareLimits:
    configs, config = broker.group_configs, broker.config
    return ShareLimits(
        session_timeout_ms=int(configs.get(group_id, "share.session.timeout.ms")),
        heartbeat_interval_ms=int(configs.get(group_id, "share.heartbeat.interval.ms")),
        max_size=config.get_int("group.share.max.size"),
        max_groups=config.get_int("group.share.max.groups"))


@handles(76, 1, 1)
async def share_group_heartbeat(ctx, req: ShareGroupHeartbeatRequest
                                ) -> ShareGroupHeartbeatResponse:
    broker = ctx.broker

    def error(code: int, message: str | None = None) -> ShareGroupHeartbeatResponse:
        return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=code,
                                           error_message=message, member_epoch=0,
                                           heartbeat_interval_ms=0)

    if not share_enabled(broker):
        return error(DISABLED.code, DISABLED.message)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return error(Errors.GROUP_AUTHORIZATION_FAILED)
    names = req.subscribed_topic_names or []
    if names and len(allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   set(names))) < len(set(names)):
        return error(Errors.TOPIC_AUTHORIZATION_FAILED)
    hb = ShareHeartbeat(req.group_id, req.member_id, req.member_epoch, req.rack_id,
                        req.subscribed_topic_names, ctx.client_id or "", f"/{ctx.conn.host}")
    problem = validate(hb)  # before the coordinator's routing, as Kafka's service does
    if problem is not None:
        return error(Errors.INVALID_REQUEST, problem)
    groups = broker.groups
    await groups.topic.ensure()
    err = groups.topic.coordinator_error(req.group_id)
    if err is not None:
        return error(err.code, err.message)
    coord = groups.coordinator
    existing = coord.groups.get(req.group_id)
    wanted = set(names) | (existing.subscribed_topic_names()
                           if isinstance(existing, ShareGroup) else set())
    limits = _limits(broker, req.group_id)
    topics = {n: t for n in wanted if (t := coord.topics.lookup(n)) is not None}
    answer = await groups.call([req.group_id], lambda: heartbeat(coord, hb, limits, topics))
    if isinstance(answer, KafkaError):
        return error(answer.code, answer.message)
    if answer.error:
        return error(answer.error, answer.message)
    groups.initialize_share_state(req.group_id, answer.state_epoch, answer.initialize)
    assignment = None
    if answer.assignment is not None:
        assignment = hb_rsp.Assignment(topic_partitions=[
            hb_rsp.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(answer.assignment.items())])
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, member_id=answer.member_id,
        member_epoch=answer.member_epoch, heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=assignment)


def _described_error(group_id: str, code: int, message: str | None = None
                     ) -> describe_rsp.DescribedGroup:
    return describe_rsp.DescribedGroup(
        error_code=code, error_message=message, group_id=group_id,
        group_state="Dead" if code == Errors.GROUP_ID_NOT_FOUND else "", group_epoch=0,
        assignment_epoch=0, assignor_name="", members=[])


@handles(77, 1, 1)
async def share_group_describe(ctx, req: ShareGroupDescribeRequest
                               ) -> ShareGroupDescribeResponse:
    broker = ctx.broker
    if not share_enabled(broker):
        return ShareGroupDescribeResponse(throttle_time_ms=0, groups=[
            _described_error(g, DISABLED.code, DISABLED.message) for g in req.group_ids])
    out = []
    for gid in req.group_ids:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(_described_error(gid, Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        err = broker.groups.topic.coordinator_error(gid)
        if err is not None:
            out.append(_described_error(gid, err.code, err.message))
            continue
        g = share_group(broker.groups.coordinator, gid)
        if not isinstance(g, ShareGroup):
            message = g.message if gid in broker.groups.coordinator.groups else \
                f"Group {gid} not found."
            out.append(_described_error(gid, g.error, message))
            continue
        out.append(describe_rsp.DescribedGroup(
            error_code=0, group_id=gid, group_state=g.state, group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch, assignor_name=ASSIGNOR,
            authorized_operations=(authorized_operations(ctx, ResourceType.GROUP, gid)
                                   if req.include_authorized_operations else OMITTED),
            members=[describe_rsp.Member(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=describe_rsp.Assignment(topic_partitions=[
                    describe_rsp.TopicPartitions(topic_id=t, topic_name=_name(broker, g, t),
                                                 partitions=sorted(ps))
                    for t, ps in sorted(m.assigned.items())]))
                for _, m in sorted(g.members.items())]))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=out)


def _name(broker, g: ShareGroup, topic_id: uuid.UUID) -> str:
    return broker.view.topic_name(topic_id) or g.topic_name(topic_id) or ""


@handles(90, 0, 1)
async def describe_share_group_offsets(ctx, req: DescribeShareGroupOffsetsRequest
                                       ) -> DescribeShareGroupOffsetsResponse:
    broker = ctx.broker
    out = []
    for rg in req.groups:
        gid = rg.group_id

        def group_error(code: int, message: str | None = None, gid=gid):
            return offsets_rsp.DescribeShareGroupOffsetsResponseGroup(
                group_id=gid, topics=[], error_code=code, error_message=message)

        if not share_enabled(broker):
            out.append(group_error(DISABLED.code, DISABLED.message))
            continue
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(group_error(Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        err = broker.groups.topic.coordinator_error(gid)
        if err is not None:
            out.append(group_error(err.code, err.message))
            continue
        g = share_group(broker.groups.coordinator, gid)
        if not isinstance(g, ShareGroup):
            out.append(group_error(g.error, g.message))
            continue
        out.append(offsets_rsp.DescribeShareGroupOffsetsResponseGroup(
            group_id=gid, error_code=0, topics=await _describe_topics(ctx, g, rg.topics)))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=out)


async def _describe_topics(ctx, g: ShareGroup, asked) -> list:
    broker = ctx.broker
    if asked is None:  # every topic the group has share state for
        wanted = {}
        for t, i in g.initialized.items():
            wanted.setdefault(broker.view.topic_name(t) or i.name, sorted(i.partitions))
    else:
        wanted = {t.topic_name: list(t.partitions) for t in asked}
    permitted = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, set(wanted))
    topics = []
    for name, partitions in sorted(wanted.items()):
        tid = broker.view.topic_id(name)
        count = broker.view.partition_count(name) if tid is not None else 0
        rows = []
        for p in partitions:
            code, start = 0, -1
            if name not in permitted:
                code = Errors.TOPIC_AUTHORIZATION_FAILED
            elif tid is None or not 0 <= p < count:
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif tid in g.initialized and p in g.initialized[tid].partitions:
                summary = await broker.share_persister.read_summary(g.group_id, tid, p, -1)
                if isinstance(summary, KafkaError):
                    if summary.code != Errors.UNKNOWN_TOPIC_OR_PARTITION:
                        code = summary.code
                else:
                    start = summary[1]
            rows.append(offsets_rsp.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, start_offset=start, leader_epoch=-1, lag=-1,
                error_code=code,
                error_message=None))
        topics.append(offsets_rsp.DescribeShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=tid or uuid.UUID(int=0), partitions=rows))
    return topics


async def _empty_share_group(ctx, gid: str, operation: AclOperation
                             ) -> ShareGroup | KafkaError:
    broker = ctx.broker
    if not share_enabled(broker):
        return DISABLED
    if not allowed(ctx, operation, ResourceType.GROUP, gid):
        return KafkaError(Errors.GROUP_AUTHORIZATION_FAILED)
    if not gid:  # Kafka's GroupCoordinatorService, before the coordinator's operation
        return KafkaError(Errors.INVALID_GROUP_ID)
    await broker.groups.topic.ensure()
    err = broker.groups.topic.coordinator_error(gid)
    if err is not None:
        return err
    g = share_group(broker.groups.coordinator, gid)
    if not isinstance(g, ShareGroup):
        return KafkaError(g.error, g.message)
    if g.members:
        return KafkaError(Errors.NON_EMPTY_GROUP, f"Share group {gid} is not empty.")
    return g


@handles(91, 0, 0)
async def alter_share_group_offsets(ctx, req: AlterShareGroupOffsetsRequest
                                    ) -> AlterShareGroupOffsetsResponse:
    broker = ctx.broker
    g = await _empty_share_group(ctx, req.group_id, AclOperation.READ)
    if isinstance(g, KafkaError):
        return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=g.code,
                                              error_message=g.message, responses=[])
    permitted = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                              {t.topic_name for t in req.topics})
    state_epoch = g.group_epoch + 1  # a new state epoch fences the old state's writers
    responses, done = [], []
    for t in req.topics:
        tid = broker.view.topic_id(t.topic_name)
        count = broker.view.partition_count(t.topic_name) if tid is not None else 0
        rows = []
        for p in t.partitions:
            code = 0
            if t.topic_name not in permitted:
                code = Errors.TOPIC_AUTHORIZATION_FAILED
            elif tid is None or not 0 <= p.partition_index < count:
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                code = Errors.INVALID_REQUEST
            else:
                e = await broker.share_persister.initialize(
                    g.group_id, tid, p.partition_index, state_epoch, p.start_offset)
                code = e.code if e is not None else 0
                if e is None:
                    done.append((tid, t.topic_name, p.partition_index))
            rows.append(alter_rsp.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=code,
                error_message=None))
        responses.append(alter_rsp.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=tid or uuid.UUID(int=0), partitions=rows))
    if done:
        coord = broker.groups.coordinator
        err = await broker.groups.call(
            [g.group_id], lambda: offsets_reset(coord, g.group_id, done, state_epoch))
        if isinstance(err, KafkaError):
            return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=err.code,
                                                  error_message=err.message, responses=[])
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0,
                                          responses=responses)


@handles(92, 0, 0)
async def delete_share_group_offsets(ctx, req: DeleteShareGroupOffsetsRequest
                                     ) -> DeleteShareGroupOffsetsResponse:
    broker = ctx.broker
    g = await _empty_share_group(ctx, req.group_id, AclOperation.DELETE)
    if isinstance(g, KafkaError):
        return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=g.code,
                                               error_message=g.message, responses=[])
    permitted = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                              {t.topic_name for t in req.topics})
    responses, gone = [], []
    for t in req.topics:
        tid = broker.view.topic_id(t.topic_name)
        code = 0
        if t.topic_name not in permitted:
            code = Errors.TOPIC_AUTHORIZATION_FAILED
        elif tid is None:
            code = Errors.UNKNOWN_TOPIC_OR_PARTITION
        else:
            parts = {p for table in (g.initialized, g.initializing)
                     for p in (table[tid].partitions if tid in table else ())}
            errors = await asyncio.gather(*(broker.share_persister.delete(g.group_id, tid, p)
                                            for p in sorted(parts)))
            bad = next((e for e in errors if e is not None), None)
            code = bad.code if bad is not None else 0
            if bad is None:
                gone.append(tid)
        responses.append(delete_rsp.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=tid or uuid.UUID(int=0), error_code=code,
            error_message=None))
    if gone:
        coord = broker.groups.coordinator
        done = await broker.groups.call([g.group_id],
                                        lambda: forget_topics(coord, g.group_id, gone))
        if isinstance(done, KafkaError):
            return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=done.code,
                                                   error_message=done.message, responses=[])
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0,
                                           responses=responses)


async def delete_share_states(ctx, names: list[str]) -> dict[str, int]:
    """DeleteGroups: the share state of every Empty share group among ``names`` is deleted
    through the persister before its records; a failure is that group's error code."""
    broker = ctx.broker
    codes: dict[str, int] = {}
    for gid in names:
        g = broker.groups.coordinator.groups.get(gid)
        if not isinstance(g, ShareGroup) or g.members:
            continue
        errors = await asyncio.gather(*(broker.share_persister.delete(gid, t, p)
                                        for t, p in share_partitions(g)))
        bad = next((e for e in errors if e is not None), None)
        if bad is not None:
            codes[gid] = bad.code
    return codes
