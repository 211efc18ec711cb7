"""The ISR on a real cluster (issue 14): what acks=all promises when replicas are missing, and
how a replica leaves the ISR and comes back.

* With 2 of 3 brokers down (killed with -9), a topic with replication factor 3 and
  ``min.insync.replicas=2`` refuses acks=all produce with NOT_ENOUGH_REPLICAS and appends
  nothing; acks=1 produce keeps working (at the next offset: the refused ones left no
  trace). Asked on the wire (our codec, one request, the exact error) and through
  confluent-kafka (what an application sees).
* A follower cut off from its leader (only that link: ``Cluster(replication_proxied=True)``,
  tests/helpers/cluster_proc.py) while records arrive (a follower that has everything the
  leader has stays in sync however long it is silent: Kafka's isCaughtUp) drops out of the
  ISR within ``replica.lag.time.max.ms``
  (Kafka checks every half of it: at most 1.5 times it, plus the AlterPartition round trip
  and the metadata's way to the brokers; the wait allows 10 s more on a loaded machine),
  while acks=all goes on with the other two; after the heal it catches up and is back in the
  ISR, its log byte-identical to the leader's up to the high watermark.
* A leader cut off from everyone (the quorum and the other brokers; clients still reach it)
  takes acks=1 writes that no follower can copy: a divergent tail. The controller fences it
  and elects another ISR member, which takes acks=all writes; after the heal the old leader
  truncates its tail (OffsetForLeaderEpoch) and follows: every replica holds the same bytes
  up to the high watermark, no record of the divergent tail is left anywhere, and no
  acknowledged acks=all record is lost, duplicated or reordered.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.replication import consume, full_isr, high_watermarks
from spool.protocol._generated import ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors, error_name
from spool.records.builder import BatchBuilder
from tests.helpers.cluster_proc import Cluster, PartitionState
from tests.helpers.history import (
    ACKED,
    FAILED,
    UNKNOWN,
    RecordHistory,
    check_records,
    parse_record_value,
    record_value,
)
from tests.helpers.raw_client import RawClient
from tests.helpers.replica_logs import diverging, read_replica, replica_batches

LAG_MS = 3000
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": str(LAG_MS),
}
RACKS = ("a", "b", "c")
TAIL_WRITER = 9  # the acks=1 writes to an isolated leader


def create_topic(cluster: Cluster, name: str, partitions: int = 1) -> dict[int, PartitionState]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})]
                        )[name].result(timeout=30)
    return cluster.wait_until(f"{name}: every ISR full", full_isr(cluster, name, partitions), 60)


def raw_produce(bootstrap: str, topic: str, partition: int, acks: int, history: RecordHistory,
                writer: int, n: int = 5, key: bytes = b"k") -> tuple[int, int, list]:
    """One Produce v9 of ``n`` records (one batch) to ``bootstrap``; each record an attempt of
    ``writer`` in ``history``, ended by the answer: acked at its offset, ``failed`` on
    NOT_ENOUGH_REPLICAS (refused before the append), ``unknown`` otherwise. Returns
    (error code, base offset, attempts)."""
    attempts = [history.begin(writer, topic, key, partition) for _ in range(n)]
    b = BatchBuilder(0)
    for a in attempts:
        b.append(key, record_value(a.writer, a.seq, pad=20), timestamp=int(time.time() * 1000))
    try:
        c = RawClient(bootstrap, timeout=20)
        try:
            resp = c.request(0, 9, ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[
                TopicProduceData(name=topic, partition_data=[
                    PartitionProduceData(index=partition, records=b.build())])]))
        finally:
            c.close()
    except (OSError, ConnectionError) as e:
        for a in attempts:
            history.end(a, UNKNOWN, error=f"{type(e).__name__}: {e}")
        return -1, -1, attempts
    r = resp.responses[0].partition_responses[0]
    for i, a in enumerate(attempts):
        if r.error_code == 0:
            history.end(a, ACKED, partition, r.base_offset + i)
        else:
            history.end(a, FAILED if r.error_code == Errors.NOT_ENOUGH_REPLICAS else UNKNOWN,
                        error=error_name(r.error_code))
    return r.error_code, r.base_offset, attempts


def confluent_produce(bootstrap: str, topic: str, history: RecordHistory, writer: int, n: int,
                      acks: str, timeout: float = 60.0, **conf) -> list:
    """``n`` records through a confluent-kafka producer; each ends in ``history`` by its
    delivery report (errors: ``unknown``, or ``failed`` for NOT_ENOUGH_REPLICAS when the
    producer does not retry)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "message.timeout.ms": int(timeout * 1000) - 5000, **conf})
    out = []
    for i in range(n):
        a = history.begin(writer, topic, f"key-{i % 4}".encode())
        cb = history.confluent_callback(a)

        def done(err, msg, a=a, cb=cb):
            cb(err, msg)
            if (err is not None and err.name() == "NOT_ENOUGH_REPLICAS"
                    and conf.get("retries") == 0):
                history.end(a, FAILED, error=a.error)

        p.produce(topic, key=a.key, value=record_value(a.writer, a.seq, pad=20),
                  on_delivery=done)
        out.append(a)
    assert p.flush(timeout) == 0, "outcomes missing after the flush"
    return out


