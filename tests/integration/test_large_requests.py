"""Large requests (received in place, ``spool.broker.server``) arrive whole however the
client's writes cut them, pipelined with small ones; one above socket.request.max.bytes is
refused as before."""

from __future__ import annotations

import os
import struct
import time

from confluent_kafka import Consumer, TopicPartition

from spool.protocol._generated import ApiVersionsRequest, ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient
from tests.integration import test_connections
from tests.integration.test_connections import create_topic, frame, no_tracebacks

make_broker = test_connections.make_broker  # the fixture

PARTITIONS = 4


def create(bootstrap: str, name: str) -> None:
    from spool.protocol._generated import CreateTopicsRequest
    from spool.protocol._generated.create_topics_request import CreatableTopic

    c = RawClient(bootstrap)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(topics=[
            CreatableTopic(name=name, num_partitions=PARTITIONS, replication_factor=1)]))
        assert resp.topics[0].error_code == 0
    finally:
        c.close()


def big_produce(topic: str, values: list[list[bytes]], cid: int) -> bytes:
    """One Produce v9 frame: one batch per partition of ``values[p]``."""
    data = []
    for p, vals in enumerate(values):
        b = BatchBuilder()
        for i, v in enumerate(vals):
            b.append(b"k%d" % i, v, timestamp=1_700_000_000_000 + i)
        data.append(PartitionProduceData(index=p, records=b.build()))
    return frame(0, 9, ProduceRequest(acks=1, timeout_ms=10000, topic_data=[
        TopicProduceData(name=topic, partition_data=data)]), correlation_id=cid)


def values_of(n: int) -> list[list[bytes]]:
    # ~3 MiB in all, 768 KiB a partition (under the default max.message.bytes)
    return [[os.urandom(7 * 1024 + 512 + p) for _ in range(n)] for p in range(PARTITIONS)]


def read_back(bootstrap: str, topic: str, counts: list[int]) -> list[list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                  "enable.auto.commit": False, "fetch.max.bytes": 16 << 20,
                  "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
    deadline = time.monotonic() + 20
    try:
        while [len(g) for g in got] != counts and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got[m.partition()].append(m.value())
    finally:
        c.close()
    return got


def responses(c: RawClient, n: int) -> list[tuple[int, int]]:
    """The correlation ids of the next ``n`` responses."""
    out = []
    for _ in range(n):
        body = c.recv_frame()
        out.append(struct.unpack_from(">i", body, 0)[0])
    return out


def test_a_3_mib_produce_in_many_small_writes_with_pauses_is_stored_exactly(make_broker):
    b = make_broker()
    create(b.bootstrap, "big-slow")
    values = values_of(108)
    req = big_produce("big-slow", values, cid=7)
    assert len(req) > 3 << 20
    c = RawClient(b.bootstrap)
    try:
        for i, pos in enumerate(range(0, len(req), 1500)):
            c.send_raw(req[pos:pos + 1500])
            if i % 200 == 0:
                time.sleep(0.02)  # the broker sees the frame arrive in pieces
        cid, resp = c.recv(0, 9)
        assert cid == 7
        assert [p.error_code for p in resp.responses[0].partition_responses] == [0] * 4
    finally:
        c.close()
    assert read_back(b.bootstrap, "big-slow", [108] * 4) == values
    no_tracebacks(b)


def test_a_3_mib_produce_in_one_write_between_small_requests(make_broker):
    b = make_broker()
    create(b.bootstrap, "big-one")
    values = values_of(108)
    versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    data = (frame(18, 3, versions, correlation_id=1) + big_produce("big-one", values, cid=2)
            + frame(18, 3, versions, correlation_id=3) + big_produce("big-one", values, cid=4)
            + frame(18, 3, versions, correlation_id=5))
    c = RawClient(b.bootstrap)
    try:
        c.send_raw(data)  # (in one write: the broker reads it in what pieces TCP gives)
        assert responses(c, 5) == [1, 2, 3, 4, 5]
    finally:
        c.close()
    got = read_back(b.bootstrap, "big-one", [216] * 4)
    assert got == [v + v for v in values]
    no_tracebacks(b)


def test_a_frame_above_socket_request_max_bytes_is_refused(make_broker):
    b = make_broker({"socket.request.max.bytes": str(2 << 20)}, log_level="INFO")
    create_topic(b.bootstrap, "refused")
    req = big_produce("refused", [[os.urandom(7 * 1024 + 512) for _ in range(108)]] * 4, cid=1)
    assert len(req) > 3 << 20
    c = RawClient(b.bootstrap)
    try:
        c.send_raw(req[:100_000])  # the size prefix, then some of the frame
        assert c.is_closed_by_peer()
    finally:
        c.close()
    # under the limit: stored
    small = big_produce("refused", [[os.urandom(7 * 1024) for _ in range(100)]], cid=9)
    assert 64 * 1024 < len(small) < 2 << 20
    c = RawClient(b.bootstrap)
    try:
        c.send_raw(small)
        cid, resp = c.recv(0, 9)
        assert (cid, resp.responses[0].partition_responses[0].error_code) == (9, 0)
    finally:
        c.close()
    text = b.log_path.read_text(errors="replace")
    assert "exceeds the limit of 2097152" in text, text[-2000:]
    no_tracebacks(b)
