"""kafka-python 3.0.12 infers the broker's Kafka version from ApiVersions (its
``infer_broker_version_from_api_versions``: Fetch 17 means 3.9, Produce 13 means 4.1, ...) and
picks features by it. With Fetch 4-18, Produce 0-13 and Metadata 0-13 advertised it takes
Spool for Kafka 4.x, and its producer, group consumer and commits work at that version
(its own requests stay at Fetch v12 and Produce v9, its maxima)."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient


def test_kafka_python_takes_spool_for_kafka_4(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        node = admin.describe_cluster()["brokers"][0]["broker_id"]
        seen = admin.get_broker_version_data(node)
    finally:
        admin.close()
    assert (seen.api_versions[0], seen.api_versions[1], seen.api_versions[3]) == (
        (0, 13), (4, 18), (0, 13))
    # (4, 3) from DescribeLogDirs 5: a Kafka 4.2 broker advertises 1-4, which it reads as (4, 2)
    assert seen.broker_version == (4, 3)

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        sent = [producer.send(topic_name, b"v%d" % i) for i in range(5)]
        assert [f.get(10).offset for f in sent] == [0, 1, 2, 3, 4]
        assert producer.config["api_version"] == seen.broker_version
    finally:
        producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap,
                             group_id=f"{topic_name}-g", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=15_000,
                             request_timeout_ms=10_000)
    try:
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == 5:
                break
        assert got == [b"v%d" % i for i in range(5)]
        assert consumer.config["api_version"] == seen.broker_version
        consumer.commit()
        assert consumer.committed(TopicPartition(topic_name, 0)) == 5
    finally:
        consumer.close()
