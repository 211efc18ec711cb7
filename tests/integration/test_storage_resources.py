"""Storage resources of a real broker: descriptors per partition."""

from __future__ import annotations

import os

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def open_fds(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def test_an_idle_partition_holds_one_descriptor(fresh_broker):
    """Was 5 per partition (the .log, and the .index and .timeindex each held twice by
    their mmaps); now only the active segment's .log stays open."""
    fresh_broker.start()
    pid = fresh_broker.proc.pid
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("warmup", 1)])["warmup"].result(10)
    before = len(open_fds(pid))
    topics = [f"fds-{i}" for i in range(20)]
    for f in admin.create_topics([NewTopic(t, 10) for t in topics]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "linger.ms": 0})
    for t in topics:
        for part in range(10):
            p.produce(t, value=b"x" * 100, partition=part)
    assert p.flush(30) == 0
    n = len(open_fds(pid))
    index_fds = [t for t in open_fds(pid) if t.endswith(("index", "timeindex"))]
    assert index_fds == []
    assert (n - before) / 200 < 1.2


def test_inactive_segments_hold_a_bounded_number_of_descriptors(fresh_broker):
    """Was one .log descriptor (and two per index) for every segment; now inactive
    segments' files are opened on use and at most 256 stay open."""
    from confluent_kafka import Consumer, TopicPartition

    max_open = 256  # spool.storage.segment.DEFAULT_MAX_OPEN_FILES
    fresh_broker.overrides["internal.segment.bytes.enable"] = "true"  # test-only seam
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("many-segments", 1, config={
        "internal.segment.bytes": "2000"})])["many-segments"].result(10)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "linger.ms": 0})
    n = max_open + 60
    for i in range(n):
        p.produce("many-segments", value=b"%06d" % i + b"x" * 2000)
        p.flush(10)
    fresh_broker.stop()
    fresh_broker.start()
    c = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "fds",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("many-segments", 0, 0)])
    seen = []
    while len(seen) < n:
        seen += [m.value()[:6] for m in c.consume(100, 5) if m.error() is None]
    c.close()
    assert seen == [b"%06d" % i for i in range(n)]
    logs = [t for t in open_fds(fresh_broker.proc.pid) if "many-segments-0/" in t]
    assert all(t.endswith(".log") for t in logs)
    assert len(logs) <= max_open + 1


def test_a_flood_of_fresh_producer_ids_is_bounded(broker, topic_name):
    """Each new producer id used to stay until producer.id.expiration.ms (a day): a flood
    grew the partition's producer state without limit. Now at most 4096 are kept; the
    least recently writing idle ones are forgotten first."""
    from spool.protocol._generated import ProduceRequest
    from spool.protocol._generated.produce_request import (
        PartitionProduceData,
        TopicProduceData,
    )
    from spool.protocol.errors import Errors
    from spool.records.builder import BatchBuilder
    from tests.helpers.raw_client import RawClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)

    def request(pid: int, seq: int) -> ProduceRequest:
        b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq)
        b.append(None, b"v", timestamp=1_700_000_000_000)
        return ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=topic_name, partition_data=[
                PartitionProduceData(index=0, records=b.build())])])

    c = RawClient(broker.bootstrap, timeout=60)
    try:
        pids = list(range(10_000, 10_000 + 4096 + 100))
        for i in range(0, len(pids), 25):  # pipelined, 25 at a time
            chunk = pids[i : i + 25]
            for pid in chunk:
                c.send(0, 9, request(pid, 0))
            for _ in chunk:
                _, resp = c.recv(0, 9)
                assert resp.responses[0].partition_responses[0].error_code == 0
        def code(pid: int, seq: int) -> int:
            return c.request(0, 9, request(pid, seq)).responses[0].partition_responses[0].error_code
        assert code(pids[0], 1) == Errors.UNKNOWN_PRODUCER_ID  # the oldest was forgotten
        last = c.request(0, 9, request(pids[-1], 0)).responses[0].partition_responses[0]
        assert last.error_code == 0 and last.base_offset == len(pids) - 1  # a duplicate
        assert code(pids[-1], 1) == 0  # the newest is still known: its next sequence
    finally:
        c.close()
