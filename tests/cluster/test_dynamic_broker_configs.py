"""Dynamic broker configs in a 3-node cluster: ConfigRecords in the metadata log reach every broker.

A cluster-wide default sent to one node (forwarded to the active controller after
that node's checks) shows on every broker as DYNAMIC_DEFAULT_BROKER_CONFIG and acts
on every leader (``message.max.bytes``); a per-broker key sent by confluent-kafka to
broker 3 shows there only, is named in that broker's log as stored but not acted
on, and survives its restart; a key that needs a restart is refused by the node
that received it, with Kafka's message.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.helpers.broker_configs import raw_alter, raw_describe, raw_incremental
from tests.helpers.cluster_proc import COMBINED

pytestmark = pytest.mark.timeout(240)

DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5
RELOGIN = "sasl.kerberos.min.time.before.relogin"


def produce_errors(bootstrap: str, topic: str, partitions: int, size: int) -> list:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                  "message.max.bytes": 10**6, "retries": 0})
    got: list = []
    for partition in range(partitions):
        p.produce(topic, value=b"x" * size, partition=partition,
                  on_delivery=lambda err, _msg: got.append(err and err.code()))
    p.flush(30)
    return got


def test_dynamic_configs_reach_every_broker(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, proxied=False).start()
    cluster.wait_formed()
    nodes = cluster.nodes
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("t", 3, 3)])["t"].result(30)

    assert raw_incremental(nodes[2].bootstrap, "", ("message.max.bytes", "2000", 0)) == (0, None)
    for n, node in nodes.items():
        cluster.wait_until(f"message.max.bytes on broker {n}", lambda node=node, n=n: (
            raw_describe(node.bootstrap, str(n))["message.max.bytes"][:2] == (
                "2000", DYNAMIC_DEFAULT) or "not yet"))
    cluster.wait_until("every leader refuses 5000 bytes", lambda: produce_errors(
        cluster.bootstrap, "t", 3, 5000) == [KafkaError.MSG_SIZE_TOO_LARGE] * 3 or "not yet")

    res = ConfigResource("broker", "3", incremental_configs=[
        ConfigEntry(RELOGIN, "120000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)  # confluent-kafka asks broker 3
    cluster.wait_until("broker 3's own value", lambda: raw_describe(
        nodes[3].bootstrap, "3")[RELOGIN][:2] == ("120000", DYNAMIC_BROKER) or "not yet")
    assert raw_describe(nodes[1].bootstrap, "1")[RELOGIN][:2] == ("60000", DEFAULT)
    # (Describe answers from the metadata image; the warning is logged as the change is
    # applied, a moment after the image has it)
    warned = (f"broker 3: dynamic config {RELOGIN}=120000 is stored and reported, but Spool "
              "does not act on it")
    cluster.wait_until("broker 3's warning", lambda: (
        warned in nodes[3].log_path.read_text() or "not yet"), timeout=10)

    assert raw_alter(nodes[1].bootstrap, "1", {"log.dirs": "/elsewhere"}) == (
        KafkaError.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")
    assert raw_alter(nodes[1].bootstrap, "2", {RELOGIN: "1"}) == (
        KafkaError.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")

    nodes[3].restart()
    cluster.wait_until("broker 3's values after its restart", lambda: (
        [raw_describe(nodes[3].bootstrap, "3")[k][:2] for k in (RELOGIN, "message.max.bytes")]
        == [("120000", DYNAMIC_BROKER), ("2000", DYNAMIC_DEFAULT)]) or "not yet")

    assert raw_incremental(nodes[1].bootstrap, "", ("message.max.bytes", None, 1)) == (0, None)
    cluster.wait_until("every leader takes 5000 bytes again", lambda: produce_errors(
        cluster.bootstrap, "t", 3, 5000) == [None] * 3 or "not yet")
