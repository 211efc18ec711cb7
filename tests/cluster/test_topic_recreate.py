"""A topic deleted and created again under its name on a real 3-node cluster: every broker
answers the old topic ID with UNKNOWN_TOPIC_ID (Fetch v13, Produce v13), the new ID serves
the new topic only, and a consumer group that had committed offsets in the old topic starts
the new one from auto.offset.reset (the coordinator dropped them when its image lost the
topic), never at the old topic's offsets."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import FetchRequest, MetadataRequest, ProduceRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(240)


def fetch_by_id(bootstrap: str, tid: uuid.UUID):
    req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[FetchTopic(
        topic_id=tid, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                 partition_max_bytes=1 << 20)])])
    [p] = request_once(bootstrap, 1, 13, req).responses[0].partitions
    return p.error_code, sum(h.records_count for _, h in iter_batches(bytes(p.records or b"")))


def produce_by_id(bootstrap: str, tid: uuid.UUID) -> int:
    b = BatchBuilder()
    b.append(None, b"stale", timestamp=1_700_000_000_000)
    resp = request_once(bootstrap, 0, 13, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(topic_id=tid, partition_data=[
            PartitionProduceData(index=0, records=b.build())])]))
    return resp.responses[0].partition_responses[0].error_code


def topic_id(bootstrap: str) -> uuid.UUID:
    md = request_once(bootstrap, 3, 12, MetadataRequest(
        topics=[MetadataRequestTopic(name="again")], allow_auto_topic_creation=False))
    assert md.topics[0].error_code == 0
    return md.topics[0].topic_id


def consume(consumer, n: int) -> list[tuple[bytes, int]]:
    got: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append((m.value(), m.offset()))
    return got


def test_a_recreated_topic_is_new_on_every_broker(cluster_factory):
    cluster = cluster_factory(proxied=False).start()
    cluster.wait_formed()
    boot = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic("again", 1, 3)])["again"].result(30)
    producer = Producer({"bootstrap.servers": boot, "acks": "all"})
    for i in range(3):
        producer.produce("again", value=b"old%d" % i)
    assert producer.flush(30) == 0
    group = {"bootstrap.servers": boot, "group.id": "g-again", "auto.offset.reset": "earliest",
             "enable.auto.commit": False}
    c = Consumer(group)
    c.subscribe(["again"])
    try:
        assert consume(c, 3) == [(b"old%d" % i, i) for i in range(3)]
        c.commit(asynchronous=False)
    finally:
        c.close()
    old = topic_id(cluster.nodes[1].bootstrap)

    admin.delete_topics(["again"])["again"].result(30)
    for n, node in cluster.nodes.items():
        cluster.wait_until(f"node {n} forgets the old id", lambda node=node: (
            True if fetch_by_id(node.bootstrap, old)[0] == Errors.UNKNOWN_TOPIC_ID
            else "not yet"))
    admin.create_topics([NewTopic("again", 1, 3)])["again"].result(30)
    for i in range(5):
        producer.produce("again", value=b"new%d" % i)
    assert producer.flush(30) == 0

    assert topic_id(cluster.nodes[1].bootstrap) != old
    for node in cluster.nodes.values():  # the old id stays unknown; nothing written under it
        assert fetch_by_id(node.bootstrap, old) == (Errors.UNKNOWN_TOPIC_ID, 0)
        assert produce_by_id(node.bootstrap, old) == Errors.UNKNOWN_TOPIC_ID
    c = Consumer(group)
    c.subscribe(["again"])
    try:
        assert consume(c, 5) == [(b"new%d" % i, i) for i in range(5)]
    finally:
        c.close()
