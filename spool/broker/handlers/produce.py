"""Produce (0): validate each partition's batch, append it, answer per partition.

Advertised from v0 (old librdkafka stops compressing otherwise) but served
from v3: a v0-2 request gets UNSUPPORTED_VERSION for every partition, as
Kafka 4 does. Bad records never drop the connection: each partition gets
its own error code (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_TIMESTAMP...). A batch refused for some
of its records (a null key on a compacted topic, a timestamp out of range:
``spool.storage.record_checks``) names them in ``record_errors`` (KIP-467, v8+), so a
client fails those and sends the others again. As Kafka: lastOffsetDelta
must be recordsCount - 1, and an uncompressed batch must hold exactly
recordsCount records (INVALID_RECORD); a compressed batch is counted when it
claims more records than it has bytes, or when it is inflated anyway (a
compacted topic's key check, where a mismatch is CORRUPT_MESSAGE). acks=0 gets no
response at all. A storage failure (a full disk) is KAFKA_STORAGE_ERROR for
that partition; the connection stays and a later produce succeeds once space
returns. When ``flush.messages`` is reached the fsync runs in the executor,
not on the event loop, and the answer waits for it.

The append goes through the partition's leader (``broker.replicas``,
``spool.replica``): acks=all with an ISR smaller than the topic's
``min.insync.replicas`` is NOT_ENOUGH_REPLICAS, nothing appended (acks=0 and
acks=1 ignore the setting, as in Kafka); acks=all then answers once every ISR
member has the batch (the high watermark passed it): a delayed produce bounded
by the request's ``timeout_ms`` (REQUEST_TIMED_OUT), NOT_LEADER_OR_FOLLOWER if
leadership moves meanwhile, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
below ``min.insync.replicas``. On a single node the ISR is the leader alone and
the high watermark follows each append: acks=all answers at once.
"""

from __future__ import annotations

import asyncio
import logging

from spool.broker.registry import handles
from spool.protocol._generated import ProduceRequest, ProduceResponse
from spool.protocol._generated.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import validate_batch
from spool.records.record import check_record_count
from spool.replica.partition import NotLeader
from spool.storage.record_checks import RecordErrors, check_records, needs_record_checks

log = logging.getLogger("spool.produce")

MIN_SERVED_VERSION = 3


def append_partition(
    broker, topic: str, partition: int, records, now_ms: int, acks: int = 1, flush: bool = True,
    pending: list | None = None,
) -> PartitionProduceResponse:
    """Validate and append one partition's batch; with ``flush=False`` a due
    ``flush.messages`` fsync is left to the caller (``flush_due_partitions``). An acks=-1
    batch not yet replicated goes into ``pending`` as (topic, response, last offset):
    the caller waits for it (``wait_replicated``)."""
    resp = PartitionProduceResponse(index=partition, error_code=0, base_offset=-1,
                                    log_append_time_ms=-1, log_start_offset=-1)
    try:
        replicas = broker.replicas
        part = replicas.leader_partition(topic, partition)
        if records is None or len(records) == 0:
            raise KafkaError(Errors.INVALID_RECORD, "produce request without records")
        plog = part.log
        cfg = plog.config
        header = validate_batch(records, 0, max_size=cfg.max_message_bytes)
        if header.size != len(records):
            raise KafkaError(
                Errors.INVALID_RECORD, "a produce request must carry exactly one record batch per partition"
            )
        check_record_count(records, 0, header)
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise KafkaError(Errors.INVALID_RECORD, "a batch with a producer id needs a sequence")
        if needs_record_checks(cfg, header, now_ms):  # keys, timestamps: most topics skip it
            check_records(records, cfg, now_ms, f"{topic}-{partition}")
        append_time = now_ms if cfg.uses_log_append_time else None
        info = replicas.append_as_leader(part, records, acks=acks, now_ms=now_ms,
                                         log_append_time_ms=append_time, flush=flush)
    except NotLeader as e:
        resp.error_code = e.code
        resp.error_message = e.message
        resp.current_leader = LeaderIdAndEpoch(leader_id=e.leader, leader_epoch=e.leader_epoch)
        return resp
    except RecordErrors as e:
        _refused_records(resp, e, part.log.log_start_offset)
        return resp
    except KafkaError as e:
        resp.error_code = e.code
        resp.error_message = e.message
        return resp
    except OSError as e:  # storage failed (a full disk): this partition's error, not the connection's
        log.warning("produce to %s-%d failed: %s", topic, partition, e)
        resp.error_code = Errors.KAFKA_STORAGE_ERROR
        resp.error_message = str(e)
        return resp
    resp.base_offset = info.first_offset
    resp.log_append_time_ms = append_time if append_time is not None else -1
    resp.log_start_offset = plog.log_start_offset
    if acks == -1:  # a single node: done at once (the ISR is this broker)
        done, code = part.replication_status(info.last_offset + 1)
        if not done:
            if pending is None:
                raise RuntimeError("an acks=-1 append needs a pending list to wait in")
            pending.append((topic, resp, info.last_offset))
        elif code:
            resp.error_code = code
    return resp


