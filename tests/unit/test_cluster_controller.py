"""QuorumController: broker lifecycle, controlled shutdown, topics, configs, snapshots."""

from __future__ import annotations

import uuid

import pytest

from spool.cluster.controller import QuorumController
from spool.cluster.image import BROKER_RESOURCE, TOPIC_RESOURCE, Endpoint, MetadataImage
from spool.cluster.ops import ControllerConfig
from spool.protocol._generated import (
    AlterConfigsRequest,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    CreatePartitionsRequest,
    FeatureLevelRecord,
    IncrementalAlterConfigsRequest,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from spool.protocol._generated import alter_configs_request as ac
from spool.protocol._generated import create_partitions_request as cp
from spool.protocol._generated import create_topics_request as ct
from spool.protocol._generated import incremental_alter_configs_request as iac
from spool.protocol._generated.register_broker_record import BrokerEndpoint, BrokerFeature
from spool.protocol.errors import Errors, KafkaError
from tests.helpers.cluster_harness import CLUSTER_ID, MV, Harness

TIMEOUT = ControllerConfig().broker_session_timeout_ms


def three_brokers(**kw) -> Harness:
    h = Harness(ControllerConfig(**kw))
    for b, rack in [(1, "a"), (2, "b"), (3, "c")]:
        h.start(b, rack)
    return h


def records_since(h: Harness, offset: int) -> list:
    return [r for o, r in h.log if o >= offset]


# -- activation and registration -----------------------------------------------------------

def test_activation_on_an_empty_log_writes_metadata_version_once():
    h = Harness()
    assert h.log == [(0, FeatureLevelRecord(name="metadata.version", feature_level=14))]
    assert h.controller.activate(h.now).records == []


def test_registration_writes_a_fenced_broker_whose_epoch_is_its_record_offset():
    h = Harness()
    offset = h.next_offset
    epoch = h.register(1, "rack-a")
    assert epoch == offset
    (_, rec), = h.log[offset:]
    assert rec == RegisterBrokerRecord(
        broker_id=1, incarnation_id=h.incarnations[1], broker_epoch=offset,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9093,
                                   security_protocol=0)],
        features=[BrokerFeature(name="metadata.version", min_supported_version=1,
                                max_supported_version=14)],
        rack="rack-a", fenced=True, in_controlled_shutdown=False)
    b = h.image.brokers[1]
    assert (b.fenced, b.rack, b.epoch, b.listeners) == (
        True, "rack-a", offset, (Endpoint("PLAINTEXT", "127.0.0.1", 9093, 0),))


def test_registration_refuses_another_cluster_and_unsupported_metadata_version():
    h = Harness()
    with pytest.raises(KafkaError) as e:
        h.controller.register_broker(broker_id=1, cluster_id="other", incarnation_id=uuid.uuid4(),
                                     listeners=[], features=[MV], next_offset=1, now_ms=h.now)
    assert e.value.code == Errors.INCONSISTENT_CLUSTER_ID
    with pytest.raises(KafkaError) as e:
        h.controller.register_broker(broker_id=1, cluster_id=CLUSTER_ID,
                                     incarnation_id=uuid.uuid4(), listeners=[],
                                     features=[("metadata.version", 1, 7)], next_offset=1,
                                     now_ms=h.now)
    assert e.value.code == Errors.UNSUPPORTED_VERSION


def test_same_incarnation_keeps_its_epoch_another_live_one_is_refused():
    h = three_brokers()
    epoch = h.epochs[2]
    assert h.register(2) == epoch
    assert not h.image.brokers[2].fenced
    with pytest.raises(KafkaError) as e:
        h.register(2, new=True)
    assert e.value.code == Errors.DUPLICATE_BROKER_REGISTRATION


# -- heartbeats, fencing -------------------------------------------------------------------

def test_a_broker_is_unfenced_only_once_caught_up_and_asking():
    h = Harness()
    epoch = h.register(1)
    reply = h.heartbeat(1, offset=epoch - 1)
    assert (reply.is_caught_up, reply.is_fenced, reply.should_shut_down) == (False, True, False)
    assert h.image.brokers[1].fenced
    reply = h.heartbeat(1, offset=epoch, want_fence=True)
    assert (reply.is_caught_up, reply.is_fenced) == (True, True)
    before = h.next_offset
    reply = h.heartbeat(1, offset=epoch)
    assert (reply.is_caught_up, reply.is_fenced) == (True, False)
    assert records_since(h, before) == [
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=-1)]
    assert h.image.brokers[1].active


