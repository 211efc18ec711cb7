"""DescribeProducers (61) v0: the active producers of partitions this broker leads.

As Kafka's ``KafkaApis.handleDescribeProducersRequest`` and
``Partition.activeProducerState``, per requested partition:

- an illegal topic name is INVALID_TOPIC_EXCEPTION, then (with an authorizer,
  ``spool.broker.authz``) a topic the principal may not READ TOPIC_AUTHORIZATION_FAILED,
  then a topic the metadata does not know UNKNOWN_TOPIC_OR_PARTITION, for each of its
  partitions;
- a partition this broker does not lead (a follower, not a replica, no leader) is
  NOT_LEADER_OR_FOLLOWER; one the metadata does not know (or whose log is still being
  created on a single node) UNKNOWN_TOPIC_OR_PARTITION;
- otherwise every producer the log's producer state keeps
  (``spool.storage.producer_state``): producer id, epoch, the last sequence of its
  last data batch (-1: none kept), the timestamp of its last batch, the coordinator
  epoch of its last transaction marker (-1: none) and the first offset of its open
  transaction (-1: none). Expired producers are gone, as in Kafka.

The answer lists topics and partitions in request order.
"""

from __future__ import annotations

from spool.broker.authz import allowed
from spool.broker.broker import validate_topic_name
from spool.broker.registry import handles
from spool.protocol._generated import DescribeProducersRequest, DescribeProducersResponse
from spool.protocol._generated.describe_producers_response import (
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError


def _topic_error(ctx, name: str) -> KafkaError | None:
    broker = ctx.broker
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return KafkaError(Errors.INVALID_TOPIC_EXCEPTION, e.message)
    if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name):
        return KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    if broker.view.topic(name) is None:
        return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return None


def _partition(broker, topic: str, index: int) -> PartitionResponse:
    try:
        plog = broker.replicas.leader_partition(topic, index).log
    except KafkaError as e:
        return PartitionResponse(partition_index=index, error_code=e.code,
                                 error_message=e.message, active_producers=[])
    return PartitionResponse(partition_index=index, error_code=0, active_producers=[
        ProducerState(producer_id=a.producer_id, producer_epoch=a.producer_epoch,
                      last_sequence=a.last_sequence, last_timestamp=a.last_timestamp,
                      coordinator_epoch=a.coordinator_epoch,
                      current_txn_start_offset=a.current_txn_start_offset)
        for a in plog.active_producers()])


@handles(61, 0, 0)
async def describe_producers(ctx, req: DescribeProducersRequest) -> DescribeProducersResponse:
    broker = ctx.broker
    topics = []
    for t in req.topics:
        err = _topic_error(ctx, t.name)
        if err is not None:
            parts = [PartitionResponse(partition_index=i, error_code=err.code,
                                       error_message=err.message, active_producers=[])
                     for i in t.partition_indexes]
        else:
            parts = [_partition(broker, t.name, i) for i in t.partition_indexes]
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
