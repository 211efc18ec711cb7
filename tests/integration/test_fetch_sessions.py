"""Fetch sessions (KIP-227) on a real broker, through the raw protocol (spool.net's
NodeClient) and kafka-python (which uses them): a full request opens a session; an
incremental one names only what changed and is answered only with what changed (records, a
new high watermark or log start, an error, until it goes), and its long poll wakes on an
append to any partition of the session; forgotten partitions leave it; a wrong epoch, an
unknown session, a session asked with the other kind of topic naming are top-level errors;
FINAL closes a session; a full cache answers session id 0 unless a follower's session may
evict a consumer's. confluent-kafka (no sessions) is covered by every other consume test."""

from __future__ import annotations

import asyncio
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.net.client import NodeClient
from spool.protocol._generated import FetchRequest, MetadataRequest, ProduceRequest
from spool.protocol._generated.fetch_request import (
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
)
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from tests.helpers.broker_proc import BrokerProcess

pytestmark = pytest.mark.timeout(120)

NAMES, IDS = 12, 13  # Fetch versions: topics by name, by ID


def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(10)


def values(records) -> list[bytes]:
    buf = bytes(records or b"")
    return [bytes(r.value) for pos, _ in iter_batches(buf) for r in iter_records(buf, pos)]


class Client:
    """One NodeClient and what a fetching client knows: the topic, its ID, the session."""

    def __init__(self, port: int, topic: str, version: int) -> None:
        self.node = NodeClient("127.0.0.1", port, client_id="sessions-test")
        self.topic = topic
        self.version = version
        self.topic_id = uuid.UUID(int=0)

    async def __aenter__(self) -> Client:
        md = await self.node.request(MetadataRequest(
            topics=[MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False), 12)
        self.topic_id = md.topics[0].topic_id
        return self

    async def __aexit__(self, *exc) -> None:
        await self.node.close()

    async def produce(self, partition: int, *vals: bytes) -> None:
        b = BatchBuilder()
        for v in vals:
            b.append(None, v, timestamp=1_700_000_000_000)
        resp = await self.node.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=self.topic, partition_data=[
                PartitionProduceData(index=partition, records=b.build())])]), 9)
        assert resp.responses[0].partition_responses[0].error_code == 0

    async def fetch(self, session_id: int, epoch: int, offsets: dict[int, int],
                    forget: tuple[int, ...] = (), *, max_wait_ms: int = 0, min_bytes: int = 0,
                    replica_id: int = -1, version: int | None = None):
        parts = [FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                 for p, o in offsets.items()]
        req = FetchRequest(
            replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
            max_bytes=1 << 20, isolation_level=0, session_id=session_id, session_epoch=epoch,
            topics=[FetchTopic(topic=self.topic, topic_id=self.topic_id, partitions=parts)]
            if parts else [],
            forgotten_topics_data=[ForgottenTopic(topic=self.topic, topic_id=self.topic_id,
                                                  partitions=list(forget))] if forget else [])
        return await self.node.request(req, version or self.version)

    def answered(self, resp) -> dict[int, tuple[int, int, list[bytes]]]:
        """{partition: (error, high watermark, values)} of a response of this topic."""
        out = {}
        for t in resp.responses:
            assert (t.topic_id if self.version >= IDS else t.topic) == (
                self.topic_id if self.version >= IDS else self.topic)
            for p in t.partitions:
                out[p.partition_index] = (p.error_code, p.high_watermark, values(p.records))
        return out


