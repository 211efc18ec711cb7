"""ListOffsets up to v11: max timestamp (KIP-734) as confluent-kafka's AdminClient asks for
it, and on the wire the special timestamps of v8-v11 as Kafka answers them for a topic
without tiered storage, each refused below its version."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from spool.protocol._generated import ListOffsetsRequest
from spool.protocol._generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(60)

BASE = 1_700_000_000_000
# timestamps of records 0..5: the largest (BASE + 900) is carried by records 2 and 4
STAMPS = [BASE + 100, BASE + 300, BASE + 900, BASE + 200, BASE + 900, BASE + 500]


def _topic_with_records(bootstrap: str, topic: str) -> AdminClient:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, ts in enumerate(STAMPS):
        p.produce(topic, value=f"v{i}".encode(), timestamp=ts)
        p.flush(10)  # one batch per record: max timestamp is found across batches
    return a


def test_admin_list_offsets_max_timestamp(broker, topic_name):
    a = _topic_with_records(broker.bootstrap, topic_name)
    tp = TopicPartition(topic_name, 0)

    def ask(spec):
        r = a.list_offsets({tp: spec}, request_timeout=10)[tp].result(10)
        return r.offset, r.timestamp

    assert ask(OffsetSpec.max_timestamp()) == (2, BASE + 900)  # the first record carrying it
    assert ask(OffsetSpec.earliest())[0] == 0
    assert ask(OffsetSpec.latest())[0] == 6
    assert ask(OffsetSpec.for_timestamp(BASE + 250)) == (1, BASE + 300)


def _ask(rc: RawClient, version: int, topic: str, *stamps: int, replica_id: int = -1):
    got = rc.request(2, version, ListOffsetsRequest(
        replica_id=replica_id, isolation_level=0, timeout_ms=5000,
        topics=[ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsPartition(partition_index=0, timestamp=ts) for ts in stamps])]))
    return [(p.error_code, p.offset, p.timestamp, p.leader_epoch) for p in got.topics[0].partitions]


def test_special_timestamps_by_version(broker, topic_name):
    _topic_with_records(broker.bootstrap, topic_name)
    rc = RawClient(broker.bootstrap)
    try:
        # v11: earliest local is the log start (no tiered storage); latest tiered and
        # earliest pending upload have nothing in tiered storage: -1 and leader epoch -1
        assert _ask(rc, 11, topic_name, -4) == [(0, 0, -1, 0)]
        assert _ask(rc, 11, topic_name, -5) == [(0, -1, -1, -1)]
        assert _ask(rc, 11, topic_name, -6) == [(0, -1, -1, -1)]
        assert _ask(rc, 11, topic_name, -3) == [(0, 2, BASE + 900, 0)]
        # each special timestamp below the version that brought it: UNSUPPORTED_VERSION
        unsupported = (Errors.UNSUPPORTED_VERSION, -1, -1, -1)
        assert _ask(rc, 6, topic_name, -3) == [unsupported]
        assert _ask(rc, 7, topic_name, -4) == [unsupported]
        assert _ask(rc, 8, topic_name, -5) == [unsupported]
        assert _ask(rc, 10, topic_name, -6) == [unsupported]
        assert _ask(rc, 11, topic_name, -7) == [unsupported]
        assert _ask(rc, 8, topic_name, -4) == [(0, 0, -1, 0)]
        assert _ask(rc, 9, topic_name, -5) == [(0, -1, -1, -1)]
    finally:
        rc.close()


def test_partition_listed_twice_is_invalid_request(broker, topic_name):
    _topic_with_records(broker.bootstrap, topic_name)
    rc = RawClient(broker.bootstrap)
    try:
        assert _ask(rc, 11, topic_name, -1, -2) == [(Errors.INVALID_REQUEST, -1, -1, -1)] * 2
    finally:
        rc.close()


def test_max_timestamp_in_an_open_transaction_is_hidden_from_read_committed(broker, topic_name):
    _topic_with_records(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic_name}"})
    p.init_transactions(10)
    p.begin_transaction()
    late = int(time.time() * 1000) + 86_400_000  # above the commit marker's timestamp too
    p.produce(topic_name, value=b"late", timestamp=late)  # offset 6, the new maximum
    p.flush(10)
    rc = RawClient(broker.bootstrap)
    try:
        def ask(isolation_level: int):
            got = rc.request(2, 11, ListOffsetsRequest(
                replica_id=-1, isolation_level=isolation_level, topics=[ListOffsetsTopic(
                    name=topic_name, partitions=[ListOffsetsPartition(partition_index=0,
                                                                      timestamp=-3)])]))
            r = got.topics[0].partitions[0]
            return r.error_code, r.offset, r.timestamp

        assert ask(0) == (0, 6, late)  # below the high watermark
        assert ask(1) == (0, -1, -1)  # at or past the last stable offset (6): not readable
        p.commit_transaction(10)
        assert ask(1) == (0, 6, late)
    finally:
        rc.close()
