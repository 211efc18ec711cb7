"""Cluster state and consumer lag on the metrics endpoints of a real 3-node cluster (issue 18).

Every node (broker and controller) serves ``metrics.listeners``; the test scrapes each as
Prometheus would and checks what an operator's dashboards and alerts read:

* formed, with ``metered`` (3 partitions, replication factor 3, min.insync.replicas=2),
  ``spread`` (3 partitions, replication factor 1: one a broker) and
  ``__consumer_offsets`` (1 partition, replication factor 3):
  ``kafka_controller_kafkacontroller_activecontrollercount`` is 1 on the quorum leader and
  0 on the others; each node hosts and leads the partitions Metadata says; nothing is
  under-replicated.
* replication (BrokerTopicMetrics): 30 records produced to ``metered`` count 30 messages
  in over the leaders, each follower appends its leaders' batches (replication bytes in,
  summed over the nodes, twice the bytes in) and the leaders sent exactly those bytes to
  their followers (replication bytes out).
* consumer lag where the coordinator holds no replica: a group commits offsets of the
  three ``spread`` partitions; its coordinator alone reports the group, and its lag on
  every partition is the leader's high watermark minus the commit, the partitions held
  by other brokers included (asked from their leaders: present from the second scrape).
* a follower killed with -9: once the leaders dropped it from the ISRs, each survivor's
  ``kafka_server_replicamanager_underreplicatedpartitions`` is exactly the number of
  replication-factor-3 partitions it leads; ``atminisrpartitioncount`` counts the
  ``metered`` ones (ISR 2 = min.insync.replicas) and its ``spread`` one (ISR 1 = 1), not
  ``__consumer_offsets`` (ISR 2, min.insync.replicas 1);
  kafka-exporter's ``kafka_topic_partition_under_replicated_partition`` is 1 for each
  ``metered`` partition, reported once (by its leader); the controllers count one fenced
  broker and, offline, the ``spread`` partition the dead broker held; the active
  controller count still sums to 1.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.replication import full_isr
from tests.helpers.cluster_proc import Cluster, PartitionState
from tests.helpers.scrape import Scrape, scrape

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.num.partitions": "1",
}
TOPIC, SPREAD, OFFSETS = "metered", "spread", "__consumer_offsets"
RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"


def scrape_all(cluster: Cluster, ports: dict[int, int]) -> dict[int, Scrape]:
    return {i: scrape(f"http://127.0.0.1:{ports[i]}/metrics")
            for i, n in cluster.nodes.items() if n.alive}


def wait_scrapes(cluster: Cluster, ports: dict[int, int], what: str, ok, timeout: float = 60):
    """Scrape every live node until ``ok(scrapes)``; the scrapes."""
    def probe() -> dict[int, Scrape] | str:
        s = scrape_all(cluster, ports)
        return s if ok(s) else f"{what}: not yet"
    return cluster.wait_until(what, probe, timeout)


def states(cluster: Cluster, node: int, topics=(TOPIC, SPREAD, OFFSETS)
           ) -> dict[tuple[str, int], PartitionState]:
    """Every partition of ``topics`` as ``node``'s Metadata shows it."""
    out = {}
    for t in topics:
        parts = cluster.partitions(node, t)
        assert not isinstance(parts, str), parts
        out.update({(t, p): s for p, s in parts.items()})
    return out