@pytest.mark.parametrize("version", [NAMES, IDS])
def test_an_incremental_fetch_answers_only_what_changed(broker, topic_name, version):
    create(broker.bootstrap, topic_name, 4)

    async def go():
        async with Client(broker.port, topic_name, version) as c:
            await c.produce(0, b"a")
            await c.produce(1, b"b")
            full = await c.fetch(0, 0, {0: 0, 1: 0, 2: 0, 3: 0})
            sid = full.session_id
            assert (full.error_code, sid != 0) == (0, True)
            assert c.answered(full) == {0: (0, 1, [b"a"]), 1: (0, 1, [b"b"]),
                                        2: (0, 0, []), 3: (0, 0, [])}
            # the new positions of p0 and p1, nothing new anywhere: an empty answer
            r1 = await c.fetch(sid, 1, {0: 1, 1: 1})
            assert (r1.error_code, r1.session_id, c.answered(r1)) == (0, sid, {})
            # an append to p2, named in no request since the full one, wakes the long poll
            waiting = asyncio.ensure_future(c.fetch(sid, 2, {}, max_wait_ms=20_000,
                                                    min_bytes=1))
            await asyncio.sleep(0.3)
            await c.produce(2, b"c")
            r2 = await waiting
            assert (r2.session_id, c.answered(r2)) == (sid, {2: (0, 1, [b"c"])})
            r3 = await c.fetch(sid, 3, {2: 1})
            assert c.answered(r3) == {}
            # the session still fetches p0 at its new offset
            await c.produce(0, b"d")
            r4 = await c.fetch(sid, 4, {})
            assert c.answered(r4) == {0: (0, 2, [b"d"])}

    asyncio.run(go())


@pytest.mark.parametrize("version", [NAMES, IDS])
def test_forgotten_partitions_leave_the_session(broker, topic_name, version):
    create(broker.bootstrap, topic_name, 2)

    async def go():
        async with Client(broker.port, topic_name, version) as c:
            full = await c.fetch(0, 0, {0: 0, 1: 0})
            sid = full.session_id
            assert c.answered(full) == {0: (0, 0, []), 1: (0, 0, [])}
            r1 = await c.fetch(sid, 1, {}, forget=(1,))
            assert c.answered(r1) == {}
            await c.produce(1, b"x")
            await c.produce(0, b"y")
            r2 = await c.fetch(sid, 2, {})
            assert c.answered(r2) == {0: (0, 1, [b"y"])}
            # named again: back in the session, answered with what it has (and p0, read
            # from where the session has it, would send "y" again: its new offset)
            r3 = await c.fetch(sid, 3, {1: 0, 0: 1})
            assert c.answered(r3) == {1: (0, 1, [b"x"])}
            # every partition forgotten: the session closes, the answer is sessionless
            r4 = await c.fetch(sid, 4, {}, forget=(0, 1))
            assert (r4.error_code, r4.session_id, c.answered(r4)) == (0, 0, {})
            r5 = await c.fetch(sid, 5, {})
            assert r5.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND

    asyncio.run(go())


def test_an_error_is_answered_until_it_goes(broker, topic_name):
    create(broker.bootstrap, topic_name, 1)

    async def go():
        async with Client(broker.port, topic_name, IDS) as c:
            await c.produce(0, b"a")
            sid = (await c.fetch(0, 0, {0: 1})).session_id
            r1 = await c.fetch(sid, 1, {0: 5})  # past the log end
            assert c.answered(r1) == {0: (Errors.OFFSET_OUT_OF_RANGE, -1, [])}
            r2 = await c.fetch(sid, 2, {})  # nothing changed: the error is answered again
            assert c.answered(r2) == {0: (Errors.OFFSET_OUT_OF_RANGE, -1, [])}
            r3 = await c.fetch(sid, 3, {0: 1})  # the error gone: answered once more
            assert c.answered(r3) == {0: (0, 1, [])}
            r4 = await c.fetch(sid, 4, {})
            assert c.answered(r4) == {}

    asyncio.run(go())