def state(cluster: Cluster, topic: str, asked: int, partition: int = 0) -> PartitionState | str:
    parts = cluster.partitions(asked, topic)
    return parts if isinstance(parts, str) else parts[partition]


def started_with_topic(cluster_factory, prefix: str, *, proxied: bool,
                       ) -> tuple[Cluster, str, dict[int, PartitionState]]:
    """A formed cluster (RACKS, OVERRIDES, replication through the fault proxy; clients too if
    `proxied`) and a new one-partition topic on it named `prefix`-<random>."""
    cluster = cluster_factory(racks=RACKS, proxied=proxied, replication_proxied=True,
                              overrides=OVERRIDES)
    cluster.start()
    cluster.wait_formed()
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    return cluster, topic, create_topic(cluster, topic)


@pytest.mark.parametrize("down", ["followers", "leader and a follower"])
def test_with_two_of_three_brokers_down_acks_all_is_refused_and_acks_1_works(
        cluster_factory, down):
    # One dedicated controller (node 1) and three brokers: killing two brokers leaves the
    # quorum whole, so the controller fences them and shrinks the ISR to the survivor.
    cluster = cluster_factory(roles=("controller", "broker", "broker", "broker"),
                              racks=(None, *RACKS), proxied=False, overrides=OVERRIDES)
    cluster.start()
    cluster.wait_formed()
    topic = f"nr-{uuid.uuid4().hex[:6]}"
    parts = create_topic(cluster, topic)
    leader = parts[0].leader
    history = RecordHistory()
    # Metadata names the leader a moment before it serves the partition (Kafka too): a
    # client retries NOT_LEADER_OR_FOLLOWER (nothing appended: those attempts stay unknown)
    deadline = time.monotonic() + 30
    while True:
        err, base, before = raw_produce(cluster.nodes[leader].bootstrap, topic, 0, -1,
                                        history, 0)
        if err != Errors.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (err, base) == (0, 0), error_name(err)  # acks=all works with the full ISR

    followers = [n for n in parts[0].replicas if n != leader]
    killed = followers if down == "followers" else [leader, followers[0]]
    survivor = next(n for n in parts[0].replicas if n not in killed)
    for n in killed:
        cluster.nodes[n].kill()
    cluster.wait_until(f"{topic}-0 led by {survivor} alone in the ISR", lambda: (
        (s := state(cluster, topic, survivor)) and not isinstance(s, str)
        and s.leader == survivor and s.isr == (survivor,) and s) or f"{s}", 60)
    bootstrap = cluster.nodes[survivor].bootstrap

    # acks=all: refused before the append, on the wire and through a real client
    err, _, refused = raw_produce(bootstrap, topic, 0, -1, history, 0)
    assert err == Errors.NOT_ENOUGH_REPLICAS, error_name(err)
    refused += confluent_produce(bootstrap, topic, history, 0, 5, "all", retries=0)
    assert [a.outcome for a in refused] == [FAILED] * 10, [str(a) for a in refused]
    assert all(a.error.startswith("NOT_ENOUGH_REPLICAS") for a in refused), \
        [str(a) for a in refused]

    # acks=1: written, at the next offset (nothing of the refused records was appended)
    err, base, _ = raw_produce(bootstrap, topic, 0, 1, history, 0)
    assert (err, base) == (0, len(before)), error_name(err)
    ones = confluent_produce(bootstrap, topic, history, 0, 5, "1")
    assert [a.outcome for a in ones] == [ACKED] * 5, [str(a) for a in ones]
    assert [a.offset for a in ones] == list(range(len(before) + 5, len(before) + 10))

    # Everything acknowledged is there, once, in order; nothing refused is.
    hw = high_watermarks(bootstrap, topic, 1)
    assert hw == {0: len(before) + 10}
    for read in (consume(bootstrap, topic, hw),
                 read_replica(f"replica {survivor}", cluster.nodes[survivor].data_dir, topic,
                              [0], hw)):
        rep = check_records(history, read, {topic})
        assert not rep, rep.summary()
        assert len(read.records) == len(before) + 10


