"""MetadataImage: replaying Kafka's metadata records, the per-broker diff, snapshots."""

from __future__ import annotations

import uuid

import pytest

from spool.cluster.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerRegistration,
    Endpoint,
    MetadataDelta,
    MetadataImage,
    MetadataReplayError,
    PartitionRegistration,
)
from spool.cluster.local_changes import TopicIdPartition, local_changes
from spool.cluster.snapshot import snapshot_records
from spool.protocol._generated import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from spool.protocol._generated.register_broker_record import BrokerEndpoint
from spool.protocol.metadata_records import decode_record, encode_record

T1 = uuid.UUID("11111111-1111-4111-8111-111111111111")
T2 = uuid.UUID("22222222-2222-4222-8222-222222222222")
INC = uuid.UUID("33333333-3333-4333-8333-333333333333")


def broker(i: int, epoch: int, rack: str | None = None, fenced: bool = True):
    return RegisterBrokerRecord(
        broker_id=i, incarnation_id=INC, broker_epoch=epoch, rack=rack, fenced=fenced,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="h", port=9090 + i,
                                   security_protocol=0)])


def partition(tid, p, replicas, leader=None, isr=None):
    isr = list(replicas) if isr is None else isr
    return PartitionRecord(partition_id=p, topic_id=tid, replicas=list(replicas), isr=isr,
                           leader=replicas[0] if leader is None else leader,
                           leader_epoch=0, partition_epoch=0)


BASE = [
    FeatureLevelRecord(name="metadata.version", feature_level=14),
    broker(1, 1, "a"), broker(2, 2, "b"), broker(3, 3, "c"),
    TopicRecord(name="orders", topic_id=T1),
    ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="orders",
                 name="retention.ms", value="1000"),
    partition(T1, 0, [1, 2, 3]), partition(T1, 1, [2, 3, 1]),
    TopicRecord(name="logs", topic_id=T2), partition(T2, 0, [3]),
    ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="",
                 name="log.retention.ms", value="5000"),
    ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1000),
    NoOpRecord(),
]


def base() -> MetadataImage:
    return MetadataImage(cluster_id="c1").replay(BASE)


def test_replay_builds_brokers_topics_partitions_configs():
    img = base()
    assert img.offset == len(BASE) - 1
    assert img.features == {"metadata.version": 14}
    assert img.brokers[2] == BrokerRegistration(
        broker_id=2, incarnation_id=INC, epoch=2,
        listeners=(Endpoint("PLAINTEXT", "h", 9092, 0),), rack="b", fenced=True)
    assert img.brokers[2].listener("PLAINTEXT").port == 9092
    orders = img.topic("orders")
    assert orders.topic_id == T1 and img.topics_by_id[T1] is orders
    assert orders.partitions[1] == PartitionRegistration(replicas=(2, 3, 1), isr=(2, 3, 1),
                                                         leader=2)
    assert img.config(TOPIC_RESOURCE, "orders") == {"retention.ms": "1000"}
    assert img.config(BROKER_RESOURCE, "") == {"log.retention.ms": "5000"}
    assert img.next_producer_id == 1000
    assert img.total_partitions == 3


def test_partition_change_keeps_unset_fields_and_bumps_epochs():
    img = base().replay([PartitionChangeRecord(topic_id=T1, partition_id=0, isr=[1, 3])])
    p = img.partition(T1, 0)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == (
        (1, 2, 3), (1, 3), 1, 0, 1)
    img = img.replay([PartitionChangeRecord(topic_id=T1, partition_id=0, leader=3)])
    p = img.partition(T1, 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 3), 3, 1, 2)
    img = img.replay([PartitionChangeRecord(topic_id=T1, partition_id=0, leader=-1)])
    assert (img.partition(T1, 0).leader, img.partition(T1, 0).leader_epoch) == (-1, 2)


def test_images_are_never_mutated_and_share_untouched_topics():
    before = base()
    after = before.replay([PartitionChangeRecord(topic_id=T1, partition_id=0, leader=2)])
    assert before.partition(T1, 0).leader == 1
    assert after.partition(T1, 0).leader == 2
    assert after.topic("logs") is before.topic("logs")
    with pytest.raises(TypeError):
        after.brokers[9] = None  # type: ignore[index]


def test_remove_topic_drops_its_partitions_and_configs():
    img = base().replay([RemoveTopicRecord(topic_id=T1)])
    assert img.topic("orders") is None and T1 not in img.topics_by_id
    assert img.config(TOPIC_RESOURCE, "orders") == {}
    assert img.total_partitions == 1


def test_config_null_value_deletes_the_key():
    img = base().replay([ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="orders",
                                      name="retention.ms", value=None)])
    assert img.config(TOPIC_RESOURCE, "orders") == {}


