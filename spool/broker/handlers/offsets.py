"""Committed offsets: OffsetCommit (8) 2-8, OffsetFetch (9) 1-7, OffsetDelete (47) 0.

A commit for a partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
(as Kafka's broker answers); the rest go to the coordinator, whose records
are appended to ``__consumer_offsets`` and replayed before the response
leaves (``__consumer_offsets`` is created first if need be, in the
executor: ``spool.broker.internal_topic``). If that append fails every partition gets COORDINATOR_NOT_AVAILABLE
(retriable) and nothing changes: OffsetFetch still returns the previous
commit.
OffsetFetch with null topics (v2+) returns every committed partition;
listed partitions without a commit get offset -1 and empty metadata.
``retention_time_ms`` (v2-4) is ignored, as Kafka does since 2.1:
retention follows ``offsets.retention.minutes``.
"""

from __future__ import annotations

from spool.broker.registry import handles
from spool.coordinator.admin import OffsetToCommit, commit_offsets, delete_offsets, fetch_offsets
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
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from spool.protocol.errors import Errors, KafkaError


def _exists(broker, topic: str, partition: int) -> bool:
    return 0 <= partition < broker.partition_count(topic)


@handles(8, 2, 8)
async def offset_commit(ctx, req: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    v = ctx.api_version
    todo: list[OffsetToCommit] = []
    codes: dict[tuple[str, int], int] = {}
    for t in req.topics:
        for p in t.partitions:
            if _exists(broker, t.name, p.partition_index):
                epoch = p.committed_leader_epoch if v >= 6 else -1
                todo.append(OffsetToCommit(t.name, p.partition_index, p.committed_offset, epoch,
                                           p.committed_metadata))
            else:
                codes[(t.name, p.partition_index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
    if todo:
        await broker.groups.topic.ensure()  # created in the executor, never on the loop
        # commit_offsets changes no group (its records do, once replayed): no group checkpoint
        got = broker.groups.topic.coordinator_error(req.group_id) or await broker.groups.call(
            [], lambda: commit_offsets(
            broker.groups.coordinator, req.group_id, req.generation_id_or_member_epoch,
            req.member_id, req.group_instance_id if v >= 7 else None, todo))
        if isinstance(got, KafkaError):
            got = [got.code] * len(todo)
        codes.update({(o.topic, o.partition): c for o, c in zip(todo, got, strict=True)})
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index,
                                          error_code=codes[(t.name, p.partition_index)])
            for p in t.partitions
        ]) for t in req.topics
    ])


@handles(9, 1, 7)
async def offset_fetch(ctx, req: OffsetFetchRequest) -> OffsetFetchResponse:
    wanted = None
    if req.topics is not None:
        wanted = [(t.name, p) for t in req.topics for p in t.partition_indexes]
    err = ctx.broker.groups.topic.coordinator_error(req.group_id)
    if err is not None:  # v2+: the top-level error; v1 has only the partitions' codes
        return OffsetFetchResponse(throttle_time_ms=0, error_code=err.code, topics=[
            OffsetFetchResponseTopic(name=t.name, partitions=[OffsetFetchResponsePartition(
                partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                error_code=err.code) for p in t.partition_indexes])
            for t in req.topics or ()] if ctx.api_version < 2 else [])
    found = fetch_offsets(ctx.broker.groups.coordinator, req.group_id, wanted)
    by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
    for (topic, partition), c in found.items():
        by_topic.setdefault(topic, []).append(OffsetFetchResponsePartition(
            partition_index=partition,
            committed_offset=c.offset if c else -1,
            committed_leader_epoch=c.leader_epoch if c else -1,
            metadata=c.metadata if c else "",
            error_code=0,
        ))
    return OffsetFetchResponse(throttle_time_ms=0, error_code=0, topics=[
        OffsetFetchResponseTopic(name=name, partitions=parts) for name, parts in by_topic.items()
    ])


@handles(47, 0, 0)
async def offset_delete(ctx, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    broker = ctx.broker
    asked = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    known = [tp for tp in asked if _exists(broker, *tp)]
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
                error_code=by_tp.get((t.name, p.partition_index), Errors.UNKNOWN_TOPIC_OR_PARTITION))
            for p in t.partitions
        ]) for t in req.topics
    ])
