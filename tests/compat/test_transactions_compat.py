"""kafka-python and aiokafka transactional producers and read_committed consumers.

Each client commits one transaction, aborts one, and commits offsets inside a
transaction (``send_offsets_to_transaction``); a read_committed consumer of the
same client sees only the committed records, a read_uncommitted one sees all.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as ATopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic


def _create(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def _kp_read(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, group_id=None)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    out: list[bytes] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(out) < expect:
        for recs in c.poll(500).values():
            out += [r.value for r in recs]
    # let a read_committed consumer prove it stops: poll once more
    for recs in c.poll(500).values():
        out += [r.value for r in recs]
    c.close()
    return out


@pytest.mark.timeout(60)
def test_kafka_python_transactions(broker, topic_name):
    _create(broker.bootstrap, topic_name)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{topic_name}")
    p.init_transactions()
    p.begin_transaction()
    p.send(topic_name, b"one")
    p.send_offsets_to_transaction({TopicPartition(topic_name, 0): OffsetAndMetadata(7, "", -1)},
                                 f"kp-g-{topic_name}")
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic_name, b"aborted")
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic_name, b"two")
    p.commit_transaction()
    p.close()
    assert _kp_read(broker.bootstrap, topic_name, "read_committed", 2) == [b"one", b"two"]
    assert _kp_read(broker.bootstrap, topic_name, "read_uncommitted", 3) == [
        b"one", b"aborted", b"two"]
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"kp-g-{topic_name}")
    try:
        assert c.committed(TopicPartition(topic_name, 0)) == 7
    finally:
        c.close()


@pytest.mark.timeout(60)
def test_aiokafka_transactions(broker, topic_name):
    async def go():
        _create(broker.bootstrap, topic_name)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id=f"aio-{topic_name}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic_name, b"one")
                await p.send_offsets_to_transaction({ATopicPartition(topic_name, 0): 5},
                                                    f"aio-g-{topic_name}")
            await p.begin_transaction()
            await p.send_and_wait(topic_name, b"aborted")
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic_name, b"two")
        finally:
            await p.stop()
        got = {}
        for isolation in ("read_committed", "read_uncommitted"):
            c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
            await c.start()
            try:
                c.assign([ATopicPartition(topic_name, 0)])
                out = []
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and len(out) < 3:
                    batches = await c.getmany(timeout_ms=500)
                    out += [m.value for ms in batches.values() for m in ms]
                    if isolation == "read_committed" and len(out) >= 2:
                        break
                got[isolation] = out
            finally:
                await c.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"aio-g-{topic_name}")
        await c.start()
        try:
            got["committed"] = await c.committed(ATopicPartition(topic_name, 0))
        finally:
            await c.stop()
        return got

    got = asyncio.run(go())
    assert got["read_committed"] == [b"one", b"two"]
    assert got["read_uncommitted"] == [b"one", b"aborted", b"two"]
    assert got["committed"] == 5
