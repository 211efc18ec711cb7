"""DescribeLogDirs and DescribeProducers on a real 3-node cluster (issue 14): every broker
lists the replicas it holds, leader or follower, and once the followers caught up their
segment bytes equal the leader's with no offset lag; DescribeProducers answers on the
leader only, NOT_LEADER_OR_FOLLOWER on the followers."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient

from spool.protocol._generated import (
    CreateTopicsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.describe_producers_request import TopicRequest
from spool.protocol.errors import Errors
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(240)

TOPIC = "la"


def held(bootstrap: str) -> dict[int, tuple[int, int]] | str:
    """{partition: (size, offset lag)} of TOPIC as this broker's DescribeLogDirs lists it."""
    resp = request_once(bootstrap, 35, 4, DescribeLogDirsRequest(topics=None))
    out = {}
    for r in resp.results:
        if r.error_code:
            return f"log dir {r.log_dir}: error {r.error_code}"
        for t in r.topics:
            if t.name == TOPIC:
                out.update({p.partition_index: (p.partition_size, p.offset_lag)
                            for p in t.partitions})
    return out


def test_every_replica_describes_its_log_and_the_leader_its_producers(cluster_factory):
    cluster = cluster_factory(overrides={"replica.lag.time.max.ms": "3000"}).start()
    cluster.wait_formed()
    boot = cluster.nodes[1].bootstrap
    resp = request_once(boot, 19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
        name=TOPIC, num_partitions=1, replication_factor=3, assignments=[], configs=[])]))
    assert [t.error_code for t in resp.topics] == [0]
    def settled() -> int | str:
        parts = cluster.partitions(1, TOPIC)
        if isinstance(parts, str) or parts[0].leader < 0 or sorted(parts[0].isr) != [1, 2, 3]:
            return f"not yet: {parts}"
        return parts[0].leader

    leader = cluster.wait_until("la-0 has a leader and a full ISR", settled)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                  "acks": "all"})
    for i in range(300):
        p.produce(TOPIC, value=b"v" * 200 + b"%d" % i, partition=0)
    assert p.flush(60) == 0
    del p

    def converged() -> dict | str:
        seen = {n.node_id: held(n.bootstrap) for n in cluster.brokers}
        sizes = {n: h.get(0) for n, h in seen.items() if not isinstance(h, str)}
        if len(sizes) != 3 or len({s for s in sizes.values()}) != 1 or None in sizes.values():
            return f"not yet: {seen}"
        return sizes

    sizes = cluster.wait_until("every replica holds the same bytes", converged)
    size, lag = sizes[leader]
    assert size > 300 * 200 and lag == 0
    # the leader's log is what the others copied: the same as the leader's file on disk
    leader_dir = cluster.nodes[leader].data_dir / f"{TOPIC}-0"
    assert size == sum(f.stat().st_size for f in leader_dir.glob("*.log"))

    kafka_admin = KafkaAdminClient(bootstrap_servers=boot)
    try:
        answers = kafka_admin.describe_log_dirs({TOPIC: [0]})
    finally:
        kafka_admin.close()
    assert sorted(a["broker"] for a in answers) == [1, 2, 3]
    assert {(a["broker"], p["partition_size"], p["offset_lag"])
            for a in answers for d in a["log_dirs"] for t in d["topics"]
            for p in t["partitions"]} == {(n, size, 0) for n in (1, 2, 3)}

    described = {}
    for n in cluster.brokers:
        r = request_once(n.bootstrap, 61, 0, DescribeProducersRequest(topics=[
            TopicRequest(name=TOPIC, partition_indexes=[0])]))
        [part] = r.topics[0].partitions
        described[n.node_id] = (part.error_code, [(s.producer_epoch, s.last_sequence)
                                                  for s in part.active_producers])
    assert described == {n: (0, [(0, 299)]) if n == leader
                         else (Errors.NOT_LEADER_OR_FOLLOWER, []) for n in (1, 2, 3)}
