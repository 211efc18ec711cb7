"""Cluster state on the metrics endpoints of a real 3-node cluster (issue 18).

Every node (broker and controller) serves ``metrics.listeners``; the test scrapes each as
Prometheus would and checks what an operator's alerts read:

* formed, with a topic of 3 partitions, replication factor 3 and min.insync.replicas=2:
  ``kafka_controller_kafkacontroller_activecontrollercount`` is 1 on the quorum leader
  and 0 on the others (sums to 1); each node hosts 3 replicas and leads what Metadata
  says it leads; nothing is under-replicated.
* a follower killed with -9: once the leaders dropped it from the ISRs, each survivor's
  ``kafka_server_replicamanager_underreplicatedpartitions`` is exactly the number of
  partitions it leads (3 in all: the dead node held a replica of each), as is
  ``atminisrpartitioncount`` (ISR 2 = min.insync.replicas); kafka-exporter's
  ``kafka_topic_partition_under_replicated_partition`` is 1 for each partition, reported
  once (by its leader); the controllers count one fenced broker, no offline partition,
  and the active controller count still sums to 1.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.replication import full_isr
from tests.helpers.cluster_proc import Cluster
from tests.helpers.scrape import Scrape, scrape

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
}
TOPIC = "metered"
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


def leaders(cluster: Cluster, node: int) -> dict[int, int]:
    """partition -> leader of TOPIC, as ``node``'s Metadata says."""
    parts = cluster.partitions(node, TOPIC)
    assert not isinstance(parts, str), parts
    return {p: s.leader for p, s in parts.items()}


def test_under_replicated_partitions_and_active_controller(cluster_factory):
    cluster = cluster_factory(overrides=OVERRIDES)
    ports = {i: n.reserve_extra() for i, n in cluster.nodes.items()}
    cluster.node_overrides = {i: {"metrics.listeners": f"http://127.0.0.1:{p}"}
                              for i, p in ports.items()}
    cluster.start()
    active = cluster.wait_formed().leader_id
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})]
                        )[TOPIC].result(timeout=30)
    cluster.wait_until("every ISR full", full_isr(cluster, TOPIC, 3), 60)

    led = leaders(cluster, active)
    # the leaders' replica managers take the image's ISRs as the Metadata answer does
    before = wait_scrapes(cluster, ports, "3 replicas hosted everywhere", lambda s: all(
        x.value(RM + "partitioncount") == 3 for x in s.values()))
    assert {i: s.value(KC + "activecontrollercount") for i, s in before.items()} == {
        i: (1.0 if i == active else 0.0) for i in cluster.nodes}
    for i, s in before.items():
        assert s.value(RM + "leadercount") == sum(1 for v in led.values() if v == i)
        assert s.value(RM + "underreplicatedpartitions") == 0
        assert s.value(RM + "atminisrpartitioncount") == 0
        assert s.value(KC + "globalpartitioncount") == 3
        assert s.value(KC + "offlinepartitionscount") == 0

    victim = next(i for i in sorted(cluster.nodes) if i != active)
    cluster.nodes[victim].kill()
    survivors = [i for i in cluster.nodes if i != victim]

    def shrunk() -> dict[int, Scrape] | str:
        parts = cluster.partitions(active, TOPIC)
        if isinstance(parts, str):
            return parts
        if any(victim in s.isr or s.leader in (victim, -1) for s in parts.values()):
            return f"metadata: {parts}"
        s = scrape_all(cluster, ports)
        urp = {i: s[i].value(RM + "underreplicatedpartitions") for i in survivors}
        fenced = s[active].value(KC + "fencedbrokercount")
        return s if sum(urp.values()) == 3 and fenced == 1 else f"urp {urp}, fenced {fenced}"

    after = cluster.wait_until(f"node {victim} out of every ISR", shrunk, 60)
    led = leaders(cluster, active)
    assert set(led.values()) <= set(survivors)
    for i in survivors:
        s = after[i]
        mine = sum(1 for v in led.values() if v == i)
        assert s.value(RM + "leadercount") == mine
        assert s.value(RM + "underreplicatedpartitions") == mine
        assert s.value(RM + "atminisrpartitioncount") == mine
        assert s.value(RM + "underminisrpartitioncount") == 0
        assert s.value(KC + "offlinepartitionscount") == 0
        assert s.value(KC + "fencedbrokercount") == 1
        assert s.value(KC + "activebrokercount") == 2
        flags = s.series("kafka_topic_partition_under_replicated_partition")
        assert flags == {(("partition", str(p)), ("topic", TOPIC)): 1.0
                         for p, leader in led.items() if leader == i}
    assert sum(after[i].value(KC + "activecontrollercount") for i in survivors) == 1

