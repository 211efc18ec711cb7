"""DescribeProducers (61) against a real single-node broker, as ``kafka-transactions.sh
describe-producers`` and kafka-python's ``describe_producers`` show it: per partition the
producers the log keeps, with what the log itself says about their batches (producer id,
epoch, last sequence, last timestamp; an open transaction's first offset; the coordinator
epoch of the last marker), and per-partition errors for what cannot be described."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition

from spool.protocol._generated import DescribeProducersRequest, FetchRequest
from spool.protocol._generated.describe_producers_request import TopicRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.records.record import ControlRecord, iter_records
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)


def log_batches(bootstrap: str, topic: str, partition: int) -> list:
    """(header, batch bytes) of every batch in the partition up to its high watermark."""
    c = RawClient(bootstrap)
    try:
        resp = c.request(1, 11, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
            topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                partition=partition, fetch_offset=0, partition_max_bytes=1 << 24)])]))
    finally:
        c.close()
    data = bytes(resp.responses[0].partitions[0].records or b"")
    return [(h, data[pos:pos + h.size]) for pos, h in iter_batches(data)]


def describe(bootstrap: str, topic: str, *partitions: int) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        got = admin.describe_producers([TopicPartition(topic, p) for p in partitions])
    finally:
        admin.close()
    return {tp.partition: state for tp, state in got.items()}


def states(described) -> list[tuple]:
    return sorted((s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                   s.coordinator_epoch, s.current_transaction_start_offset)
                  for s in described.active_producers)


def test_idempotent_and_transactional_producers(broker, topic_name):
    create(broker.bootstrap, topic_name, 2)
    idem = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                     "linger.ms": 0})
    for i in range(7):
        idem.produce(topic_name, value=b"i%d" % i, partition=0)
        idem.flush(10)  # one batch each: sequences 0..6
    assert idem.flush(10) == 0
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic_name})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic_name, value=b"t%d" % i, partition=0)
    assert txn.flush(10) == 0

    batches = [h for h, _ in log_batches(broker.bootstrap, topic_name, 0)]
    idem_b, txn_b = batches[:7], batches[7:]
    assert len(txn_b) >= 1 and all(h.is_transactional for h in txn_b)
    idem_pid, txn_pid = idem_b[0].producer_id, txn_b[0].producer_id
    open_state = {
        (idem_pid, idem_b[-1].producer_epoch, 6, idem_b[-1].max_timestamp, -1, -1),
        (txn_pid, txn_b[-1].producer_epoch, txn_b[-1].last_sequence, txn_b[-1].max_timestamp,
         -1, txn_b[0].base_offset),
    }
    described = describe(broker.bootstrap, topic_name, 0, 1)
    assert set(states(described[0])) == open_state
    assert states(described[1]) == []

    txn.commit_transaction(30)
    marker_h, marker = log_batches(broker.bootstrap, topic_name, 0)[-1]
    assert marker_h.is_control and marker_h.producer_id == txn_pid
    [rec] = list(iter_records(marker))
    coordinator_epoch = ControlRecord.decode(rec.key, rec.value).coordinator_epoch
    assert coordinator_epoch >= 0
    after = set(states(describe(broker.bootstrap, topic_name, 0)[0]))
    assert after == {
        (idem_pid, idem_b[-1].producer_epoch, 6, idem_b[-1].max_timestamp, -1, -1),
        (txn_pid, txn_b[-1].producer_epoch, txn_b[-1].last_sequence,
         max(txn_b[-1].max_timestamp, marker_h.max_timestamp), coordinator_epoch, -1),
    }


def test_what_cannot_be_described_is_an_error_per_partition(broker, topic_name):
    create(broker.bootstrap, topic_name, 1)
    c = RawClient(broker.bootstrap)
    try:
        resp = c.request(61, 0, DescribeProducersRequest(topics=[
            TopicRequest(name=topic_name, partition_indexes=[0, 5]),
            TopicRequest(name=f"{topic_name}-nope", partition_indexes=[0, 1]),
            TopicRequest(name="bad name!", partition_indexes=[0])]))
    finally:
        c.close()
    assert [(t.name, [(p.partition_index, p.error_code, p.active_producers)
                      for p in t.partitions]) for t in resp.topics] == [
        (topic_name, [(0, 0, []), (5, Errors.UNKNOWN_TOPIC_OR_PARTITION, [])]),
        (f"{topic_name}-nope", [(0, Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
                                (1, Errors.UNKNOWN_TOPIC_OR_PARTITION, [])]),
        ("bad name!", [(0, Errors.INVALID_TOPIC_EXCEPTION, [])]),
    ]
