"""IncrementalAlterConfigs on list configs behaves as Kafka 4.2's (confluent-kafka admin).

A SUBTRACT may empty ``cleanup.policy``: DescribeConfigs then shows "" as the topic's
own value, and the topic is neither compacted (null keys are accepted) nor trimmed
by retention (its records stay while a ``delete`` topic's go). APPEND and SUBTRACT
start from the topic's own value, else the key's default (``delete``), never from
what the broker would resolve; SUBTRACT of an absent item changes nothing; DELETE
brings the default back; a null value is INVALID_REQUEST.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from spool.protocol._generated import IncrementalAlterConfigsRequest
from spool.protocol._generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

HOUR_MS = 3_600_000
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


def alter(admin: AdminClient, topic: str, *ops: tuple[str, str | None, AlterConfigOpType]
          ) -> None:
    res = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    admin.incremental_alter_configs([res])[res].result(10)


def described(admin: AdminClient, topic: str, name: str) -> tuple[str, ConfigSource]:
    res = ConfigResource("topic", topic)
    entry = admin.describe_configs([res])[res].result(10)[name]
    return entry.value, ConfigSource(entry.source)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int]]
            ) -> list[KafkaError | None]:
    """Send (key, value, timestamp) records one request each; the delivery errors."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors: list[KafkaError | None] = []
    for key, value, ts in records:
        p.produce(topic, value=value, key=key, timestamp=ts,
                  on_delivery=lambda err, _msg: errors.append(err))
        p.flush(10)
    return errors


def log_start(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "list-configs"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        c.close()


def wait_for(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_subtract_that_empties_cleanup_policy_keeps_every_record(tmp_path, topic_name):
    b = BrokerProcess(tmp_path / "data", {"log.retention.check.interval.ms": "200"}).start()
    kept, trimmed, probe = f"{topic_name}-kept", f"{topic_name}-del", f"{topic_name}-probe"
    short = {"segment.ms": str(HOUR_MS), "retention.ms": str(HOUR_MS)}
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(kept, 1, config={**short, "cleanup.policy": "compact"})]
                            )[kept].result(10)
        assert produce(b.bootstrap, kept, [(None, b"x", int(time.time() * 1000))])[0].code() \
            == KafkaError.INVALID_RECORD  # compacted: a null key is refused

        alter(admin, kept, ("cleanup.policy", "compact", SUBTRACT))
        assert described(admin, kept, "cleanup.policy") == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG)

        now = int(time.time() * 1000)
        # two hours apart > segment.ms: the second record rolls the segment, and the first
        # segment (newest record 2 h old) is past retention.ms on a topic that deletes
        records = [(None, b"old", now - 2 * HOUR_MS), (None, b"new", now)]
        assert produce(b.bootstrap, kept, records) == [None, None]
        admin.create_topics([NewTopic(trimmed, 1, config=short)])[trimmed].result(10)
        produce(b.bootstrap, trimmed, records)
        wait_for(lambda: log_start(b.bootstrap, trimmed) == 1, "retention of the delete topic")
        # a topic made after that pass is trimmed by a later pass: the one that trimmed
        # the delete topic has looked at the emptied one too
        admin.create_topics([NewTopic(probe, 1, config=short)])[probe].result(10)
        produce(b.bootstrap, probe, records)
        wait_for(lambda: log_start(b.bootstrap, probe) == 1, "a later retention pass")
        assert log_start(b.bootstrap, kept) == 0
    finally:
        b.stop()


def test_append_and_subtract_start_from_the_default_and_ignore_absent_items(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    assert described(admin, topic_name, "cleanup.policy") == ("delete",
                                                              ConfigSource.DEFAULT_CONFIG)
    alter(admin, topic_name, ("cleanup.policy", "compact", SUBTRACT))  # absent: no change
    assert described(admin, topic_name, "cleanup.policy") == (
        "delete", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    alter(admin, topic_name, ("cleanup.policy", "compact,delete", APPEND))
    assert described(admin, topic_name, "cleanup.policy")[0] == "delete,compact"
    alter(admin, topic_name, ("cleanup.policy", "delete,compact", SUBTRACT))
    assert described(admin, topic_name, "cleanup.policy")[0] == ""
    alter(admin, topic_name, ("cleanup.policy", None, DELETE))
    assert described(admin, topic_name, "cleanup.policy") == ("delete",
                                                              ConfigSource.DEFAULT_CONFIG)
    alter(admin, topic_name, ("leader.replication.throttled.replicas", "0:0", APPEND))
    assert described(admin, topic_name, "leader.replication.throttled.replicas")[0] == "0:0"


def test_a_null_value_is_invalid_request(broker, topic_name):
    """confluent-kafka cannot send one; a raw IncrementalAlterConfigs v1 can."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, config={"retention.ms": "1000"})]
                        )[topic_name].result(10)
    c = RawClient(broker.bootstrap)
    try:
        resp = c.request(44, 1, IncrementalAlterConfigsRequest(validate_only=False, resources=[
            AlterConfigsResource(resource_type=2, resource_name=topic_name, configs=[
                AlterableConfig(name="retention.ms", config_operation=0, value=None)])]))
    finally:
        c.close()
    [r] = resp.responses
    assert (r.error_code, r.error_message) == (KafkaError.INVALID_REQUEST,
                                               "Null value not supported for : retention.ms")
    assert described(admin, topic_name, "retention.ms")[0] == "1000"
