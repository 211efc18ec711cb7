"""Random operation sequences against the QuorumController keep the metadata invariants.

After every committed write: each partition's leader is in its ISR or -1; the ISR is
a non-empty subset of the replicas; replicas are distinct; no fenced broker, broker in
controlled shutdown or unregistered broker leads or stays in an ISR (except as the
last member of a leaderless one); leader and partition epochs never go back; a
reassignment's adding and removing replicas are disjoint replicas, the ISR keeps a
replica that stays. At the end, the snapshot replays to an equal image.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.cluster.image import MetadataImage
from spool.cluster.ops import ControllerConfig
from spool.protocol._generated import ElectLeadersRequest
from spool.protocol._generated import alter_partition_reassignments_request as aprq
from spool.protocol._generated import alter_partition_request as apq
from spool.protocol._generated import create_partitions_request as cp
from spool.protocol.errors import KafkaError
from tests.helpers.cluster_harness import CLUSTER_ID, Harness

BROKERS = st.integers(1, 4)
TOPICS = st.integers(0, 2)
HEARTBEAT = st.sampled_from(["catch up", "catch up", "catch up", "fence", "shut down",
                             "fence and shut down", "behind"])
RACKS = st.sampled_from([None, "a", "b", "c"])

OPS = st.one_of(
    st.tuples(st.just("register"), BROKERS, RACKS, st.booleans()),
    st.tuples(st.just("heartbeat"), BROKERS, HEARTBEAT),
    st.tuples(st.just("heartbeat"), BROKERS, HEARTBEAT),
    st.tuples(st.just("heartbeat"), BROKERS, HEARTBEAT),
    st.tuples(st.just("wait"), st.integers(0, 12_000)),
    st.tuples(st.just("create"), TOPICS, st.integers(1, 4), st.integers(1, 3)),
    st.tuples(st.just("delete"), TOPICS),
    st.tuples(st.just("grow"), TOPICS, st.integers(1, 3)),
    st.tuples(st.just("unregister"), BROKERS),
    st.tuples(st.just("alter isr"), TOPICS, st.integers(0, 1), st.integers(0, 15)),
    st.tuples(st.just("alter isr"), TOPICS, st.integers(0, 1), st.integers(0, 15)),
    st.tuples(st.just("balance"), st.integers(1, 3)),
    st.tuples(st.just("elect"), st.sampled_from([0, 1])),
    st.tuples(st.just("reassign"), TOPICS, st.integers(0, 1), st.permutations([1, 2, 3, 4]),
              st.integers(0, 4)),  # 0 replicas: cancel
    st.tuples(st.just("reassign"), TOPICS, st.integers(0, 1), st.permutations([1, 2, 3, 4]),
              st.integers(0, 4)),
    st.tuples(st.just("unclean elections")),
)


def check(img: MetadataImage, epochs: dict) -> None:
    for t in img.topics_by_id.values():
        for pid, p in t.partitions.items():
            assert len(set(p.replicas)) == len(p.replicas), p
            assert p.isr and set(p.isr) <= set(p.replicas), p
            assert p.leader == -1 or p.leader in p.isr, p
            assert set(p.adding_replicas) <= set(p.replicas), p
            assert set(p.removing_replicas) <= set(p.replicas), p
            assert not set(p.adding_replicas) & set(p.removing_replicas), p
            if p.leader != -1 or len(p.isr) > 1:  # only a lone, leaderless ISR keeps a
                for r in p.isr:                     # broker that stopped (none to replace it)
                    b = img.brokers.get(r)
                    assert b is not None and b.active, (p, b)
            key = (t.topic_id, pid)
            if key in epochs:
                assert p.leader_epoch >= epochs[key][0], p
                assert p.partition_epoch >= epochs[key][1], p
            epochs[key] = (p.leader_epoch, p.partition_epoch)


def run(h: Harness, op: tuple) -> None:
    c = h.controller
    kind = op[0]
    if kind == "register":
        _, b, rack, new = op
        h.register(b, rack, new=new)
    elif kind == "heartbeat":
        _, b, how = op
        if b in h.epochs:
            h.heartbeat(b, want_fence="fence" in how, want_shutdown="shut down" in how,
                        offset=0 if how == "behind" else None)
    elif kind == "wait":
        h.now += op[1]
        h.commit(c.tick(h.now))
    elif kind == "create":
        _, n, parts, rf = op
        h.create_topic(f"t{n}", parts, rf)
    elif kind == "delete":
        h.commit(c.delete_topics([(f"t{op[1]}", None)]))
    elif kind == "grow":
        _, n, more = op
        t = h.image.topic(f"t{n}")
        if t is not None:
            req = cp.CreatePartitionsRequest(topics=[cp.CreatePartitionsTopic(
                name=f"t{n}", count=len(t.partitions) + more, assignments=None)],
                timeout_ms=1, validate_only=False)
            h.commit(c.create_partitions(req))
    elif kind == "unregister":
        h.commit(c.unregister_broker(op[1]))
    elif kind == "alter isr":
        alter_isr(h, *op[1:])
    elif kind == "balance":
        h.commit(c.balance_leaders(op[1]))
    elif kind == "reassign":
        _, n, index, order, size = op
        t = h.image.topic(f"t{n}")
        if t is not None and index in t.partitions:
            req = aprq.AlterPartitionReassignmentsRequest(topics=[aprq.ReassignableTopic(
                name=t.name, partitions=[aprq.ReassignablePartition(
                    partition_index=index, replicas=list(order[:size]) if size else None)])])
            h.commit(c.alter_partition_reassignments(req))
    elif kind == "unclean elections":
        h.commit(c.elect_unclean_leaders())
    elif kind == "elect":
        h.commit(c.elect_leaders(ElectLeadersRequest(election_type=op[1],
                                                     topic_partitions=None)))


def alter_isr(h: Harness, n: int, index: int, mask: int) -> None:
    """The leader of one partition asks for the ISR: itself plus the replicas in ``mask``."""
    t = h.image.topic(f"t{n}")
    if t is None or index not in t.partitions or t.partitions[index].leader == -1:
        return
    p = t.partitions[index]
    isr = [p.leader] + [r for i, r in enumerate(p.replicas) if mask >> i & 1 and r != p.leader]
    req = apq.AlterPartitionRequest(
        broker_id=p.leader, broker_epoch=h.image.brokers[p.leader].epoch,
        topics=[apq.TopicData(topic_name=t.name, topic_id=t.topic_id, partitions=[
            apq.PartitionData(partition_index=index, leader_epoch=p.leader_epoch,
                              partition_epoch=p.partition_epoch, new_isr=isr)])])
    h.commit(h.controller.alter_partition(req, 2))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RACKS, min_size=3, max_size=3), st.lists(OPS, max_size=40),
       st.integers(0, 2**32))
def test_random_operations_keep_the_invariants(racks, ops, seed):
    h = Harness(ControllerConfig(default_replication_factor=2), seed=seed)
    for b, rack in enumerate(racks, 1):
        h.start(b, rack)
    h.create_topic("t0", 2, 2)  # so that short sequences exercise partitions too
    epochs: dict = {}
    for op in ops:
        try:
            run(h, op)
        except KafkaError:
            pass  # refused: nothing was written
        check(h.image, epochs)
    assert MetadataImage(cluster_id=CLUSTER_ID).replay(h.controller.snapshot_records()) == h.image
