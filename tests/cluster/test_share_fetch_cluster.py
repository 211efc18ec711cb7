"""KIP-932 share fetch on a real 3-node cluster, through the raw protocol.

``shared`` has one partition on brokers 1 and 2 (leader 1). A ShareFetch to broker 2 (a
follower) is NOT_LEADER_OR_FOLLOWER naming broker 1, its epoch and endpoint (KIP-951).
Broker 1 hands out records 0-9, a member accepts 0-4 and releases 5-6; broker 1 stops and
broker 2 takes the partition over: it reads the share-partition's state from the share
coordinator (``__share_group_state``, wherever it is) and hands out 5-9 only, with
delivery count 2: 5-6 were written with the release, 7-9 when the member's connection
closed (its share session ended and released them); 0-4 are never delivered again."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from spool.protocol._generated import (
    CreateTopicsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from spool.protocol._generated import share_acknowledge_request as ackreq
from spool.protocol._generated import share_fetch_request as freq
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
)
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient, request_once

pytestmark = pytest.mark.timeout(240)

TOPIC, GROUP = "shared", "sg-cluster"
ACCEPT, RELEASE = 1, 2


def share_fetch(rc: RawClient, member: str, epoch: int, tid, max_wait_ms: int = 0):
    return rc.request(78, 1, ShareFetchRequest(
        group_id=GROUP, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
        min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
        topics=[freq.FetchTopic(topic_id=tid, partitions=[freq.FetchPartition(0)])]))


def acquired(resp) -> dict[int, int]:
    """offset -> delivery count of what the answer acquired."""
    return {o: a.delivery_count for t in resp.responses for p in t.partitions
            for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}


def test_share_partition_moves_with_its_leader(cluster_factory):
    cluster = cluster_factory(proxied=False, overrides={
        "replica.lag.time.max.ms": "3000",
        "share.coordinator.state.topic.num.partitions": "3"}).start()
    cluster.wait_formed()
    nodes = cluster.nodes
    resp = request_once(nodes[3].bootstrap, 19, 7, CreateTopicsRequest(
        timeout_ms=10000, topics=[CreatableTopic(
            name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
                CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])]))
    assert [t.error_code for t in resp.topics] == [0]
    tid = resp.topics[0].topic_id

    def led_by(n):
        def check():
            parts = cluster.partitions(3, TOPIC)
            if isinstance(parts, str) or parts[0].leader != n or n not in parts[0].isr:
                return f"not yet: {parts}"
            return parts[0]
        return check

    first = cluster.wait_until("shared-0 led by 1", led_by(1))
    cluster.wait_until("ISR 1, 2", lambda: True if sorted(
        cluster.partitions(3, TOPIC)[0].isr) == [1, 2] else "not yet")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    res = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce(TOPIC, b"v%d" % i, partition=0)
    assert p.flush(30) == 0

    with RawClient(nodes[2].bootstrap) as rc:  # a follower
        resp = share_fetch(rc, "m1", 0, tid)
        [part] = resp.responses[0].partitions
        assert (part.error_code, part.current_leader.leader_id,
                part.current_leader.leader_epoch) == (Errors.NOT_LEADER_OR_FOLLOWER, 1,
                                                      first.leader_epoch)
        assert [(e.node_id, e.port) for e in resp.node_endpoints] == \
            [(1, nodes[1].broker_port)]

    with RawClient(nodes[1].bootstrap) as rc:
        got = cluster.wait_until("broker 1 hands out 0-9", lambda: (
            acquired(share_fetch(rc, "m1", 0, tid, 2000)) or "not yet"))
        assert got == {o: 1 for o in range(10)}
        resp = rc.request(79, 1, ShareAcknowledgeRequest(
            group_id=GROUP, member_id="m1", share_session_epoch=1, topics=[
                ackreq.AcknowledgeTopic(topic_id=tid, partitions=[ackreq.AcknowledgePartition(
                    partition_index=0, acknowledgement_batches=[
                        ackreq.AcknowledgementBatch(0, 4, [ACCEPT]),
                        ackreq.AcknowledgementBatch(5, 6, [RELEASE])])])]))
        assert [p.error_code for t in resp.responses for p in t.partitions] == [0]

    assert nodes[1].stop() == 0  # controlled shutdown: leadership moves to broker 2
    cluster.wait_until("broker 2 leads shared-0", led_by(2))
    with RawClient(nodes[2].bootstrap) as rc:
        got = cluster.wait_until("broker 2 hands out the rest", lambda: (
            acquired(share_fetch(rc, f"m2-{uuid.uuid4().hex[:4]}", 0, tid, 2000))
            or "not yet"), timeout=60)
        assert got == {o: 2 for o in range(5, 10)}
