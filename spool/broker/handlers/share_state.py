"""The share coordinator's inter-broker APIs (KIP-932), served by the key's coordinator.

InitializeShareGroupState (83, v0), ReadShareGroupState (84, v0), WriteShareGroupState
(85, v0-1), DeleteShareGroupState (86, v0), ReadShareGroupStateSummary (87, v0-1): each
(topic id, partition) of the request is one key (group id, topic id, partition) of the
share coordinator (``spool.broker.share_runtime``), answered in request order with its
own error:

- NOT_COORDINATOR when another broker leads the key's ``__share_group_state`` partition
  (COORDINATOR_LOAD_IN_PROGRESS while it loads here, COORDINATOR_NOT_AVAILABLE while the
  topic is created): the sender (``spool.broker.share_persister``) looks again;
- INVALID_GROUP_ID for an empty group id, INVALID_REQUEST for a zero topic id or a
  negative partition;
- the state machine's answers (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH,
  UNKNOWN_TOPIC_OR_PARTITION: ``spool.share.coordinator``).

Brokers send these, not clients: with an authorizer the caller needs CLUSTER_ACTION on
the cluster (Kafka's ``KafkaApis``), else every partition is CLUSTER_AUTHORIZATION_FAILED.
WriteShareGroupState v1 / ReadShareGroupStateSummary v1 add ``delivery_complete_count``
(KIP-1226), which Spool does not track: ignored in, -1 out.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from spool.broker.authz import allowed_cluster
from spool.broker.registry import handles
from spool.protocol._generated import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from spool.protocol._generated import delete_share_group_state_response as dresp
from spool.protocol._generated import initialize_share_group_state_response as iresp
from spool.protocol._generated import read_share_group_state_response as rresp
from spool.protocol._generated import read_share_group_state_summary_response as sresp
from spool.protocol._generated import write_share_group_state_response as wresp
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.share.batches import StateBatch

DENIED = "Cluster authorization failed."
ZERO = uuid.UUID(int=0)


def _invalid(group_id: str, topic_id: uuid.UUID, partition: int) -> KafkaError | None:
    if not group_id:
        return KafkaError(Errors.INVALID_GROUP_ID, "the group id is empty")
    if topic_id == ZERO:
        return KafkaError(Errors.INVALID_REQUEST, "the topic id is empty")
    if partition < 0:
        return KafkaError(Errors.INVALID_REQUEST, f"negative partition {partition}")
    return None


async def _each(ctx, req: Any, run: Callable[[tuple, Any], Awaitable[Any]],
                result: Callable[[int, Any], Any], topic_result: Callable[..., Any]) -> list:
    """Run ``run(key, partition data)`` for every partition of the request (keys at once);
    ``result(partition, answer)`` builds each partition's entry."""
    denied = ctx.broker.authorizer is not None and not allowed_cluster(
        ctx, AclOperation.CLUSTER_ACTION)

    async def one(topic_id: uuid.UUID, p: Any) -> Any:
        if denied:
            return KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED, DENIED)
        key = (req.group_id, topic_id, p.partition)
        err = _invalid(*key)
        if err is not None:
            return err
        try:
            return await run(key, p)
        except KafkaError as e:
            return e

    out = []
    for t in req.topics:
        answers = await asyncio.gather(*(one(t.topic_id, p) for p in t.partitions))
        out.append(topic_result(topic_id=t.topic_id, partitions=[
            result(p.partition, a) for p, a in zip(t.partitions, answers, strict=True)]))
    return out


def _error(a: Any) -> tuple[int, str | None]:
    if isinstance(a, KafkaError):
        return a.code, a.message
    return 0, None


def _plain_result(cls: Any) -> Callable[[int, Any], Any]:
    def build(partition: int, a: Any) -> Any:
        code, msg = _error(a)
        return cls(partition=partition, error_code=code, error_message=msg)
    return build


@handles(83, 0, 0)
async def initialize_share_group_state(ctx, req: InitializeShareGroupStateRequest
                                       ) -> InitializeShareGroupStateResponse:
    rt = ctx.broker.share_state
    results = await _each(
        ctx, req, lambda key, p: rt.initialize(key, p.state_epoch, p.start_offset),
        _plain_result(iresp.PartitionResult), iresp.InitializeStateResult)
    return InitializeShareGroupStateResponse(results=results)


@handles(84, 0, 0)
async def read_share_group_state(ctx, req: ReadShareGroupStateRequest
                                 ) -> ReadShareGroupStateResponse:
    rt = ctx.broker.share_state

    def result(partition: int, a: Any) -> Any:
        if isinstance(a, KafkaError):
            return rresp.PartitionResult(partition=partition, error_code=a.code,
                                         error_message=a.message, state_epoch=0,
                                         start_offset=-1, state_batches=[])
        return rresp.PartitionResult(
            partition=partition, error_code=0, error_message=None, state_epoch=a.state_epoch,
            start_offset=a.start_offset, state_batches=[
                rresp.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                 delivery_state=b.delivery_state,
                                 delivery_count=b.delivery_count) for b in a.batches])

    results = await _each(ctx, req, lambda key, p: rt.read(key, p.leader_epoch), result,
                          rresp.ReadStateResult)
    return ReadShareGroupStateResponse(results=results)


@handles(85, 0, 1)
async def write_share_group_state(ctx, req: WriteShareGroupStateRequest
                                  ) -> WriteShareGroupStateResponse:
    rt = ctx.broker.share_state

    def run(key: tuple, p: Any) -> Awaitable[Any]:
        batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                   b.delivery_count) for b in p.state_batches)
        return rt.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)

    results = await _each(ctx, req, run, _plain_result(wresp.PartitionResult),
                          wresp.WriteStateResult)
    return WriteShareGroupStateResponse(results=results)


@handles(86, 0, 0)
async def delete_share_group_state(ctx, req: DeleteShareGroupStateRequest
                                   ) -> DeleteShareGroupStateResponse:
    rt = ctx.broker.share_state
    results = await _each(ctx, req, lambda key, p: rt.delete(key),
                          _plain_result(dresp.PartitionResult), dresp.DeleteStateResult)
    return DeleteShareGroupStateResponse(results=results)


@handles(87, 0, 1)
async def read_share_group_state_summary(ctx, req: ReadShareGroupStateSummaryRequest
                                         ) -> ReadShareGroupStateSummaryResponse:
    rt = ctx.broker.share_state

    def result(partition: int, a: Any) -> Any:
        if isinstance(a, KafkaError):
            return sresp.PartitionResult(partition=partition, error_code=a.code,
                                         error_message=a.message, state_epoch=0,
                                         leader_epoch=-1, start_offset=-1)
        return sresp.PartitionResult(partition=partition, error_code=0, error_message=None,
                                     state_epoch=a.state_epoch, leader_epoch=a.leader_epoch,
                                     start_offset=a.start_offset)

    results = await _each(ctx, req, lambda key, p: rt.read_summary(key, p.leader_epoch),
                          result, sresp.ReadStateSummaryResult)
    return ReadShareGroupStateSummaryResponse(results=results)
