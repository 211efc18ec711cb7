"""The share-group state persister in a 3-node cluster: the broker leading a share-partition
(ShareFetch/ShareAcknowledge there) is not the share coordinator of its key, so its reads
and writes of the state go over the network to the leader of the key's
``__share_group_state`` partition; when that coordinator is killed -9 the state is read
back from the partition's new leader (replicated, loaded on leadership) and the persister
finds it (retrying NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import (
    FindCoordinatorRequest,
    MetadataRequest,
    ReadShareGroupStateSummaryRequest,
)
from spool.protocol._generated import read_share_group_state_summary_request as sreq
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import RawClient
from tests.integration.test_share_fetch import acknowledge, fetch, part

pytestmark = pytest.mark.timeout(240)
ACCEPT = 1


def coordinator_of(cluster, key: str) -> int:
    def ask():
        with RawClient(cluster.live_bootstrap().split(",")[0]) as rc:
            c = rc.request(10, 6, FindCoordinatorRequest(key_type=2,
                                                         coordinator_keys=[key])).coordinators[0]
        return c.node_id if c.error_code == 0 else f"FindCoordinator: {c.error_code}"
    return cluster.wait_until(f"the share coordinator of {key}", ask)


def summary(bootstrap: str, group: str, tid: uuid.UUID) -> tuple[int, int]:
    with RawClient(bootstrap) as rc:
        r = rc.request(87, 0, ReadShareGroupStateSummaryRequest(group_id=group, topics=[
            sreq.ReadStateSummaryData(topic_id=tid, partitions=[sreq.PartitionData(
                partition=0, leader_epoch=-1)])]))
    p = r.results[0].partitions[0]
    return p.error_code, p.start_offset


def test_persister_reaches_the_coordinator_on_another_broker(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, proxied=False, overrides={
        "share.coordinator.state.topic.num.partitions": "3"}).start()
    cluster.wait_formed()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # alive until the answer
    admin.create_topics([NewTopic("q", 1, 3)])["q"].result(30)
    leader = cluster.wait_until("q's leader", lambda: _leader(cluster)).leader
    with RawClient(cluster.nodes[leader].bootstrap) as rc:
        tid = rc.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="q")],
                                                allow_auto_topic_creation=False)).topics[0].topic_id
    # a group whose share-state coordinator is not q's leader
    group = next(g for g in (f"sg{i}" for i in range(100))
                 if coordinator_of(cluster, f"{g}:{_text(tid)}:0") != leader)
    coord = coordinator_of(cluster, f"{group}:{_text(tid)}:0")
    with RawClient(cluster.nodes[leader].bootstrap) as rc:  # share.auto.offset.reset=latest:
        cluster.wait_until("the share-partition initialized at 0", lambda: (  # start it at 0
            part(fetch(rc, group, "starter", 0, tid, max_wait_ms=0)).error_code == 0
            or "not yet"))
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(5):
        p.produce("q", f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0

    with RawClient(cluster.nodes[leader].bootstrap) as rc:
        got = cluster.wait_until("records acquired on q's leader", lambda: (
            part(fetch(rc, group, "m1", 0, tid, max_wait_ms=500)).acquired_records
            or "none yet (the share-partition initializes through the coordinator)"))
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(0, 4, 1)]
        ack = acknowledge(rc, group, "m1", 1, tid, [(0, 4, ACCEPT)])
        assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0

    # the state is on the coordinator, not on q's leader
    assert summary(cluster.nodes[leader].bootstrap, group, tid)[0] == Errors.NOT_COORDINATOR
    assert summary(cluster.nodes[coord].bootstrap, group, tid) == (0, 5)

    # the coordinator dies: the key's partition gets a new leader, which loads the state
    cluster.nodes[coord].kill()
    new = cluster.wait_until("a new share coordinator", lambda: (
        n if (n := coordinator_of(cluster, f"{group}:{_text(tid)}:0")) != coord else "same"))
    if new != leader:
        assert cluster.wait_until("the state on the new coordinator", lambda: (
            s if (s := summary(cluster.nodes[new].bootstrap, group, tid))[0] == 0 else
            f"error {s[0]}")) == (0, 5)
    # q's leader goes on persisting through the new coordinator: a second member's records
    with RawClient(cluster.nodes[leader].bootstrap) as rc:
        p.produce("q", b"v5", partition=0)
        assert p.flush(30) == 0
        got = cluster.wait_until("the new record acquired", lambda: (
            part(fetch(rc, group, "m2", 0, tid, max_wait_ms=500)).acquired_records or "none"))
        assert [(a.first_offset, a.last_offset) for a in got] == [(5, 5)]
        ack = acknowledge(rc, group, "m2", 1, tid, [(5, 5, ACCEPT)])
        assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
    assert cluster.wait_until("the start offset moved on", lambda: (
        s if (s := summary(cluster.nodes[new].bootstrap, group, tid)) == (0, 6) else
        f"summary {s}")) == (0, 6)


def _leader(cluster):
    parts = cluster.partitions(1, "q")
    if isinstance(parts, str) or 0 not in parts or parts[0].leader < 0:
        return f"no leader yet: {parts}"
    return parts[0]


def _text(tid: uuid.UUID) -> str:
    from spool.util.ids import uuid_text
    return uuid_text(tid)
