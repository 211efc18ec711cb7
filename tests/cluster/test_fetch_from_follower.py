"""KIP-392 on a real 3-node cluster, racks a, b, c, replica.selector.class Kafka's
RackAwareReplicaSelector: the leader sends a consumer in another rack to the in-sync replica
of its rack (preferred_read_replica, no records); that follower serves consumer fetches
(v11+) up to its high watermark; librdkafka with client.rack fetches from it and reads every
record; a consumer in the leader's rack, or without one, stays on the leader."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spool.protocol._generated import CreateTopicsRequest, FetchRequest
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
)
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.replica.selector import RACK_AWARE
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(240)

TOPIC = "near"
N = 60


def fetch(bootstrap: str, version: int, rack: str = "", offset: int = 0, isolation: int = 0):
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=isolation, rack_id=rack, topics=[FetchTopic(
                           topic=TOPIC, partitions=[FetchPartition(
                               partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    [p] = request_once(bootstrap, 1, version, req).responses[0].partitions
    records = bytes(p.records or b"")
    return p, sum(h.records_count for _, h in iter_batches(records) if not h.is_control)


def consume_all(bootstrap: str, rack: str | None) -> tuple[list[bytes], set[int]]:
    """Every record of near-0 through librdkafka, and the brokers its statistics say it
    fetched from."""
    fetched_from: set[int] = set()

    def stats(doc: str) -> None:
        p = json.loads(doc)["topics"].get(TOPIC, {}).get("partitions", {}).get("0")
        if p is not None and p.get("broker", -1) >= 0:
            fetched_from.add(p["broker"])

    conf = {"bootstrap.servers": bootstrap, "group.id": f"g-{rack}", "enable.auto.commit": False,
            "statistics.interval.ms": 100, "stats_cb": stats, "fetch.wait.max.ms": 100}
    if rack is not None:
        conf["client.rack"] = rack
    c = Consumer(conf)
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < N and time.monotonic() < deadline:
            for m in c.consume(100, 0.2):
                assert m.error() is None, m.error()
                got.append(m.value())
        end = time.monotonic() + 1  # a few more statistics rounds
        while time.monotonic() < end:
            c.poll(0.1)
    finally:
        c.close()
    return got, fetched_from


def test_consumers_fetch_from_the_replica_in_their_rack(cluster_factory):
    cluster = cluster_factory(racks=["a", "b", "c"], overrides={
        "replica.selector.class": RACK_AWARE, "replica.lag.time.max.ms": "3000"}).start()
    cluster.wait_formed()
    boot = cluster.nodes[1].bootstrap
    resp = request_once(boot, 19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
        name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])])]))
    assert [t.error_code for t in resp.topics] == [0]

    def settled():
        parts = cluster.partitions(1, TOPIC)
        if isinstance(parts, str) or parts[0].leader != 1 or sorted(parts[0].isr) != [1, 2, 3]:
            return f"not yet: {parts}"
        return parts[0]

    cluster.wait_until("near-0 led by 1 with a full ISR", settled)
    p = Producer({"bootstrap.servers": boot, "acks": "all"})
    for i in range(N):
        p.produce(TOPIC, value=b"r%d" % i, partition=0)
    assert p.flush(30) == 0
    del p
    # acks=all: every ISR member has them; the followers learn the high watermark on
    # their next fetch
    for node in (2, 3):
        cluster.wait_until(f"node {node} serves all {N} records", lambda node=node: (
            True if fetch(cluster.nodes[node].bootstrap, 11)[1] == N else "not yet"))

    # the leader points a consumer in rack c to node 3, with no records
    pd, n = fetch(boot, 11, rack="c")
    assert (pd.error_code, pd.preferred_read_replica, n, pd.high_watermark) == (0, 3, 0, N)
    # in its own rack, or without a rack, the leader serves
    for rack in ("a", ""):
        pd, n = fetch(boot, 11, rack=rack)
        assert (pd.error_code, pd.preferred_read_replica, n) == (0, -1, N)
    # a follower serves consumers from Fetch v11 on (they carry a rack), not before
    pd, n = fetch(cluster.nodes[3].bootstrap, 11, rack="c")
    assert (pd.error_code, pd.preferred_read_replica, n, pd.high_watermark) == (0, -1, N, N)
    pd, _ = fetch(cluster.nodes[3].bootstrap, 10)
    assert pd.error_code == Errors.NOT_LEADER_OR_FOLLOWER

    values, brokers = consume_all(boot, "c")
    assert values == [b"r%d" % i for i in range(N)]
    assert 3 in brokers
    values, brokers = consume_all(boot, "a")
    assert values == [b"r%d" % i for i in range(N)]
    assert brokers == {1}

    # read_committed on a follower stops at its last stable offset: an open transaction
    # holds it at the transaction's first offset, its commit releases it
    txn = Producer({"bootstrap.servers": boot, "transactional.id": "near-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(TOPIC, value=b"t%d" % i, partition=0)
    assert txn.flush(30) == 0
    follower = cluster.nodes[3].bootstrap

    def held_at_lso():
        pd, n = fetch(follower, 11, rack="c", isolation=1)
        return (pd.last_stable_offset, n) if pd.high_watermark >= N + 5 else "not yet"

    assert cluster.wait_until("node 3 has the open transaction", held_at_lso) == (N, N)
    assert fetch(follower, 11, rack="c")[1] == N + 5  # read_uncommitted: up to the HW
    txn.commit_transaction(30)

    def released():
        pd, n = fetch(follower, 11, rack="c", isolation=1)
        return n if pd.last_stable_offset >= N + 5 else "not yet"  # (N + 5: the marker's)

    assert cluster.wait_until("node 3 has the commit", released) == N + 5
