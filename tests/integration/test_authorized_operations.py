"""``include_authorized_operations`` as confluent-kafka's AdminClient asks for it.

Spool runs without an authorizer, and Kafka without one answers every operation the
resource type supports: what a user sees from describe_cluster, describe_topics and
describe_consumer_groups, and None (not asked) otherwise.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

pytestmark = pytest.mark.timeout(60)

Op = AclOperation
TOPIC = {Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
         Op.ALTER_CONFIGS}
GROUP = {Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
CLUSTER = {Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
           Op.IDEMPOTENT_WRITE}


def test_describe_cluster_lists_every_cluster_operation(broker):
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    asked = a.describe_cluster(include_authorized_operations=True).result(10)
    assert set(asked.authorized_operations) == CLUSTER
    assert a.describe_cluster().result(10).authorized_operations is None


def test_describe_topics_lists_every_topic_operation(broker, topic_name):
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    asked = a.describe_topics(TopicCollection([topic_name]),
                              include_authorized_operations=True)[topic_name].result(10)
    assert set(asked.authorized_operations) == TOPIC
    plain = a.describe_topics(TopicCollection([topic_name]))[topic_name].result(10)
    assert plain.authorized_operations is None


def test_describe_consumer_groups_lists_every_group_operation(broker, topic_name):
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    group = f"ops-{topic_name}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "session.timeout.ms": 6000})
    try:
        c.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment()
        asked = a.describe_consumer_groups([group], include_authorized_operations=True)[
            group].result(10)
        assert set(asked.authorized_operations) == GROUP
        plain = a.describe_consumer_groups([group])[group].result(10)
        assert plain.authorized_operations is None
    finally:
        c.close()
