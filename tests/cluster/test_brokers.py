"""The broker side of a real cluster: topics live on their replicas, leaders serve, other
brokers refuse with NOT_LEADER_OR_FOLLOWER, admin requests reach the controller from any
node, groups work, and SIGTERM moves leadership away before the broker stops."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import FindCoordinatorRequest, HeartbeatRequest, ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import RawClient

RACKS = ("a", "b", "c")


def partitions_of(bootstrap: str, topic: str) -> dict | str:
    """{partition: (leader, replicas)} as one node's Metadata tells a real client."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return f"{topic}: {None if t is None else t.error}"
    parts = {p: (m.leader, tuple(m.replicas)) for p, m in t.partitions.items()}
    if any(leader < 0 for leader, _ in parts.values()):
        return f"{topic}: a partition without leader: {parts}"
    return parts


def create(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(timeout=30)


def test_topics_live_on_their_replicas_and_only_leaders_serve(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    cluster.wait_formed()
    nodes = cluster.nodes
    create(nodes[2].bootstrap, "orders", 6, 2)  # CreateTopics forwarded from node 2
    views = [cluster.wait_until(f"orders on node {n}", lambda n=n: partitions_of(
        nodes[n].bootstrap, "orders")) for n in nodes]
    assert views[0] == views[1] == views[2]  # every node answers from the same image
    parts = views[0]
    for p, (_, replicas) in parts.items():
        assert len(replicas) == 2
        for n, node in nodes.items():  # a log on each replica, none elsewhere
            path, want = node.data_dir / f"orders-{p}", n in replicas
            cluster.wait_until(f"{path.name} on node {n}: {want}",
                               lambda path=path, want=want: path.is_dir() == want or "not yet")

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    errors = []
    for i in range(60):
        producer.produce("orders", key=str(i).encode(), value=b"v%d" % i,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and errors == []

    consumer = Consumer({"bootstrap.servers": nodes[3].bootstrap, "group.id": "g1",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    got = []
    try:
        while len(got) < 60:
            msg = cluster.wait_until("a message", lambda: consumer.poll(1.0) or "none", 60)
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(60))

    leader, _ = parts[0]
    other = next(n for n in nodes if n != leader)
    b = BatchBuilder(0)
    b.append(b"k", b"v", timestamp=1)
    c = RawClient(nodes[other].bootstrap)
    try:
        resp = c.request(0, 11, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name="orders", partition_data=[
                PartitionProduceData(index=0, records=b.build())])]))
    finally:
        c.close()
    refused = resp.responses[0].partition_responses[0]
    assert refused.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    # KIP-951: the leader and where to reach it, so the client need not ask Metadata
    assert refused.current_leader.leader_id == leader
    assert [(e.node_id, e.port, e.rack) for e in resp.node_endpoints] == [
        (leader, nodes[leader].broker_port, RACKS[leader - 1])]

    admin = AdminClient({"bootstrap.servers": nodes[3].bootstrap})
    admin.delete_topics(["orders"])["orders"].result(timeout=30)
    for n, node in nodes.items():
        cluster.wait_until(f"orders gone from node {n}", lambda node=node: not any(
            node.data_dir.glob("orders-[0-9]")) or sorted(p.name for p in node.data_dir.glob(
                "orders-*")))


def test_sigterm_moves_leadership_away_before_the_broker_stops(cluster_factory):
    """With sessions too long to expire during the test, only the controlled shutdown can
    move the leaders of the stopped broker."""
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False,
                              overrides={"broker.session.timeout.ms": "120000"}).start()
    leader = cluster.wait_formed()
    name = f"t-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, name, 6, 3)
    # a broker that is not the active controller, leading some partitions
    victim = next(n for n in cluster.nodes if n != leader.leader_id)
    survivor = next(n for n in cluster.nodes if n != victim)
    before = cluster.wait_until("leaders", lambda: partitions_of(
        cluster.nodes[survivor].bootstrap, name))
    assert any(lead == victim for lead, _ in before.values())
    assert cluster.nodes[victim].stop() == 0
    def moved():
        parts = partitions_of(cluster.nodes[survivor].bootstrap, name)
        if isinstance(parts, str) or all(lead != victim for lead, _ in parts.values()):
            return parts
        return f"still led by {victim}: {parts}"

    after = cluster.wait_until("leaders moved", moved, 30)
    assert all(lead != victim for lead, _ in after.values())
    md = cluster.metadata(survivor)
    assert victim not in md.brokers  # fenced: not offered to clients


def test_a_broker_killed_and_restarted_serves_its_partitions_with_their_data(cluster_factory):
    """Single-replica partitions on one broker go offline with it (no replication yet) and
    come back with every acknowledged record when it restarts on the same dirs."""
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    leader = cluster.wait_formed()
    victim = next(n for n in cluster.nodes if n != leader.leader_id)
    name = f"solo-{uuid.uuid4().hex[:6]}"
    create(cluster.nodes[leader.leader_id].bootstrap, name, 6, 1)
    parts = cluster.wait_until("leaders", lambda: partitions_of(cluster.bootstrap, name))
    mine = sorted(p for p, (lead, _) in parts.items() if lead == victim)
    assert mine
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in mine:
        for i in range(5):
            producer.produce(name, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    cluster.nodes[victim].kill()
    cluster.nodes[victim].start()
    survivor = next(n for n in cluster.nodes if n != victim)
    def led_again():
        now = partitions_of(cluster.nodes[survivor].bootstrap, name)
        if isinstance(now, str) or all(now[p][0] == victim for p in mine):
            return now
        return f"leaders {now}"

    cluster.wait_until("its partitions led again", led_again, 60)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "after-restart",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for p in mine])
    got = []
    try:
        while len(got) < 5 * len(mine):
            msg = cluster.wait_until("a message", lambda: consumer.poll(1.0) or "none", 60)
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"%d-%d" % (p, i) for p in mine for i in range(5))


