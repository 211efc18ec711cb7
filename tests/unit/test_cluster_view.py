"""ClusterView: what handlers read from a cluster's MetadataImage (Kafka's KRaftMetadataCache)."""

from __future__ import annotations

import uuid

from spool.broker.cluster_view import ClusterView
from spool.cluster.image import MetadataImage
from spool.protocol._generated.config_record import ConfigRecord
from spool.protocol._generated.partition_record import PartitionRecord
from spool.protocol._generated.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol._generated.unfence_broker_record import UnfenceBrokerRecord

TID = uuid.UUID(int=42)


def broker(node, rack=None, external=True):
    eps = [BrokerEndpoint(name="INTERNAL", host=f"10.0.0.{node}", port=9092, security_protocol=0)]
    if external:
        eps.append(BrokerEndpoint(name="EXTERNAL", host=f"b{node}.example", port=19092,
                                  security_protocol=0))
    return RegisterBrokerRecord(broker_id=node, incarnation_id=uuid.UUID(int=node),
                                broker_epoch=10 + node, end_points=eps, rack=rack, fenced=True)


def image():
    return MetadataImage(cluster_id="c").replay([
        broker(1, "a"), broker(2, "b"), broker(3, "c", external=False),
        UnfenceBrokerRecord(id=1, epoch=11), UnfenceBrokerRecord(id=3, epoch=13),
        TopicRecord(name="orders", topic_id=TID),
        PartitionRecord(partition_id=0, topic_id=TID, replicas=[1, 2, 3], isr=[1, 3],
                        leader=1, leader_epoch=4),
        PartitionRecord(partition_id=1, topic_id=TID, replicas=[2, 3], isr=[2], leader=2,
                        leader_epoch=0),
        ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
        ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="5"),
        ConfigRecord(resource_type=4, resource_name="3", name="log.retention.ms", value="7"),
    ])


def test_brokers_are_the_unfenced_ones_on_the_requested_listener():
    view = ClusterView(image(), "INTERNAL")
    assert [(b.node_id, b.host, b.port, b.rack) for b in view.brokers()] == [
        (1, "10.0.0.1", 9092, "a"), (3, "10.0.0.3", 9092, "c")]
    # broker 3 has no EXTERNAL endpoint: a client of that listener cannot reach it
    assert [(b.node_id, b.host) for b in view.brokers("EXTERNAL")] == [(1, "b1.example")]
    assert view.broker(2) is None  # fenced
    assert view.broker(3, "EXTERNAL") is None


def test_partitions_carry_leader_epoch_replicas_isr_and_offline_replicas():
    view = ClusterView(image(), "INTERNAL")
    t = view.topic("orders")
    assert t.topic_id == TID and view.topic_name(TID) == "orders" and view.topic_id("orders") == TID
    p0, p1 = t.partitions
    assert (p0.leader, p0.leader_epoch, tuple(p0.replicas), tuple(p0.isr)) == (1, 4, (1, 2, 3), (1, 3))
    assert tuple(p0.offline_replicas) == (2,)  # fenced
    assert p1.leader == 2 and view.partition("orders", 1) == p1
    assert view.partition("orders", 2) is None and view.partition("nope", 0) is None
    assert view.partition_count("orders") == 2 and view.topic_names() == ["orders"]


def test_configs_come_from_config_records():
    view = ClusterView(image(), "INTERNAL")
    assert view.topic_configs("orders") == {"retention.ms": "1000"}
    assert view.broker_configs(1) == {"log.retention.ms": "5"}
    assert view.broker_configs(3) == {"log.retention.ms": "7"}


def test_the_controller_id_is_the_active_controller_when_it_is_a_live_broker():
    assert ClusterView(image(), "INTERNAL", active_controller=3).controller_id() == 3
    # a controller-only node (or a fenced broker) is not told to clients: a live broker is
    assert ClusterView(image(), "INTERNAL", active_controller=9).controller_id() in (1, 3)
    assert ClusterView(MetadataImage(), "INTERNAL", active_controller=9).controller_id() == -1


def test_a_controller_this_broker_cannot_reach_is_not_told_to_clients():
    """After a kill -9 of the controller, before the election: this broker names itself
    (it forwards), not the controller its last request to failed."""
    gone = ClusterView(image(), "INTERNAL", active_controller=3, self_id=1,
                       reachable=lambda node: node != 3)
    assert gone.controller_id() == 1
    back = ClusterView(image(), "INTERNAL", active_controller=3, self_id=1,
                       reachable=lambda node: True)
    assert back.controller_id() == 3
    # a controller-only leader: this broker, not a random one
    assert ClusterView(image(), "INTERNAL", active_controller=9, self_id=3).controller_id() == 3
