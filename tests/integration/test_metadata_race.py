"""Metadata that auto-creates a topic while DeleteTopics removes it answers, never fails.

Auto-creation runs off the event loop, so a DeleteTopics can complete while a
Metadata request awaits it; the answer is then UNKNOWN_TOPIC_OR_PARTITION for
that topic (Kafka's), not a handler failure that closes the connection. Found
by ``bench.reliability.fuzz``. DeleteTopics racing the creation of the same
name is answered too (topic changes are serialised in ``Storage``), never a
closed connection.
"""

from __future__ import annotations

import threading

from spool.protocol._generated import DeleteTopicsRequest, MetadataRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

ROUNDS = 300


def test_metadata_racing_delete_topics_never_closes_the_connection(broker, topic_name):
    answers: list[int] = []
    deleted: list[int] = []
    failures: list[str] = []

    def describe() -> None:
        c = RawClient(broker.bootstrap)
        try:
            for _ in range(ROUNDS):
                resp = c.request(3, 4, MetadataRequest(
                    topics=[MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=True))
                answers.append(resp.topics[0].error_code)
        except ConnectionError as e:
            failures.append(repr(e))
        finally:
            c.close()

    def delete() -> None:
        c = RawClient(broker.bootstrap)
        try:
            for _ in range(ROUNDS):
                resp = c.request(
                    20, 3, DeleteTopicsRequest(topic_names=[topic_name], timeout_ms=1000))
                deleted.append(resp.responses[0].error_code)
        except ConnectionError as e:
            failures.append(f"DeleteTopics: {e!r}")
        finally:
            c.close()

    failed_before = broker.log_path.read_bytes().count(b"handler failed")
    threads = [threading.Thread(target=describe) for _ in range(4)]
    threads += [threading.Thread(target=delete) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(answers) == 4 * ROUNDS
    assert set(answers) <= {Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(deleted) == 2 * ROUNDS
    assert set(deleted) <= {Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.log_path.read_bytes().count(b"handler failed") == failed_before
