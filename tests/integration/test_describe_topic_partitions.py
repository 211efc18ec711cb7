"""DescribeTopicPartitions (75) against a real single-node broker, over a socket.

What Kafka's AdminClient.describeTopics (3.8+) relies on: a named topic's partitions with
leader, epoch, replicas and ISR; UNKNOWN_TOPIC_OR_PARTITION for a name that does not exist;
every topic, by name, for an empty list; and paging: ``response_partition_limit`` caps the
partitions of one answer, ``next_cursor`` says where the next one starts.
"""

from __future__ import annotations

import uuid

import pytest

from spool.protocol._generated import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DescribeTopicPartitionsRequest,
    MetadataRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.describe_topic_partitions_request import Cursor, TopicRequest
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

ZERO_UUID = uuid.UUID(int=0)


def create(client: RawClient, *names: str, partitions: int = 3) -> None:
    resp = client.request(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
        CreatableTopic(name=n, num_partitions=partitions, replication_factor=1, assignments=[],
                       configs=[]) for n in names]))
    assert [(t.name, t.error_code) for t in resp.topics] == [(n, 0) for n in names]


def describe(client: RawClient, *names: str, limit: int = 2000, cursor: Cursor | None = None):
    return client.request(75, 0, DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in names], response_partition_limit=limit,
        cursor=cursor))


def partitions(topic) -> list[tuple]:
    return [(p.error_code, p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes,
             p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas)
            for p in topic.partitions]


@pytest.fixture
def client(broker):
    c = RawClient(broker.bootstrap)
    yield c
    c.close()


def test_api_versions_advertises_v0(client):
    resp = client.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1"))
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}[75] == (0, 0)


def test_a_named_topic_lists_its_partitions(client, topic_name):
    create(client, topic_name)
    resp = describe(client, topic_name)
    assert resp.next_cursor is None
    [t] = resp.topics
    assert (t.error_code, t.name, t.is_internal) == (0, topic_name, False)
    assert t.topic_id != ZERO_UUID
    assert t.topic_authorized_operations == 3576  # no authorizer: all a topic supports
    assert partitions(t) == [(0, i, 0, 0, [0], [0], [], [], []) for i in range(3)]
    md = client.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert {m.name: m.topic_id for m in md.topics}[topic_name] == t.topic_id


def test_an_unknown_topic_is_unknown_topic_or_partition(client, topic_name):
    resp = describe(client, f"{topic_name}-missing", "bad/name")
    assert [(t.name, t.error_code, t.topic_id, t.partitions) for t in resp.topics] == [
        ("bad/name", Errors.INVALID_TOPIC_EXCEPTION, ZERO_UUID, []),
        (f"{topic_name}-missing", Errors.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, []),
    ]
    assert {t.topic_authorized_operations for t in resp.topics} == {3576}  # as Kafka's handler
    assert resp.next_cursor is None


def test_an_empty_list_means_every_topic_by_name(fresh_broker):
    fresh_broker.start()
    c = RawClient(fresh_broker.bootstrap)
    try:
        create(c, "b-topic", "a-topic", partitions=2)
        create(c, "c-topic", partitions=1)
        resp = describe(c)
        assert [(t.name, t.error_code, [p.partition_index for p in t.partitions])
                for t in resp.topics] == [("a-topic", 0, [0, 1]), ("b-topic", 0, [0, 1]),
                                          ("c-topic", 0, [0])]
        assert resp.next_cursor is None
        # The limit used up exactly at a topic's end: the cursor is the next topic's start.
        resp = describe(c, limit=2)
        assert [t.name for t in resp.topics] == ["a-topic"]
        assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("b-topic", 0)
    finally:
        c.close()


def test_a_partition_limit_pages_with_a_cursor(client, topic_name):
    create(client, topic_name)
    first = describe(client, topic_name, limit=2)
    [t] = first.topics
    assert [p.partition_index for p in t.partitions] == [0, 1]
    cur = first.next_cursor
    assert (cur.topic_name, cur.partition_index) == (topic_name, 2)
    rest = describe(client, topic_name, limit=2,
                    cursor=Cursor(topic_name=cur.topic_name, partition_index=cur.partition_index))
    [t] = rest.topics
    assert partitions(t) == [(0, 2, 0, 0, [0], [0], [], [], [])]
    assert rest.next_cursor is None


def test_a_cursor_outside_the_topic_list_is_invalid_request(client, topic_name):
    resp = describe(client, topic_name, cursor=Cursor(topic_name=f"{topic_name}-other"))
    assert [(t.name, t.error_code) for t in resp.topics] == [(topic_name,
                                                              Errors.INVALID_REQUEST)]