def test_heartbeat_with_a_stale_epoch_is_refused():
    h = three_brokers()
    h.epochs[1] -= 1
    with pytest.raises(KafkaError) as e:
        h.heartbeat(1)
    assert e.value.code == Errors.STALE_BROKER_EPOCH
    with pytest.raises(KafkaError) as e:
        h.controller.heartbeat(broker_id=9, broker_epoch=0, want_fence=False,
                               want_shutdown=False, current_metadata_offset=0, now_ms=h.now)
    assert e.value.code == Errors.STALE_BROKER_EPOCH


def test_session_timeout_fences_the_broker_and_moves_its_leaders():
    h = three_brokers()
    h.create_topic("t", 6, 3)
    t = h.image.topic("t")
    led_by_2 = [p for p, part in t.partitions.items() if part.leader == 2]
    assert led_by_2
    h.now += TIMEOUT
    assert h.commit(h.controller.tick(h.now)) == []  # exactly the timeout: still valid
    h.heartbeat(1)
    h.heartbeat(3)
    h.now += 1
    before = h.next_offset
    assert h.commit(h.controller.tick(h.now)) == [2]
    recs = records_since(h, before)
    assert recs[-1] == BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=h.epochs[2],
                                                      fenced=1)
    assert all(isinstance(r, PartitionChangeRecord) for r in recs[:-1])
    assert len(recs) - 1 == 6  # broker 2 is in every ISR
    img = h.image
    assert img.brokers[2].fenced
    for p, part in img.topic("t").partitions.items():
        assert 2 not in part.isr and part.leader in (1, 3) and part.leader in part.isr
        old = t.partitions[p]
        if p in led_by_2:
            assert part.leader == next(r for r in old.replicas if r != 2)
            assert part.leader_epoch == old.leader_epoch + 1
        else:
            assert (part.leader, part.leader_epoch) == (old.leader, old.leader_epoch)
        assert part.partition_epoch == old.partition_epoch + 1


def test_last_isr_member_fenced_leaves_the_partition_leaderless_until_it_returns():
    h = three_brokers()
    h.create_topic("solo", assignments={0: [2]})
    h.now += TIMEOUT + 1
    h.heartbeat(1)
    h.heartbeat(3)
    assert h.commit(h.controller.tick(h.now)) == [2]
    p = h.image.topic("solo").partitions[0]
    assert (p.isr, p.leader, p.leader_epoch) == ((2,), -1, 1)
    before = h.next_offset
    h.heartbeat(2)  # caught up: unfenced, and elected again
    recs = records_since(h, before)
    assert recs[0] == BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=h.epochs[2],
                                                     fenced=-1)
    assert recs[1] == PartitionChangeRecord(topic_id=h.image.topic("solo").topic_id,
                                            partition_id=0, leader=2)
    p = h.image.topic("solo").partitions[0]
    assert (p.isr, p.leader, p.leader_epoch) == ((2,), 2, 2)


def test_unclean_leader_election_picks_an_out_of_sync_replica():
    h = three_brokers()
    h.create_topic("u", assignments={0: [1, 2]},
                   configs={"unclean.leader.election.enable": "true"})
    tid = h.image.topic("u").topic_id
    h.commit(h.controller.heartbeat(broker_id=2, broker_epoch=h.epochs[2], want_fence=True,
                                    want_shutdown=False, current_metadata_offset=0,
                                    now_ms=h.now))
    assert h.image.partition(tid, 0).isr == (1,)
    h.commit(h.controller.heartbeat(broker_id=2, broker_epoch=h.epochs[2], want_fence=False,
                                    want_shutdown=False, current_metadata_offset=h.next_offset,
                                    now_ms=h.now))
    h.heartbeat(1, want_fence=True)
    p = h.image.partition(tid, 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)


