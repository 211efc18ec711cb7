"""A share group's acknowledgements survive kill -9 of the broker: with two ShareConsumers
acknowledging records (explicit mode, ``commit_sync``; every tenth rejected, the others
accepted), the broker is killed and restarted mid-way; no record whose acceptance or
rejection the broker confirmed is delivered again (only records in flight at the kill may
be), and every record ends accepted or rejected exactly once. Released records keep their
delivery counts over the kill: a record released twice before comes back with count 3 and is
archived at ``group.share.delivery.count.limit`` (5) all the same."""

from __future__ import annotations

import time

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
    wait_until,
)

N = 12_000


def _decide(msg) -> int:
    return AcknowledgeType.REJECT if msg.offset() % 10 == 3 else AcknowledgeType.ACCEPT


@pytest.mark.timeout(300)
def test_broker_kill_9_loses_no_acknowledged_state(tmp_path, topic_name):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        bootstrap, group = broker.bootstrap, f"g-{topic_name}"
        share_topic(bootstrap, topic_name, group, N)
        log = ShareLog()
        workers = [ShareWorker(f"w{i}", bootstrap, group, topic_name, log, decide=_decide,
                               config={"max.poll.records": 100}) for i in range(2)]
        for w in workers:
            w.start()
        try:
            assert wait_until(lambda: len(log.finished) >= N // 3, 60, workers), log.errors[:5]
            broker.kill()
            killed_at = time.monotonic()
            broker.start()
            wait_until(lambda: log.covers(N, unknown_ok=True), 120, workers)
            # Records acquired before the kill become available again; a record produced
            # now is acquired after every available one below it.
            produce(bootstrap, topic_name, N, 1)
            wait_until(lambda: N in log.accepted, 60, workers)
        finally:
            finish(workers)
    finally:
        broker.stop()
    confirmed_before = {a.ack_type for a in log.acks if a.ok and a.at < killed_at}
    assert confirmed_before == {"ACCEPT", "REJECT"}, confirmed_before
    assert check_exactly_once(log, N + 1, unknown_ok=True) == [], log.errors[:10]


@pytest.mark.timeout(180)
def test_released_records_keep_their_delivery_counts_over_a_broker_kill_9(tmp_path, topic_name):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        bootstrap, group = broker.bootstrap, f"g-{topic_name}"
        share_topic(bootstrap, topic_name, group, 5)
        log = ShareLog()

        def release_all_but_5(msg) -> int:
            return AcknowledgeType.ACCEPT if msg.offset() == 5 else AcknowledgeType.RELEASE

        def released(count: int) -> bool:
            return sum(a.ok and a.ack_type == "RELEASE" for a in log.acks) >= count

        before = ShareWorker("before", bootstrap, group, topic_name, log,
                             decide=release_all_but_5)
        before.open()
        try:  # each record delivered and released twice (the 5 may come in one poll)
            assert wait_until(lambda: before.step() or released(10), 60), log.acks
        finally:
            before.consumer.close()
        broker.kill()
        broker.start()
        after = ShareWorker("after", bootstrap, group, topic_name, log,
                            decide=release_all_but_5)
        after.open()
        try:  # counts 3, 4, 5, then archived; record 5 is the next one delivered
            assert wait_until(lambda: after.step() or released(25), 60), log.acks
            produce(bootstrap, topic_name, 5, 1)
            assert wait_until(lambda: after.step() or 5 in log.accepted, 60), log.acks
        finally:
            after.consumer.close()
    finally:
        broker.stop()
    counts = {off: [(d.consumer, d.delivery_count) for d in log.deliveries_of(off)]
              for off in range(6)}
    twice_then_three = [("before", 1), ("before", 2), ("after", 3), ("after", 4), ("after", 5)]
    assert counts == {**{off: twice_then_three for off in range(5)}, 5: [("after", 1)]}
