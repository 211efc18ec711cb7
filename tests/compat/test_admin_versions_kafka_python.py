"""kafka-python 3.0.12's admin client against the newest group and cluster versions.

It asks DescribeGroups (now v6) and DescribeCluster (v2) with authorized operations, and
lists two groups' committed offsets with one OffsetFetch v8: what its user reads back.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.timeout(90)

GROUP_OPS = {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
               "ALTER", "DESCRIBE"}


def test_describe_groups_and_offsets(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    group, unknown = f"kp-{uuid.uuid4().hex[:8]}", f"none-{uuid.uuid4().hex[:8]}"
    c = None
    try:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
        c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                          enable_auto_commit=False, session_timeout_ms=6000,
                          heartbeat_interval_ms=500)
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(500)
        assert len(c.assignment()) == 2
        c.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(4, "meta", -1)})

        described = admin.describe_groups([group, unknown])
        live = described[group]
        assert (live["error"], live["group_state"]) == (None, "Stable")
        assert set(live["authorized_operations"]) == GROUP_OPS
        # DescribeGroups v6 (KIP-1043): an unknown group is an error, not an empty Dead group
        assert "GroupIdNotFound" in described[unknown]["error"]
        assert described[unknown]["group_state"] == "Dead"

        # one OffsetFetch v8 for both groups (KIP-709): all of one, a partition of the other
        offsets = admin.list_group_offsets({group: None,
                                            unknown: [TopicPartition(topic_name, 1)]})
        assert offsets == {
            group: {TopicPartition(topic_name, 0): OffsetAndMetadata(4, "meta", -1)},
            unknown: {TopicPartition(topic_name, 1): OffsetAndMetadata(-1, "", -1)}}

        cluster = admin.describe_cluster()  # DescribeCluster v2, operations asked
        assert set(cluster["authorized_operations"]) == CLUSTER_OPS
    finally:
        if c is not None:
            c.close()
        admin.close()
