"""Committed offsets: OffsetCommit (8) 2-10, OffsetFetch (9) 1-10, OffsetDelete (47) 0.

A commit for a partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
(as Kafka's broker answers); the rest go to the coordinator, whose records
are appended to ``__consumer_offsets`` and replayed before the response
leaves (``__consumer_offsets`` is created first if need be, in the
executor: ``spool.broker.internal_topic``). If that append fails every partition gets COORDINATOR_NOT_AVAILABLE
(retriable) and nothing changes: OffsetFetch still returns the previous
commit. Who may commit is Kafka's rule (``spool.coordinator.admin._check_commit``):
``generation_id_or_member_epoch`` is a classic group's generation, or a KIP-848 consumer
group member's epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; -1 only while the group has no
member; a member must use v9+, else UNSUPPORTED_VERSION); a commit with a generation to a group that does not exist is GROUP_ID_NOT_FOUND
from v9 (the dispatcher answers ILLEGAL_GENERATION below it, ``error_versions``).
v10 names topics by ID (KIP-848): an ID no topic has is UNKNOWN_TOPIC_ID for its
partitions, and the answer names the topic by ID.

OffsetFetch with null topics (v2+) returns every committed partition (v10: of the
topics that exist, named by ID); listed partitions without a commit get offset -1 and
empty metadata; a v10 topic ID no topic has is UNKNOWN_TOPIC_ID. v8+ asks for several
groups at once, each answered with its own error (NOT_COORDINATOR when another broker
coordinates it). v9's member id and epoch are checked for consumer groups only: a classic
group's offsets are readable by anyone, as in Kafka. ``require_stable`` (v7+): a partition
whose transactional commit waits for its transaction's marker is UNSTABLE_OFFSET_COMMIT
(retriable) instead of its older offset.
With an authorizer (``spool.broker.authz``), as Kafka's ``KafkaApis``: OffsetCommit needs
READ on the group (else GROUP_AUTHORIZATION_FAILED for every partition, nothing committed)
and READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions); OffsetFetch
DESCRIBE on each group (the group's error) and DESCRIBE on each listed topic
(TOPIC_AUTHORIZATION_FAILED, offset -1, for its partitions; asked for all, the topics it
may not describe are left out); OffsetDelete DELETE on the group (the top-level error)
and READ on each topic.
``retention_time_ms`` (v2-4) is ignored, as Kafka does since 2.1:
retention follows ``offsets.retention.minutes``.
"""

from __future__ import annotations

from uuid import UUID

from spool.broker.authz import allowed, allowed_names
from spool.broker.registry import handles
from spool.coordinator.admin import (
    OffsetToCommit,
    check_offset_fetch,
    commit_offsets,
    delete_offsets,
    fetch_offsets,
)
from spool.protocol._generated import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from spool.protocol._generated.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from spool.protocol._generated.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from spool.protocol._generated.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.primitives import ZERO_UUID

TOPIC_IDS_VERSION = 10  # OffsetCommit and OffsetFetch name topics by ID from v10


def _group_allowed(ctx, op: AclOperation, group_id: str) -> bool:
    return allowed(ctx, op, ResourceType.GROUP, group_id)


def _readable(ctx, names, op: AclOperation = AclOperation.READ) -> set[str]:
    """The named topics the principal may ``op``."""
    return allowed_names(ctx, op, ResourceType.TOPIC, [n for n in names if n is not None])


def _exists(broker, topic: str, partition: int) -> bool:
    return 0 <= partition < broker.partition_count(topic)


def _name_of(broker, topic_id: UUID) -> str | None:
    """The name of the topic with this ID, None when no topic has it."""
    return broker.view.topic_name(topic_id)


