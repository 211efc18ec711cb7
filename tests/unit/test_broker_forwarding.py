"""Admin requests reaching a cluster broker go to the active controller (the real
QuorumController behind an in-process channel) and are answered with its reply;
with no controller reachable, every topic or resource is REQUEST_TIMED_OUT."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from spool.broker.cluster_view import ClusterView
from spool.broker.controller_channel import ControllerChannel
from spool.broker.forwarding import create_topic_via_controller
from spool.broker.handlers import admin, configs, metadata, partition_admin
from spool.broker.internal_topic import InternalTopic
from spool.cluster.loader import MetadataLoader
from spool.protocol._generated import (
    AlterPartitionReassignmentsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
)
from spool.protocol._generated import alter_partition_reassignments_request as aprq
from spool.protocol._generated import elect_leaders_request as elq
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.delete_topics_request import DeleteTopicState
from spool.protocol._generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from spool.protocol._generated.unfence_broker_record import UnfenceBrokerRecord
from spool.protocol.errors import Errors, KafkaError
from tests.helpers.inprocess_controller import InProcessController


def setup(leader: int = 1):
    loader = MetadataLoader("c1")
    ctrl = InProcessController(loader)
    for node in (1, 2):  # two live brokers, as their registrations would have left them
        ctrl.commit([RegisterBrokerRecord(
            broker_id=node, incarnation_id=uuid.UUID(int=node), broker_epoch=node,
            end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + node,
                                       security_protocol=0)], fenced=True)])
        ctrl.commit([UnfenceBrokerRecord(id=node, epoch=node)])
    broker = SimpleNamespace(
        view=ClusterView(loader.image, "PLAINTEXT", leader), request_timeout_s=5.0,
        authorizer=None,  # no authorizer.class.name: every check allows
        controller_channel=ControllerChannel({1: ("127.0.0.1", 1)}, lambda: leader,
                                             lambda host, port: ctrl))
    return loader, broker


def ctx(broker, api_key, version):
    return SimpleNamespace(broker=broker, header=SimpleNamespace(api_key=api_key),
                           api_version=version)


def create_req(*names, rf=2):
    return CreateTopicsRequest(topics=[CreatableTopic(
        name=n, num_partitions=3, replication_factor=rf, assignments=[], configs=[])
        for n in names], timeout_ms=1000, validate_only=False)


def test_create_alter_delete_are_the_controllers_answers():
    async def main():
        loader, broker = setup()
        resp = await admin.create_topics(ctx(broker, 19, 7), create_req("a", "b"))
        assert [(t.name, t.error_code, t.num_partitions) for t in resp.topics] == [
            ("a", 0, 3), ("b", 0, 3)]
        a = loader.image.topic("a")
        assert a is not None and all(len(p.replicas) == 2 for p in a.partitions.values())
        again = await admin.create_topics(ctx(broker, 19, 7), create_req("a", rf=3))
        assert again.topics[0].error_code == Errors.TOPIC_ALREADY_EXISTS
        alter = await configs.incremental_alter_configs(
            ctx(broker, 44, 1), IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=2, resource_name="a", configs=[AlterableConfig(
                    name="retention.ms", config_operation=0, value="5000")])],
                validate_only=False))
        assert alter.responses[0].error_code == 0
        assert dict(loader.image.config(2, "a")) == {"retention.ms": "5000"}
        gone = await admin.delete_topics(ctx(broker, 20, 6), DeleteTopicsRequest(
            topics=[DeleteTopicState(name="b")], timeout_ms=1000))
        assert gone.responses[0].error_code == 0 and loader.image.topic("b") is None
        await create_topic_via_controller(broker, "auto")
        assert loader.image.topic("auto") is not None
        with pytest.raises(KafkaError) as e:
            await create_topic_via_controller(broker, "auto")
        assert e.value.code == Errors.TOPIC_ALREADY_EXISTS

    asyncio.run(main())


def test_no_controller_is_request_timed_out_for_each_topic():
    async def main():
        _, broker = setup(leader=-1)
        resp = await admin.create_topics(ctx(broker, 19, 7), create_req("x", "y"))
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("x", Errors.REQUEST_TIMED_OUT), ("y", Errors.REQUEST_TIMED_OUT)]
        gone = await admin.delete_topics(ctx(broker, 20, 5), DeleteTopicsRequest(
            topic_names=["x"], timeout_ms=1000))
        assert [(t.name, t.error_code) for t in gone.responses] == [
            ("x", Errors.REQUEST_TIMED_OUT)]

    asyncio.run(main())


def test_metadata_auto_creates_through_the_controller():
    async def main():
        loader, broker = setup()
        broker.config = SimpleNamespace(get_bool=lambda key: True)
        broker.cluster_id = "c1"
        broker.has_topic = lambda name: broker.view.partition_count(name) > 0
        broker.topic_names = lambda: broker.view.topic_names()
        c = SimpleNamespace(broker=broker, api_version=12, listener_name="PLAINTEXT",
                            header=SimpleNamespace(api_key=3))
        req = MetadataRequest(topics=[MetadataRequestTopic(name="auto1")],
                              allow_auto_topic_creation=True)
        first = await metadata.metadata(c, req)
        # created on the controller; this broker's view does not have it yet
        assert [(t.name, t.error_code) for t in first.topics] == [
            ("auto1", Errors.LEADER_NOT_AVAILABLE)]
        assert loader.image.topic("auto1") is not None
        broker.view = ClusterView(loader.image, "PLAINTEXT", 1)  # the next image published
        second = await metadata.metadata(c, req)
        t = second.topics[0]
        assert t.error_code == 0 and len(t.partitions) == 1 and t.partitions[0].leader_id in (1, 2)
        assert [b.node_id for b in second.brokers] == [1, 2] and second.controller_id == 1
        assert ctrl_requests(broker).count("CreateTopicsRequest") == 1  # exists now: no 2nd

    asyncio.run(main())


def ctrl_requests(broker):
    return broker.controller_channel._connect("h", 0).requests


class ViewPublisher:
    """The broker's view follows the committed log (what BrokerMetadataPublisher does)."""

    def __init__(self, broker):
        self.broker = broker

    def on_metadata_update(self, old, new, leader):
        self.broker.view = ClusterView(new, "PLAINTEXT", 1)