def test_broker_registration_changes_apply_to_the_matching_epoch_only():
    img = base().replay([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1,
                                                        fenced=-1)])
    assert not img.brokers[1].fenced and img.brokers[1].active
    img = img.replay([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1,
                                                     in_controlled_shutdown=1)])
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].active
    with pytest.raises(MetadataReplayError):
        img.replay([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=7, fenced=1)])
    with pytest.raises(MetadataReplayError):
        img.replay([UnregisterBrokerRecord(broker_id=1, broker_epoch=2)])
    assert 1 not in img.replay([UnregisterBrokerRecord(broker_id=1, broker_epoch=1)]).brokers


def test_records_about_missing_things_are_a_corrupt_log():
    with pytest.raises(MetadataReplayError):
        base().replay([PartitionChangeRecord(topic_id=uuid.uuid4(), partition_id=0, leader=1)])
    with pytest.raises(MetadataReplayError):
        base().replay([PartitionChangeRecord(topic_id=T1, partition_id=9, leader=1)])
    with pytest.raises(MetadataReplayError):
        base().replay([TopicRecord(name="again", topic_id=T1)])


def test_delta_apply_twice_gives_equal_images():
    delta = MetadataDelta(base())
    delta.replay(TopicRecord(name="new", topic_id=uuid.UUID(int=7)), 100)
    first = delta.apply()
    delta.replay(partition(uuid.UUID(int=7), 0, [1]), 101)
    second = delta.apply()
    assert first.topic("new").partitions == {}
    assert second.topic("new").partitions[0].leader == 1
    assert (first.offset, second.offset) == (100, 101)


def test_snapshot_records_replay_to_an_equal_image_through_the_wire_format():
    img = base().replay([
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=2, fenced=-1),
        PartitionChangeRecord(topic_id=T1, partition_id=1, isr=[2, 3], leader=3),
    ])
    encoded = [encode_record(r) for r in snapshot_records(img)]
    decoded = [decode_record(b)[0] for b in encoded]
    again = MetadataImage(cluster_id="c1").replay(decoded)
    assert again == img
    assert again.partition(T1, 1).leader_epoch == 1
    assert again.partition(T1, 1).partition_epoch == 1
    assert not again.brokers[2].fenced and again.brokers[1].fenced
    assert again.total_partitions == img.total_partitions


def test_local_changes_for_one_broker():
    old = base()
    new = old.replay([
        PartitionChangeRecord(topic_id=T1, partition_id=0, isr=[2, 3], leader=2),
        RemoveTopicRecord(topic_id=T2),
        TopicRecord(name="fresh", topic_id=uuid.UUID(int=9)),
        partition(uuid.UUID(int=9), 0, [1, 2]),
    ])
    two = local_changes(old, new, 2)
    assert two.deletes == frozenset()
    assert set(two.leaders) == {TopicIdPartition(T1, "orders", 0)}
    assert set(two.followers) == {TopicIdPartition(uuid.UUID(int=9), "fresh", 0)}
    three = local_changes(old, new, 3)
    assert three.deletes == {TopicIdPartition(T2, "logs", 0)}
    assert set(three.followers) == {TopicIdPartition(T1, "orders", 0)}
    assert not three.leaders
    one = local_changes(old, new, 1)
    assert set(one.leaders) == {TopicIdPartition(uuid.UUID(int=9), "fresh", 0)}
    assert set(one.followers) == {TopicIdPartition(T1, "orders", 0)}  # lost leadership
    assert not local_changes(new, new, 1)


def test_local_changes_from_nothing_lists_every_replica():
    img = base()
    one = local_changes(MetadataImage(), img, 1)
    assert set(one.leaders) == {TopicIdPartition(T1, "orders", 0)}
    assert set(one.followers) == {TopicIdPartition(T1, "orders", 1)}


def test_a_feature_set_to_level_0_is_no_longer_finalized():
    """UpdateFeatures' downgrade to 0 (``spool features disable``) writes a FeatureLevelRecord
    at level 0: the feature leaves the finalized set every broker reports in ApiVersions
    (and that ``transaction_version`` reads), and the snapshot does not bring it back."""
    img = base().replay([FeatureLevelRecord(name="transaction.version", feature_level=2)])
    assert img.features == {"metadata.version": 14, "transaction.version": 2}
    img = img.replay([FeatureLevelRecord(name="transaction.version", feature_level=0)])
    assert img.features == {"metadata.version": 14}
    again = MetadataImage(cluster_id="c1").replay(list(snapshot_records(img)))
    assert again.features == {"metadata.version": 14}