def test_a_new_incarnation_after_the_old_one_was_fenced_starts_over():
    h = three_brokers()
    h.create_topic("t", assignments={0: [3, 1]})
    h.now += TIMEOUT + 1
    h.heartbeat(1)
    h.heartbeat(2)
    h.commit(h.controller.tick(h.now))
    offset = h.next_offset
    epoch = h.register(3, "c", new=True)
    assert epoch == offset and h.image.brokers[3].fenced
    assert h.image.brokers[3].incarnation_id == h.incarnations[3]


def test_a_restarted_incarnation_leaves_the_isrs_of_the_old_one():
    h = three_brokers()
    h.create_topic("t", assignments={0: [3, 1]})
    tid = h.image.topic("t").topic_id
    h.now += TIMEOUT + 1  # the old session lapsed, but nobody ticked yet
    offset = h.next_offset
    epoch = h.register(3, "c", new=True)
    recs = records_since(h, offset)
    assert recs[0] == PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[1], leader=1)
    assert isinstance(recs[1], RegisterBrokerRecord) and epoch == offset + 1


def test_unregister_moves_leadership_then_removes_the_broker():
    h = three_brokers()
    h.create_topic("t", assignments={0: [1, 2]})
    tid = h.image.topic("t").topic_id
    before = h.next_offset
    h.commit(h.controller.unregister_broker(1))
    assert records_since(h, before) == [
        PartitionChangeRecord(topic_id=tid, partition_id=0, isr=[2], leader=2),
        UnregisterBrokerRecord(broker_id=1, broker_epoch=h.epochs[1])]
    assert 1 not in h.image.brokers
    with pytest.raises(KafkaError) as e:
        h.controller.unregister_broker(1)
    assert e.value.code == Errors.BROKER_ID_NOT_REGISTERED


# -- controlled shutdown -------------------------------------------------------------------

def test_controlled_shutdown_moves_leaders_before_the_broker_may_stop():
    h = three_brokers()
    h.create_topic("t", 6, 3)
    led = [p for p, part in h.image.topic("t").partitions.items() if part.leader == 1]
    assert led
    before = h.next_offset
    reply = h.heartbeat(1, want_shutdown=True)
    assert (reply.is_fenced, reply.in_controlled_shutdown, reply.should_shut_down) == (
        False, True, False)
    recs = records_since(h, before)
    mark = h.next_offset - 1
    assert recs[-1] == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=h.epochs[1],
                                                      in_controlled_shutdown=1)
    img = h.image
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].fenced
    for part in img.topic("t").partitions.values():
        assert part.leader != 1 and 1 not in part.isr
    # the others have not seen the move yet: the broker must wait
    h.heartbeat(2, offset=mark - 1)
    h.heartbeat(3, offset=mark)
    reply = h.heartbeat(1, want_shutdown=True)
    assert (reply.in_controlled_shutdown, reply.should_shut_down) == (True, False)
    h.heartbeat(2, offset=mark)
    before = h.next_offset
    reply = h.heartbeat(1, want_shutdown=True)
    assert (reply.is_fenced, reply.should_shut_down) == (True, True)
    assert records_since(h, before) == [
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=h.epochs[1], fenced=1)]
    assert h.image.brokers[1].fenced


def test_a_broker_leading_nothing_may_stop_at_once():
    h = three_brokers()
    reply = h.heartbeat(3, want_shutdown=True)
    assert (reply.is_fenced, reply.should_shut_down) == (True, True)
    assert h.image.brokers[3].fenced


def test_new_topics_avoid_brokers_in_controlled_shutdown():
    h = three_brokers()
    h.create_topic("t", assignments={0: [1]})
    h.heartbeat(1, want_shutdown=True)
    res = h.create_topic("u", 4, 2)
    assert res.error_code == 0
    assert all(1 not in p.replicas for p in h.image.topic("u").partitions.values())
    res = h.create_topic("v", 1, 3)
    assert res.error_code == Errors.INVALID_REPLICATION_FACTOR


# -- topics --------------------------------------------------------------------------------

