"""Group configs in a 3-node cluster: a GROUP resource set on one broker (checked there,
forwarded to the active controller, a ConfigRecord in the metadata log) is seen by all; and
``spool groups list`` asks every broker, so it lists groups whatever broker coordinates
them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.helpers.broker_configs import raw_alter, raw_describe, raw_incremental
from tests.helpers.cluster_proc import COMBINED

pytestmark = pytest.mark.timeout(240)
GROUP, GROUP_CONFIG, DEFAULT_CONFIG = 32, 8, 5


def test_group_config_set_on_one_broker_is_seen_by_all(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, proxied=False).start()
    cluster.wait_formed()
    nodes = cluster.nodes
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    res = ConfigResource(ResourceType.GROUP, "shared", incremental_configs=[
        ConfigEntry("share.record.lock.duration.ms", "15000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    assert raw_incremental(nodes[2].bootstrap, "shared",
                           ("consumer.session.timeout.ms", "50000", 0), rtype=GROUP) == (0, None)
    for n, node in nodes.items():
        cluster.wait_until(f"the group's values on broker {n}", lambda node=node: (
            [raw_describe(node.bootstrap, "shared", rtype=GROUP)[k][:2] for k in (
                "share.record.lock.duration.ms", "consumer.session.timeout.ms",
                "share.isolation.level")]
            == [("15000", GROUP_CONFIG), ("50000", GROUP_CONFIG),
                ("read_uncommitted", DEFAULT_CONFIG)]) or "not yet")

    assert raw_incremental(nodes[3].bootstrap, "shared", ("share.delivery.count.limit", "1", 0),
                           rtype=GROUP)[0] == KafkaError.INVALID_CONFIG
    assert raw_incremental(nodes[3].bootstrap, "shared", ("nope", "1", 0), rtype=GROUP) == (
        KafkaError.INVALID_CONFIG, "Unknown group config name: nope")
    assert raw_alter(nodes[1].bootstrap, "shared", {"share.isolation.level": "read_committed"},
                     rtype=GROUP) == (0, None)  # legacy AlterConfigs: the whole set replaced
    cluster.wait_until("the replaced set on broker 3", lambda: (
        {k: v[0] for k, v in raw_describe(nodes[3].bootstrap, "shared", rtype=GROUP).items()
         if v[1] == GROUP_CONFIG} == {"share.isolation.level": "read_committed"}) or "not yet")


def test_groups_list_asks_every_broker(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, proxied=False).start()
    cluster.wait_formed()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("t", 1, 3)])["t"].result(30)
    groups = [f"g{i}" for i in range(8)]  # their coordinators spread over the brokers
    for g in groups:  # a commit made before the coordinator knows "t" fails for that partition
        req = ConsumerGroupTopicPartitions(g, [TopicPartition("t", 0, 0)])
        cluster.wait_until(f"{g}'s offset committed", lambda req=req, g=g: all(
            tp.error is None for tp in admin.alter_consumer_group_offsets(
                [req], request_timeout=30)[g].result(30).topic_partitions) or "not yet")
    done = subprocess.run([sys.executable, "-m", "spool.cli.main", "groups", "list", "--json",
                           "--type", "classic", "-b", cluster.nodes[1].bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [(g["group"], g["type"], g["state"]) for g in json.loads(done.stdout)] == [
        (g, "classic", "Empty") for g in groups]