def test_internal_topics_are_created_by_the_controller_with_their_replication_factor():
    async def main():
        loader, broker = setup()
        loader.add_publisher(ViewPublisher(broker))
        settings = {"offsets.topic.replication.factor": 3,
                    "transaction.state.log.replication.factor": 1,
                    "transaction.state.log.min.isr": 2}
        broker.config = SimpleNamespace(get_int=lambda key: settings[key])
        topic = InternalTopic(broker, "__consumer_offsets", lambda: 5)
        # 3 replicas asked, 2 brokers registered: capped to 2
        assert await topic.ensure()
        t = loader.image.topic("__consumer_offsets")
        assert len(t.partitions) == 5 and all(len(p.replicas) == 2 for p in t.partitions.values())
        assert dict(loader.image.config(2, "__consumer_offsets")) == {"cleanup.policy": "compact"}
        leader = broker.view.partition("__consumer_offsets", topic.partition_for("g1")).leader
        assert leader in (1, 2)
        txn = InternalTopic(broker, "__transaction_state", lambda: 3)
        assert await txn.ensure()
        t = loader.image.topic("__transaction_state")
        assert all(len(p.replicas) == 1 for p in t.partitions.values())
        assert dict(loader.image.config(2, "__transaction_state")) == {
            "cleanup.policy": "compact", "min.insync.replicas": "1"}  # capped by the factor

    asyncio.run(main())


