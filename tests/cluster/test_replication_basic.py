"""Replication on real processes (issue 14), small and exact: acks=all waits for the ISR,
followers that die leave the ISR (and come back once restarted), min.insync.replicas refuses acks=all once too few are left
while acks=1 goes on, and consumers see a record only once every ISR member has it.

One controller-only node and three brokers, so that killing two brokers leaves the
controller quorum alive (it is the controller that commits ISR changes).
"""

from __future__ import annotations

import os
import signal
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import FetchRequest, ProduceRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from tests.helpers.raw_client import RawClient

ROLES = ("controller", "broker", "broker", "broker")
RACKS = (None, "a", "b", "c")


def create(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 3, config=configs)])[name].result(timeout=30)


def partition0(bootstrap: str, topic: str):
    """(leader, replicas, isr) of ``topic``-0 as one broker's Metadata tells confluent-kafka."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return f"{topic}: {None if t is None else t.error}"
    p = t.partitions[0]
    if p.leader < 0:
        return f"{topic}-0 has no leader"
    return p.leader, tuple(p.replicas), tuple(sorted(p.isrs))


def wait_isr(cluster, bootstrap: str, topic: str, isr, timeout: float):
    """Until ``bootstrap``'s Metadata gives ``topic``-0 exactly the ISR ``isr``."""
    want = tuple(sorted(isr))

    def check():
        p = partition0(bootstrap, topic)
        return True if not isinstance(p, str) and p[2] == want else f"ISR {p}, not {want}"

    cluster.wait_until(f"{topic}-0 with ISR {want}", check, timeout)


def records_on_disk(node, topic: str) -> list[bytes]:
    """The record values in a replica's segment files, in offset order."""
    values = []
    for seg in sorted((node.data_dir / f"{topic}-0").glob("*.log")):
        data = seg.read_bytes()
        for pos, _h in iter_batches(data):
            values += [bytes(r.value) for r in iter_records(data, pos)]
    return values


def produce_raw(bootstrap: str, topic: str, acks: int, value: bytes, timeout_ms: int = 5000):
    b = BatchBuilder(0)
    b.append(b"k", value, timestamp=1)
    c = RawClient(bootstrap)
    try:
        resp = c.request(0, 11, ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
            TopicProduceData(name=topic, partition_data=[
                PartitionProduceData(index=0, records=b.build())])]))
    finally:
        c.close()
    return resp.responses[0].partition_responses[0]