@handles(8, 2, 10)
async def offset_commit(ctx, req: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    v = ctx.api_version
    by_id = v >= TOPIC_IDS_VERSION
    todo: list[OffsetToCommit] = []
    codes: dict[tuple[str, int], int] = {}
    names = [_name_of(broker, t.topic_id) if by_id else t.name for t in req.topics]
    group_ok = _group_allowed(ctx, AclOperation.READ, req.group_id)
    readable = _readable(ctx, names) if group_ok else set()
    for t, name in zip(req.topics, names, strict=True):
        for p in t.partitions:
            if name is None:
                codes[(t.topic_id, p.partition_index)] = Errors.UNKNOWN_TOPIC_ID
            elif not group_ok:
                codes[(name, p.partition_index)] = Errors.GROUP_AUTHORIZATION_FAILED
            elif name not in readable:
                codes[(name, p.partition_index)] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif _exists(broker, name, p.partition_index):
                epoch = p.committed_leader_epoch if v >= 6 else -1
                todo.append(OffsetToCommit(name, p.partition_index, p.committed_offset, epoch,
                                           p.committed_metadata))
            else:
                codes[(name, p.partition_index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
    if todo:
        await broker.groups.topic.ensure()  # created in the executor, never on the loop
        # commit_offsets changes no group (its records do, once replayed): no group checkpoint
        got = broker.groups.topic.coordinator_error(req.group_id) or await broker.groups.call(
            [], lambda: commit_offsets(
            broker.groups.coordinator, req.group_id, req.generation_id_or_member_epoch,
            req.member_id, req.group_instance_id if v >= 7 else None, todo,
            missing_group=Errors.GROUP_ID_NOT_FOUND, version=v))
        if isinstance(got, KafkaError):
            got = [got.code] * len(todo)
        codes.update({(o.topic, o.partition): c for o, c in zip(todo, got, strict=True)})
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            OffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=codes[(name if name is not None else t.topic_id, p.partition_index)])
            for p in t.partitions
        ]) for t, name in zip(req.topics, names, strict=True)
    ])


# One group's answer: (group error, [(name, topic id, [(partition, offset, leader epoch,
# metadata, error)])]), whatever the version's shape.
_Parts = list[tuple[int, int, int, str | None, int]]
_Answer = tuple[int, list[tuple[str | None, UUID | None, _Parts]]]


def _fetch_group(ctx, group_id: str, topics, require_stable: bool, by_id: bool,
                 member: tuple[str | None, int] | None = None) -> _Answer:
    """OffsetFetch for one group; ``topics`` are the request's (None: every committed one);
    ``member``: v9+'s (member id, member epoch)."""
    broker = ctx.broker
    err = broker.groups.topic.coordinator_error(group_id)
    if not _group_allowed(ctx, AclOperation.DESCRIBE, group_id):
        err = KafkaError(Errors.GROUP_AUTHORIZATION_FAILED)
    if err is None and member is not None:
        code = check_offset_fetch(broker.groups.coordinator, group_id, *member)
        err = KafkaError(code) if code else None
    if err is not None:
        return err.code, [(t.name, getattr(t, "topic_id", None),
                           [(p, -1, -1, "", err.code) for p in t.partition_indexes])
                          for t in topics or ()]
    checked = broker.authorizer is not None
    unstable = (broker.groups.txn_offsets.pending_for(group_id) if require_stable else set())
    coord = broker.groups.coordinator
    out: list[tuple[str | None, UUID | None, _Parts]] = []
    if topics is None:
        by_topic: dict[str, _Parts] = {}
        for (topic, partition), c in fetch_offsets(coord, group_id, None).items():
            by_topic.setdefault(topic, []).append(_partition(partition, c, (topic, partition)
                                                             in unstable))
        seen = _readable(ctx, by_topic, AclOperation.DESCRIBE) if checked else by_topic
        for name, parts in by_topic.items():
            if name not in seen:
                continue  # offsets of a topic it may not describe are not shown
            topic_id = broker.view.topic_id(name) if by_id else None
            if by_id and topic_id is None:
                continue  # a topic that no longer exists has no ID to name it by
            out.append((name, topic_id, parts))
        return 0, out
    names = [_name_of(broker, t.topic_id) if by_id else t.name for t in topics]
    seen = _readable(ctx, names, AclOperation.DESCRIBE) if checked else None
    for t, name in zip(topics, names, strict=True):
        if name is None or (seen is not None and name not in seen):
            code = Errors.UNKNOWN_TOPIC_ID if name is None else Errors.TOPIC_AUTHORIZATION_FAILED
            out.append((name, t.topic_id if by_id else None,
                        [(p, -1, -1, "", code) for p in t.partition_indexes]))
            continue
        found = fetch_offsets(coord, group_id, [(name, p) for p in t.partition_indexes])
        out.append((name, t.topic_id if by_id else None, [
            _partition(p, found[(name, p)], (name, p) in unstable) for p in t.partition_indexes]))
    return 0, out


