"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp.

Latest is the high watermark, or the last stable offset under
read_committed. By timestamp: the first offset whose record timestamp is
at or after the target (the log's time index, then a scan of the batch);
none gives offset -1 and timestamp -1, as in Kafka.
"""

from __future__ import annotations

from spool.broker.registry import handles
from spool.protocol._generated import ListOffsetsRequest, ListOffsetsResponse
from spool.protocol._generated.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from spool.protocol.errors import Errors, KafkaError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def _lookup(broker, plog, timestamp: int, isolation_level: int) -> tuple[int, int]:
    if timestamp == LATEST:
        return -1, (plog.last_stable_offset if isolation_level == 1 else plog.high_watermark)
    if timestamp == EARLIEST:
        return -1, plog.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
    elif timestamp < 0:
        raise KafkaError(Errors.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    offset, ts = found
    return ts, offset


@handles(2, 1, 7)
async def list_offsets(ctx, req: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                             timestamp=-1, offset=-1, leader_epoch=-1)
            plog = None
            try:
                part = broker.replicas.leader_partition(t.name, p.partition_index)
                plog, epoch = part.log, part.leader_epoch
                cur = p.current_leader_epoch
                if cur >= 0 and cur != epoch:
                    raise KafkaError(Errors.FENCED_LEADER_EPOCH if cur < epoch
                                     else Errors.UNKNOWN_LEADER_EPOCH)
                r.timestamp, r.offset = _lookup(broker, plog, p.timestamp, req.isolation_level)
                if r.offset >= 0:
                    r.leader_epoch = epoch
            except KafkaError as e:
                r.error_code = e.code
            except OSError:  # the partition was deleted meanwhile, or its disk failed
                r.error_code = (Errors.UNKNOWN_TOPIC_OR_PARTITION if plog is not None
                                and plog.closed else Errors.KAFKA_STORAGE_ERROR)
            parts.append(r)
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
