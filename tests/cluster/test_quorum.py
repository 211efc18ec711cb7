"""The KRaft quorum of 3 combined nodes as an operator sees it: DescribeQuorum, the
``quorum-state`` file, a restarted leader rejoining, a follower catching up from a snapshot.

(Formation, failover through clients, partitions and the kill loop are in the other files
of this tier; these check the quorum itself.)
"""

from __future__ import annotations

import json

from spool.protocol._generated import CreateTopicsRequest, DescribeQuorumRequest, MetadataRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.describe_quorum_request import PartitionData, TopicData
from spool.protocol.errors import Errors
from tests.helpers.cluster_proc import METADATA_TOPIC, Cluster, QuorumState
from tests.helpers.raw_client import RawClient


def _describe(address: str):
    c = RawClient(address, timeout=10)
    try:
        return c.request(55, 2, DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)])]))
    finally:
        c.close()


def _topics(cluster: Cluster, node: int) -> set[str] | str:
    """The topics ``node``'s broker lists (Metadata v12, every topic)."""
    try:
        c = RawClient(cluster.nodes[node].bootstrap, timeout=10)
        try:
            md = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        finally:
            c.close()
    except (OSError, ConnectionError) as e:
        return f"node {node}: {e}"
    return {t.name for t in md.topics}


def _lists(cluster: Cluster, node: int, names: set[str]):
    def probe():
        got = _topics(cluster, node)
        return got if not isinstance(got, str) and names <= got else f"node {node}: {got}"
    return probe


def _create(cluster: Cluster, names: list[str], node: int | None = None) -> dict[str, int]:
    """CreateTopics on ``node``'s controller listener (default: the active controller's);
    name -> error code."""
    if node is None:
        node = cluster.wait_until("an active controller", cluster.active_controller).leader_id
    c = RawClient(cluster.nodes[node].controller_address, timeout=30)
    try:
        r = c.request(19, 7, CreateTopicsRequest(timeout_ms=10_000, topics=[
            CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names]))
    finally:
        c.close()
    return {t.name: t.error_code for t in r.topics}


def _caught_up(cluster: Cluster, node: int):
    """The leader's DescribeQuorum shows ``node`` at the high watermark."""
    def probe():
        s = cluster.active_controller()
        if s is None:
            return "no leader"
        if s.voters.get(node, -1) < s.high_watermark:
            return f"node {node} at {s.voters.get(node)}, high watermark {s.high_watermark}"
        return s
    return probe


def test_describe_quorum_is_answered_by_the_leader_and_forwarded_by_brokers(cluster_factory):
    cluster = cluster_factory(proxied=False).start()
    formed = cluster.wait_formed()
    leader = cluster.wait_until("every voter caught up", _caught_up(cluster, 1))
    assert leader.leader_id == formed.leader_id
    for n in (2, 3):
        cluster.wait_until(f"node {n} caught up", _caught_up(cluster, n))

    answer = _describe(cluster.nodes[leader.leader_id].controller_address)
    p = answer.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, p.leader_epoch) == (0, leader.leader_id,
                                                           leader.leader_epoch)
    assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
    assert {v.log_end_offset for v in p.current_voters} == {p.high_watermark}
    assert all(v.last_caught_up_timestamp > 0 for v in p.current_voters)
    assert sorted(n.node_id for n in answer.nodes) == [1, 2, 3]

    for n in (1, 2, 3):
        if n != leader.leader_id:
            other = _describe(cluster.nodes[n].controller_address).topics[0].partitions[0]
            assert other.error_code == Errors.NOT_LEADER_OR_FOLLOWER
        via_broker = _describe(cluster.nodes[n].bootstrap).topics[0].partitions[0]
        assert (via_broker.error_code, via_broker.leader_id) == (0, leader.leader_id)


def _quorum_state(cluster: Cluster, node: int) -> dict:
    path = cluster.nodes[node].data_dir / f"{METADATA_TOPIC}-0" / "quorum-state"
    return json.loads(path.read_text())


def test_a_killed_leader_rejoins_as_a_follower_of_the_new_epoch(cluster_factory):
    cluster = cluster_factory(proxied=False).start()
    old = cluster.wait_formed()
    assert _create(cluster, ["before"]) == {"before": 0}
    follower = next(n for n in (1, 2, 3) if n != old.leader_id)
    assert _create(cluster, ["refused"], node=follower) == {"refused": Errors.NOT_CONTROLLER}
    state = _quorum_state(cluster, old.leader_id)
    assert (state["leaderId"], state["leaderEpoch"]) == (old.leader_id, old.leader_epoch)

    cluster.nodes[old.leader_id].kill()
    new: QuorumState = cluster.wait_until("a new leader", lambda: (
        s if (s := cluster.active_controller(exclude=[old.leader_id])) is not None
        and s.leader_epoch > old.leader_epoch else f"{cluster.quorum_states()}"))
    assert _create(cluster, ["after"]) == {"after": 0}

    cluster.nodes[old.leader_id].start()
    s = cluster.wait_until("the old leader caught up", _caught_up(cluster, old.leader_id))
    assert s.leader_id == new.leader_id  # it rejoined without deposing the new leader
    assert _describe(cluster.nodes[old.leader_id].controller_address).topics[0].partitions[
        0].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    state = _quorum_state(cluster, old.leader_id)
    assert (state["leaderId"], state["leaderEpoch"]) == (new.leader_id, s.leader_epoch)
    cluster.wait_until("the old leader's broker lists both topics",
                       _lists(cluster, old.leader_id, {"before", "after"}))


def test_a_follower_far_behind_catches_up_from_a_snapshot(cluster_factory):
    cluster = cluster_factory(proxied=False, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "1000"}).start()
    cluster.wait_formed()
    behind = 3 if cluster.active_controller().leader_id != 3 else 2
    cluster.nodes[behind].stop()
    names = [f"t{i}" for i in range(40)]
    for i in range(0, len(names), 10):
        assert set(_create(cluster, names[i:i + 10]).values()) == {0}
    leader = cluster.active_controller()
    leader_dir = cluster.nodes[leader.leader_id].data_dir / f"{METADATA_TOPIC}-0"
    snapshots = cluster.wait_until("a snapshot on the leader", lambda: (
        found if (found := sorted(leader_dir.glob("*.checkpoint"))) else "none yet"))
    assert int(snapshots[-1].name.split("-")[0]) > 0

    cluster.nodes[behind].start()
    cluster.wait_until("the follower caught up", _caught_up(cluster, behind))
    follower_dir = cluster.nodes[behind].data_dir / f"{METADATA_TOPIC}-0"
    assert sorted(follower_dir.glob("*.checkpoint")), "the follower installed no snapshot"
    cluster.wait_until("the follower's broker lists every topic",
                       _lists(cluster, behind, set(names)))