def test_create_topic_records_and_reply():
    h = three_brokers(num_partitions=2, default_replication_factor=2)
    before = h.next_offset
    res = h.create_topic("orders", configs={"retention.ms": "60000"})
    assert (res.error_code, res.error_message, res.num_partitions, res.replication_factor) == (
        0, None, 2, 2)
    recs = records_since(h, before)
    tid = res.topic_id
    assert recs[0] == TopicRecord(name="orders", topic_id=tid)
    assert recs[1] == ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="orders",
                                   name="retention.ms", value="60000")
    assert [type(r) for r in recs[2:]] == [PartitionRecord, PartitionRecord]
    for i, r in enumerate(recs[2:]):
        assert (r.partition_id, r.topic_id, r.isr, r.leader, r.leader_epoch,
                r.partition_epoch) == (i, tid, r.replicas, r.replicas[0], 0, 0)
        assert len(set(r.replicas)) == 2
    retention = next(c for c in res.configs if c.name == "retention.ms")
    assert (retention.value, retention.config_source) == ("60000", 1)  # TOPIC_CONFIG
    assert h.image.topic("orders").topic_id == tid


@pytest.mark.parametrize("kw,code", [
    (dict(name="bad name!"), Errors.INVALID_TOPIC),
    (dict(name="t", rf=4), Errors.INVALID_REPLICATION_FACTOR),
    (dict(name="t", rf=0), Errors.INVALID_REPLICATION_FACTOR),
    (dict(name="t", partitions=0), Errors.INVALID_PARTITIONS),
    (dict(name="t", configs={"retention.ms": "soon"}), Errors.INVALID_CONFIG),
    (dict(name="t", configs={"no.such.key": "1"}), Errors.INVALID_CONFIG),
    (dict(name="t", configs={"retention.ms": None}), Errors.INVALID_CONFIG),
    (dict(name="t", assignments={0: [1, 9]}), Errors.INVALID_REPLICA_ASSIGNMENT),
    (dict(name="t", assignments={0: [1, 1]}), Errors.INVALID_REPLICA_ASSIGNMENT),
    (dict(name="t", assignments={0: [1], 1: [1, 2]}), Errors.INVALID_REPLICA_ASSIGNMENT),
    (dict(name="t", assignments={1: [1]}), Errors.INVALID_REPLICA_ASSIGNMENT),
    (dict(name="t", assignments={0: [1]}, partitions=1), Errors.INVALID_REQUEST),
])
def test_create_topic_errors_write_nothing(kw, code):
    h = three_brokers()
    before = h.next_offset
    res = h.create_topic(**kw)
    assert res.error_code == code, res.error_message
    assert h.next_offset == before


def test_existing_colliding_and_duplicate_names():
    h = three_brokers()
    h.create_topic("a.b")
    assert h.create_topic("a.b").error_code == Errors.TOPIC_ALREADY_EXISTS
    res = h.create_topic("a_b")
    assert (res.error_code, res.error_message) == (
        Errors.INVALID_TOPIC, "Topic 'a_b' collides with existing topic: a.b")
    req = ct.CreateTopicsRequest(topics=[ct.CreatableTopic(name="x", num_partitions=1,
                                                           replication_factor=1)] * 2,
                                 timeout_ms=1, validate_only=False)
    result = h.controller.create_topics(req)
    assert result.records == []
    assert [t.error_code for t in result.reply.topics] == [Errors.INVALID_REQUEST] * 2


def test_validate_only_answers_without_records():
    h = three_brokers()
    res = h.create_topic("t", 3, 3, validate_only=True)
    assert (res.error_code, res.num_partitions) == (0, 3)
    assert h.image.topic("t") is None


def test_more_than_ten_thousand_records_is_a_policy_violation():
    h = three_brokers()
    res = h.create_topic("huge", 10_000, 1)
    assert res.error_code == Errors.POLICY_VIOLATION
    assert h.image.topic("huge") is None


