"""DescribeTopicPartitions in a cluster: any broker answers from its metadata image, the
same leader, epoch, replicas and ISR that its Metadata answer gives (issue 13)."""

from __future__ import annotations

from spool.protocol._generated import (
    CreateTopicsRequest,
    DescribeTopicPartitionsRequest,
    MetadataRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.describe_topic_partitions_request import TopicRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from tests.helpers.raw_client import request_once

NAME = "dtp-3x3"


def metadata_partitions(bootstrap: str):
    md = request_once(bootstrap, 3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=NAME)],
                                               allow_auto_topic_creation=False))
    [t] = md.topics
    return t.error_code, t.topic_id, [(p.partition_index, p.leader_id, p.leader_epoch,
                                       p.replica_nodes, p.isr_nodes)
                                      for p in t.partitions]


def test_another_broker_describes_a_replicated_topic_as_its_metadata_does(cluster_factory):
    cluster = cluster_factory().start()
    cluster.wait_formed()
    creator, asked = cluster.brokers[0], cluster.brokers[1]
    resp = request_once(creator.bootstrap, 19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
        CreatableTopic(name=NAME, num_partitions=3, replication_factor=3, assignments=[],
                       configs=[])]))
    assert [(t.name, t.error_code) for t in resp.topics] == [(NAME, 0)]

    def settled():
        code, _, parts = metadata_partitions(asked.bootstrap)
        full = code == 0 and len(parts) == 3 and all(
            leader in (1, 2, 3) and sorted(isr) == [1, 2, 3] for _, leader, _, _, isr in parts)
        return parts if full else f"{code} {parts}"

    cluster.wait_until(f"node {asked.node_id} lists {NAME} with a full ISR", settled)
    got = request_once(asked.bootstrap, 75, 0, DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=NAME)]))
    _, topic_id, expected = metadata_partitions(asked.bootstrap)
    assert got.next_cursor is None
    [t] = got.topics
    assert (t.error_code, t.name, t.topic_id) == (0, NAME, topic_id)
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in t.partitions] == expected
    assert all(sorted(p.replica_nodes) == [1, 2, 3] and p.offline_replicas == []
               and p.eligible_leader_replicas == [] for p in t.partitions)
