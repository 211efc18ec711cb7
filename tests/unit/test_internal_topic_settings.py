"""How a cluster creates __consumer_offsets and __transaction_state: Kafka's replication
factor defaults (3), capped by the registered brokers; the transaction log's min ISR."""

from __future__ import annotations

import pytest

from spool.broker.config import BrokerConfig
from spool.broker.internal_topic import cluster_topic_settings


@pytest.mark.parametrize("brokers, rf", [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_defaults_capped_by_the_registered_brokers(brokers, rf):
    config = BrokerConfig.load(None, [])
    assert cluster_topic_settings("__consumer_offsets", config, brokers) == (
        rf, {"cleanup.policy": "compact"})
    assert cluster_topic_settings("__transaction_state", config, brokers) == (
        rf, {"cleanup.policy": "compact", "min.insync.replicas": str(min(2, rf))})


def test_configured_factors_and_min_isr():
    config = BrokerConfig.load(None, ["offsets.topic.replication.factor=2",
                                      "transaction.state.log.replication.factor=4",
                                      "transaction.state.log.min.isr=3"])
    assert cluster_topic_settings("__consumer_offsets", config, 5)[0] == 2
    assert cluster_topic_settings("__transaction_state", config, 5) == (
        4, {"cleanup.policy": "compact", "min.insync.replicas": "3"})


@pytest.mark.parametrize("brokers, rf", [(1, 1), (2, 2), (5, 3)])
def test_share_group_state_keeps_every_record(brokers, rf):
    # ShareUpdates count until the next ShareSnapshot: never compacted (Kafka: delete)
    config = BrokerConfig.load(None, [])
    assert cluster_topic_settings("__share_group_state", config, brokers) == (
        rf, {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "104857600",
             "min.insync.replicas": str(min(2, rf))})
