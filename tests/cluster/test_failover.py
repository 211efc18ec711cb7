"""The active controller goes away: killed (kill -9) or stopped (SIGTERM). A live node leads a
newer epoch, CreateTopics through a real client works again, the old controller rejoins as a
follower without deposing the new leader, and nothing acknowledged is lost.

(The kill loop in test_kill_loop.py repeats the kill; this file checks each step once, with
kafka-python as the client, and the graceful path.)
"""

from __future__ import annotations

import uuid

import pytest
from kafka.admin import KafkaAdminClient

from tests.helpers.cluster_proc import Cluster, QuorumState
from tests.helpers.history import OK, UNKNOWN, History, check, classify, node_view, wait_converged

RACKS = ("a", "b", "c")


def create_kafka_python(history: History, bootstrap: str, name: str):
    """CreateTopics through kafka-python's KafkaAdminClient, recorded in the history."""
    from kafka.errors import KafkaError

    from spool.protocol.errors import error_name

    op = history.begin("create_topic", name, partitions=1)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    except Exception as e:  # noqa: BLE001  (no broker reachable: nothing was sent)
        return history.end(op, UNKNOWN, repr(e))
    try:
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}},
                            timeout_ms=5000)
        return history.end(op, OK)
    except KafkaError as e:
        errno = getattr(e, "errno", None)
        return history.end(op, classify(error_name(errno)) if isinstance(errno, int) else UNKNOWN,
                           repr(e))
    except Exception as e:  # noqa: BLE001  (a connection error: the outcome is unknown)
        return history.end(op, UNKNOWN, repr(e))
    finally:
        admin.close()


def newer_leader(cluster: Cluster, old: QuorumState):
    def probe():
        s = cluster.active_controller(exclude=[old.leader_id])
        return s if s is not None and s.leader_epoch > old.leader_epoch else \
            f"{cluster.quorum_states()}"
    return probe


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
def test_the_controller_goes_away_a_new_one_serves_and_the_old_one_rejoins(
        cluster_factory, how):
    cluster = cluster_factory(racks=RACKS).start()
    old = cluster.wait_formed()
    history = History()
    for v in [node_view(b.node_id, b.bootstrap, history) for b in cluster.brokers]:
        history.observe(v)
    tag = uuid.uuid4().hex[:6]
    before = create_kafka_python(history, cluster.bootstrap, f"before-{tag}")
    assert before.outcome == OK, str(before)

    victim = cluster.nodes[old.leader_id]
    if how == "kill -9":
        victim.kill()
    else:
        assert victim.stop() == 0, victim.log_tail()
    new = cluster.wait_until("a new controller", newer_leader(cluster, old), timeout=30)
    live = cluster.live_bootstrap()
    attempt = [0]

    def create_again():
        attempt[0] += 1
        op = create_kafka_python(history, live, f"after-{tag}-{attempt[0]}")
        return op if op.outcome == OK else str(op)

    cluster.wait_until("CreateTopics works again", create_again, timeout=30, every=0.2)

    victim.start()
    cluster.wait_until(f"node {victim.node_id} follows again, caught up", lambda: (
        (s := cluster.active_controller()) is not None and s.leader_id != victim.node_id
        and s.voters.get(victim.node_id, -1) >= s.high_watermark and s)
        or f"{cluster.quorum_states()}", timeout=30)
    after = cluster.active_controller()
    assert (after.leader_id, after.leader_epoch) == (new.leader_id, new.leader_epoch), \
        f"the rejoining node disturbed the quorum: {new} -> {after}"
    own = cluster.quorum(victim.node_id)
    assert not (isinstance(own, QuorumState) and own.leader_id == victim.node_id), own
    bad = wait_converged(
        lambda: [node_view(b.node_id, b.bootstrap, history) for b in cluster.brokers],
        lambda vs: check(history, vs, cluster.expected_racks), timeout=30)
    assert bad == [], "\n".join(bad)


def test_an_admin_client_made_right_after_the_controller_dies_creates_its_topic(
        cluster_factory):
    """librdkafka sends CreateTopics to the broker Metadata names as controller and, while
    that broker is down, waits for it until the request times out, without asking for
    metadata again. So right after a kill -9 of the controller, a broker must not name it:
    the fresh client's CreateTopics succeeds once a new controller is elected."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(racks=RACKS).start()
    old = cluster.wait_formed()
    cluster.nodes[old.leader_id].kill()
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
    name = f"right-after-{uuid.uuid4().hex[:6]}"
    fut = admin.create_topics([NewTopic(name, 3, 1)], request_timeout=20)[name]
    fut.result(30)  # raises _TIMED_OUT "Timed out waiting for controller" when named
    md = admin.list_topics(timeout=10)
    assert md.controller_id != old.leader_id and md.controller_id in md.brokers

    def partitions() -> int | str:  # CreateTopics answers once the controller committed it;
        found = admin.list_topics(timeout=10).topics.get(name)  # the broker asked may not
        return len(found.partitions) if found else "not yet"    # have it yet, as in Kafka

    assert cluster.wait_until(f"{name} in Metadata", partitions, timeout=10) == 3
