"""KafkaLog against a real broker: created compacted, read back in order, read_to_end."""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from spool.connect.api import ConnectError
from spool.connect.kafka_log import KafkaLog, murmur2, partition_for


def _name(tag: str) -> str:
    return f"connect-log-{tag}-{uuid.uuid4().hex[:8]}"


class Collected:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None, int, int]] = []
        self.lock = threading.Lock()

    def __call__(self, key, value, partition, offset) -> None:
        with self.lock:
            self.records.append((key, value, partition, offset))


def test_creates_a_compacted_topic_and_reads_back_what_it_sends(broker):
    topic = _name("rw")
    seen = Collected()
    log = KafkaLog({"bootstrap.servers": broker.bootstrap}, topic, partitions=3,
                   on_record=seen)
    try:
        log.start()
        assert seen.records == []
        for i in range(30):
            log.send(f"k{i % 7}".encode(), f"v{i}".encode())
        assert log.flush(10.0) == 0
        log.read_to_end(10.0)
        assert len(seen.records) == 30
        # per key, in the order sent (same key, same partition: murmur2 as Kafka's)
        by_key: dict[bytes, list[bytes]] = {}
        for key, value, _, _ in seen.records:
            by_key.setdefault(key, []).append(value)
        assert by_key[b"k0"] == [b"v0", b"v7", b"v14", b"v21", b"v28"]
        partitions = {k: {p for kk, _, p, _ in seen.records if kk == k} for k in by_key}
        assert all(len(ps) == 1 for ps in partitions.values())
        log.send_and_wait(b"k0", None, 10.0)  # a tombstone
        log.read_to_end(10.0)
        assert seen.records[-1][:2] == (b"k0", None)
    finally:
        log.stop()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([res])[res].result(10)["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3


def test_a_new_reader_replays_the_topic_from_the_beginning(broker):
    topic = _name("replay")
    writer = KafkaLog({"bootstrap.servers": broker.bootstrap}, topic, on_record=Collected())
    seen = Collected()
    reader = KafkaLog({"bootstrap.servers": broker.bootstrap}, topic, on_record=seen)
    try:
        writer.start()
        for i in range(50):
            writer.send(b"key-%d" % i, b"value-%d" % i)
        assert writer.flush(10.0) == 0
        reader.start()  # returns once what was there is read
        assert [(k, v) for k, v, _, _ in seen.records] == [
            (b"key-%d" % i, b"value-%d" % i) for i in range(50)]
        assert [o for _, _, _, o in seen.records] == list(range(50))
        writer.send_and_wait(b"late", b"1", 10.0)
        reader.read_to_end(10.0)
        assert seen.records[-1][:2] == (b"late", b"1")
    finally:
        writer.stop()
        reader.stop()


def test_an_existing_topic_that_is_not_compacted_is_refused(broker):
    topic = _name("delete")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "delete"})])[
        topic].result(10)
    log = KafkaLog({"bootstrap.servers": broker.bootstrap}, topic, on_record=Collected(),
                   config_key="offset.storage.topic")
    try:
        with pytest.raises(ConnectError) as e:
            log.start()
        assert (f"Topic '{topic}' supplied via the 'offset.storage.topic' property is "
                "required to have 'cleanup.policy=compact'") in str(e.value)
        assert "'cleanup.policy=delete'" in str(e.value)
    finally:
        log.stop()


def test_read_to_end_skips_aborted_transactions_and_waits_for_committed_ones(broker):
    topic = _name("txn")
    seen = Collected()
    log = KafkaLog({"bootstrap.servers": broker.bootstrap}, topic, on_record=seen)
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": f"txn-{uuid.uuid4().hex[:8]}"})
    try:
        log.start()
        p.init_transactions(10)
        p.begin_transaction()
        p.produce(topic, key=b"aborted", value=b"x")
        p.flush(10)
        p.abort_transaction(10)
        p.begin_transaction()
        p.produce(topic, key=b"committed", value=b"y")
        p.commit_transaction(10)
        log.read_to_end(10.0)
        assert [(k, v) for k, v, _, _ in seen.records] == [(b"committed", b"y")]
    finally:
        log.stop()


def test_partition_for_is_kafkas_default_partitioner(broker):
    """librdkafka's murmur2_random is Java's default partitioner: the same partitions."""
    topic = _name("murmur")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 7, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    chosen: dict[bytes, int] = {}
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"abcde"] + [
        f'["conn-{i}",{{"file":"/x/{i}"}}]'.encode() for i in range(40)]
    for key in keys:
        p.produce(topic, key=key, value=b"v",
                  on_delivery=lambda err, msg: chosen.__setitem__(msg.key(), msg.partition()))
    assert p.flush(10) == 0
    assert chosen == {k: partition_for(k, 7) for k in keys}
    assert murmur2(b"21") == -973932308  # Kafka's UtilsTest.testMurmur2 vectors
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(bytes([ord("a"), ord("b"), ord("c")])) == 479470107


def test_no_broker_is_a_connect_error(tmp_path):
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = KafkaLog({"bootstrap.servers": f"127.0.0.1:{port}"}, "nowhere",
                   on_record=Collected())
    try:
        with pytest.raises(ConnectError, match="Unable to read the metadata of topic nowhere"):
            log.start(timeout=2.0)
    finally:
        log.stop()
