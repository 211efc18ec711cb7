"""DescribeTopicPartitions (75, KIP-966): topics and their partitions, a page at a time.

Answered from the broker's ``MetadataView`` alone, as Kafka's
``DescribeTopicPartitionsRequestHandler`` answers from its metadata cache:

- ``topics`` empty means every topic; otherwise the named ones. Either way
  only names >= the ``cursor``'s topic are taken, in name order.
- A ``cursor`` naming a topic not in a non-empty ``topics`` list, or with a
  negative partition index, is INVALID_REQUEST for every requested topic
  (Kafka throws InvalidRequestException; its error response says so per topic).
- The response holds at most ``response_partition_limit`` partitions, clamped
  to 1..2000 (Kafka's ``max.request.partition.size.limit`` default). The cursor's
  topic starts at the cursor's partition, every other topic at 0. When the limit
  stops inside a topic, ``next_cursor`` is that topic and the first partition not
  sent; when it is used up exactly at a topic's end and topics remain,
  ``next_cursor`` is the next topic at partition 0; otherwise it is null.
- A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (with a zero
  topic id), or INVALID_TOPIC_EXCEPTION if its name is illegal; with ``topics``
  empty such errors are omitted (a topic deleted meanwhile simply is not listed).
- Per partition: leader (-1: none, error still 0 as in Kafka), leader epoch,
  replicas, ISR and offline replicas as the view has them; ``eligible_leader_replicas``
  and ``last_known_elr`` are empty (Spool keeps no ELR). ``is_internal`` marks
  Kafka's internal topics; every answered topic (unknown ones too, as Kafka's handler
  does) carries ``topic_authorized_operations`` from ``spool.broker.authz``
  (without an authorizer: all a topic supports, 3576).
- With an authorizer, topics the principal may not DESCRIBE are left out; those it named
  are answered TOPIC_AUTHORIZATION_FAILED (zero topic id, no operations) after the
  others, as Kafka's handler does: nothing disclosed of whether they exist.
"""

from __future__ import annotations

from spool.broker.authz import allowed_names, authorized_operations
from spool.broker.broker import INTERNAL_TOPICS, validate_topic_name
from spool.broker.registry import handles
from spool.protocol._generated import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from spool.protocol._generated.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def _error_topic(name: str, code: int, is_internal: bool) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=code, name=name, is_internal=is_internal, partitions=[])


def _unknown_code(name: str) -> int:
    try:
        validate_topic_name(name)
    except KafkaError:
        return Errors.INVALID_TOPIC_EXCEPTION
    return Errors.UNKNOWN_TOPIC_OR_PARTITION


@handles(75, 0, 0)
async def describe_topic_partitions(
        ctx, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    view = ctx.broker.view
    cursor = req.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    all_topics = not req.topics
    source = view.topic_names() if all_topics else (t.name for t in req.topics)
    names = sorted({n for n in source if n >= start_name})
    if cursor is not None and (cursor.partition_index < 0
                               or (not all_topics and cursor.topic_name not in names)):
        return DescribeTopicPartitionsResponse(
            throttle_time_ms=0,
            topics=[_error_topic(t.name, Errors.INVALID_REQUEST, False) for t in req.topics])
    refused: list[DescribeTopicPartitionsResponseTopic] = []
    if ctx.broker.authorizer is not None:
        seen = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if not all_topics:
            refused = [_error_topic(n, Errors.TOPIC_AUTHORIZATION_FAILED, False)
                       for n in names if n not in seen]
        names = [n for n in names if n in seen]
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit), 1)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = view.topic(name)
        if topic is None:
            if not all_topics:
                topics.append(_error_topic(name, _unknown_code(name), name in INTERNAL_TOPICS))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        end = min(len(topic.partitions), first + remaining)
        parts = [
            DescribeTopicPartitionsResponsePartition(
                error_code=0, partition_index=p.partition_index, leader_id=p.leader,
                leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr), eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=list(p.offline_replicas))
            for p in topic.partitions[first:end]
        ]
        topics.append(DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=topic.topic_id,
            is_internal=name in INTERNAL_TOPICS, partitions=parts))
        if end < len(topic.partitions):
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(parts)
    for t in topics:  # every answered topic, as Kafka (AuthHelper: all ops without an authorizer)
        t.topic_authorized_operations = authorized_operations(ctx, ResourceType.TOPIC, t.name)
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics + refused,
                                           next_cursor=next_cursor)
