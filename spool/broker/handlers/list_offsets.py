"""ListOffsets (2) 1-11: an offset of each partition by timestamp or by a special one.

Special timestamps, each from the version Kafka accepts it (below it, or any other
negative timestamp: UNSUPPORTED_VERSION for that partition, as Kafka's
``isListOffsetsTimestampUnsupported``):

- latest (-1, v1+): the high watermark, or the last stable offset under read_committed,
  with the leader's epoch;
- earliest (-2, v1+): the log start offset;
- max timestamp (-3, v7+, KIP-734): the offset and timestamp of the first record carrying
  the largest timestamp;
- earliest local (-4, v8+, KIP-405): the first offset on local disk; Spool has no tiered
  storage, so it is the log start offset, as Kafka answers for a topic without it;
- latest tiered (-5, v9+, KIP-1005) and earliest pending upload (-6, v11+, KIP-1023):
  nothing is in tiered storage, so offset -1 and leader epoch -1, as Kafka answers for a
  topic without remote storage.

By timestamp: the first offset whose record timestamp is at or after the target (the log's
time index, then a scan of the batch); none gives offset -1 and timestamp -1. A timestamp
or max-timestamp answer at or past what the requester may read (for a consumer, replica
id -1: the high watermark, or the last stable offset under read_committed; for anyone
else the log end) is offset -1 and timestamp -1 too, as Kafka hides records not yet
committed. The leader epoch answered is the one that wrote the offset (Kafka's): the
earliest cached epoch for earliest, the batch's for a timestamp.
A new leader whose high watermark has not yet reached the start of its epoch answers a
consumer's latest, and a lookup with nothing readable, OFFSET_NOT_AVAILABLE (retriable;
LEADER_NOT_AVAILABLE below v5, ``spool.protocol.error_versions``), as Kafka.
A topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED for each of its
partitions (``spool.broker.authz``; Kafka's check). A partition listed twice is
INVALID_REQUEST for both. ``timeout_ms`` (v10+, KIP-1075)
bounds Kafka's wait on remote storage; Spool answers from local disk at once.
"""

from __future__ import annotations

from spool.broker.authz import allowed_names
from spool.broker.registry import handles
from spool.protocol._generated import ListOffsetsRequest, ListOffsetsResponse
from spool.protocol._generated.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
CONSUMER_REPLICA_ID = -1

# The first ListOffsets version that accepts each special timestamp (Kafka's table).
MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
               EARLIEST_PENDING_UPLOAD: 11}


def _lookup(plog, timestamp: int, leader_epoch: int, fetchable: int,
            lagging: bool = False) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) for one special or real timestamp. ``lagging``:
    this leader's high watermark has not reached its epoch's start yet, so what a
    consumer may read is not known: latest, and a lookup without a readable answer, are
    OFFSET_NOT_AVAILABLE (retriable), as Kafka's ``Partition.fetchOffsetForTimestamp``."""
    if timestamp == LATEST:
        if lagging:
            raise KafkaError(Errors.OFFSET_NOT_AVAILABLE, "the high watermark lags behind the "
                             "start of this leader's epoch")
        return -1, fetchable, leader_epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        start = plog.log_start_offset
        first = plog.leader_epochs.earliest_entry()
        return -1, start, (first.epoch if first is not None and first.start_offset <= start
                           else -1)
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1, -1
    found = (plog.max_timestamp_offset() if timestamp == MAX_TIMESTAMP
             else plog.offset_for_timestamp(timestamp))
    if found is None or found[0] >= fetchable:
        if lagging:
            raise KafkaError(Errors.OFFSET_NOT_AVAILABLE, "the high watermark lags behind the "
                             "start of this leader's epoch")
        return -1, -1, -1
    offset, ts = found
    return ts, offset, plog.leader_epochs.epoch_for(offset)


@handles(2, 1, 11)
async def list_offsets(ctx, req: ListOffsetsRequest) -> ListOffsetsResponse:
    seen: set[tuple[str, int]] = set()
    twice = set()
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            (twice if tp in seen else seen).add(tp)
    topics = []
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:  # Kafka: DESCRIBE on each topic
        named = {t.name for t in req.topics}
        denied = named - allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
    for t in req.topics:
        if t.name in denied:
            parts = [ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                timestamp=-1, offset=-1, leader_epoch=-1) for p in t.partitions]
        else:
            parts = [_partition(ctx, req, t.name, p, (t.name, p.partition_index) in twice)
                     for p in t.partitions]
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _partition(ctx, req: ListOffsetsRequest, topic: str, p, duplicate: bool
               ) -> ListOffsetsPartitionResponse:
    r = ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                     timestamp=-1, offset=-1, leader_epoch=-1)
    if duplicate:
        r.error_code = Errors.INVALID_REQUEST
        return r
    if p.timestamp < 0 and ctx.api_version < MIN_VERSION.get(p.timestamp, 1 << 15):
        r.error_code = Errors.UNSUPPORTED_VERSION
        return r
    plog = None
    try:
        part = ctx.broker.replicas.leader_partition(topic, p.partition_index)
        plog, epoch = part.log, part.leader_epoch
        cur = p.current_leader_epoch
        if cur >= 0 and cur != epoch:
            raise KafkaError(Errors.FENCED_LEADER_EPOCH if cur < epoch
                             else Errors.UNKNOWN_LEADER_EPOCH)
        if req.replica_id != CONSUMER_REPLICA_ID:
            fetchable = plog.log_end_offset
        elif req.isolation_level == 1:
            fetchable = plog.last_stable_offset
        else:
            fetchable = plog.high_watermark
        # a new leader whose HW has not caught up with its epoch's start (Kafka's check,
        # for consumers only); a single node's partitions never lag
        lagging = (req.replica_id == CONSUMER_REPLICA_ID
                   and getattr(part, "epoch_start_offset", -1) > plog.high_watermark)
        r.timestamp, r.offset, r.leader_epoch = _lookup(plog, p.timestamp, epoch, fetchable,
                                                        lagging)
    except KafkaError as e:
        r.error_code = e.code
    except OSError:  # the partition was deleted meanwhile, or its disk failed
        r.error_code = (Errors.UNKNOWN_TOPIC_OR_PARTITION if plog is not None
                        and plog.closed else Errors.KAFKA_STORAGE_ERROR)
    return r
