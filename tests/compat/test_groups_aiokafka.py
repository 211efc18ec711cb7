"""aiokafka consumer groups against a real broker: range, roundrobin, sticky.

Two members in one event loop split the partitions and consume every record
once; after a member leaves, the other takes everything and resumes from the
committed offsets; commits with metadata round-trip.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.timeout(90)
PARTITIONS = 4
N = 400


async def _setup(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await p.start()
    try:
        for i in range(N):
            await p.send(topic, key=str(i).encode(), value=b"v%d" % i)
        await p.flush()
    finally:
        await p.stop()


def _member(bootstrap: str, topic: str, group: str, assignor) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
        partition_assignment_strategy=[assignor],
    )


async def _consume(c: AIOKafkaConsumer, seen: set, stop: asyncio.Event) -> None:
    while not stop.is_set():
        batches = await c.getmany(timeout_ms=200)
        for records in batches.values():
            seen.update(r.value for r in records)
        if batches:
            await c.commit()


async def _wait(cond, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("assignor", [RangePartitionAssignor, RoundRobinPartitionAssignor,
                                      StickyPartitionAssignor], ids=lambda a: a.name)
def test_two_members_split_then_one_takes_over(broker, topic_name, assignor):
    async def go():
        await _setup(broker.bootstrap, topic_name)
        group = f"g-{topic_name}"
        a = _member(broker.bootstrap, topic_name, group, assignor)
        b = _member(broker.bootstrap, topic_name, group, assignor)
        await a.start()
        await b.start()
        seen_a, seen_b, stop_a, stop_b = set(), set(), asyncio.Event(), asyncio.Event()
        ta = asyncio.create_task(_consume(a, seen_a, stop_a))
        tb = asyncio.create_task(_consume(b, seen_b, stop_b))
        try:
            await _wait(lambda: len(a.assignment()) == len(b.assignment()) == PARTITIONS // 2,
                        60, "two partitions each")
            assert not a.assignment() & b.assignment()
            await _wait(lambda: len(seen_a | seen_b) == N, 30, "every record")
            stop_b.set()
            await tb
            await b.stop()  # LeaveGroup: a takes all four
            await _wait(lambda: len(a.assignment()) == PARTITIONS, 30, "a to own everything")
            committed = [await a.committed(TopicPartition(topic_name, q)) for q in range(PARTITIONS)]
            assert sum(committed) == N
        finally:
            stop_a.set()
            await ta
            await a.stop()

    asyncio.run(go())


def test_commit_with_metadata_round_trips(broker, topic_name):
    async def go():
        await _setup(broker.bootstrap, topic_name)
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                             enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic_name, 2)
            c.assign([tp])
            await c.commit({tp: OffsetAndMetadata(17, "aio-meta")})
            assert await c.committed(tp) == 17
            assert await c.committed(TopicPartition(topic_name, 0)) is None
        finally:
            await c.stop()

    asyncio.run(go())
