"""aiokafka 0.14.0 against a real Spool broker: producer, consumer, admin client.

Consumer groups are not implemented in the broker yet: consumers use
``group_id=None`` and manual assignment. aiokafka producers are not
idempotent unless asked; the idempotent one (InitProducerId) has its own
test. Every test drives its own event loop.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    InvalidPartitionsError,
    InvalidTimestampError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
)

from tests.compat.expect import (
    CODECS,
    LOG_APPEND_TIME,
    Got,
    check_roundtrip,
    check_stored_codec,
    make_records,
    now_ms,
)

PARTITIONS = 3
RECORDS = 700  # per (codec, acks): ~2,100 per codec
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_CONFIG = 40


def run(coro):
    return asyncio.run(coro)


class Admin:
    """AIOKafkaAdminClient as an async context manager."""

    def __init__(self, bootstrap: str) -> None:
        self.client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)

    async def __aenter__(self) -> AIOKafkaAdminClient:
        await self.client.start()
        return self.client

    async def __aexit__(self, *exc) -> None:
        await self.client.close()


async def create(bootstrap: str, topic: str, partitions: int = PARTITIONS,
                 configs: dict | None = None) -> None:
    async with Admin(bootstrap) as admin:
        resp = await admin.create_topics([NewTopic(topic, partitions, 1,
                                                   topic_configs=configs or {})])
    assert [tuple(e[:2]) for e in resp.topic_errors] == [(topic, 0)], resp


def producer(bootstrap: str, **kw) -> AIOKafkaProducer:
    kw.setdefault("linger_ms", 5)
    return AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000, **kw)


def consumer(bootstrap: str, **kw) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                            request_timeout_ms=10_000, **kw)


def to_got(m) -> Got:
    return Got(m.partition, m.offset, m.key, m.value, tuple(tuple(h) for h in m.headers),
               m.timestamp, m.timestamp_type)


async def consume(bootstrap: str, topic: str, partitions: int, expected: int,
                  timeout: float = 30.0, **kw) -> list[Got]:
    c = consumer(bootstrap, **kw)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        got: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for _tp, msgs in sorted((await c.getmany(timeout_ms=500)).items()):
                got.extend(to_got(m) for m in msgs)
        for msgs in (await c.getmany(timeout_ms=200)).values():
            got.extend(to_got(m) for m in msgs)
        return got
    finally:
        await c.stop()


async def send_all(p: AIOKafkaProducer, topic: str, records) -> list:
    futs = [await p.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                         timestamp_ms=r.timestamp) for r in records]
    await p.flush()
    return futs


@pytest.mark.timeout(60)
@pytest.mark.parametrize("acks", [0, 1, "all"], ids=lambda a: f"acks{a}")
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(broker, topic_name, codec, acks):
    records = make_records(f"aio-{codec}-{acks}", RECORDS)

    async def go():
        await create(broker.bootstrap, topic_name)
        p = producer(broker.bootstrap, acks=acks,
                     compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            futs = await send_all(p, topic_name, records)
            mds = [await f for f in futs]
        finally:
            await p.stop()
        return mds, await consume(broker.bootstrap, topic_name, PARTITIONS, len(records))

    mds, got = run(go())
    check_roundtrip(records, got, PARTITIONS)
    if acks != 0:
        at = {(g.partition, g.offset): g for g in got}
        for r, md in zip(records, mds, strict=True):
            assert at[(md.partition, md.offset)].key == r.key
            assert at[(md.partition, md.offset)].headers == r.headers
            # (Not md.timestamp: aiokafka 0.14.0's BatchBuilder.done() hands every future
            # of a batch the first record's CreateTime.)
            assert md.timestamp_type == 0
    check_stored_codec(broker.data_dir, topic_name, codec)


@pytest.mark.timeout(30)
def test_edge_records(broker, topic_name):
    """Null key, tombstone, empty value and key, null and repeated header values, a 300 KB value."""
    ts = now_ms() - 1000
    cases = [
        (None, b"no key", [("h", b"1")]),
        (b"tomb", None, []),
        (b"empty", b"", [("", b""), ("nullval", None), ("dup", b"1"), ("dup", b"2")]),
        (b"\x00\xff\x80", bytes(range(256)) * 1200, [("big", b"x" * 1000)]),
        (b"", b"empty key", []),
    ]

    async def go():
        await create(broker.bootstrap, topic_name, partitions=1)
        p = producer(broker.bootstrap, acks=1, compression_type="snappy",
                     max_request_size=2 << 20)
        await p.start()
        try:
            for i, (k, v, h) in enumerate(cases):
                await p.send(topic_name, key=k, value=v, headers=h, partition=0,
                             timestamp_ms=ts + i)
            await p.flush()
        finally:
            await p.stop()
        # Tiny fetch limits: the broker still hands out whole batches, at least one (KIP-74).
        return await consume(broker.bootstrap, topic_name, 1, len(cases),
                             max_partition_fetch_bytes=1024, fetch_max_bytes=1024,
                             isolation_level="read_committed")

    got = run(go())
    assert [(g.key, g.value, list(g.headers), g.timestamp) for g in got] == [
        (k, v, h, ts + i) for i, (k, v, h) in enumerate(cases)
    ]
    assert [g.offset for g in got] == list(range(len(cases)))


@pytest.mark.timeout(30)
def test_idempotent_producer(broker, topic_name):
    async def go():
        await create(broker.bootstrap, topic_name, partitions=1)
        p = producer(broker.bootstrap, enable_idempotence=True)
        await p.start()
        try:
            return await asyncio.wait_for(p.send_and_wait(topic_name, b"v", key=b"k"), 15)
        finally:
            await p.stop()

    assert run(go()).offset == 0


@pytest.mark.timeout(30)
def test_offsets_for_times_and_watermarks(broker, topic_name):
    base = now_ms() - 3_600_000
    records = make_records("aio-times", 300, base_ts=base)
    records = [type(r)(r.key, r.value, r.headers, base + 10 * i) for i, r in enumerate(records)]
    targets = (0, base, base + 5, base + 1500, base + 1505, base + 2990, base + 2991, base + 10**7)

    async def go():
        await create(broker.bootstrap, topic_name)
        p = producer(broker.bootstrap, acks=1, compression_type="zstd")
        await p.start()
        try:
            mds = [await f for f in await send_all(p, topic_name, records)]
        finally:
            await p.stop()
        c = consumer(broker.bootstrap)
        await c.start()
        try:
            tps = [TopicPartition(topic_name, q) for q in range(PARTITIONS)]
            found = [await c.offsets_for_times(dict.fromkeys(tps, t)) for t in targets]
            return mds, found, await c.beginning_offsets(tps), await c.end_offsets(tps)
        finally:
            await c.stop()

    mds, found, beginning, end = run(go())
    by_part: dict[int, list[tuple[int, int]]] = {q: [] for q in range(PARTITIONS)}
    for r, md in zip(records, mds, strict=True):
        by_part[md.partition].append((md.offset, r.timestamp))
    for target, res in zip(targets, found, strict=True):
        want = {TopicPartition(topic_name, q): next(((o, t) for o, t in rows if t >= target), None)
                for q, rows in by_part.items()}
        got = {tp: (v.offset, v.timestamp) if v else None for tp, v in res.items()}
        assert got == want, f"target {target - base:+d} ms"
    assert set(beginning.values()) == {0}
    assert end == {TopicPartition(topic_name, q): len(rows) for q, rows in by_part.items()}


@pytest.mark.timeout(30)
def test_log_append_time_and_rejections(broker, topic_name):
    lat, small = topic_name + "-lat", topic_name + "-small"

    async def go():
        await create(broker.bootstrap, lat, 1, {"message.timestamp.type": "LogAppendTime"})
        await create(broker.bootstrap, topic_name, 1, {"message.timestamp.before.max.ms": "3600000"})
        await create(broker.bootstrap, small, 1, {"max.message.bytes": "10000"})
        p = producer(broker.bootstrap, acks=1, compression_type="gzip")
        await p.start()
        try:
            before = now_ms()
            mds = [await f for f in [await p.send(lat, b"v", key=b"k%d" % i,
                                                  timestamp_ms=1_500_000_000_000)
                                     for i in range(50)]]
            after = now_ms()
            assert all(md.timestamp_type == LOG_APPEND_TIME for md in mds)
            assert all(before - 5 <= md.timestamp <= after + 5 for md in mds), mds[0]
            with pytest.raises(InvalidTimestampError):
                await p.send_and_wait(topic_name, b"old", timestamp_ms=now_ms() - 7_200_000)
            assert (await p.send_and_wait(topic_name, b"fresh")).offset == 0
            with pytest.raises(MessageSizeTooLargeError):
                # max.message.bytes bounds the batch as stored, i.e. after compression.
                await p.send_and_wait(small, os.urandom(50_000))
            assert (await p.send_and_wait(small, b"small")).offset == 0
        finally:
            await p.stop()
        return mds, await consume(broker.bootstrap, lat, 1, 50)

    mds, got = run(go())
    assert len(got) == 50
    assert {g.timestamp_type for g in got} == {LOG_APPEND_TIME}
    assert {g.timestamp for g in got} == {mds[0].timestamp}


@pytest.mark.timeout(30)
def test_long_poll_wakes_on_append(broker, topic_name):
    async def go():
        await create(broker.bootstrap, topic_name, partitions=1)
        c = consumer(broker.bootstrap, fetch_max_wait_ms=5000)
        p = producer(broker.bootstrap, acks=1)
        await c.start()
        await p.start()
        try:
            tp = TopicPartition(topic_name, 0)
            c.assign([tp])
            await c.seek_to_end(tp)
            assert await c.getmany(timeout_ms=300) == {}

            async def produce_later():
                await asyncio.sleep(0.5)
                t = time.monotonic()
                await p.send_and_wait(topic_name, b"wake")
                return t

            task = asyncio.create_task(produce_later())
            got = []
            deadline = time.monotonic() + 15
            while not got and time.monotonic() < deadline:
                got = [m for msgs in (await c.getmany(timeout_ms=500)).values() for m in msgs]
            received = time.monotonic()
            return got, received - await task
        finally:
            await c.stop()
            await p.stop()

    got, latency = run(go())
    assert [m.value for m in got] == [b"wake"]
    assert latency < 2.5, "the parked Fetch was not woken by the append"


@pytest.mark.timeout(30)
def test_admin(broker, topic_name):
    async def go():
        async with Admin(broker.bootstrap) as admin:
            resp = await admin.create_topics([NewTopic(topic_name, 2, 1,
                                                       topic_configs={"retention.ms": "3600000"})])
            assert [tuple(e[:2]) for e in resp.topic_errors] == [(topic_name, 0)]
            resp = await admin.create_topics([NewTopic(topic_name, 1, 1)])
            assert [tuple(e[:2]) for e in resp.topic_errors] == [(topic_name, TOPIC_ALREADY_EXISTS)]
            assert topic_name in await admin.list_topics()
            [t] = await admin.describe_topics([topic_name])
            assert t["error_code"] == 0 and len(t["partitions"]) == 2
            cluster = await admin.describe_cluster()
            assert [b["node_id"] for b in cluster["brokers"]] == [0]
            assert cluster["controller_id"] == 0

            res = ConfigResource(ConfigResourceType.TOPIC, topic_name)
            [d] = await admin.describe_configs([res])
            [r] = d.resources
            assert r[0] == 0, r
            entries = {e[0]: e for e in r[4]}
            assert entries["retention.ms"][1:4] == ("3600000", False, 1)  # TOPIC_CONFIG
            assert entries["cleanup.policy"][1] == "delete"
            assert entries["cleanup.policy"][3] == 5  # DEFAULT_CONFIG

            # AlterConfigs (non-incremental) replaces the whole override set.
            [a] = [x for x in await admin.alter_configs([ConfigResource(
                ConfigResourceType.TOPIC, topic_name, {"segment.ms": "7200000"})]) if x.resources]
            assert [tuple(x[:1]) for x in a.resources] == [(0,)], a
            [d] = await admin.describe_configs([res])
            entries = {e[0]: e for e in d.resources[0][4]}
            assert entries["segment.ms"][1] == "7200000" and entries["segment.ms"][3] == 1
            assert entries["retention.ms"][1] == "604800000" and entries["retention.ms"][3] == 5
            [a] = [x for x in await admin.alter_configs([ConfigResource(
                ConfigResourceType.TOPIC, topic_name, {"retention.ms": "soon"})]) if x.resources]
            assert a.resources[0][0] == INVALID_CONFIG, a

            await admin.create_partitions({topic_name: NewPartitions(4)})
            [t] = await admin.describe_topics([topic_name])
            assert len(t["partitions"]) == 4
            with pytest.raises(InvalidPartitionsError):
                await admin.create_partitions({topic_name: NewPartitions(2)})

            p = producer(broker.bootstrap, acks=1, compression_type="lz4")
            await p.start()
            try:
                for i in range(100):
                    await p.send(topic_name, b"r%d" % i, partition=0)
                await p.flush()
            finally:
                await p.stop()
            tp0 = TopicPartition(topic_name, 0)
            assert await admin.delete_records({tp0: RecordsToDelete(30)}) == {tp0: 30}
            with pytest.raises(OffsetOutOfRangeError):
                await admin.delete_records({tp0: RecordsToDelete(1000)})
            got = await consume(broker.bootstrap, topic_name, 1, 70)
            assert [(g.offset, g.value) for g in got] == [(o, b"r%d" % o) for o in range(30, 100)]

            resp = await admin.delete_topics([topic_name])
            assert [tuple(e[:2]) for e in resp.topic_error_codes] == [(topic_name, 0)]
            assert topic_name not in await admin.list_topics()
            resp = await admin.delete_topics([topic_name])
            assert [tuple(e[:2]) for e in resp.topic_error_codes] == [
                (topic_name, UNKNOWN_TOPIC_OR_PARTITION)]

    run(go())
