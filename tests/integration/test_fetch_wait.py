"""Fetch long polling: a fetch waits for min_bytes (or max_wait_ms), appends wake it."""

from __future__ import annotations

import select

from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import FetchRequest, ProduceRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.batch import iter_batches
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient

VERSION = 11


def batch(value: bytes) -> bytes:
    b = BatchBuilder()
    b.append(None, value, timestamp=1_700_000_000_000)
    return b.build()


def produce(bootstrap: str, topic: str, records: bytes) -> None:
    c = RawClient(bootstrap)
    try:
        resp = c.request(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ]))
        assert resp.responses[0].partition_responses[0].error_code == 0
    finally:
        c.close()


def test_fetch_waits_for_min_bytes_across_appends(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    small = batch(b"x" * 100)
    min_bytes = 3 * len(small)
    fetcher = RawClient(broker.bootstrap, timeout=30)
    req = FetchRequest(replica_id=-1, max_wait_ms=20_000, min_bytes=min_bytes, max_bytes=1 << 20,
                       isolation_level=0, topics=[FetchTopic(topic=topic_name, partitions=[
                           FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    fetcher.send(1, VERSION, req)

    produce(broker.bootstrap, topic_name, small)
    produce(broker.bootstrap, topic_name, batch(b"y" * 100))
    # two appends, fewer than min_bytes: the fetch is still waiting (max_wait is 20 s)
    readable, _, _ = select.select([fetcher.sock], [], [], 1.0)
    assert not readable, "the fetch answered before min_bytes were there"

    produce(broker.bootstrap, topic_name, batch(b"z" * 100))
    _, resp = fetcher.recv(1, VERSION)
    records = resp.responses[0].partitions[0].records
    assert len(records) >= min_bytes
    assert [h.base_offset for _, h in iter_batches(records)] == [0, 1, 2]
    fetcher.close()
