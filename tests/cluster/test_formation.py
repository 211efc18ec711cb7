"""A cluster formed from Kafka-style configs: every client sees every broker, its rack and the
real controller, from whichever node it asks.

Issue 13, "Done when": a 3-node cluster forms from Kafka-style configs; confluent-kafka,
kafka-python and kcat see 3 brokers with their racks and the real controller.
"""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient

from tests.cluster.clients import (
    confluent_metadata_view,
    confluent_view,
    kafka_python_view,
    kcat_view,
)
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.history import History, check, node_view, wait_converged

RACKS = ("a", "b", "c")


def converged(cluster, history: History, controller_agreed: bool = True) -> list[str]:
    """The history's violations once every broker caught up (metadata reaches brokers after
    the controller acknowledged it), or after 30 s."""
    def check_fn(views):
        return [b for b in check(history, views, cluster.expected_racks)
                if controller_agreed or "disagree on the controller" not in b]
    return wait_converged(
        lambda: [node_view(b.node_id, b.bootstrap, history) for b in cluster.brokers],
        check_fn, timeout=30)


def test_three_combined_nodes_from_plain_kafka_configs(cluster_factory):
    """Every node has the same controller.quorum.voters (no proxies): the configs a Kafka user
    writes. Each client, bootstrapped on each node in turn, sees brokers 1-3 on racks a-c and
    the quorum's leader as controller."""
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    voters = {n.properties()["controller.quorum.voters"] for n in cluster.nodes.values()}
    assert len(voters) == 1, voters
    leader = cluster.wait_formed()
    assert set(leader.voters) == {1, 2, 3}
    racks = {1: "a", 2: "b", 3: "c"}
    for node in cluster.brokers:
        assert confluent_view(node.bootstrap) == (racks, leader.leader_id), node.node_id
        assert kafka_python_view(node.bootstrap) == (racks, leader.leader_id), node.node_id
        assert confluent_metadata_view(node.bootstrap) == ({1: None, 2: None, 3: None},
                                                           leader.leader_id)
        assert kcat_view(node.bootstrap) == ({1: None, 2: None, 3: None}, leader.leader_id)


def test_every_node_reports_the_same_cluster_id_as_formatted(cluster_factory):
    cluster = cluster_factory(racks=RACKS).start()
    cluster.wait_formed()
    for node in cluster.brokers:
        md = cluster.metadata(node.node_id)
        assert not isinstance(md, str), md
        assert md.cluster_id == cluster.cluster_id


def test_a_topic_created_through_any_node_is_placed_rack_aware_and_seen_everywhere(
        cluster_factory):
    """CreateTopics reaches the controller from whichever broker a client bootstraps on; the
    topic's replicas of each partition are on distinct racks; every node lists it the same."""
    cluster = cluster_factory(racks=RACKS).start()
    cluster.wait_formed()
    history = History()
    for node in cluster.brokers:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        name = f"via-{node.node_id}-{uuid.uuid4().hex[:6]}"
        op = history.create_topic_admin(admin, name, partitions=6, replication_factor=3)
        assert op.outcome == "ok", str(op)
    # Acknowledged means committed; each broker lists it once it applied it: wait for all.
    assert converged(cluster, history) == []
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    rack_of = {b.node_id: b.rack for b in cluster.brokers}
    for op in history.ops:
        parts = md.topics[op.topic].partitions
        assert len(parts) == 6
        for p in parts.values():
            assert sorted(rack_of[r] for r in p.replicas) == ["a", "b", "c"], (op.topic, p)
        leaders = sorted(p.leader for p in parts.values())
        assert leaders == [1, 1, 2, 2, 3, 3], (op.topic, leaders)  # spread evenly


def test_dedicated_controllers_and_broker_only_nodes(cluster_factory):
    """Three controller-only voters and broker-only nodes: the brokers (and only they) are
    listed, the quorum has the 3 voters, and a real client can create a topic (its CreateTopics
    goes where Metadata's controller id points)."""
    roles = ("controller",) * 3 + ("broker",) * 2
    cluster = cluster_factory(roles=roles, racks=(None, None, None, "x", "y")).start()
    leader = cluster.wait_formed()
    assert set(leader.voters) == {1, 2, 3}
    # (wait_formed read DescribeQuorum before it saw the brokers' metadata: an observer is
    # listed once its Fetch reached this leader, which may be just after)
    leader = cluster.wait_until("brokers 4 and 5 observe the quorum", lambda: (
        (q := cluster.quorum(leader.leader_id)) and not isinstance(q, str)
        and {4, 5} <= set(q.observers) and q) or f"{q}", 30)
    assert set(leader.voters) == {1, 2, 3}
    assert {4, 5} <= set(leader.observers), leader
    for node in cluster.brokers:
        assert confluent_view(node.bootstrap)[0] == {4: "x", 5: "y"}
    history = History()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    op = history.create_topic_admin(admin, "dedicated", partitions=2, replication_factor=2)
    assert op.outcome == "ok", str(op)
    # Which id Metadata names as controller when no broker is one is Kafka's choice of a live
    # broker, per request; everything else must hold.
    assert converged(cluster, history, controller_agreed=False) == []