def test_session_errors_epochs_and_closing(broker, topic_name):
    create(broker.bootstrap, topic_name, 1)

    async def go():
        async with Client(broker.port, topic_name, NAMES) as c:
            sid = (await c.fetch(0, 0, {0: 0})).session_id
            assert sid != 0
            unknown = await c.fetch(sid ^ 0x5A5A5A, 1, {})
            assert (unknown.error_code, unknown.session_id, unknown.responses) == (
                Errors.FETCH_SESSION_ID_NOT_FOUND, 0, [])
            stale = await c.fetch(sid, 2, {})  # the session expects epoch 1
            assert (stale.error_code, stale.session_id, stale.responses) == (
                Errors.INVALID_FETCH_SESSION_EPOCH, 0, [])
            ok = await c.fetch(sid, 1, {})  # the error did not end the session
            assert (ok.error_code, ok.session_id) == (0, sid)
            # made with names (v12): asked by topic ID (v13) is FETCH_SESSION_TOPIC_ID_ERROR
            other = await c.fetch(sid, 2, {}, version=IDS)
            assert (other.error_code, other.responses) == (Errors.FETCH_SESSION_TOPIC_ID_ERROR,
                                                           [])
            # FINAL closes the session; this answer is a sessionless one
            await c.produce(0, b"z")
            final = await c.fetch(sid, -1, {0: 0})
            assert (final.error_code, final.session_id, c.answered(final)) == (
                0, 0, {0: (0, 1, [b"z"])})
            gone = await c.fetch(sid, 2, {})
            assert gone.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND
            # a full request with a session id replaces that session by a new one
            sid2 = (await c.fetch(0, 0, {0: 1})).session_id
            sid3 = (await c.fetch(sid2, 0, {0: 1})).session_id
            assert sid3 not in (0, sid2)
            assert (await c.fetch(sid2, 1, {})).error_code == Errors.FETCH_SESSION_ID_NOT_FOUND
            assert (await c.fetch(sid3, 1, {})).error_code == 0

    asyncio.run(go())


def test_a_full_cache_answers_session_id_0_and_a_follower_may_evict(tmp_path, topic_name):
    b = BrokerProcess(tmp_path / "data", {"max.incremental.fetch.session.cache.slots": "1"})
    try:
        b.start()
        create(b.bootstrap, topic_name, 1)

        async def go():
            async with Client(b.port, topic_name, IDS) as c:
                first = (await c.fetch(0, 0, {0: 0})).session_id
                assert first != 0
                # full, young, not a follower's: no room for another consumer
                second = await c.fetch(0, 0, {0: 0})
                assert (second.error_code, second.session_id, c.answered(second)) == (
                    0, 0, {0: (0, 0, [])})
                assert (await c.fetch(first, 1, {})).error_code == 0
                # a follower's session is worth more than a consumer's: it takes the slot
                follower = await c.fetch(0, 0, {0: 0}, replica_id=7)
                assert follower.session_id not in (0, first)
                assert (await c.fetch(first, 2, {})).error_code == (
                    Errors.FETCH_SESSION_ID_NOT_FOUND)
                # and no consumer's session evicts the follower's
                assert (await c.fetch(0, 0, {0: 0})).session_id == 0
                assert (await c.fetch(follower.session_id, 1, {}, replica_id=7)
                        ).error_code == 0

        asyncio.run(go())
    finally:
        b.stop()


def test_no_sessions_when_the_cache_has_no_slots(tmp_path, topic_name):
    b = BrokerProcess(tmp_path / "data", {"max.incremental.fetch.session.cache.slots": "0"})
    try:
        b.start()
        create(b.bootstrap, topic_name, 1)

        async def go():
            async with Client(b.port, topic_name, NAMES) as c:
                full = await c.fetch(0, 0, {0: 0})
                assert (full.error_code, full.session_id, c.answered(full)) == (
                    0, 0, {0: (0, 0, [])})

        asyncio.run(go())
    finally:
        b.stop()


