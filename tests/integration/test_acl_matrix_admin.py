"""The admin half of the ACL matrix, against a real broker with Kafka's StandardAuthorizer.

For each admin API: a principal with no ACL (``alice``) is refused with Kafka's error,
in the place Kafka puts it (per topic, per config resource, or the whole request), and
nothing changes (the super user ``admin`` looks); a principal given the ACL the API
needs does it. The rules are ``spool.broker.admin_authz``'s. Principals come from SASL
PLAIN; each test grants its own user, so the tests do not depend on one another.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka import errors as kerrors

from spool.protocol._generated import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    ListPartitionReassignmentsRequest,
    UpdateFeaturesRequest,
)
from spool.protocol._generated import alter_configs_request as acr
from spool.protocol._generated import alter_partition_reassignments_request as aprr
from spool.protocol._generated import delete_records_request as drr
from spool.protocol._generated import incremental_alter_configs_request as iacr
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.delete_topics_request import DeleteTopicState
from spool.protocol._generated.update_features_request import FeatureUpdateKey
from spool.protocol.errors import Errors
from tests.helpers.acl import authorizing_broker, plain_request
from tests.helpers.secure_broker import PLAIN_LOGIN, SecureBroker

pytestmark = pytest.mark.timeout(180)

CAF, TAF = Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED
USERS = ("alice", "creator", "deleter", "alterer", "trimmer", "configurer", "operator",
         "describer", "viewer", "grouper")
SPOOL = [sys.executable, "-m", "spool.cli.main"]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = authorizing_broker(tmp_path_factory.mktemp("acl-admin") / "data",
                                {u: f"{u}-secret" for u in USERS})
    yield broker
    _ADMINS.clear()
    broker.stop()


_ADMINS: dict[tuple[int, str], AdminClient] = {}


def _admin(broker: SecureBroker, user: str = "admin") -> AdminClient:
    """``user``'s AdminClient, kept for the module (a dropped one fails its futures)."""
    key = (id(broker), user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(broker.confluent(user))
    return _ADMINS[key]


def _code(future, timeout: float = 15) -> int:
    """The error code a confluent-kafka admin future fails with (0: it succeeded)."""
    try:
        future.result(timeout)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def _grant(broker: SecureBroker, user: str, rtype: ResourceType, name: str,
           *ops: AclOperation, pattern: ResourcePatternType = ResourcePatternType.LITERAL
           ) -> None:
    bindings = [AclBinding(rtype, name, pattern, f"User:{user}", "*", op,
                           AclPermissionType.ALLOW) for op in ops]
    for f in _admin(broker).create_acls(bindings).values():
        f.result(15)


def _wire(broker: SecureBroker, user: str, message, version: int):
    """``message`` sent as ``user`` (SASL PLAIN) with Spool's own client: the response."""
    host, port = broker.bootstrap().rsplit(":", 1)
    return plain_request(host, int(port), user, broker.password(user), message, version,
                         request_timeout_ms=15000)


def _topic(broker: SecureBroker, partitions: int = 1, records: int = 0,
           config: dict[str, str] | None = None) -> str:
    """A new topic of the test's own, made by the super user."""
    name = f"acl-{uuid.uuid4().hex[:10]}"
    admin = _admin(broker)
    admin.create_topics([NewTopic(name, partitions, config=config or {})])[name].result(15)
    if records:
        producer = Producer(broker.confluent("admin"))
        for i in range(records):
            producer.produce(name, f"v{i}".encode(), partition=0)
        assert producer.flush(15) == 0
    return name


def _partitions(broker: SecureBroker, name: str) -> int | None:
    topic = _admin(broker).list_topics(timeout=10).topics.get(name)
    return None if topic is None else len(topic.partitions)


def _config(broker: SecureBroker, rtype: ResourceType, name: str, key: str) -> str | None:
    res = ConfigResource(rtype, name)
    return _admin(broker).describe_configs([res])[res].result(15)[key].value


def _earliest(broker: SecureBroker, name: str) -> int:
    tp = TopicPartition(name, 0)
    return _admin(broker).list_offsets({tp: OffsetSpec.earliest()})[tp].result(15).offset


def _node(broker: SecureBroker) -> str:
    return str(_admin(broker).describe_cluster().result(15).nodes[0].id)


def test_create_topics_needs_create_on_the_cluster_or_topic(secured):
    name = f"made-{uuid.uuid4().hex[:8]}"
    alice = _admin(secured, "alice")
    assert _code(alice.create_topics([NewTopic(name, 1)])[name]) == TAF
    assert _partitions(secured, name) is None
    # CREATE on a prefix: created, but its configs are not shown without DESCRIBE_CONFIGS
    _grant(secured, "creator", ResourceType.TOPIC, "made-", AclOperation.CREATE,
           pattern=ResourcePatternType.PREFIXED)
    made = _wire(secured, "creator", CreateTopicsRequest(topics=[
        CreatableTopic(name=name, num_partitions=2, replication_factor=-1),
        CreatableTopic(name=f"other-{name}", num_partitions=1, replication_factor=-1)]), 7)
    assert [(t.name, t.error_code, t.error_message, t.num_partitions, t.configs,
             t.topic_config_error_code) for t in made.topics] == [
        (name, 0, None, -1, [], TAF),
        (f"other-{name}", TAF, "Authorization failed.", -1, None, 0)]
    assert _partitions(secured, name) == 2 and _partitions(secured, f"other-{name}") is None


def test_delete_topics_needs_delete(secured):
    name = _topic(secured)
    alice = _admin(secured, "alice")
    assert _code(alice.delete_topics([name])[name]) == TAF
    missing = f"gone-{uuid.uuid4().hex[:8]}"
    assert _code(alice.delete_topics([missing])[missing]) == TAF  # not UNKNOWN: reveals nothing
    kp = KafkaAdminClient(**secured.kafka_python("alice"), request_timeout_ms=15000)
    try:  # kafka-python raises Kafka's exception too
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            kp.delete_topics([name])
    finally:
        kp.close()
    assert _partitions(secured, name) == 1
    _grant(secured, "deleter", ResourceType.TOPIC, name, AclOperation.DELETE)
    assert _code(_admin(secured, "deleter").delete_topics([name])[name]) == 0
    assert _partitions(secured, name) is None


def test_delete_topics_by_id_names_the_topic_only_to_who_may_describe_it(secured):
    name = f"byid-{uuid.uuid4().hex[:8]}"
    made = _wire(secured, "admin", CreateTopicsRequest(topics=[
        CreatableTopic(name=name, num_partitions=1, replication_factor=-1)]), 7)
    topic_id, unknown = made.topics[0].topic_id, uuid.uuid4()

    def delete(user: str):
        resp = _wire(secured, user, DeleteTopicsRequest(topics=[
            DeleteTopicState(name=None, topic_id=topic_id),
            DeleteTopicState(name=None, topic_id=unknown)], timeout_ms=5000), 6)
        return [(r.name, r.topic_id, r.error_code) for r in resp.responses]

    assert delete("alice") == [(None, topic_id, TAF), (None, unknown, Errors.UNKNOWN_TOPIC_ID)]
    _grant(secured, "viewer", ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    assert delete("viewer") == [(name, topic_id, TAF), (None, unknown, Errors.UNKNOWN_TOPIC_ID)]
    assert _partitions(secured, name) == 1


def test_create_partitions_needs_alter_on_the_topic(secured):
    name = _topic(secured)
    assert _code(_admin(secured, "alice").create_partitions([NewPartitions(name, 3)])[name]) == TAF
    assert _partitions(secured, name) == 1
    _grant(secured, "alterer", ResourceType.TOPIC, name, AclOperation.ALTER)
    assert _code(_admin(secured, "alterer").create_partitions([NewPartitions(name, 3)])[name]) == 0
    assert _partitions(secured, name) == 3


def _delete_records(broker: SecureBroker, user: str, name: str, offset: int):
    """DeleteRecords on partition 0 over the wire (librdkafka's delete_records looks the
    leader up in a Metadata answer that hides topics the principal may not describe)."""
    resp = _wire(broker, user, DeleteRecordsRequest(topics=[drr.DeleteRecordsTopic(
        name=name, partitions=[drr.DeleteRecordsPartition(partition_index=0, offset=offset)])],
        timeout_ms=5000), 2)
    return [(p.error_code, p.low_watermark) for p in resp.topics[0].partitions]


def test_delete_records_needs_delete_on_the_topic(secured):
    name = _topic(secured, records=3)
    assert _delete_records(secured, "alice", name, 2) == [(TAF, -1)]
    assert _earliest(secured, name) == 0
    _grant(secured, "trimmer", ResourceType.TOPIC, name, AclOperation.DELETE)
    assert _delete_records(secured, "trimmer", name, 2) == [(0, 2)]
    assert _earliest(secured, name) == 2


def test_topic_configs_need_describe_configs_and_alter_configs(secured):
    name = _topic(secured, config={"retention.ms": "3600000"})
    res = ConfigResource(ResourceType.TOPIC, name)
    change = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    legacy = AlterConfigsRequest(resources=[acr.AlterConfigsResource(
        resource_type=2, resource_name=name,
        configs=[acr.AlterableConfig(name="retention.ms", value="1")])])
    alice = _admin(secured, "alice")
    assert _code(alice.describe_configs([res])[res]) == TAF
    assert _code(alice.incremental_alter_configs([change])[change]) == TAF
    assert [(r.error_code, r.error_message) for r in _wire(secured, "alice", legacy, 2).responses
            ] == [(TAF, "Topic authorization failed.")]
    assert _config(secured, ResourceType.TOPIC, name, "retention.ms") == "3600000"
    _grant(secured, "configurer", ResourceType.TOPIC, name, AclOperation.ALTER_CONFIGS)
    configurer = _admin(secured, "configurer")
    assert configurer.describe_configs([res])[res].result(15)["retention.ms"].value == "3600000"
    assert _code(configurer.incremental_alter_configs([change])[change]) == 0
    assert _config(secured, ResourceType.TOPIC, name, "retention.ms") == "7200000"


def test_group_configs_need_describe_configs_and_alter_configs_on_the_group(secured):
    group = f"g-{uuid.uuid4().hex[:8]}"
    res = ConfigResource(ResourceType.GROUP, group)
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.isolation.level", "read_committed",
                    incremental_operation=AlterConfigOpType.SET)])
    alice = _admin(secured, "alice")
    assert _code(alice.describe_configs([res])[res]) == Errors.GROUP_AUTHORIZATION_FAILED
    assert _code(alice.incremental_alter_configs([change])[change]) == (
        Errors.GROUP_AUTHORIZATION_FAILED)
    assert _config(secured, ResourceType.GROUP, group, "share.isolation.level") == (
        "read_uncommitted")
    _grant(secured, "grouper", ResourceType.GROUP, group, AclOperation.DESCRIBE_CONFIGS)
    grouper = _admin(secured, "grouper")
    assert grouper.describe_configs([res])[res].result(15)["share.isolation.level"].value == (
        "read_uncommitted")
    assert _code(grouper.incremental_alter_configs([change])[change]) == (
        Errors.GROUP_AUTHORIZATION_FAILED)
    _grant(secured, "grouper", ResourceType.GROUP, group, AclOperation.ALTER_CONFIGS)
    assert _code(grouper.incremental_alter_configs([change])[change]) == 0
    assert _config(secured, ResourceType.GROUP, group, "share.isolation.level") == (
        "read_committed")