def test_delete_topics_by_name_and_id():
    h = three_brokers()
    a = h.create_topic("a").topic_id
    b = h.create_topic("b").topic_id
    h.controller.replay(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="a",
                                     name="retention.ms", value="1"), h.next_offset)
    h.log.append((h.next_offset, None))
    result = h.controller.delete_topics([("a", None), (None, b), ("nope", None),
                                         (None, uuid.UUID(int=5))])
    assert result.records == [RemoveTopicRecord(topic_id=a), RemoveTopicRecord(topic_id=b)]
    assert [(r.name, r.topic_id, r.error_code) for r in result.reply.responses] == [
        ("a", a, 0), ("b", b, 0), ("nope", uuid.UUID(int=0), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (None, uuid.UUID(int=5), Errors.UNKNOWN_TOPIC_ID)]
    h.commit(result)
    assert h.image.topics_by_name == {}
    assert h.image.config(TOPIC_RESOURCE, "a") == {}


def test_delete_disabled():
    h = three_brokers(delete_topic_enable=False)
    h.create_topic("a")
    result = h.controller.delete_topics([("a", None)])
    assert result.records == []
    assert result.reply.responses[0].error_code == Errors.TOPIC_DELETION_DISABLED


def _create_partitions(h, name, count, assignments=None):
    req = CreatePartitionsRequest(
        topics=[cp.CreatePartitionsTopic(
            name=name, count=count,
            assignments=None if assignments is None else
            [cp.CreatePartitionsAssignment(broker_ids=a) for a in assignments])],
        timeout_ms=1, validate_only=False)
    return h.commit(h.controller.create_partitions(req)).results[0]


def test_create_partitions_places_new_partitions_with_the_topics_replication_factor():
    h = three_brokers()
    tid = h.create_topic("t", 2, 2).topic_id
    before = h.next_offset
    assert _create_partitions(h, "t", 5).error_code == 0
    recs = records_since(h, before)
    assert [(r.partition_id, r.topic_id, len(r.replicas)) for r in recs] == [
        (2, tid, 2), (3, tid, 2), (4, tid, 2)]
    assert _create_partitions(h, "t", 7, [[1, 2], [3, 1]]).error_code == 0
    assert h.image.topic("t").partitions[6].replicas == (3, 1)
    for count, assignments, code in [
        (7, None, Errors.INVALID_PARTITIONS), (6, None, Errors.INVALID_PARTITIONS),
        (9, [[1, 2]], Errors.INVALID_REPLICA_ASSIGNMENT),
        (8, [[1]], Errors.INVALID_REPLICA_ASSIGNMENT),
    ]:
        assert _create_partitions(h, "t", count, assignments).error_code == code
    assert _create_partitions(h, "nope", 3).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION


# -- configs -------------------------------------------------------------------------------

def _incremental(h, rtype, name, *ops):
    req = IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[iac.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=False)
    result = h.controller.incremental_alter_configs(req)
    return result.records, h.commit(result).responses[0]


def test_incremental_alter_configs_writes_config_records():
    h = three_brokers()
    h.create_topic("t")
    recs, r = _incremental(h, TOPIC_RESOURCE, "t", ("retention.ms", 0, "1000"),
                           ("cleanup.policy", 2, "compact"))
    assert r.error_code == 0
    assert recs == [
        ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1000"),
        ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy",
                     value="delete,compact")]
    recs, r = _incremental(h, TOPIC_RESOURCE, "t", ("retention.ms", 1, None),
                           ("cleanup.policy", 3, "delete"))
    assert recs == [
        ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value=None),
        ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy",
                     value="compact")]
    assert h.image.config(TOPIC_RESOURCE, "t") == {"cleanup.policy": "compact"}
    recs, r = _incremental(h, TOPIC_RESOURCE, "t", ("cleanup.policy", 0, "compact"))
    assert (recs, r.error_code) == ([], 0)  # no change, no record


def test_subtract_may_empty_a_list_and_a_null_value_is_invalid_request():
    h = three_brokers()
    h.create_topic("t")
    recs, r = _incremental(h, TOPIC_RESOURCE, "t", ("cleanup.policy", 3, "delete"))
    assert (r.error_code, recs) == (0, [ConfigRecord(
        resource_type=2, resource_name="t", name="cleanup.policy", value="")])
    recs, r = _incremental(h, TOPIC_RESOURCE, "t", ("retention.ms", 0, None))
    assert (recs, r.error_code, r.error_message) == (
        [], Errors.INVALID_REQUEST, "Null value not supported for : retention.ms")


@pytest.mark.parametrize("rtype,name,op,code", [
    (TOPIC_RESOURCE, "nope", ("retention.ms", 0, "1"), Errors.UNKNOWN_TOPIC_OR_PARTITION),
    (TOPIC_RESOURCE, "t", ("retention.ms", 0, "x"), Errors.INVALID_CONFIG),
    (TOPIC_RESOURCE, "t", ("retention.ms", 2, "1"), Errors.INVALID_CONFIG),
    (BROKER_RESOURCE, "b1", ("log.retention.ms", 0, "1"), Errors.INVALID_REQUEST),
    (8, "1", ("x", 0, "1"), Errors.INVALID_REQUEST),
])
def test_config_errors(rtype, name, op, code):
    h = three_brokers()
    h.create_topic("t")
    recs, r = _incremental(h, rtype, name, op)
    assert (recs, r.error_code) == ([], code), r.error_message