def test_kafka_python_reads_every_record_of_many_partitions_through_a_session(
        broker, topic_name):
    from kafka import KafkaConsumer, TopicPartition

    partitions, per_partition = 40, 50
    create(broker.bootstrap, topic_name, partitions)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    expected = set()
    for i in range(per_partition):
        for part in range(partitions):
            v = f"{part}-{i}".encode()
            p.produce(topic_name, v, partition=part)
            expected.add(v)
    assert p.flush(30) == 0

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=512)  # several rounds per partition
    try:
        consumer.assign([TopicPartition(topic_name, i) for i in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        sessions = [h.next_metadata.session_id
                    for h in consumer._fetcher._session_handlers.values()]
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected)  # every record, once
    assert sessions and all(s != 0 for s in sessions)  # the broker kept its session


def test_a_replica_fetcher_follows_many_partitions_in_an_incremental_session(
        broker, topic_name, tmp_path):
    """The follower side (spool.replica.fetch_session): a fetcher following 30 partitions
    (as replica id -1: a single node answers a non-replica's follower fetch with
    NOT_LEADER_OR_FOLLOWER) keeps one session through rounds of appends to a few of them,
    and ends with each log byte-identical to the leader's and its high watermark."""
    from spool.cluster.image import PartitionRegistration
    from spool.replica.fetcher import FetchConfig, ReplicaFetcherManager
    from spool.replica.partition import Partition
    from spool.storage.log import PartitionLog

    n = 30
    create(broker.bootstrap, topic_name, n)
    parts = []
    for i in range(n):
        log = PartitionLog(tmp_path / "follower" / f"{topic_name}-{i}", hw_follows_leo=False)
        part = Partition(topic_name, i, log, node_id=1)
        part.make_follower(PartitionRegistration(replicas=(0, 1), isr=(0, 1), leader=0,
                                                 leader_epoch=0))
        parts.append(part)
    sent: dict[int, list[bytes]] = {i: [] for i in range(n)}

    async def go():
        fm = ReplicaFetcherManager(-1, FetchConfig(wait_max_ms=100, backoff_ms=100),
                                   lambda node: ("127.0.0.1", broker.port), lambda p: None)
        fm.add(parts)
        try:
            async with Client(broker.port, topic_name, NAMES) as c:
                for rnd in range(6):
                    for i in (rnd, rnd + 7, 29 - rnd):
                        v = f"{rnd}-{i}".encode()
                        await c.produce(i, v)
                        sent[i].append(v)
                    deadline = time.monotonic() + 30
                    while any(p.log_end_offset != len(sent[p.partition]) or
                              p.high_watermark != len(sent[p.partition]) for p in parts):
                        assert time.monotonic() < deadline, "the follower did not catch up"
                        await asyncio.sleep(0.05)
            [fetcher] = fm.fetchers.values()
            session = fetcher._session
            assert session.session_id != 0 and session.epoch > 6  # incremental throughout
            assert len(session.session) == n
        finally:
            await fm.shutdown()

    asyncio.run(go())
    for p in parts:
        got = [bytes(r.value) for b in p.log.iter_batches()
               for r in iter_records(bytes(b), 0)]
        assert got == sent[p.partition], p.partition
        p.log.close()


def test_the_session_cache_metrics_of_a_consumer_and_an_eviction(tmp_path, topic_name):
    """kafka_server_fetchsessioncache_* on the metrics endpoint: kafka-python's session over
    3 partitions is one session of 3 partitions; a follower's session takes the only slot
    from it: one eviction, and the follower's 1 partition cached."""
    from kafka import KafkaConsumer, TopicPartition
    from prometheus_client.parser import text_string_to_metric_families

    b = BrokerProcess(tmp_path / "data", {"max.incremental.fetch.session.cache.slots": "1",
                                          "metrics.listeners": "http://127.0.0.1:0"})

    def cache_metrics() -> tuple[float, float, float]:
        with urllib.request.urlopen(f"{b.http_urls['metrics']}/metrics", timeout=10) as r:
            found = {s.name: s.value for f in text_string_to_metric_families(r.read().decode())
                     for s in f.samples if s.name.startswith("kafka_server_fetchsessioncache_")}
        p = "kafka_server_fetchsessioncache_"
        return (found[p + "numincrementalfetchsessions"],
                found[p + "numincrementalfetchpartitionscached"],
                found[p + "incrementalfetchsessionevictions_total"])

    try:
        b.start()
        create(b.bootstrap, topic_name, 3)
        assert cache_metrics() == (0, 0, 0)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for part in range(3):
            p.produce(topic_name, b"v", partition=part)
        assert p.flush(30) == 0
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, fetch_max_wait_ms=100)
        try:
            consumer.assign([TopicPartition(topic_name, i) for i in range(3)])
            got = 0
            deadline = time.monotonic() + 30
            while got < 3 and time.monotonic() < deadline:
                got += sum(len(rs) for rs in consumer.poll(timeout_ms=500).values())
            assert got == 3
            assert cache_metrics() == (1, 3, 0)

            async def follower_fetch():
                async with Client(b.port, topic_name, IDS) as c:
                    return (await c.fetch(0, 0, {0: 0}, replica_id=7)).session_id

            assert asyncio.run(follower_fetch()) != 0
            assert cache_metrics() == (1, 1, 1)
        finally:
            consumer.close()
    finally:
        b.stop()
