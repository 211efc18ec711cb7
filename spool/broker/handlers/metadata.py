"""Metadata (3), DescribeCluster (60), OffsetForLeaderEpoch (23): what the cluster looks like.

Metadata lists this one broker as leader and sole replica of every
partition. ``topics`` null (v1+) means all topics; before v1 an empty list
meant all. Unknown topics are created when ``auto.create.topics.enable``
and the request allows it (``allow_auto_topic_creation``, v4+; always
before v4), never internal ones; otherwise UNKNOWN_TOPIC_OR_PARTITION.
Auto-creation runs in the executor (other clients are served meanwhile) and
obeys the broker's partition limit: beyond it the topic's error is
POLICY_VIOLATION. A partition listed in the metadata whose log does not
exist yet (a creation still running, or left uncreated by the limit) is
LEADER_NOT_AVAILABLE with leader -1, as Kafka reports a partition being
created. Internal topics are marked ``is_internal``.
"""

from __future__ import annotations

import uuid

from spool.broker.broker import INTERNAL_TOPICS, validate_topic_name
from spool.broker.registry import handles
from spool.protocol._generated import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from spool.protocol._generated.describe_cluster_response import DescribeClusterBroker
from spool.protocol._generated.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from spool.protocol._generated.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from spool.protocol.errors import Errors, KafkaError

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _topic_entry(broker, name: str) -> MetadataResponseTopic:
    meta = broker.metadata.topic(name)
    if meta is None:  # deleted while this request awaited its auto-creation
        return _error_topic(name, Errors.UNKNOWN_TOPIC_OR_PARTITION)
    node = broker.node_id
    logs = broker.logs
    return MetadataResponseTopic(
        error_code=0,
        name=name,
        topic_id=uuid.UUID(meta.topic_id),
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            MetadataResponsePartition(
                error_code=0, partition_index=i, leader_id=node, leader_epoch=broker.leader_epoch,
                replica_nodes=[node], isr_nodes=[node], offline_replicas=[],
            )
            if logs.get(name, i) is not None else
            MetadataResponsePartition(
                error_code=Errors.LEADER_NOT_AVAILABLE, partition_index=i, leader_id=-1,
                leader_epoch=-1, replica_nodes=[node], isr_nodes=[], offline_replicas=[],
            )
            for i in range(meta.partitions)
        ],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _error_topic(name: str, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, is_internal=False, partitions=[],
                                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


@handles(3, 0, 12)
async def metadata(ctx, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    host, port = broker.advertised_address_for(ctx.listener_name)
    if req.topics is None or (version == 0 and not req.topics):
        names = broker.topic_names()
        requested = False
    else:
        names = [t.name for t in req.topics]
        requested = True
    allow_create = req.allow_auto_topic_creation if version >= 4 else True
    topics = []
    for name in names:
        if name is None:
            topics.append(_error_topic("", Errors.INVALID_TOPIC_EXCEPTION))
            continue
        if requested and not broker.has_topic(name):
            try:
                validate_topic_name(name)
            except KafkaError as e:
                topics.append(_error_topic(name, e.code))
                continue
            created = False
            if allow_create:
                try:
                    created = await broker.run_blocking(broker.auto_create_topic, name)
                except KafkaError as e:
                    topics.append(_error_topic(name, e.code))
                    continue
            if not created:
                topics.append(_error_topic(name, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
        topics.append(_topic_entry(broker, name))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


@handles(60, 0, 1)
async def describe_cluster(ctx, req: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    host, port = broker.advertised_address_for(ctx.listener_name)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=broker.cluster_id, controller_id=broker.node_id,
        brokers=[DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


@handles(23, 2, 4)
async def offset_for_leader_epoch(ctx, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    """One leader epoch so far: any requested epoch >= 0 ends at the log end offset."""
    broker = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            try:
                plog = broker.get_log(t.topic, p.partition)
                cur = p.current_leader_epoch
                if cur >= 0 and cur < broker.leader_epoch:
                    raise KafkaError(Errors.FENCED_LEADER_EPOCH)
                if cur > broker.leader_epoch:
                    raise KafkaError(Errors.UNKNOWN_LEADER_EPOCH)
                if p.leader_epoch >= broker.leader_epoch:
                    r.leader_epoch = broker.leader_epoch
                    r.end_offset = plog.log_end_offset
            except KafkaError as e:
                r.error_code = e.code
            parts.append(r)
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
