"""Bad input never crashes the broker nor loses stored data; each gets Kafka's answer."""

from __future__ import annotations

import os
import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import (
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
)
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient


@pytest.fixture
def topic(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(topic_name, key=b"k%d" % i, value=b"stored-%d" % i)
    assert p.flush(10) == 0
    return topic_name


def stored_values(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        out = []
        for _ in range(20):
            out += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
            if len(out) >= 10:
                break
        return out
    finally:
        c.close()


def batch(n: int = 3, **kw) -> bytes:
    b = BatchBuilder(**kw)
    for i in range(n):
        b.append(b"k%d" % i, b"v%d" % i, timestamp=1_700_000_000_000 + i)
    return b.build()


def produce(client: RawClient, topic: str, records: bytes, version: int = 9, acks: int = 1):
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
    ])
    if acks == 0:
        client.send(0, version, req)
        return None
    resp = client.request(0, version, req)
    return resp.responses[0].partition_responses[0]


def still_serving(broker, topic: str) -> None:
    c = RawClient(broker.bootstrap)
    try:
        resp = c.request(3, 1, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
        assert resp.topics[0].error_code == 0
    finally:
        c.close()
    assert stored_values(broker.bootstrap, topic) == [b"stored-%d" % i for i in range(10)]


def test_negative_frame_size_closes_the_connection(broker, topic):
    c = RawClient(broker.bootstrap)
    c.send_raw(struct.pack(">i", -5) + b"junk")
    assert c.is_closed_by_peer()
    still_serving(broker, topic)


def test_oversized_request_closes_the_connection(broker, topic):
    c = RawClient(broker.bootstrap)
    c.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 100)
    assert c.is_closed_by_peer()
    still_serving(broker, topic)


def test_garbage_bytes_close_the_connection(broker, topic):
    c = RawClient(broker.bootstrap)
    junk = os.urandom(64)
    c.send_raw(struct.pack(">i", len(junk)) + junk)
    assert c.is_closed_by_peer()
    still_serving(broker, topic)


def test_half_a_frame_then_hang_up(broker, topic):
    c = RawClient(broker.bootstrap)
    c.send_raw(struct.pack(">i", 100) + b"\x00\x03")
    c.close()
    still_serving(broker, topic)


def test_unknown_api_key_closes_the_connection(broker, topic):
    c = RawClient(broker.bootstrap)
    body = struct.pack(">hhih", 999, 0, 1, -1)
    c.send_raw(struct.pack(">i", len(body)) + body)
    assert c.is_closed_by_peer()
    still_serving(broker, topic)


def test_unsupported_metadata_version_closes_the_connection(broker, topic):
    c = RawClient(broker.bootstrap)
    body = struct.pack(">hhih", 3, 99, 1, -1)
    c.send_raw(struct.pack(">i", len(body)) + body)
    assert c.is_closed_by_peer()
    still_serving(broker, topic)


def test_api_versions_unknown_version_gets_v0_error_and_the_list(broker):
    c = RawClient(broker.bootstrap)
    body = struct.pack(">hhih", 18, 77, 42, -1) + b"\x00" * 8
    c.send_raw(struct.pack(">i", len(body)) + body)
    cid, resp = c.recv(18, 0, header_version=False)
    assert cid == 42
    assert resp.error_code == Errors.UNSUPPORTED_VERSION
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[0][0] == 0  # Produce advertised from v0 (old librdkafka, KAFKA-18659)
    assert keys[18] == (0, 4)
    resp = c.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert resp.error_code == 0


def test_corrupt_batch_gets_corrupt_message_and_the_connection_stays(broker, topic):
    c = RawClient(broker.bootstrap)
    good = bytearray(batch())
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # inside the CRC-covered records
    r = produce(c, topic, bytes(bad))
    assert r.error_code == Errors.CORRUPT_MESSAGE
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    assert produce(c, topic, bytes(wrong_magic)).error_code == Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert produce(c, topic, bytes(good[:40])).error_code == Errors.CORRUPT_MESSAGE
    two = bytes(good) + bytes(good)
    assert produce(c, topic, two).error_code == Errors.INVALID_RECORD
    control = batch(is_control=True, producer_id=1, producer_epoch=0)
    assert produce(c, topic, control).error_code == Errors.INVALID_RECORD
    assert produce(c, "no-such-topic-here", bytes(good)).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    ok = produce(c, topic, bytes(good))
    assert ok.error_code == 0 and ok.base_offset == 10
    c.close()
    values = stored_values(broker.bootstrap, topic)
    assert values[:10] == [b"stored-%d" % i for i in range(10)]


def test_old_produce_versions_are_refused_per_partition(broker, topic):
    c = RawClient(broker.bootstrap)
    r = produce(c, topic, batch(), version=2)
    assert r.error_code == Errors.UNSUPPORTED_VERSION
    c.close()
    still_serving(broker, topic)


def test_acks_zero_gets_no_response_and_the_next_request_is_answered(broker, topic):
    c = RawClient(broker.bootstrap)
    produce(c, topic, batch(), acks=0)
    resp = c.request(3, 1, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
    assert resp.topics[0].name == topic
    assert produce(c, topic, batch(), acks=5).error_code == Errors.INVALID_REQUIRED_ACKS
    c.close()


def test_invalid_topic_names_in_metadata(fresh_broker):
    # a broker of its own: on the shared one a group test may have created __consumer_offsets
    c = RawClient(fresh_broker.start().bootstrap)
    resp = c.request(3, 4, MetadataRequest(
        topics=[MetadataRequestTopic(name="bad/name"), MetadataRequestTopic(name="__consumer_offsets")],
        allow_auto_topic_creation=True,
    ))
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes["bad/name"] == Errors.INVALID_TOPIC_EXCEPTION
    assert codes["__consumer_offsets"] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    c.close()


def _recount(good: bytes, count: int) -> bytes:
    """``good`` claiming ``count`` records (lastOffsetDelta = count - 1), CRC recomputed."""
    from spool.records.batch import compute_crc

    b = bytearray(good)
    struct.pack_into(">i", b, 23, count - 1)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, compute_crc(b, 0, len(b)))
    return bytes(b)


def test_record_count_must_match_the_records_present(broker, topic):
    c = RawClient(broker.bootstrap)
    try:
        good = batch(1)
        huge = _recount(good, 0x7FFFFFFF)
        assert len(huge) < 80
        assert produce(c, topic, huge).error_code == Errors.INVALID_RECORD
        three = batch(3)
        assert produce(c, topic, _recount(three, 2)).error_code == Errors.INVALID_RECORD
        assert produce(c, topic, _recount(three, 4)).error_code == Errors.INVALID_RECORD
        for codec in (1, 3, 4):  # gzip, lz4, zstd: inflated and counted
            packed = batch(1, compression=codec)
            assert produce(c, topic, _recount(packed, 0x7FFFFFFF)).error_code == Errors.INVALID_RECORD
        ok = produce(c, topic, three)
        assert ok.error_code == 0 and ok.base_offset == 10  # the log end did not move
    finally:
        c.close()
    assert stored_values(broker.bootstrap, topic)[:13] == (
        [b"stored-%d" % i for i in range(10)] + [b"v0", b"v1", b"v2"])
