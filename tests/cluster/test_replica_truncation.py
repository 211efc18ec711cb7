"""Followers on real processes: logs byte-identical to the leader's, and a divergent tail
truncated (issue 14: epoch-based truncation with OffsetForLeaderEpoch).

One controller-only node and three brokers, replication links through fault proxies
(``replication_proxied``). The leader L of a partition (RF=3) is cut from both followers
(their links refused: nothing in flight survives), takes records with acks=1 that only it
has -- a tail written in its leader epoch -- and is killed. The controller elects a
follower N (epoch + 1), which takes more records with acks=all. L restarts, follows N, must
truncate its tail (OffsetForLeaderEpoch for its latest epoch; N answers where that epoch
ends) and fetch N's records: then all three replicas hold byte-identical segment files'
batches and the same leader-epoch-checkpoint, none holds a record of the lost tail, and L
is back in the ISR. OffsetForLeaderEpoch then answers as Kafka's: N ends the old epoch
where its own began and its own at the LEO; an older current_leader_epoch is
FENCED_LEADER_EPOCH, a newer UNKNOWN_LEADER_EPOCH; L, a follower, NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import OffsetForLeaderEpochRequest
from spool.protocol._generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from spool.protocol.errors import Errors
from spool.records.batch import BatchHeader, iter_batches
from spool.records.record import iter_records
from spool.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from tests.helpers.fault_proxy import Mode
from tests.helpers.raw_client import RawClient

ROLES = ("controller", "broker", "broker", "broker")


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": 30000,
                  "linger.ms": 2, "batch.num.messages": 4})
    errors: list = []
    for v in values:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(40) == 0 and errors == []


def disk_batches(node, topic: str) -> list[bytes]:
    """The batches of a replica's segment files, in offset order (read beside the process)."""
    out = []
    for seg in sorted((node.data_dir / f"{topic}-0").glob("*.log")):
        data = seg.read_bytes()
        out += [data[pos:pos + h.size] for pos, h in iter_batches(data)]
    return out


def values(batches: list[bytes]) -> list[bytes]:
    return [bytes(r.value) for b in batches for r in iter_records(b, 0)]


def end_offset(node, topic: str, current: int, epoch: int) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch v4 (replica id -1) to ``node``: (error, epoch, end offset)."""
    c = RawClient(node.bootstrap)
    try:
        resp = c.request(23, 4, OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            OffsetForLeaderTopic(topic=topic, partitions=[OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=epoch)])]))
    finally:
        c.close()
    r = resp.topics[0].partitions[0]
    return r.error_code, r.leader_epoch, r.end_offset


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_a_restarted_leader_truncates_its_divergent_tail_and_matches_the_new_leader(
        cluster_factory):
    cluster = cluster_factory(roles=ROLES, proxied=False, replication_proxied=True, overrides={
        "replica.lag.time.max.ms": "60000", "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500", "replica.fetch.backoff.ms": "200",
        "replica.fetch.wait.max.ms": "200"}).start()
    cluster.wait_formed()
    topic = f"d-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)

    def state(node: int):
        parts = cluster.partitions(node, topic)
        return parts if isinstance(parts, str) else parts[0]

    def when(node: int, ok):
        """The partition as ``node`` shows it once ``ok(state)``; else why not (a string)."""
        s = state(node)
        return s if isinstance(s, str) or ok(s) else f"not yet: {s}"

    first = cluster.wait_until("a leader and a full ISR", lambda: when(
        2, lambda s: s.leader > 0 and len(s.isr) == 3))
    old_leader, epoch = first.leader, first.leader_epoch
    followers = [n for n in first.replicas if n != old_leader]
    boot = cluster.nodes[old_leader].bootstrap

    kept = [b"kept-%d" % i for i in range(20)]
    produce(boot, topic, kept, "all")

    for f in followers:  # refused: the followers' connections to L are reset, none comes back
        cluster.rnet.cut(f, old_leader, mode=Mode.REFUSE)
    lost = [b"lost-%d" % i for i in range(10)]
    produce(boot, topic, lost, "1")  # only L has these: its divergent tail
    assert values(disk_batches(cluster.nodes[old_leader], topic)) == kept + lost
    cluster.nodes[old_leader].kill()
    cluster.rnet.heal()

    new = cluster.wait_until("a new leader", lambda: when(
        followers[0], lambda s: s.leader in followers and s.leader_epoch > epoch), 60)
    new_boot = cluster.nodes[new.leader].bootstrap
    added = [b"new-%d" % i for i in range(10)]
    produce(new_boot, topic, added, "all")

    cluster.nodes[old_leader].start()
    cluster.wait_until("the old leader back in the ISR", lambda: when(
        new.leader, lambda s: old_leader in s.isr), 60)
    hw = high_watermark(new_boot, topic)
    assert hw == len(kept) + len(added)

    def replica_batches(n: int) -> list[bytes]:
        return [b for b in disk_batches(cluster.nodes[n], topic)
                if BatchHeader.parse(b).base_offset < hw]

    leader_batches = replica_batches(new.leader)
    assert values(leader_batches) == kept + added
    for n in first.replicas:
        got = cluster.wait_until(f"node {n} caught up", lambda n=n: (
            b if (b := replica_batches(n)) == leader_batches else
            f"{len(b)} batches, values {values(b)[-3:]}"), 30)
        assert got == leader_batches  # byte-identical up to the high watermark
    assert values(disk_batches(cluster.nodes[old_leader], topic)) == kept + added  # no tail
    checkpoints = {n: (cluster.nodes[n].data_dir / f"{topic}-0" / LEADER_EPOCH_CHECKPOINT)
                   .read_text() for n in first.replicas}
    assert len(set(checkpoints.values())) == 1, checkpoints
    assert checkpoints[new.leader].splitlines() == [
        "0", "2", f"{epoch} 0", f"{new.leader_epoch} {len(kept)}"]

    # OffsetForLeaderEpoch as the new leader answers it, and as a follower refuses it
    leader_node, ne = cluster.nodes[new.leader], new.leader_epoch
    assert end_offset(leader_node, topic, ne, epoch) == (0, epoch, len(kept))
    assert end_offset(leader_node, topic, ne, ne) == (0, ne, hw)
    assert end_offset(leader_node, topic, epoch, ne)[0] == Errors.FENCED_LEADER_EPOCH
    assert end_offset(leader_node, topic, ne + 1, ne)[0] == Errors.UNKNOWN_LEADER_EPOCH
    assert end_offset(cluster.nodes[old_leader], topic, ne, ne)[0] == \
        Errors.NOT_LEADER_OR_FOLLOWER
