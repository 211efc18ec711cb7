"""Four ShareConsumers on a one-partition topic (KIP-932: no partition exclusivity): every
consumer receives records and every record is accepted exactly once overall.

``SPOOL_SHARE_RECORDS`` records (20,000 here; ``make soak`` runs 100,000). Two consumers
acknowledge explicitly and commit with ``commit_sync`` (ShareAcknowledge), one acknowledges
explicitly on its next poll (acknowledgements in ShareFetch), one implicitly.
"""

from __future__ import annotations

import os

import pytest

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.share import (
    OVERRIDES,
    ShareLog,
    ShareWorker,
    check_delivery_counts,
    check_exactly_once,
    create_topic,
    finish,
    produce,
    set_group_config,
    wait_members,
    wait_until,
)

N = int(os.environ.get("SPOOL_SHARE_RECORDS", "20000"))


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data", OVERRIDES).start()
    yield b
    b.stop()


@pytest.mark.timeout(900)
def test_four_consumers_on_one_partition_accept_every_record_once(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"g-{topic_name}"
    create_topic(bootstrap, topic_name)
    set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    log = ShareLog()
    poll_cfg = {"max.poll.records": 200}
    workers = [
        ShareWorker("sync-1", bootstrap, group, topic_name, log, config=poll_cfg),
        ShareWorker("sync-2", bootstrap, group, topic_name, log, config=poll_cfg),
        ShareWorker("on-poll", bootstrap, group, topic_name, log, commit=False, config=poll_cfg),
        ShareWorker("implicit", bootstrap, group, topic_name, log, decide=None, config=poll_cfg),
    ]
    for w in workers:
        w.start()
    try:
        wait_members(bootstrap, group, 4)
        produce(bootstrap, topic_name, 0, N)
        wait_until(lambda: log.covers(N), 30 + N / 100, workers)
    finally:
        finish(workers)
    assert check_exactly_once(log, N) == [], log.errors[:10]
    per_consumer = log.by_consumer()
    assert sorted(per_consumer) == sorted(w.name for w in workers), per_consumer
    assert all(n > 0 for n in per_consumer.values()), per_consumer
    assert check_delivery_counts(log) == []
