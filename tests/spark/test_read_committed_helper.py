"""The tier's ``consume_all(..., isolation="read_committed")`` reads every committed record,
also those of a transaction whose COMMIT markers reach the partition after the producer's
``commit_transaction()`` returned (EndTxn is answered once PREPARE_COMMIT is logged, as in
Kafka; on the 3-broker cluster the markers of partitions other brokers lead follow over
WriteTxnMarkers). The exactly-once tests read their sink with it the moment the driver ends:
reading only up to the last stable offset of that moment missed the last micro-batch's
output (``test_sessions_exactly_once_across_a_driver_kill[cluster]``, 1 in 3 CI runs).

The marker is held back deterministically: the broker runs as ``tests.helpers.faulty_broker``
and fails its first appends (retried with backoff), as in test_coordinator_faults.
"""

from __future__ import annotations

import pytest

from tests.integration.test_coordinator_faults import faults, faulty, fired  # noqa: F401
from tests.integration.test_transactions import create, txn_producer
from tests.spark.conftest import consume_all


@pytest.mark.timeout(60)
def test_read_committed_waits_for_a_late_commit_marker(faulty, topic_name):  # noqa: F811
    faulty.start()
    create(faulty.bootstrap, topic_name)
    # 5 failed appends: the marker is written ~1.5 s (50 + 100 + ... + 800 ms) after EndTxn
    faults(faulty.faults, {"match": "marker", "topic": topic_name, "action": "fail", "times": 5})
    p = txn_producer(faulty.bootstrap, f"late-{topic_name}")
    p.begin_transaction()
    for i in range(3):
        p.produce(topic_name, b"r%d" % i)
    p.commit_transaction(15)
    got = consume_all(faulty.bootstrap, topic_name, isolation="read_committed")
    assert [m.value() for m in got] == [b"r0", b"r1", b"r2"]
    assert fired(faulty.faults) == [f"marker fail {topic_name}-0"] * 5  # it was late