def test_a_transaction_over_partitions_of_every_broker_commits_and_aborts(cluster_factory):
    """The coordinator writes the markers of partitions other brokers lead with
    WriteTxnMarkers: a read_committed consumer sees every committed record (its last stable
    offset moved on every partition) and none of the aborted ones."""
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    cluster.wait_formed()
    name = f"tx-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, name, 6, 1)
    parts = cluster.wait_until("leaders", lambda: partitions_of(cluster.bootstrap, name))
    assert {lead for lead, _ in parts.values()} == {1, 2, 3}
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": f"txn-{name}"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for p in range(6):
            producer.produce(name, value=f"{outcome}-{p}".encode(), partition=p)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{name}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for p in range(6)])
    got = []
    try:
        while len(got) < 12:
            msg = cluster.wait_until("a committed message",
                                     lambda: consumer.poll(1.0) or "none", 60)
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        assert consumer.poll(2.0) is None  # nothing of the aborted transaction
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"commit-%d" % p for p in range(6) for _ in range(2))


def test_broker_only_nodes_follow_the_log_as_observers_and_serve(cluster_factory):
    """Three controller-only voters, two broker-only nodes: the brokers (observers of the
    metadata log) register, take a topic created through one of them, and serve it."""
    cluster = cluster_factory(roles=("controller",) * 3 + ("broker",) * 2,
                              racks=(None, None, None, "x", "y"), proxied=False).start()
    def both_listed(n: int):
        md = cluster.metadata(n)
        return md if not isinstance(md, str) and set(md.brokers) == {4, 5} else str(md)

    for n in (4, 5):
        md = cluster.wait_until(f"node {n} lists both brokers", lambda n=n: both_listed(n))
        assert {i: rack for i, (_, _, rack) in md.brokers.items()} == {4: "x", 5: "y"}
        assert md.controller_id in (4, 5)  # a live broker: clients cannot reach controllers
    create(cluster.nodes[5].bootstrap, "events", 4, 2)
    parts = cluster.wait_until("events", lambda: partitions_of(cluster.nodes[4].bootstrap,
                                                               "events"))
    assert all(sorted(replicas) == [4, 5] for _, replicas in parts.values())
    producer = Producer({"bootstrap.servers": cluster.nodes[4].bootstrap})
    for i in range(20):
        producer.produce("events", value=b"e%d" % i, partition=i % 4)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.nodes[5].bootstrap, "group.id": "obs",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["events"])
    got = []
    try:
        while len(got) < 20:
            msg = cluster.wait_until("a message", lambda: consumer.poll(1.0) or "none", 60)
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"e%d" % i for i in range(20))


def coordinator(bootstrap: str, key: str, key_type: int) -> int | str:
    """The node FindCoordinator names for a group (0) or transactional id (1)."""
    c = RawClient(bootstrap)
    try:
        r = c.request(10, 3, FindCoordinatorRequest(key=key, key_type=key_type))
    finally:
        c.close()
    return r.node_id if r.error_code == 0 else f"{key}: error {r.error_code}"


def test_groups_and_transactions_have_one_coordinator_each(cluster_factory):
    """Coordinators are the leaders of the keys' internal partitions: another broker answers
    NOT_COORDINATOR; a transaction whose group coordinator is another broker than its own
    commits its consumer offsets with it (TxnOffsetCommit there, markers over the network)."""
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    cluster.wait_formed()
    name = f"cp-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, name, 3, 1)
    cluster.wait_until("leaders", lambda: partitions_of(cluster.bootstrap, name))
    txn_id = f"txn-{name}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    txn_coord = cluster.wait_until("txn coordinator",
                                   lambda: coordinator(cluster.nodes[1].bootstrap, txn_id, 1))
    groups = {}
    for i in range(30):
        g = f"group-{i}"
        groups[g] = cluster.wait_until("group coordinator",
                                       lambda g=g: coordinator(cluster.nodes[1].bootstrap, g, 0))
    group = next(g for g, node in groups.items() if node != txn_coord)
    other = next(n for n in cluster.nodes if n != groups[group])

    c = RawClient(cluster.nodes[other].bootstrap)
    try:
        hb = c.request(12, 4, HeartbeatRequest(group_id=group, generation_id=1,
                                               member_id="m", group_instance_id=None))
    finally:
        c.close()
    assert hb.error_code == Errors.NOT_COORDINATOR

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        producer.begin_transaction()
        producer.produce(name, value=b"x", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(name, 0, 42)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)

        def committed_42():
            tp = consumer.committed([TopicPartition(name, 0)], timeout=10)[0]
            return tp if tp.offset == 42 else f"offset {tp.offset}"

        committed = cluster.wait_until("the committed offset", committed_42, 30)
    finally:
        consumer.close()
    assert committed.offset == 42


def test_a_broker_serves_clients_only_once_the_controller_unfenced_it(cluster_factory):
    """A node restarted alone (no quorum: 1 voter of 3) answers ApiVersions but no Metadata:
    its image could only tell clients of no broker. Once a majority is back it registers,
    is unfenced, and answers."""
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    cluster.wait_formed()
    for node in cluster.nodes.values():
        node.kill()
    cluster.nodes[1].start()  # returns once ApiVersions is answered on every listener
    assert isinstance(cluster.metadata(1, timeout=3), str)  # no answer, not an empty list
    cluster.nodes[2].start()

    def serving():
        md = cluster.metadata(1)
        return md if not isinstance(md, str) and set(md.brokers) == {1, 2} else str(md)

    cluster.wait_until("node 1 serves Metadata", serving, 60)