def _partition(partition: int, c, unstable: bool) -> tuple[int, int, int, str, int]:
    if unstable:
        return partition, -1, -1, "", Errors.UNSTABLE_OFFSET_COMMIT
    if c is None:
        return partition, -1, -1, "", 0
    return partition, c.offset, c.leader_epoch, c.metadata, 0


@handles(9, 1, 10)
async def offset_fetch(ctx, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    stable = req.require_stable if v >= 7 else False
    if v >= 8:
        by_id = v >= TOPIC_IDS_VERSION
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            _group_response(g.group_id, _fetch_group(
                ctx, g.group_id, g.topics, stable, by_id,
                (g.member_id, g.member_epoch) if v >= 9 else None))
            for g in req.groups])
    code, topics = _fetch_group(ctx, req.group_id, req.topics, stable, False)
    if code and v >= 2:  # v2+: the top-level error; v1 has only the partitions' codes
        return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[])
    return OffsetFetchResponse(throttle_time_ms=0, error_code=0, topics=[
        OffsetFetchResponseTopic(name=name, partitions=[OffsetFetchResponsePartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
            error_code=c) for p, o, e, m, c in parts])
        for name, _, parts in topics])


def _group_response(group_id: str, answer: _Answer) -> OffsetFetchResponseGroup:
    code, topics = answer
    if code:
        return OffsetFetchResponseGroup(group_id=group_id, error_code=code, topics=[])
    return OffsetFetchResponseGroup(group_id=group_id, error_code=0, topics=[
        OffsetFetchResponseTopics(name=name or "", topic_id=topic_id or ZERO_UUID, partitions=[
            OffsetFetchResponsePartitions(partition_index=p, committed_offset=o,
                                          committed_leader_epoch=e, metadata=m, error_code=c)
            for p, o, e, m, c in parts])
        for name, topic_id, parts in topics])


@handles(47, 0, 0)
async def offset_delete(ctx, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    broker = ctx.broker
    if not _group_allowed(ctx, AclOperation.DELETE, req.group_id):
        return OffsetDeleteResponse(error_code=Errors.GROUP_AUTHORIZATION_FAILED,
                                    throttle_time_ms=0, topics=[])
    readable = _readable(ctx, [t.name for t in req.topics])
    asked = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    known = [tp for tp in asked if tp[0] in readable and _exists(broker, *tp)]
    await broker.groups.topic.ensure()
    err = broker.groups.topic.coordinator_error(req.group_id)
    if err is not None:
        return OffsetDeleteResponse(error_code=err.code, throttle_time_ms=0, topics=[])

    def op():
        result, top, codes = delete_offsets(broker.groups.coordinator, req.group_id, known)
        return result, (top, codes)

    done = await broker.groups.call([], op)
    if isinstance(done, KafkaError):
        return OffsetDeleteResponse(error_code=done.code, throttle_time_ms=0, topics=[])
    top, done = done
    if top:
        return OffsetDeleteResponse(error_code=top, throttle_time_ms=0, topics=[])
    by_tp = dict(zip(known, done, strict=True))
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(
                partition_index=p.partition_index,
                error_code=by_tp.get((t.name, p.partition_index),
                                     Errors.UNKNOWN_TOPIC_OR_PARTITION if t.name in readable
                                     else Errors.TOPIC_AUTHORIZATION_FAILED))
            for p in t.partitions
        ]) for t in req.topics
    ])
