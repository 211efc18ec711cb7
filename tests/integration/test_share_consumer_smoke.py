"""confluent-kafka's ShareConsumer (librdkafka 2.16, KIP-932) against a real broker: smoke.

One consumer reads every record; two consumers of one partition split its records with
none delivered to both (implicit acknowledgement); an explicit RELEASE brings the record
back with delivery count 2. The issue's full suite (4 consumers, kill -9, delivery limits,
broker restart) is in tests/integration/test_share_groups_*.py.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import AcknowledgeType

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.share import (
    OVERRIDES,
    ShareLog,
    ShareWorker,
    check_exactly_once,
    finish,
    produce,
    share_topic,
    wait_members,
    wait_until,
)

N = 500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share-smoke") / "data", OVERRIDES) as b:
        yield b


def topic_and_group(bootstrap: str, records: int) -> tuple[str, str]:
    topic, group = f"smoke-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    share_topic(bootstrap, topic, group, records)
    return topic, group


def test_one_consumer_reads_every_record(broker):
    topic, group = topic_and_group(broker.bootstrap, N)
    log = ShareLog()
    w = ShareWorker("c1", broker.bootstrap, group, topic, log, decide=None)
    w.start()
    try:
        assert wait_until(lambda: log.covers(N), 60, [w]), log.errors
    finally:
        finish([w])
    assert check_exactly_once(log, N) == []
    assert {d.offset for d in log.deliveries} == set(range(N))


def test_two_consumers_split_one_partition(broker):
    topic, group = topic_and_group(broker.bootstrap, 0)
    log = ShareLog()
    workers = [ShareWorker(f"c{i}", broker.bootstrap, group, topic, log, decide=None)
               for i in range(2)]
    for w in workers:
        w.start()
    try:
        wait_members(broker.bootstrap, group, 2)
        produce(broker.bootstrap, topic, 0, 4 * N)  # 200-record batches: several to share
        assert wait_until(lambda: log.covers(4 * N), 60, workers), log.errors
    finally:
        finish(workers)
    assert check_exactly_once(log, 4 * N) == []
    seen = [d.offset for d in log.deliveries]
    assert len(seen) == len(set(seen)), "a record was delivered twice"
    assert sorted(log.by_consumer()) == ["c0", "c1"], log.by_consumer()


def test_release_redelivers_with_delivery_count_two(broker):
    topic, group = topic_and_group(broker.bootstrap, 10)
    log = ShareLog()
    released = set()

    def decide(msg):
        if msg.offset() % 2 == 0 and msg.offset() not in released:
            released.add(msg.offset())
            return AcknowledgeType.RELEASE
        return AcknowledgeType.ACCEPT

    w = ShareWorker("c1", broker.bootstrap, group, topic, log, decide=decide)
    w.start()
    try:
        assert wait_until(lambda: log.covers(10), 60, [w]), log.errors
    finally:
        finish([w])
    assert check_exactly_once(log, 10) == []
    for off in range(10):
        counts = [d.delivery_count for d in log.deliveries_of(off)]
        assert counts == ([1, 2] if off % 2 == 0 else [1]), (off, counts)