def test_broker_configs_and_legacy_alter_configs_replace_the_set():
    h = three_brokers()
    recs, r = _incremental(h, BROKER_RESOURCE, "", ("log.retention.ms", 0, "5000"))
    assert r.error_code == 0 and h.image.config(BROKER_RESOURCE, "") == {
        "log.retention.ms": "5000"}
    h.create_topic("t", configs={"retention.ms": "1", "segment.ms": "100000"})
    req = AlterConfigsRequest(resources=[ac.AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name="t",
        configs=[ac.AlterableConfig(name="retention.ms", value="2")])], validate_only=False)
    result = h.controller.alter_configs(req)
    assert result.records == [
        ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="2"),
        ConfigRecord(resource_type=2, resource_name="t", name="segment.ms", value=None)]
    h.commit(result)
    assert h.image.config(TOPIC_RESOURCE, "t") == {"retention.ms": "2"}


# -- producer ids, snapshots ---------------------------------------------------------------

def test_producer_id_blocks_never_overlap():
    h = three_brokers()
    a = h.commit(h.controller.allocate_producer_ids(1, h.epochs[1]))
    b = h.commit(h.controller.allocate_producer_ids(2, h.epochs[2]))
    assert (a.first_producer_id, a.size, b.first_producer_id) == (0, 1000, 1000)
    assert h.log[-1][1] == ProducerIdsRecord(broker_id=2, broker_epoch=h.epochs[2],
                                             next_producer_id=2000)
    with pytest.raises(KafkaError) as e:
        h.controller.allocate_producer_ids(1, h.epochs[1] + 100)
    assert e.value.code == Errors.STALE_BROKER_EPOCH


def test_snapshot_round_trip_gives_an_equal_image_and_a_working_controller():
    h = three_brokers()
    h.create_topic("t", 4, 2, configs={"retention.ms": "9"})
    h.heartbeat(1, want_shutdown=True)
    h.commit(h.controller.allocate_producer_ids(2, h.epochs[2]))
    snap = list(h.controller.snapshot_records())
    other = QuorumController(cluster_id=CLUSTER_ID)
    other.load_snapshot(snap, h.next_offset - 1)
    assert other.image == h.image
    assert MetadataImage(cluster_id=CLUSTER_ID).replay(snap) == h.image
    assert other.last_offset == h.next_offset - 1
    other.activate(h.now)
    result = other.heartbeat(broker_id=2, broker_epoch=h.epochs[2], want_fence=False,
                             want_shutdown=False, current_metadata_offset=h.next_offset - 1,
                             now_ms=h.now)
    assert not result.reply.is_fenced


def test_controlled_shutdown_completes_on_a_controller_loaded_from_a_snapshot():
    h = three_brokers()
    h.create_topic("t", assignments={0: [1, 2]})
    h.heartbeat(1, want_shutdown=True)
    other = QuorumController(cluster_id=CLUSTER_ID)
    other.load_snapshot(list(h.controller.snapshot_records()), h.next_offset - 1)
    other.activate(h.now)
    h.controller = other
    h.heartbeat(2)
    h.heartbeat(3)
    reply = h.heartbeat(1, want_shutdown=True)
    assert (reply.is_fenced, reply.should_shut_down) == (True, True)


def test_controller_config_from_kafka_property_names():
    config = ControllerConfig.from_props({
        "num.partitions": "3", "default.replication.factor": 2,
        "delete.topic.enable": "false", "broker.session.timeout.ms": "18000",
        "log.retention.ms": "1000"})
    assert (config.num_partitions, config.default_replication_factor,
            config.delete_topic_enable, config.broker_session_timeout_ms) == (3, 2, False, 18000)
    assert ControllerConfig.from_props({}) == ControllerConfig(static_props={})
    with pytest.raises(KafkaError) as e:
        ControllerConfig.from_props({"num.partitions": "0"})
    assert e.value.code == Errors.INVALID_CONFIG