def test_describe_cluster_describes_brokers_only():
    async def main():
        _, broker = setup()
        broker.cluster_id = "c1"
        c = SimpleNamespace(broker=broker, api_version=1, listener_name="PLAINTEXT")
        ok = await metadata.describe_cluster(c, DescribeClusterRequest(endpoint_type=1))
        assert (ok.error_code, [b.broker_id for b in ok.brokers], ok.controller_id) == (
            0, [1, 2], 1)
        ctl = await metadata.describe_cluster(c, DescribeClusterRequest(endpoint_type=2))
        assert ctl.error_code == Errors.MISMATCHED_ENDPOINT_TYPE and ctl.brokers == []
        odd = await metadata.describe_cluster(c, DescribeClusterRequest(endpoint_type=9))
        assert odd.error_code == Errors.UNSUPPORTED_ENDPOINT_TYPE

    asyncio.run(main())


def test_elections_and_reassignments_are_the_controllers_answers():
    async def main():
        loader, broker = setup()
        await admin.create_topics(ctx(broker, 19, 7), create_req("r", rf=1))
        broker.view = ClusterView(loader.image, "PLAINTEXT", 1)
        p0 = loader.image.topic("r").partitions[0]
        other = 2 if p0.replicas == (1,) else 1
        moved = await partition_admin.alter_partition_reassignments(
            ctx(broker, 45, 1), AlterPartitionReassignmentsRequest(topics=[
                aprq.ReassignableTopic(name="r", partitions=[
                    aprq.ReassignablePartition(partition_index=0, replicas=[other]),
                    aprq.ReassignablePartition(partition_index=1, replicas=[7])])]))
        assert [(p.partition_index, p.error_code) for p in moved.responses[0].partitions] == [
            (0, 0), (1, Errors.INVALID_REPLICA_ASSIGNMENT)]
        listed = await partition_admin.list_partition_reassignments(
            ctx(broker, 46, 0), ListPartitionReassignmentsRequest(topics=None))
        assert [(t.name, [(p.partition_index, p.adding_replicas, p.removing_replicas)
                          for p in t.partitions]) for t in listed.topics] == [
            ("r", [(0, [other], list(p0.replicas))])]
        elected = await partition_admin.elect_leaders(ctx(broker, 43, 2), ElectLeadersRequest(
            election_type=0, topic_partitions=[elq.TopicPartitions(topic="r", partitions=[1])]))
        assert elected.replica_election_results[0].partition_result[0].error_code == (
            Errors.ELECTION_NOT_NEEDED)

    asyncio.run(main())


def test_elections_and_reassignments_without_a_controller_time_out():
    async def main():
        _, broker = setup(leader=-1)
        broker.request_timeout_s = 0.3  # how long the forwarder looks for a controller
        elected = await partition_admin.elect_leaders(ctx(broker, 43, 2), ElectLeadersRequest(
            election_type=0, topic_partitions=[elq.TopicPartitions(topic="r", partitions=[0])]))
        assert [(r.topic, p.partition_id, p.error_code) for r in elected.replica_election_results
                for p in r.partition_result] == [("r", 0, Errors.REQUEST_TIMED_OUT)]
        every = await partition_admin.elect_leaders(ctx(broker, 43, 2), ElectLeadersRequest(
            election_type=0, topic_partitions=None))
        assert (every.error_code, every.replica_election_results) == (
            Errors.REQUEST_TIMED_OUT, [])
        moved = await partition_admin.alter_partition_reassignments(
            ctx(broker, 45, 1), AlterPartitionReassignmentsRequest(topics=[
                aprq.ReassignableTopic(name="r", partitions=[
                    aprq.ReassignablePartition(partition_index=0, replicas=[1])])]))
        assert (moved.error_code, moved.responses[0].partitions[0].error_code) == (
            Errors.REQUEST_TIMED_OUT, Errors.REQUEST_TIMED_OUT)
        listed = await partition_admin.list_partition_reassignments(
            ctx(broker, 46, 0), ListPartitionReassignmentsRequest())
        assert (listed.error_code, listed.topics) == (Errors.REQUEST_TIMED_OUT, [])

    asyncio.run(main())
