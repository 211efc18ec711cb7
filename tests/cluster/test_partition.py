"""A minority cut off from the quorum cannot change metadata; the majority can; after the
partition heals the minority converges (issue 13: "a minority partition cannot change metadata
and the majority can").

The nodes reach each other's controller listener through fault proxies (tests/helpers/
fault_proxy.py); a partition blackholes the links (nothing is forwarded, nothing closed: as a
network partition looks to TCP). Clients still reach every node directly, so the test asks the
isolated node itself to create a topic, on its broker listener (forwarded) and on its controller
listener. Neither answer may be a success; the controller's must be Kafka's NOT_CONTROLLER or
REQUEST_TIMED_OUT within the request's timeout (the broker may hold a forwarded request longer,
as Kafka's does). Whether a request takes effect after the heal is left open (the history
counts it as of unknown outcome); whatever happens, the history checker must find every
acknowledged change on every node.
"""

from __future__ import annotations

import uuid

import pytest

from tests.helpers.cluster_proc import Cluster, QuorumState
from tests.helpers.fault_proxy import Mode
from tests.helpers.history import OK, History, check, node_view, wait_converged

RACKS = ("a", "b", "c")
KAFKA_REFUSALS = ("NOT_CONTROLLER", "REQUEST_TIMED_OUT")


def views(cluster: Cluster, history: History, nodes=None):
    return [node_view(b.node_id, b.bootstrap, history) for b in cluster.brokers
            if nodes is None or b.node_id in nodes]


def create_until_ok(cluster: Cluster, history: History, node: int, name: str, timeout=30.0):
    """CreateTopics sent to ``node`` until one is acknowledged (fresh names, all recorded)."""
    attempt = [0]

    def once():
        attempt[0] += 1
        op = history.create_topic_raw(node, cluster.nodes[node].bootstrap,
                                      f"{name}-{attempt[0]}", partitions=2, timeout=5)
        return op if op.outcome == OK else str(op)

    return cluster.wait_until(f"CreateTopics acknowledged by node {node}", once, timeout,
                              every=0.2)


@pytest.mark.parametrize(("isolated", "mode"), [
    ("leader", Mode.BLACKHOLE), ("leader", Mode.REFUSE), ("follower", Mode.BLACKHOLE)])
def test_an_isolated_node_cannot_change_metadata_and_the_majority_can(
        cluster_factory, isolated, mode):
    cluster = cluster_factory(racks=RACKS)
    cluster.start()
    leader = cluster.wait_formed()
    history = History()
    for v in views(cluster, history):
        history.observe(v)
    tag = uuid.uuid4().hex[:6]
    create_until_ok(cluster, history, leader.leader_id, f"before-{tag}")

    x = leader.leader_id if isolated == "leader" else next(
        n for n in cluster.nodes if n != leader.leader_id)
    majority = [n for n in cluster.nodes if n != x]
    assert cluster.net is not None
    cluster.net.isolate(x, mode)

    def majority_leader() -> QuorumState | str:
        s = cluster.active_controller(exclude=[x])
        if s is None or s.leader_id not in majority:
            return f"no majority leader: {cluster.quorum_states()}"
        if isolated == "leader" and s.leader_epoch <= leader.leader_epoch:
            return f"still epoch {s.leader_epoch}"
        return s

    new = cluster.wait_until("the majority has a leader", majority_leader, timeout=30)
    # The majority changes metadata, asked through either of its nodes.
    for n in majority:
        create_until_ok(cluster, history, n, f"majority-{n}-{tag}")

    # The isolated node cannot: its answer is an error or nothing, never a success.
    # Asked on its broker listener (forwarded to the controller it knows) and on its controller
    # listener (its own controller: an isolated leader must not commit alone).
    refused = [history.create_topic_raw(x, addr, f"isolated-{i}-{tag}", partitions=2, timeout=5)
               for i, addr in enumerate([cluster.nodes[x].bootstrap,
                                         cluster.nodes[x].controller_address])]
    for op in refused:
        assert op.outcome != OK, f"node {x}, cut off from the quorum, acknowledged {op}"
    # Its controller says so within the request's timeout, with an error Kafka's clients retry
    # on (an isolated leader resigns after check-quorum and fails its pending writes). The
    # broker may hold a forwarded request longer (Kafka's forwarding retries for 60 s).
    assert refused[1].error.split(":")[0] in KAFKA_REFUSALS, str(refused[1])
    # ...and the majority never saw them (checked on the majority's own views).
    mv = views(cluster, history, majority)
    assert all(op.topic not in v.topics for v in mv for op in refused), [v.topics for v in mv]
    assert all(v.controller_id == new.leader_id for v in mv), [v.controller_id for v in mv]

    cluster.net.heal()
    bad = wait_converged(lambda: views(cluster, history),
                         lambda vs: check(history, vs, cluster.expected_racks), timeout=60)
    assert bad == [], "\n".join(bad)
    after = cluster.active_controller()
    assert after is not None and after.leader_id in cluster.nodes
    # The healed node follows: the leader sees its log end offset reach the high watermark.
    cluster.wait_until(f"node {x} caught up", lambda: (
        (s := cluster.active_controller()) is not None
        and s.voters.get(x, -1) >= s.high_watermark) or f"{cluster.quorum_states()}", 30)


def test_a_partition_of_two_groups_heals_into_one_history(cluster_factory):
    """Five combined nodes split 2 | 3: only the side of 3 changes metadata, and after the heal
    all five agree on everything acknowledged."""
    cluster = cluster_factory(roles=("broker,controller",) * 5, racks=("a", "b", "c", "a", "b"))
    cluster.start()
    cluster.wait_formed()
    history = History()
    minority, majority = [1, 2], [3, 4, 5]
    assert cluster.net is not None
    cluster.net.partition(minority, majority)
    cluster.wait_until("the majority has a leader", lambda: (
        (s := cluster.active_controller(exclude=minority)) is not None
        and s.leader_id in majority and s) or "no majority leader", 30)
    tag = uuid.uuid4().hex[:6]
    create_until_ok(cluster, history, 4, f"maj-{tag}")
    for n in minority:
        for i, addr in enumerate([cluster.nodes[n].bootstrap, cluster.nodes[n].controller_address]):
            op = history.create_topic_raw(n, addr, f"min-{n}-{i}-{tag}", timeout=5)
            assert op.outcome != OK, str(op)
            if addr == cluster.nodes[n].controller_address:
                assert op.error.split(":")[0] in KAFKA_REFUSALS, str(op)
    cluster.net.heal()
    bad = wait_converged(lambda: views(cluster, history),
                         lambda vs: check(history, vs, cluster.expected_racks), timeout=60)
    assert bad == [], "\n".join(bad)
