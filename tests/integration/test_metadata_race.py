"""Metadata that auto-creates a topic while DeleteTopics removes it answers, never fails.

Auto-creation runs off the event loop, so a DeleteTopics can complete while a
Metadata request awaits it; the answer is then UNKNOWN_TOPIC_OR_PARTITION for
that topic (Kafka's), not a handler failure that closes the connection. Found
by ``bench.reliability.fuzz``. DeleteTopics racing the creation of the same
name is answered too (topic changes are serialised in ``Storage``), never a
closed connection.
"""

from __future__ import annotations

from spool.protocol._generated import DeleteTopicsRequest, MetadataRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors
from tests.helpers.race import race

ROUNDS = 300


def test_metadata_racing_delete_topics_never_closes_the_connection(broker, topic_name):
    failed_before = broker.log_path.read_bytes().count(b"handler failed")
    codes, failures = race(broker.bootstrap, ROUNDS, {
        "Metadata": (4, lambda c: c.request(3, 4, MetadataRequest(
            topics=[MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=True)
        ).topics[0].error_code),
        "DeleteTopics": (2, lambda c: c.request(20, 3, DeleteTopicsRequest(
            topic_names=[topic_name], timeout_ms=1000)).responses[0].error_code),
    })
    assert failures == []
    assert len(codes["Metadata"]) == 4 * ROUNDS
    assert set(codes["Metadata"]) <= {Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(codes["DeleteTopics"]) == 2 * ROUNDS
    assert set(codes["DeleteTopics"]) <= {Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.log_path.read_bytes().count(b"handler failed") == failed_before