def _finalized(broker: SecureBroker) -> dict[str, int]:
    """The finalized feature levels, as ApiVersions v3 tells them to the super user."""
    resp = _wire(broker, "admin", ApiVersionsRequest(client_software_name="t",
                                                     client_software_version="1"), 3)
    return {f.name: f.max_version_level for f in resp.finalized_features}


def test_cluster_operations_need_acls_on_the_cluster(secured):
    name = _topic(secured)
    node = _node(secured)
    broker_res = ConfigResource(ResourceType.BROKER, node)
    change = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
        ConfigEntry("log.cleaner.backoff.ms", "12345",
                    incremental_operation=AlterConfigOpType.SET)])
    before = _config(secured, ResourceType.BROKER, node, "log.cleaner.backoff.ms")
    features = _finalized(secured)
    elect = [TopicPartition(name, 0)]

    def calls(user: str, validate_only: bool) -> dict[str, int]:
        admin = _admin(secured, user)
        moved = _wire(secured, user, AlterPartitionReassignmentsRequest(topics=[
            aprr.ReassignableTopic(name=name, partitions=[
                aprr.ReassignablePartition(partition_index=0, replicas=None)])]), 0)
        downgrade = _wire(secured, user, UpdateFeaturesRequest(
            feature_updates=[FeatureUpdateKey(feature="transaction.version",
                                              max_version_level=0, upgrade_type=3)],
            validate_only=validate_only), 1)
        subscription = _wire(secured, user, IncrementalAlterConfigsRequest(resources=[
            iacr.AlterConfigsResource(resource_type=16, resource_name=f"sub-{user}", configs=[
                iacr.AlterableConfig(name="interval.ms", config_operation=0, value="60000")])],
            validate_only=validate_only), 1)
        return {
            "describe_broker": _code(admin.describe_configs([broker_res])[broker_res]),
            "alter_broker": _code(admin.incremental_alter_configs([change])[change]),
            "client_metrics": subscription.responses[0].error_code,
            "elect": _code(admin.elect_leaders(ElectionType.PREFERRED, elect)),
            "reassign": moved.error_code,
            "list_reassignments": _wire(secured, user, ListPartitionReassignmentsRequest(
                topics=None), 0).error_code,
            "log_dirs": _wire(secured, user, DescribeLogDirsRequest(topics=None), 4).error_code,
            "features": downgrade.error_code,
            "config_resources": _wire(secured, user, ListConfigResourcesRequest(
                resource_types=[]), 1).error_code,
        }

    refused = calls("alice", validate_only=False)
    assert refused == dict.fromkeys(refused, CAF)
    assert _config(secured, ResourceType.BROKER, node, "log.cleaner.backoff.ms") == before
    assert _finalized(secured) == features
    listed = _wire(secured, "admin", ListConfigResourcesRequest(resource_types=[16]), 1)
    assert "sub-alice" not in [r.resource_name for r in listed.config_resources]
    _grant(secured, "operator", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER,
           AclOperation.ALTER_CONFIGS)
    assert calls("operator", validate_only=True) == dict.fromkeys(refused, 0)
    assert _config(secured, ResourceType.BROKER, node, "log.cleaner.backoff.ms") == "12345"