def test_state_metrics_lag_and_a_dead_follower(cluster_factory):
    cluster = cluster_factory(overrides=OVERRIDES)
    ports = {i: n.reserve_extra() for i, n in cluster.nodes.items()}
    cluster.node_overrides = {i: {"metrics.listeners": f"http://127.0.0.1:{p}"}
                              for i, p in ports.items()}
    cluster.start()
    active = cluster.wait_formed().leader_id
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    made = admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"}),
                                NewTopic(SPREAD, 3, 1)])
    for f in made.values():
        f.result(timeout=30)
    cluster.wait_until("every ISR full", full_isr(cluster, TOPIC, 3), 60)

    # consumer lag: offsets committed by a group that only commits (this creates
    # __consumer_offsets); spread's partitions live on one broker each
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for part, n in ((0, 5), (1, 6), (2, 7)):
        for i in range(n):
            p.produce(SPREAD, value=b"%d" % i, partition=part)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "spread-g"})
    c.commit(offsets=[TopicPartition(SPREAD, part, 1) for part in range(3)], asynchronous=False)
    c.close()
    cluster.wait_until("__consumer_offsets ISR full", full_isr(cluster, OFFSETS, 1), 60)

    def lag(s: Scrape) -> list[float | None]:
        return [s.value("kafka_consumergroup_lag", consumergroup="spread-g", topic=SPREAD,
                        partition=str(part)) for part in range(3)]

    lagging = wait_scrapes(cluster, ports, "the lag of every spread partition", lambda s: any(
        None not in lag(x) for x in s.values()))
    coordinator = next(i for i, s in lagging.items() if None not in lag(s))
    assert lag(lagging[coordinator]) == [4, 5, 6]
    assert [lag(s) for i, s in lagging.items() if i != coordinator] == [[None] * 3] * 2
    spread_leaders = {part: s.leader for (t, part), s in states(cluster, active, [SPREAD]).items()}
    assert any(leader != coordinator for leader in spread_leaders.values())  # asked remotely

    # replication bytes (BrokerTopicMetrics): what the leaders took in reaches the two
    # followers of each metered partition, and is what the leaders sent them
    for i in range(30):
        p.produce(TOPIC, value=b"r%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    bt = "kafka_server_brokertopicmetrics_"

    def topic_sum(s: dict[int, Scrape], name: str) -> float:
        return sum(x.value(bt + name + "_total", topic=TOPIC) or 0 for x in s.values())

    replicated_in = wait_scrapes(cluster, ports, "metered's batches on every follower",
                                 lambda s: topic_sum(s, "replicationbytesin")
                                 == 2 * topic_sum(s, "bytesin") > 0)
    assert topic_sum(replicated_in, "messagesin") == 30
    assert topic_sum(replicated_in, "replicationbytesout") == \
        topic_sum(replicated_in, "replicationbytesin")

    view = states(cluster, active)
    before = wait_scrapes(cluster, ports, "replicas hosted as Metadata says", lambda s: all(
        x.value(RM + "partitioncount") == sum(1 for v in view.values() if i in v.replicas)
        for i, x in s.items()))
    assert {i: s.value(KC + "activecontrollercount") for i, s in before.items()} == {
        i: (1.0 if i == active else 0.0) for i in cluster.nodes}
    for i, s in before.items():
        assert s.value(RM + "leadercount") == sum(1 for v in view.values() if v.leader == i)
        assert s.value(RM + "underreplicatedpartitions") == 0
        assert s.value(RM + "atminisrpartitioncount") == sum(  # the RF 1 partitions
            1 for (t, _), v in view.items() if v.leader == i and t == SPREAD)
        assert s.value(KC + "globalpartitioncount") == 7
        assert s.value(KC + "offlinepartitionscount") == 0

    victim = next(i for i in sorted(cluster.nodes) if i != active)
    cluster.nodes[victim].kill()
    survivors = [i for i in cluster.nodes if i != victim]
    # the spread partition the victim held has no other replica: offline
    offline_expected = sum(1 for leader in spread_leaders.values() if leader == victim)
    replicated = (TOPIC, OFFSETS)

    def shrunk() -> dict[int, Scrape] | str:
        now = states(cluster, active, replicated)
        if any(victim in v.isr or v.leader in (victim, -1) for v in now.values()):
            return f"metadata: {now}"
        s = scrape_all(cluster, ports)
        urp = {i: s[i].value(RM + "underreplicatedpartitions") for i in survivors}
        # every controller's image has the fencing (and its election) too
        fenced = {i: s[i].value(KC + "fencedbrokercount") for i in survivors}
        offline = {i: s[i].value(KC + "offlinepartitionscount") for i in survivors}
        done = sum(urp.values()) == 4 and set(fenced.values()) == {1} and set(
            offline.values()) == {offline_expected}
        return s if done else f"urp {urp}, fenced {fenced}, offline {offline}"

    after = cluster.wait_until(f"node {victim} out of every ISR", shrunk, 60)
    view = states(cluster, active)
    assert {v.leader for (t, _), v in view.items() if t in replicated} <= set(survivors)
    for i in survivors:
        s = after[i]
        led = [(t, part) for (t, part), v in view.items() if v.leader == i]
        mine = [(t, part) for t, part in led if t in replicated]
        assert s.value(RM + "underreplicatedpartitions") == len(mine)
        # ISR = min.insync.replicas: metered's (2 of 3) and spread's (1 of 1)
        assert s.value(RM + "atminisrpartitioncount") == sum(
            1 for t, _ in led if t in (TOPIC, SPREAD))
        assert s.value(RM + "underminisrpartitioncount") == 0
        assert s.value(KC + "offlinepartitionscount") == offline_expected
        assert s.value(KC + "fencedbrokercount") == 1
        assert s.value(KC + "activebrokercount") == 2
        flags = s.series("kafka_topic_partition_under_replicated_partition")
        assert {k: v for k, v in flags.items() if ("topic", TOPIC) in k} == {
            (("partition", str(part)), ("topic", TOPIC)): 1.0 for t, part in mine if t == TOPIC}
    assert sum(after[i].value(KC + "activecontrollercount") for i in survivors) == 1
