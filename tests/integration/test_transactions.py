"""Transactions with confluent-kafka: commit/abort visibility, the LSO, fencing, timeouts,
and a broker kill -9 in the middle of a commit."""

from __future__ import annotations

import json
import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import ListOffsetsRequest
from spool.protocol._generated.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsTopic,
)
from tests.helpers.raw_client import RawClient

SMALL = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)


def read(bootstrap: str, topic: str, partitions: int = 1, committed: bool = True,
         expect: int | None = None, wait_s: float = 3.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline and (expect is None or len(out) < expect):
            out += [m.value() for m in c.consume(500, 0.3) if m.error() is None]
    finally:
        c.close()
    return out


def latest(bootstrap: str, topic: str, isolation: int) -> int:
    rc = RawClient(bootstrap)
    try:
        req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        return rc.request(2, 5, req).topics[0].partitions[0].offset
    finally:
        rc.close()


def txn_producer(bootstrap: str, txn_id: str, **kw) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0, **kw})
    p.init_transactions(15)
    return p


def test_commit_abort_and_the_last_stable_offset(broker, topic_name):
    create(broker.bootstrap, topic_name)
    p = txn_producer(broker.bootstrap, f"vis-{topic_name}")
    p.begin_transaction()
    p.produce(topic_name, b"c1")
    p.produce(topic_name, b"c2")
    p.commit_transaction(15)                      # offsets 0, 1, marker 2
    p.begin_transaction()
    p.produce(topic_name, b"a1")                  # offset 3, open
    p.flush(10)
    assert latest(broker.bootstrap, topic_name, 1) == 3   # read_committed: the LSO
    assert latest(broker.bootstrap, topic_name, 0) == 4   # read_uncommitted: the HW
    assert read(broker.bootstrap, topic_name, wait_s=1.5) == [b"c1", b"c2"]
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic_name, b"c3")
    p.commit_transaction(15)
    assert latest(broker.bootstrap, topic_name, 1) == latest(broker.bootstrap, topic_name, 0)
    assert read(broker.bootstrap, topic_name, expect=3) == [b"c1", b"c2", b"c3"]
    assert read(broker.bootstrap, topic_name, committed=False, expect=4) == [b"c1", b"c2", b"a1", b"c3"]


def test_a_zombie_is_fenced_and_its_transaction_aborted(broker, topic_name):
    create(broker.bootstrap, topic_name)
    txn_id = f"zombie-{topic_name}"
    old = txn_producer(broker.bootstrap, txn_id)
    old.begin_transaction()
    old.produce(topic_name, b"zombie")
    old.flush(10)
    new = txn_producer(broker.bootstrap, txn_id)  # fences `old`, aborts its transaction
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(15)
    assert e.value.args[0].fatal()
    new.begin_transaction()
    new.produce(topic_name, b"fresh")
    new.commit_transaction(15)
    assert read(broker.bootstrap, topic_name, expect=1) == [b"fresh"]


@pytest.mark.timeout(120)
def test_timeouts(fresh_broker, topic_name):
    fresh_broker.overrides.update(SMALL)
    fresh_broker.overrides["transaction.max.timeout.ms"] = "60000"
    fresh_broker.overrides["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "200"
    fresh_broker.start()
    create(fresh_broker.bootstrap, topic_name)
    too_long = Producer({"bootstrap.servers": fresh_broker.bootstrap, "transactional.id": "long",
                         "transaction.timeout.ms": 120_000})
    with pytest.raises(KafkaException) as e:
        too_long.init_transactions(15)
    assert e.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT

    p = txn_producer(fresh_broker.bootstrap, "slow", **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic_name, b"never")
    p.flush(10)
    assert latest(fresh_broker.bootstrap, topic_name, 1) == 0
    deadline = time.monotonic() + 20
    while latest(fresh_broker.bootstrap, topic_name, 1) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert latest(fresh_broker.bootstrap, topic_name, 1) == 2  # aborted: record + ABORT marker
    with pytest.raises(KafkaException) as e:
        p.commit_transaction(15)
    # The broker aborted it and bumped the epoch: the old producer is fenced for good.
    assert (e.value.args[0].code(), e.value.args[0].fatal()) == (KafkaError._FENCED, True)
    assert read(fresh_broker.bootstrap, topic_name, wait_s=1.0) == []
    assert read(fresh_broker.bootstrap, topic_name, committed=False, expect=1) == [b"never"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("point", ["txn-prepare", "marker"])
def test_broker_killed_in_the_middle_of_a_commit(fresh_broker, topic_name, tmp_path, point):
    """Killed right after the PREPARE_COMMIT record, or right after the first marker."""
    fresh_broker.overrides.update(SMALL)
    fresh_broker.start()
    create(fresh_broker.bootstrap, topic_name, partitions=2)
    group = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "g"})
    p = txn_producer(fresh_broker.bootstrap, "mid-commit", **{"message.timeout.ms": 5000})
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, b"r%d" % i, partition=i % 2)
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 42)],
                                  group.consumer_group_metadata(), 15)
    p.flush(10)
    fresh_broker.stop()
    fresh_broker.faults = tmp_path / "faults.json"  # this run dies inside the commit
    fresh_broker.faults.write_text(json.dumps([{"match": point, "action": "kill"}]))
    fresh_broker.start()
    with pytest.raises(KafkaException):
        p.commit_transaction(5)
    assert fresh_broker.proc.wait(10) == -signal.SIGKILL
    fresh_broker.faults = None
    fresh_broker.restart()  # recovery completes the commit on every partition
    got = read(fresh_broker.bootstrap, topic_name, partitions=2, expect=10, wait_s=15)
    assert sorted(got) == sorted(b"r%d" % i for i in range(10))
    c = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "g"})
    try:
        assert c.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 42
    finally:
        c.close()
    group.close()
