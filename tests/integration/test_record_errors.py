"""KIP-467: a batch refused for some of its records names them, so only those fail for good.

The broker appends nothing of a batch with an invalid record (as Kafka), but its
Produce v8+ answer lists each culprit in ``record_errors`` (batch_index, message)
with an ``error_message``. librdkafka 2.16 then fails each culprit with
INVALID_RECORD and every other record of the batch with its local
``_INVALID_DIFFERENT_RECORD`` ("an invalid record in the same batch caused the
failure"), which an application sends again: librdkafka does not resend them by
itself, nor does the Java producer. (With a single culprit in a batch, librdkafka
2.16 fails the whole batch with the partition's error, as before KIP-467: these
tests put several in one batch.) So of 100 records with 10 null keys to a
compacted topic, exactly those 10 fail with INVALID_RECORD, and the 90 others are
delivered once sent again; records outside ``message.timestamp.before.max.ms``
likewise.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(90)

HOUR_MS = 3_600_000


def create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, config=config)])[topic].result(10)


def produce_batched(bootstrap: str, topic: str,
                    records: list[tuple[bytes | None, bytes, int | None]]
                    ) -> dict[bytes, KafkaError | None]:
    """Send every (key, value, timestamp) at once (linger.ms gathers them in one batch);
    the delivery result of each, by value. The producer learns the topic's metadata
    first: records produced before it arrives wait in librdkafka's unassigned queue and
    can land in a second batch (CI saw 14-19 of 20 split off, with a single culprit, so
    the whole batch failed with the partition's error)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "acks": "all"})
    p.list_topics(topic, timeout=10)
    results: dict[bytes, KafkaError | None] = {}
    for key, value, ts in records:
        kwargs = {} if ts is None else {"timestamp": ts}
        p.produce(topic, key=key, value=value, **kwargs,
                  on_delivery=lambda err, msg: results.__setitem__(msg.value(), err))
    assert p.flush(30) == 0
    return results


def produce_resending(bootstrap: str, topic: str,
                      records: list[tuple[bytes | None, bytes, int | None]]
                      ) -> dict[bytes, KafkaError]:
    """``produce_batched``, then send again what failed only because another record of
    its batch was invalid, as an application does; the records that failed for good."""
    failed: dict[bytes, KafkaError] = {}
    while records:
        results = produce_batched(bootstrap, topic, records)
        innocent = {v for v, err in results.items()
                    if err is not None and err.code() == KafkaError._INVALID_DIFFERENT_RECORD}
        failed.update({v: err for v, err in results.items()
                       if err is not None and v not in innocent})
        records = [r for r in records if r[1] in innocent]
    return failed


def read_all(bootstrap: str, topic: str, want: int) -> list[tuple[bytes | None, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "record-errors",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes | None, bytes]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            msgs = c.consume(500, 0.5)
            out += [(m.key(), m.value()) for m in msgs if m.error() is None]
            if len(out) >= want and not msgs:
                break
    finally:
        c.close()
    return out


def test_null_keys_fail_alone_and_the_other_records_are_delivered(broker, topic_name):
    create(broker.bootstrap, topic_name, {"cleanup.policy": "compact"})
    records = [(None if i % 10 == 3 else b"k%d" % i, b"v%d" % i, None) for i in range(100)]
    failed = produce_resending(broker.bootstrap, topic_name, records)
    assert {v: err.code() for v, err in failed.items()} == {
        b"v%d" % i: KafkaError.INVALID_RECORD for i in range(3, 100, 10)}
    got = read_all(broker.bootstrap, topic_name, 90)
    assert sorted(got, key=lambda kv: int(kv[1][1:])) == [
        (k, v) for k, v, _ in records if k is not None]


def test_records_out_of_the_timestamp_range_fail_alone(broker, topic_name):
    create(broker.bootstrap, topic_name, {"message.timestamp.before.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    records = [(b"k%d" % i, b"v%d" % i, now - 2 * HOUR_MS if i % 4 == 0 else now)
               for i in range(20)]
    failed = produce_resending(broker.bootstrap, topic_name, records)
    # several culprits in a batch: librdkafka reports each as INVALID_RECORD (the broker's
    # partition error is INVALID_TIMESTAMP: test_the_produce_answer_names_each_...)
    assert set(failed) == {b"v%d" % i for i in range(0, 20, 4)}
    assert {err.code() for err in failed.values()} <= {
        KafkaError.INVALID_RECORD, KafkaError.INVALID_TIMESTAMP}
    got = read_all(broker.bootstrap, topic_name, 15)
    assert sorted(got, key=lambda kv: int(kv[1][1:])) == [
        (k, v) for k, v, ts in records if ts == now]


@pytest.mark.parametrize("version", [7, 8, 11])
def test_the_produce_answer_names_each_refused_record(broker, topic_name, version):
    create(broker.bootstrap, topic_name, {"cleanup.policy": "compact"})
    b = BatchBuilder()
    for key in (b"a", None, b"c", None):
        b.append(key, b"v", timestamp=int(time.time() * 1000))
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic_name, partition_data=[
            PartitionProduceData(index=0, records=b.build())])])
    c = RawClient(broker.bootstrap)
    try:
        p = c.request(0, version, req).responses[0].partition_responses[0]
    finally:
        c.close()
    msg = f"Compacted topic cannot accept message without key in topic partition {topic_name}-0"
    assert (p.error_code, p.base_offset) == (KafkaError.INVALID_RECORD, -1)
    if version < 8:  # the fields do not exist before v8
        assert (p.record_errors, p.error_message) == ([], None)
        return
    assert [(r.batch_index, r.batch_index_error_message) for r in p.record_errors] == [
        (1, msg), (3, msg)]
    assert p.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{msg}'), "
        f"RecordError(batchIndex=3, message='{msg}')]")


def test_the_produce_answer_names_records_out_of_the_timestamp_range(broker, topic_name):
    create(broker.bootstrap, topic_name, {"message.timestamp.after.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    b = BatchBuilder()
    for ts in (now, now + 3 * HOUR_MS, now):
        b.append(b"k", b"v", timestamp=ts)
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic_name, partition_data=[
            PartitionProduceData(index=0, records=b.build())])])
    c = RawClient(broker.bootstrap)
    try:
        p = c.request(0, 11, req).responses[0].partition_responses[0]
    finally:
        c.close()
    assert (p.error_code, p.base_offset, p.error_message) == (
        KafkaError.INVALID_TIMESTAMP, -1,
        "One or more records have been rejected due to invalid timestamp")
    [r] = p.record_errors
    assert r.batch_index == 1
    assert r.batch_index_error_message.startswith(
        f"Timestamp {now + 3 * HOUR_MS} of message with offset 1 is out of range. The "
        "timestamp should be within [")
