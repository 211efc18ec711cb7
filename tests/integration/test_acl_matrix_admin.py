"""The admin half of the ACL matrix, against a real broker with Kafka's StandardAuthorizer.

A principal without the ACL is refused each admin API with Kafka's error, in the place
Kafka puts it (per topic, per config resource, or the whole request), and nothing
changes; ``spool.broker.admin_authz`` has the rules. Here the principal is the
PLAINTEXT listener's ``User:ANONYMOUS`` with no ACL at all; what it tried is checked
after a restart without the authorizer.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from spool.net.client import NodeClient
from spool.protocol._generated import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    DeleteRecordsRequest,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    ListConfigResourcesRequest,
    ListPartitionReassignmentsRequest,
    UpdateFeaturesRequest,
)
from spool.protocol._generated import alter_configs_request as acr
from spool.protocol._generated import alter_partition_reassignments_request as aprr
from spool.protocol._generated import delete_records_request as drr
from spool.protocol._generated.update_features_request import FeatureUpdateKey
from spool.protocol.errors import Errors
from tests.helpers.broker_proc import BrokerProcess

pytestmark = pytest.mark.timeout(180)

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, KEPT_RETENTION = "kept", "3600000"
CAF, TAF = Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED


def _code(future, timeout: float = 15) -> int:
    """The error code a confluent-kafka admin future fails with (0: it succeeded)."""
    try:
        future.result(timeout)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def _wire(broker: BrokerProcess, message, version: int):
    async def go():
        client = NodeClient("127.0.0.1", broker.port, request_timeout_ms=10000)
        try:
            return await client.request(message, version)
        finally:
            await client.close()
    return asyncio.run(go())


def _seed(bootstrap: str) -> None:
    """TOPIC with 2 partitions, retention.ms set, 3 records in partition 0."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, config={"retention.ms": KEPT_RETENTION})]
                        )[TOPIC].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(TOPIC, f"v{i}".encode(), partition=0)
    assert producer.flush(15) == 0


def test_anonymous_without_acls_is_refused_every_admin_api_and_nothing_changes(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        _seed(broker.bootstrap)
        broker.stop()
        broker.overrides["authorizer.class.name"] = AUTHORIZER
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic_res = ConfigResource(ResourceType.TOPIC, TOPIC)
        node = admin.describe_cluster().result(15).nodes[0].id  # answered to anyone
        broker_res = ConfigResource(ResourceType.BROKER, str(node))

        # per topic: TOPIC_AUTHORIZATION_FAILED, the topic existing or not
        assert _code(admin.create_topics([NewTopic("new-one", 1)])["new-one"]) == TAF
        assert _code(admin.delete_topics([TOPIC])[TOPIC]) == TAF
        assert _code(admin.delete_topics(["no-such"])["no-such"]) == TAF
        assert _code(admin.create_partitions([NewPartitions(TOPIC, 4)])[TOPIC]) == TAF
        # (librdkafka's delete_records looks the leader up in a Metadata that hides TOPIC)
        trimmed = _wire(broker, DeleteRecordsRequest(topics=[drr.DeleteRecordsTopic(
            name=TOPIC, partitions=[drr.DeleteRecordsPartition(partition_index=0, offset=2)])],
            timeout_ms=5000), 2)
        assert [(p.partition_index, p.error_code, p.low_watermark)
                for p in trimmed.topics[0].partitions] == [(0, TAF, -1)]
        # per config resource
        retention = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
        assert _code(admin.incremental_alter_configs([retention])[retention]) == TAF
        assert _code(admin.describe_configs([topic_res])[topic_res]) == TAF
        assert _code(admin.describe_configs([broker_res])[broker_res]) == CAF
        legacy = _wire(broker, AlterConfigsRequest(resources=[acr.AlterConfigsResource(
            resource_type=2, resource_name=TOPIC,
            configs=[acr.AlterableConfig(name="retention.ms", value="1")])]), 2)
        assert [(r.resource_name, r.error_code, r.error_message) for r in legacy.responses] == [
            (TOPIC, TAF, "Topic authorization failed.")]
        # the cluster's operations: the whole request
        elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)])
        assert _code(elected) == CAF
        assert _wire(broker, DescribeLogDirsRequest(topics=None), 4).error_code == CAF
        assert _wire(broker, UpdateFeaturesRequest(feature_updates=[FeatureUpdateKey(
            feature="transaction.version", max_version_level=0, upgrade_type=3)]),
            1).error_code == CAF
        assert _wire(broker, ListConfigResourcesRequest(resource_types=[]), 1).error_code == CAF
        assert _wire(broker, ListPartitionReassignmentsRequest(topics=None), 0).error_code == CAF
        moved = _wire(broker, AlterPartitionReassignmentsRequest(topics=[aprr.ReassignableTopic(
            name=TOPIC, partitions=[aprr.ReassignablePartition(partition_index=0,
                                                                replicas=None)])]), 0)
        assert (moved.error_code, moved.responses[0].partitions[0].error_code) == (CAF, CAF)
        # DescribeCluster is answered to anyone; the operations it may do are none
        cluster = _wire(broker, DescribeClusterRequest(
            include_cluster_authorized_operations=True), 1)
        assert (cluster.error_code, len(cluster.brokers), cluster.cluster_authorized_operations
                ) == (0, 1, 0)

        broker.stop()  # what was refused changed nothing
        del broker.overrides["authorizer.class.name"]
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = admin.list_topics(timeout=10).topics
        assert "new-one" not in topics and len(topics[TOPIC].partitions) == 2
        configs = admin.describe_configs([topic_res])[topic_res].result(15)
        assert configs["retention.ms"].value == KEPT_RETENTION
        tp = TopicPartition(TOPIC, 0)
        assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(15).offset == 0
    finally:
        broker.stop()
