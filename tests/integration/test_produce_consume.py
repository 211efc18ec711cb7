"""confluent-kafka against a real broker: every codec, every acks, keys, headers, timestamps."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.murmur2 import partition_for

PARTITIONS = 3
N = 100_000


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, config=configs)])[name].result(10)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                out.append(m)
        # anything beyond the expected count would be a duplicate: look briefly for more
        out.extend(m for m in c.consume(10_000, 0.5) if m.error() is None)
    finally:
        c.close()
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_and_read_back_every_record(broker, topic_name, codec, acks):
    create_topic(broker.bootstrap, topic_name)
    p = Producer({
        "bootstrap.servers": broker.bootstrap,
        "compression.type": codec,
        "acks": acks,
        "linger.ms": 5,
        "partitioner": "murmur2_random",
    })
    base_ts = 1_700_000_000_000
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)

    for i in range(N):
        key = b"key-%d" % (i % 5000)
        while True:
            try:
                p.produce(topic_name, key=key, value=b"value-%d" % i,
                          headers=[("seq", str(i).encode()), ("codec", codec.encode())],
                          timestamp=base_ts + i, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    assert failures == []

    msgs = consume_all(broker.bootstrap, topic_name, PARTITIONS, N)
    assert len(msgs) == N
    last_seq = {}
    seen = set()
    for m in msgs:
        i = int(dict(m.headers())["seq"])
        assert i not in seen
        seen.add(i)
        assert m.key() == b"key-%d" % (i % 5000)
        assert m.value() == b"value-%d" % i
        assert m.headers() == [("seq", str(i).encode()), ("codec", codec.encode())]
        assert m.timestamp() == (1, base_ts + i)  # (CreateTime, ts)
        assert m.partition() == partition_for(m.key(), PARTITIONS)
        assert i > last_seq.get(m.partition(), -1), "per-partition order broken"
        last_seq[m.partition()] = i
    assert seen == set(range(N))


def test_offsets_for_times(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    base = 1_700_000_000_000
    for i in range(1000):
        p.produce(topic_name, value=b"%d" % i, timestamp=base + 10 * i)
    p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    try:
        got = [
            c.offsets_for_times([TopicPartition(topic_name, 0, ts)], timeout=10)[0].offset
            for ts in (base - 5, base, base + 15, base + 9990, base + 9991)
        ]
        assert got == [0, 0, 2, 999, -1]
        lo, hi = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (lo, hi) == (0, 1000)
    finally:
        c.close()


def test_admin_topics_configs_and_delete_records(broker, topic_name):
    from confluent_kafka.admin import ConfigResource, NewPartitions

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, config={"retention.ms": "3600000"})])[topic_name].result(10)
    md = admin.list_topics(topic_name, timeout=10).topics[topic_name]
    assert md.error is None and sorted(md.partitions) == [0, 1]

    res = ConfigResource("topic", topic_name)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert cfg["segment.bytes"].is_default

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    res2 = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([res2])[res2].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["retention.ms"].is_default

    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(10)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 4
    with pytest.raises(Exception, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(10)

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        p.produce(topic_name, key=b"k%d" % i, value=b"v", partition=0)
    p.flush(10)
    tp = TopicPartition(topic_name, 0, 40)
    out = admin.delete_records([tp])[tp].result(10)
    assert out.low_watermark == 40
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (40, 100)
    finally:
        c.close()

    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    admin.delete_topics([topic_name])[topic_name].result(10)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_broker_configs_describe(broker):
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource("broker", "0")
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["num.partitions"].value == "1"
    # Kafka's defaults: the hours key carries 168, the finer unit is unset.
    assert cfg["log.retention.hours"].value == "168"
    assert cfg["log.retention.minutes"].value is None
    assert cfg["log.roll.hours"].value == "168"
    assert "log.segment.bytes" in cfg and "listeners" in cfg
