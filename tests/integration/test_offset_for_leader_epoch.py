"""OffsetForLeaderEpoch (23) against a real broker, answered from the log's leader epoch cache.

The partition's log holds records of several leader epochs: produced through the broker
(epoch 0), then, with the broker stopped, batches appended as a follower appends them (their
own epochs, 3 and 5), then the broker started again. Each requested epoch must end where
Kafka's LeaderEpochFileCache says: at the start of the next epoch the log knows, at the log
end for the latest, -1/-1 for an epoch above every known one or undefined; a partition with
nothing appended yet answers (epoch, 0); a current_leader_epoch above the broker's is
UNKNOWN_LEADER_EPOCH; an unknown partition UNKNOWN_TOPIC_OR_PARTITION; v2 and v4 (with a
replica id) alike.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.net.client import NodeClient
from spool.protocol._generated import OffsetForLeaderEpochRequest
from spool.protocol._generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from spool.protocol.errors import Errors
from spool.records.batch import patch_partition_leader_epoch
from spool.storage.log import PartitionLog
from tests.helpers.storage_batches import make_batch

pytestmark = pytest.mark.timeout(120)


def ask(port: int, topic: str, queries: list[tuple[int, int, int]], version: int = 4,
        replica_id: int = 1) -> list[tuple[int, int, int]]:
    """(partition, current_leader_epoch, leader_epoch) -> (error, epoch, end_offset)."""
    async def go():
        client = NodeClient("127.0.0.1", port, client_id="ofle-test")
        try:
            req = OffsetForLeaderEpochRequest(
                replica_id=replica_id,
                topics=[OffsetForLeaderTopic(topic=topic, partitions=[
                    OffsetForLeaderPartition(partition=p, current_leader_epoch=cur,
                                             leader_epoch=e) for p, cur, e in queries])])
            return await client.request(req, version)
        finally:
            await client.close()

    resp = asyncio.run(go())
    [t] = resp.topics
    assert t.topic == topic
    return [(r.error_code, r.leader_epoch, r.end_offset) for r in t.partitions]


def follower_batch(base: int, count: int, epoch: int) -> bytearray:
    b = make_batch(count, base_offset=base, tag=base)
    patch_partition_leader_epoch(b, 0, epoch)
    return b


def test_end_offsets_come_from_the_leader_epoch_cache(fresh_broker, topic_name):
    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(3):
        p.produce(topic_name, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    assert ask(b.port, topic_name, [(0, 0, 0), (1, -1, 0)]) == [(0, 0, 3), (0, 0, 0)]
    b.stop()

    log = PartitionLog(b.data_dir / f"{topic_name}-0")
    log.append(follower_batch(3, 2, 3) + follower_batch(5, 1, 3), assign_offsets=False)
    log.append(follower_batch(6, 2, 5), assign_offsets=False)
    log.close()
    b.start()

    queries = [(0, -1, e) for e in (0, 1, 2, 3, 4, 5, 6, -1)]
    expected = [(0, 0, 3), (0, 0, 3), (0, 0, 3), (0, 3, 6), (0, 3, 6), (0, 5, 8),
                (0, -1, -1), (0, -1, -1)]
    assert ask(b.port, topic_name, queries) == expected
    assert ask(b.port, topic_name, queries, version=2, replica_id=-2) == expected
    assert ask(b.port, topic_name, queries, replica_id=-1) == expected  # a consumer
    assert ask(b.port, topic_name, [(0, 0, 3), (0, 1, 3), (7, -1, 0)]) == [
        (0, 3, 6),
        (Errors.UNKNOWN_LEADER_EPOCH, -1, -1),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]
    assert ask(b.port, "no-such-topic", [(0, -1, 0)]) == [
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