def fetch_raw(bootstrap: str, topic: str, isolation: int, replica_id: int = -1,
              offset: int = 0) -> tuple[int, int, list[bytes]]:
    """A Fetch v12 of ``topic``-0 from ``offset`` by a consumer (``isolation`` 0:
    read_uncommitted, 1: read_committed) or a follower (``replica_id``), not waiting:
    (error, high watermark, values)."""
    req = FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=isolation, topics=[FetchTopic(
                           topic=topic, partitions=[FetchPartition(
                               partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    c = RawClient(bootstrap)
    try:
        [p] = c.request(1, 12, req).responses[0].partitions
    finally:
        c.close()
    data = bytes(p.records or b"")
    return p.error_code, p.high_watermark, [
        bytes(r.value) for pos, _h in iter_batches(data) for r in iter_records(data, pos)]


def produce_all(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 30000})
    errors = []
    for v in values:
        producer.produce(topic, key=b"k", value=v, partition=0,
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(40) == 0 and errors == []


def consume(bootstrap: str, topic: str, offset: int, n: int, cluster, timeout=30.0):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, offset)])
    got = []
    try:
        while len(got) < n:
            msg = cluster.wait_until("a record", lambda: consumer.poll(1.0) or "none", timeout)
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_acks_all_waits_for_the_isr_and_min_insync_replicas_refuses_when_too_few_remain(
        cluster_factory):
    cluster = cluster_factory(roles=ROLES, racks=RACKS, proxied=False, overrides={
        "replica.lag.time.max.ms": "2000", "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500"}).start()
    cluster.wait_formed()
    topic = f"r-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, {"min.insync.replicas": "2"})
    leader, replicas, isr = cluster.wait_until("a leader", lambda: partition0(
        cluster.bootstrap, topic))
    assert sorted(replicas) == [2, 3, 4] and isr == (2, 3, 4)
    boot = cluster.nodes[leader].bootstrap
    f1, f2 = (n for n in replicas if n != leader)

    first = [b"a%d" % i for i in range(20)]
    produce_all(boot, topic, first)
    for n in replicas:  # acknowledged: every ISR member has them
        assert records_on_disk(cluster.nodes[n], topic) == first, f"node {n}"
    assert consume(boot, topic, 0, 20, cluster) == first

    cluster.nodes[f1].kill()
    wait_isr(cluster, boot, topic, (leader, f2), 30)
    second = [b"b%d" % i for i in range(10)]
    produce_all(boot, topic, second)  # 2 in sync = min.insync.replicas: still accepted
    assert records_on_disk(cluster.nodes[f2], topic) == first + second

    cluster.nodes[f2].kill()
    wait_isr(cluster, boot, topic, (leader,), 30)
    # The leader applies the image a moment after its Metadata shows it: until then an
    # acks=all batch is appended and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    end = 30
    while (r := produce_raw(boot, topic, -1, b"refused")).error_code != \
            Errors.NOT_ENOUGH_REPLICAS:
        assert r.error_code == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, r
        assert r.base_offset == end, r
        end += 1
    taken = produce_raw(boot, topic, 1, b"acks1")
    assert taken.error_code == 0, taken
    assert taken.base_offset == end  # the refused batch took no offset
    assert consume(boot, topic, end, 1, cluster) == [b"acks1"]

    # Restarted, the followers catch up and the leader adds them back (AlterPartition).
    for n in (f1, f2):
        cluster.nodes[n].start()
    wait_isr(cluster, boot, topic, replicas, 60)
    produce_all(boot, topic, [b"c0"])
    want = records_on_disk(cluster.nodes[leader], topic)
    assert want[-2:] == [b"acks1", b"c0"]
    for n in (f1, f2):
        assert records_on_disk(cluster.nodes[n], topic) == want, f"node {n}"


def test_consumers_see_a_record_only_once_every_isr_member_has_it(cluster_factory):
    """A follower stopped (SIGSTOP) but still in the ISR (sessions and lag far longer than
    the test) holds the high watermark: a record appended with acks=1 is not served until
    the follower runs again and fetches it, and an acks=all Produce is not acknowledged
    (its timeout_ms passes: REQUEST_TIMED_OUT) though the leader appended it."""
    cluster = cluster_factory(roles=ROLES, racks=RACKS, proxied=False, overrides={
        "replica.lag.time.max.ms": "120000", "broker.session.timeout.ms": "120000"}).start()
    cluster.wait_formed()
    topic = f"v-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, {})
    leader, replicas, _ = cluster.wait_until("a leader", lambda: partition0(
        cluster.bootstrap, topic))
    boot = cluster.nodes[leader].bootstrap
    produce_all(boot, topic, [b"x%d" % i for i in range(5)])
    follower = next(n for n in replicas if n != leader)
    pid = cluster.nodes[follower].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        appended = produce_raw(boot, topic, 1, b"held")
        assert appended.error_code == 0 and appended.base_offset == 5, appended
        # Fetches as each follower from 5 (as if neither had "held"): the leader takes a
        # fetch offset as that follower's log end (not its own LEO), so the HW stays at 5
        other = next(n for n in replicas if n not in (leader, follower))
        for r in (other, follower):
            assert fetch_raw(boot, topic, 0, replica_id=r, offset=5) == (0, 5, [b"held"]), r
        # The delayed produce waits for the HW to pass offset 6, which the stopped
        # follower holds at 5 (a broker answering at once would say 0 here).
        waited = produce_raw(boot, topic, -1, b"unacked", timeout_ms=1500)
        assert waited.error_code == Errors.REQUEST_TIMED_OUT, waited
        consumer = Consumer({"bootstrap.servers": boot, "group.id": f"g-{uuid.uuid4().hex}",
                             "enable.auto.commit": False})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            assert (low, high) == (0, 5)  # the high watermark: the stopped follower lacks 5
            consumer.assign([TopicPartition(topic, 0, 5)])
            polled = [consumer.poll(0.5) for _ in range(6)]
            assert [m.value() for m in polled if m is not None and m.error() is None] == []
        finally:
            consumer.close()
        assert partition0(boot, topic)[2] == tuple(sorted(replicas))  # still in the ISR
        # librdkafka reads read_committed (the LSO); read_uncommitted stops at the HW too
        acked = [b"x%d" % i for i in range(5)]
        for isolation in (0, 1):
            assert fetch_raw(boot, topic, isolation) == (0, 5, acked), isolation
    finally:
        os.kill(pid, signal.SIGCONT)
    assert consume(boot, topic, 5, 2, cluster) == [b"held", b"unacked"]
    assert records_on_disk(cluster.nodes[follower], topic)[5:] == [b"held", b"unacked"]