def test_a_follower_cut_off_from_its_leader_leaves_the_isr_and_comes_back(cluster_factory):
    cluster, topic, parts = started_with_topic(cluster_factory, "lag", proxied=False)
    leader = parts[0].leader
    follower, other = [n for n in parts[0].replicas if n != leader]
    history = RecordHistory()
    first = confluent_produce(cluster.bootstrap, topic, history, 0, 50, "all")
    assert {a.outcome for a in first} == {ACKED}
    s = state(cluster, topic, leader)
    assert not isinstance(s, str) and set(s.isr) == {leader, follower, other}, s

    assert cluster.rnet is not None
    cluster.rnet.cut(follower, leader)
    t0 = time.monotonic()
    # The leader's log end moves past the follower's: acks=1, answered at once.
    err, base, _ = raw_produce(cluster.nodes[leader].bootstrap, topic, 0, 1, history, 0)
    assert (err, base) == (0, 50), error_name(err)
    bound = 1.5 * LAG_MS / 1000 + 10
    shrunk = cluster.wait_until(
        f"{topic}-0: the ISR without follower {follower} (cut from leader {leader})",
        lambda: ((s := state(cluster, topic, leader)) and not isinstance(s, str)
                 and set(s.isr) == {leader, other} and s) or f"{s}", bound, every=0.1)
    took = time.monotonic() - t0
    assert shrunk.leader == leader, shrunk  # the leader kept its leadership
    # acks=all goes on with 2 in-sync replicas (min.insync.replicas=2)
    during = confluent_produce(cluster.bootstrap, topic, history, 0, 50, "all")
    assert {a.outcome for a in during} == {ACKED}, [str(a) for a in during if a.outcome != ACKED]

    cluster.rnet.heal()
    cluster.wait_until(f"{topic}-0: follower {follower} back in the ISR",
                       full_isr(cluster, topic, 1), 60)
    after = confluent_produce(cluster.bootstrap, topic, history, 0, 20, "all")
    assert {a.outcome for a in after} == {ACKED}
    hw = high_watermarks(cluster.bootstrap, topic, 1)
    assert hw == {0: 125}
    dirs = {n: cluster.nodes[n].data_dir for n in (leader, follower, other)}
    cluster.wait_until("the replicas hold the same bytes up to the high watermark",
                       lambda: not diverging(dirs, topic, 0, hw[0])
                       or "; ".join(diverging(dirs, topic, 0, hw[0])), 30)
    for n, d in dirs.items():
        rep = check_records(history, read_replica(f"replica {n}", d, topic, [0], hw), {topic})
        assert not rep, rep.summary()
    print(f"ISR shrank {took:.2f} s after the cut (replica.lag.time.max.ms {LAG_MS})")


def test_an_isolated_leaders_divergent_tail_is_truncated_after_the_heal(cluster_factory):
    cluster, topic, parts = started_with_topic(cluster_factory, "tail", proxied=True)
    old = parts[0].leader
    others = [n for n in parts[0].replicas if n != old]
    history = RecordHistory()
    first = confluent_produce(cluster.bootstrap, topic, history, 0, 30, "all")
    assert {a.outcome for a in first} == {ACKED}
    hw_before = high_watermarks(cluster.nodes[old].bootstrap, topic, 1)[0]
    assert hw_before == 30

    assert cluster.net is not None and cluster.rnet is not None
    cluster.net.isolate(old)   # from the quorum: its heartbeats stop, it gets fenced
    cluster.rnet.isolate(old)  # from the other brokers: nobody fetches from it
    tail = RecordHistory()
    for _ in range(4):  # acks=1 writes the isolated leader still takes
        err, _, _ = raw_produce(cluster.nodes[old].bootstrap, topic, 0, 1, tail, TAIL_WRITER)
        assert err == 0, error_name(err)
    old_end = replica_batches(cluster.nodes[old].data_dir, topic, 0)[-1][0].next_offset
    assert old_end == 30 + 20  # the tail is on the old leader's disk, past the HW

    new = cluster.wait_until(f"{topic}-0 led by another ISR member", lambda: (
        (s := state(cluster, topic, others[0])) and not isinstance(s, str)
        and s.leader in others and s.leader_epoch > parts[0].leader_epoch and s) or f"{s}", 60)
    majority = ",".join(cluster.nodes[n].bootstrap for n in others)
    second = confluent_produce(majority, topic, history, 0, 60, "all")
    assert {a.outcome for a in second} == {ACKED}, [str(a) for a in second if a.outcome != ACKED]

    cluster.net.heal()
    cluster.rnet.heal()
    cluster.wait_until(f"{topic}-0: the old leader {old} back in the ISR",
                       full_isr(cluster, topic, 1), 90)
    hw = high_watermarks(majority, topic, 1)
    assert hw == {0: 90}, hw  # 30 + 60 acks=all records; the tail is not counted
    dirs = {n: cluster.nodes[n].data_dir for n in parts[0].replicas}
    cluster.wait_until("the replicas hold the same bytes up to the high watermark",
                       lambda: not diverging(dirs, topic, 0, hw[0])
                       or "; ".join(diverging(dirs, topic, 0, hw[0])), 30)
    for n, d in dirs.items():
        read = read_replica(f"replica {n}", d, topic, [0], hw)
        left = [r for r in read.records
                if (parse_record_value(r.value) or (None,))[0] == TAIL_WRITER]
        assert left == [], f"replica {n} kept the divergent tail: {left[:3]}"
        rep = check_records(history, read, {topic})
        assert not rep, rep.summary()
    print(f"new leader {new.leader} in epoch {new.leader_epoch}; old leader {old} truncated "
          f"its tail of {old_end - hw_before} records")

