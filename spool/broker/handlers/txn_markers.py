"""WriteTxnMarkers (27): a transaction coordinator on another broker closes a transaction here.

In a cluster the coordinator of a transaction writes its COMMIT/ABORT markers to
the partitions it leads itself and sends the others to their leaders with this
request (Kafka's ``TransactionMarkerChannelManager``). For each partition the
marker is appended as the coordinator would have appended it locally: to the
log this broker leads (``PartitionLogWriter``; otherwise NOT_LEADER_OR_FOLLOWER,
and the coordinator asks the new leader), in its leader epoch, waking the
fetches waiting on it, and answered once replicated (acks=-1, as Kafka: within
``request.timeout.ms``, else REQUEST_TIMED_OUT, and the coordinator retries).
A marker reaching a ``__consumer_offsets`` partition applies (commit) or drops
(abort) the group coordinator's pending transactional offsets there; while the
group coordinator is loading that partition the answer is
COORDINATOR_LOAD_IN_PROGRESS, and the coordinator sends it again. Errors are per
partition: the producer's newer epoch already there is INVALID_PRODUCER_EPOCH, a
partition that does not exist UNKNOWN_TOPIC_OR_PARTITION (the coordinator treats
both as done), a disk error KAFKA_STORAGE_ERROR (it retries). v2 names the marker's
transaction version: at 2 (KIP-890) its epoch must be above the producer's here, else
INVALID_PRODUCER_EPOCH (a late or repeated marker).

With an authorizer (``spool.broker.authz``) the sender needs ALTER or CLUSTER_ACTION on
the cluster, as Kafka; else every partition is CLUSTER_AUTHORIZATION_FAILED, nothing
written.
"""

from __future__ import annotations

import asyncio
import logging

from spool.broker.authz import allowed_cluster
from spool.broker.coordinator_log import PartitionLogWriter
from spool.broker.registry import handles
from spool.broker.txn_runtime import marker_already_written
from spool.protocol._generated import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from spool.protocol._generated.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.records.builder import build_control_batch

log = logging.getLogger("spool.txn_markers")

OFFSETS_TOPIC = "__consumer_offsets"


async def _write(broker, topic: str, partition: int, marker) -> int:
    commit = marker.transaction_result
    groups = broker.groups
    if topic == OFFSETS_TOPIC and groups is not None and partition in groups.topic.loading:
        # its pending transactional offsets are being read: the coordinator sends it again
        return Errors.COORDINATOR_LOAD_IN_PROGRESS
    writer = PartitionLogWriter(broker)
    try:
        batch = build_control_batch(marker.producer_id, marker.producer_epoch, commit,
                                    marker.coordinator_epoch, 0, broker.clock.now_ms())
        last = writer.append(topic, partition, bytearray(batch),
                             transaction_version=marker.transaction_version)
        if last is not None and not writer.replicated(topic, partition, last):
            await writer.wait_replicated(topic, partition, last,
                                         broker.config.get_int("request.timeout.ms"))
    except KafkaError as e:
        if (e.code == Errors.INVALID_PRODUCER_EPOCH and marker.transaction_version >= 2
                and topic == OFFSETS_TOPIC and groups is not None
                and marker_already_written(broker, topic, partition, marker.producer_id,
                                           marker.producer_epoch)):
            groups.txn_offsets.complete(marker.producer_id, partition, commit,
                                        groups.coordinator.load)
        return e.code
    except OSError as e:
        log.warning("marker to %s-%d failed: %s", topic, partition, e)
        return Errors.KAFKA_STORAGE_ERROR
    if topic == OFFSETS_TOPIC and groups is not None:
        groups.txn_offsets.complete(marker.producer_id, partition, commit,
                                    groups.coordinator.load)
    return 0


@handles(27, 1, 2)
async def write_txn_markers(ctx, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    broker = ctx.broker
    todo = [(m, t, p) for m in req.markers for t in m.topics for p in t.partition_indexes]
    if broker.authorizer is not None and not (
            allowed_cluster(ctx, AclOperation.ALTER, log_denied=False)
            or allowed_cluster(ctx, AclOperation.CLUSTER_ACTION)):
        codes = iter([Errors.CLUSTER_AUTHORIZATION_FAILED] * len(todo))
    else:
        codes = iter(await asyncio.gather(*(_write(broker, t.name, p, m) for m, t, p in todo)))
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=p, error_code=next(codes))
                for p in t.partition_indexes])
            for t in m.topics])
        for m in req.markers])