def _refused_records(resp: PartitionProduceResponse, e: RecordErrors, log_start: int) -> None:
    """KIP-467: the batch is refused, and the answer names each failed record (v8+)."""
    resp.error_code = e.code
    resp.error_message = e.message
    resp.log_start_offset = log_start
    resp.record_errors = [BatchIndexAndErrorMessage(batch_index=r.batch_index,
                                                    batch_index_error_message=r.message)
                          for r in e.errors]


async def wait_replicated(broker, pending: list, timeout_ms: int) -> None:
    """The delayed produce: each pending partition answers once replicated, or with the
    error that ended its wait (module doc)."""
    async def one(topic: str, resp: PartitionProduceResponse, last_offset: int) -> None:
        try:
            await broker.replicas.wait_replicated(topic, resp.index, last_offset, timeout_ms)
        except KafkaError as e:
            resp.error_code = e.code
            resp.error_message = e.message

    if len(pending) == 1:
        await one(*pending[0])
    else:
        await asyncio.gather(*(one(*p) for p in pending))


async def flush_due_partitions(broker, appended: list[tuple[str, PartitionProduceResponse]]) -> None:
    """``flush.messages`` reached: fsync in the executor (not on the event loop); the
    answer waits for it, and a failed fsync is KAFKA_STORAGE_ERROR for the partition."""
    for topic, part in appended:
        try:
            plog = broker.get_log(topic, part.index)
        except KafkaError:  # deleted meanwhile: nothing left to flush
            continue
        if not plog.flush_due():
            continue
        try:
            await broker.run_blocking(plog.flush)
        except OSError as e:
            log.warning("flush of %s-%d failed: %s", topic, part.index, e)
            part.error_code = Errors.KAFKA_STORAGE_ERROR
            part.error_message = f"flush failed: {e}"


@handles(0, 0, 11)
async def produce(ctx, req: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    version = ctx.api_version
    now_ms = broker.clock.now_ms()
    topics = []
    appended: list[tuple[str, PartitionProduceResponse]] = []
    pending: list = []
    for t in req.topic_data:
        parts = []
        for p in t.partition_data:
            if version < MIN_SERVED_VERSION:
                parts.append(PartitionProduceResponse(index=p.index, error_code=Errors.UNSUPPORTED_VERSION))
            elif req.acks not in (0, 1, -1):
                parts.append(PartitionProduceResponse(index=p.index, error_code=Errors.INVALID_REQUIRED_ACKS))
            else:
                parts.append(append_partition(broker, t.name, p.index, p.records, now_ms,
                                              req.acks, flush=False, pending=pending))
                if parts[-1].error_code == 0:
                    appended.append((t.name, parts[-1]))
        topics.append(TopicProduceResponse(name=t.name, partition_responses=parts))
    await flush_due_partitions(broker, appended)
    if pending:
        await wait_replicated(broker, pending, req.timeout_ms)
    if req.acks == 0:
        return None
    return ProduceResponse(responses=topics, throttle_time_ms=0,
                           node_endpoints=_leader_endpoints(ctx, topics) if version >= 10 else [])


def _leader_endpoints(ctx, topics) -> list[NodeEndpoint]:
    """KIP-951: the endpoints of the leaders named in NOT_LEADER_OR_FOLLOWER answers."""
    leaders = {p.current_leader.leader_id for t in topics for p in t.partition_responses
               if p.error_code == Errors.NOT_LEADER_OR_FOLLOWER}
    view = ctx.broker.view
    listener = ctx.listener_name
    return [NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in (view.broker(n, listener) for n in sorted(leaders) if n >= 0) if b]
