"""CreateTopics racing DeleteTopics of the same topic answers, never fails the connection.

Creation runs off the event loop, so a DeleteTopics can complete while a
CreateTopics awaits it; the create is answered (it did happen) without the
topic id and configs of a topic that is gone, not with a handler failure
that closes the connection. Found by ``bench.reliability.fuzz``.
"""

from __future__ import annotations

from spool.protocol._generated import CreateTopicsRequest, DeleteTopicsRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol.errors import Errors
from tests.helpers.race import race

ROUNDS = 200


def test_create_topics_racing_delete_topics_never_closes_the_connection(broker, topic_name):
    codes, failures = race(broker.bootstrap, ROUNDS, {
        "CreateTopics": (3, lambda c: c.request(19, 5, CreateTopicsRequest(topics=[CreatableTopic(
            name=topic_name, num_partitions=1, replication_factor=1)], timeout_ms=5000)
        ).topics[0].error_code),
        "DeleteTopics": (3, lambda c: c.request(20, 3, DeleteTopicsRequest(
            topic_names=[topic_name], timeout_ms=1000)).responses[0].error_code),
    })
    assert failures == []
    assert len(codes["CreateTopics"]) == 3 * ROUNDS
    assert set(codes["CreateTopics"]) <= {Errors.NONE, Errors.TOPIC_ALREADY_EXISTS}
    assert len(codes["DeleteTopics"]) == 3 * ROUNDS
    assert set(codes["DeleteTopics"]) <= {Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION}
