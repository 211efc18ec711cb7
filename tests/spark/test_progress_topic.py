"""The exactly-once sink's progress topic: replicated as Kafka replicates its transaction log.

``source.ensure_progress_topic`` creates it compacted, on min(3, brokers) brokers, with
min.insync.replicas=2 when there are three, and returns only once its partition has a
leader; an existing topic is left as it is.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource

from spool.spark.source import ensure_progress_topic


def described(bootstrap: str, topic: str) -> tuple[int, int, dict[str, str]]:
    """(partitions, replicas of partition 0, the topic's non-default configs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t = admin.list_topics(topic, timeout=30).topics[topic]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(30)
    set_here = {k: v.value for k, v in configs.items() if not v.is_default}
    return len(t.partitions), len(t.partitions[0].replicas), set_here


def test_on_three_brokers_three_replicas_and_min_insync_two(spool_cluster, topic_name):
    topic = topic_name + "-progress"
    ensure_progress_topic({"bootstrap.servers": spool_cluster.bootstrap}, topic)
    partitions, replicas, configs = described(spool_cluster.bootstrap, topic)
    assert (partitions, replicas) == (1, 3)
    assert configs["cleanup.policy"] == "compact"
    assert configs["min.insync.replicas"] == "2"
    leader = AdminClient({"bootstrap.servers": spool_cluster.bootstrap}).list_topics(
        topic, timeout=30).topics[topic].partitions[0].leader
    assert leader in {b.node_id for b in spool_cluster.cluster.brokers}


def test_on_one_broker_one_replica_and_an_existing_topic_is_kept(broker, topic_name):
    topic = topic_name + "-progress"
    conf = {"bootstrap.servers": broker.bootstrap}
    ensure_progress_topic(conf, topic)
    partitions, replicas, configs = described(broker.bootstrap, topic)
    assert (partitions, replicas) == (1, 1)
    assert configs["cleanup.policy"] == "compact"
    assert "min.insync.replicas" not in configs
    ensure_progress_topic(conf, topic)  # again: nothing changes, no error
    assert described(broker.bootstrap, topic) == (partitions, replicas, configs)
