"""CreateTopics racing DeleteTopics of the same topic answers, never fails the connection.

Creation runs off the event loop, so a DeleteTopics can complete while a
CreateTopics awaits it; the create is answered (it did happen) without the
topic id and configs of a topic that is gone, not with a handler failure
that closes the connection. Found by ``bench.reliability.fuzz``.
"""

from __future__ import annotations

import threading

from spool.protocol._generated import CreateTopicsRequest, DeleteTopicsRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

ROUNDS = 200


def test_create_topics_racing_delete_topics_never_closes_the_connection(broker, topic_name):
    answers: list[int] = []
    failures: list[str] = []

    def create() -> None:
        c = RawClient(broker.bootstrap)
        try:
            for _ in range(ROUNDS):
                resp = c.request(19, 5, CreateTopicsRequest(topics=[CreatableTopic(
                    name=topic_name, num_partitions=1, replication_factor=1)], timeout_ms=5000))
                answers.append(resp.topics[0].error_code)
        except ConnectionError as e:
            failures.append(repr(e))
        finally:
            c.close()

    def delete() -> None:
        c = RawClient(broker.bootstrap)
        try:
            for _ in range(ROUNDS):
                c.request(20, 3, DeleteTopicsRequest(topic_names=[topic_name], timeout_ms=1000))
        finally:
            c.close()

    threads = [threading.Thread(target=create) for _ in range(3)]
    threads += [threading.Thread(target=delete) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(answers) == 3 * ROUNDS
    assert set(answers) <= {Errors.NONE, Errors.TOPIC_ALREADY_EXISTS}
