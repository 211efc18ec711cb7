"""KIP-951 and Fetch v15 on a real 3-node cluster, racks a, b, c, through the raw protocol.

``hinted`` has one partition on brokers 1 and 2 (leader 1). Fetch v15 carries the fetching
replica in ``replica_state``: a replica's fetch to the follower is NOT_LEADER_OR_FOLLOWER,
a consumer's is served there (KIP-392). Then broker 1 stops and leadership moves to 2:
Fetch v16+ and Produce v10+ answers of NOT_LEADER_OR_FOLLOWER (broker 3, no replica) and
FENCED_LEADER_EPOCH (broker 2 asked with the old epoch) name the new leader, its epoch and
its endpoint, so a client can go there without asking Metadata; the named broker serves.
Below Fetch v16 no hint is given, as Kafka."""

from __future__ import annotations

import pytest

from spool.protocol._generated import CreateTopicsRequest, FetchRequest, ProduceRequest
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
)
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic, ReplicaState
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(240)

TOPIC = "hinted"
RACKS = ("a", "b", "c")


def records(n: int) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(None, b"r%d" % i, timestamp=1_700_000_000_000)
    return b.build()


def fetch(bootstrap: str, version: int, tid, *, epoch: int = -1, replica: int = -1):
    """(partition answer, response) of one Fetch for hinted-0 from offset 0."""
    req = FetchRequest(replica_id=replica, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       replica_state=ReplicaState(replica_id=replica, replica_epoch=-1),
                       topics=[FetchTopic(topic=TOPIC, topic_id=tid, partitions=[FetchPartition(
                           partition=0, current_leader_epoch=epoch, fetch_offset=0,
                           partition_max_bytes=1 << 20)])])
    resp = request_once(bootstrap, 1, version, req)
    [p] = resp.responses[0].partitions
    return p, resp


def produce(bootstrap: str, version: int, tid):
    req = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[TopicProduceData(
        name=TOPIC, topic_id=tid, partition_data=[PartitionProduceData(index=0,
                                                                       records=records(1))])])
    resp = request_once(bootstrap, 0, version, req)
    return resp.responses[0].partition_responses[0], resp


def count(p) -> int:
    return sum(h.records_count for _, h in iter_batches(bytes(p.records or b"")))


def hint(p, resp) -> tuple:
    """What a KIP-951 client reads: the error, the leader and epoch, the endpoints given."""
    return (p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch,
            [(e.node_id, e.port, e.rack) for e in resp.node_endpoints])


def test_errors_name_the_leader_after_it_moved(cluster_factory):
    cluster = cluster_factory(racks=RACKS, proxied=False,
                              overrides={"replica.lag.time.max.ms": "3000"}).start()
    cluster.wait_formed()
    nodes = cluster.nodes
    resp = request_once(nodes[3].bootstrap, 19, 7, CreateTopicsRequest(
        timeout_ms=10000, topics=[CreatableTopic(
            name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
                CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])]))
    assert [t.error_code for t in resp.topics] == [0]
    tid = resp.topics[0].topic_id

    def settled():
        parts = cluster.partitions(3, TOPIC)
        if isinstance(parts, str) or parts[0].leader != 1 or sorted(parts[0].isr) != [1, 2]:
            return f"not yet: {parts}"
        return parts[0]

    first = cluster.wait_until("hinted-0 led by 1 with ISR 1, 2", settled)
    cluster.wait_until("broker 1 takes a record", lambda: (  # once it knows it leads
        True if produce(nodes[1].bootstrap, 13, tid)[0].error_code == 0 else "not yet"))
    cluster.wait_until("broker 2 knows the high watermark", lambda: (
        True if fetch(nodes[2].bootstrap, 15, tid)[0].high_watermark == 1 else "not yet"))

    # v15: the fetching replica is in replica_state
    p, _ = fetch(nodes[2].bootstrap, 15, tid, replica=3)
    assert (p.error_code, p.current_leader.leader_id) == (Errors.NOT_LEADER_OR_FOLLOWER, -1)
    p, _ = fetch(nodes[2].bootstrap, 15, tid)
    assert (p.error_code, count(p)) == (0, 1)  # a consumer may read from the follower
    p, resp = fetch(nodes[2].bootstrap, 16, tid, replica=3)
    assert hint(p, resp) == (Errors.NOT_LEADER_OR_FOLLOWER, 1, first.leader_epoch,
                             [(1, nodes[1].broker_port, "a")])

    assert nodes[1].stop() == 0  # controlled shutdown: leadership moves to broker 2

    def moved():
        parts = cluster.partitions(3, TOPIC)
        if isinstance(parts, str) or parts[0].leader != 2:
            return f"not yet: {parts}"
        return parts[0]

    now = cluster.wait_until("broker 2 leads hinted-0", moved)
    assert now.leader_epoch > first.leader_epoch
    cluster.wait_until("broker 2 knows it leads", lambda: (
        True if fetch(nodes[2].bootstrap, 16, tid, epoch=now.leader_epoch)[0].error_code == 0
        else "not yet"))
    to_2 = [(2, nodes[2].broker_port, "b")]
    # broker 3 holds no replica; broker 2 is asked with the epoch before the move
    p, resp = fetch(nodes[3].bootstrap, 16, tid)
    assert hint(p, resp) == (Errors.NOT_LEADER_OR_FOLLOWER, 2, now.leader_epoch, to_2)
    p, resp = fetch(nodes[3].bootstrap, 18, tid, epoch=first.leader_epoch)
    assert hint(p, resp) == (Errors.NOT_LEADER_OR_FOLLOWER, 2, now.leader_epoch, to_2)
    p, resp = fetch(nodes[2].bootstrap, 16, tid, epoch=first.leader_epoch)
    assert hint(p, resp) == (Errors.FENCED_LEADER_EPOCH, 2, now.leader_epoch, to_2)
    for version in (12, 15):  # no hint before v16 (Kafka sets none)
        p, _ = fetch(nodes[3].bootstrap, version, tid)
        assert (p.error_code, p.current_leader.leader_id) == (Errors.NOT_LEADER_OR_FOLLOWER, -1)
    for version in (10, 13):
        p, resp = produce(nodes[3].bootstrap, version, tid)
        assert hint(p, resp) == (Errors.NOT_LEADER_OR_FOLLOWER, 2, now.leader_epoch, to_2)

    # the broker named serves, at the epoch named
    p, _ = produce(nodes[2].bootstrap, 13, tid)
    assert (p.error_code, p.base_offset) == (0, 1)
    p, _ = fetch(nodes[2].bootstrap, 16, tid, epoch=now.leader_epoch)
    assert (p.error_code, count(p)) == (0, 2)