def test_describe_cluster_is_answered_to_anyone_with_the_operations_it_may_do(secured):
    def ops(user: str) -> tuple[int, int, int]:
        resp = _wire(secured, user, DescribeClusterRequest(
            include_cluster_authorized_operations=True), 1)
        return resp.error_code, len(resp.brokers), resp.cluster_authorized_operations

    assert ops("alice") == (0, 1, 0)
    _grant(secured, "describer", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
    assert ops("describer") == (0, 1, 1 << AclOperation.DESCRIBE.value)


def _command_config(tmp_path, user: str, password: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN_LOGIN} required username="{user}" '
                    f'password="{password}";\n')
    return str(path)


def test_cli_as_a_principal_without_acls_fails_with_kafkas_error(secured, tmp_path):
    name = _topic(secured, config={"retention.ms": "3600000"})
    config = _command_config(tmp_path, "alice", secured.password("alice"))

    def spool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*SPOOL, *args, "--bootstrap-server", secured.bootstrap(),
                               "--command-config", config, "--timeout", "15"],
                              capture_output=True, text=True, timeout=60, check=False)

    deleted = spool("topics", "delete", name)
    assert deleted.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in deleted.stderr
    altered = spool("configs", "alter", "--topic", name, "--add-config", "retention.ms=1")
    assert altered.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in altered.stderr
    assert _partitions(secured, name) == 1
    assert _config(secured, ResourceType.TOPIC, name, "retention.ms") == "3600000"
