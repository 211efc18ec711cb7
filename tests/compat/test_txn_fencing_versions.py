"""A fenced transactional producer of an old protocol version learns it is fenced.

aiokafka 0.14 speaks v0 of every transaction API (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit) and knows no PRODUCER_FENCED (90): its
error table maps 90 to UnknownError. Kafka answers INVALID_PRODUCER_EPOCH (47) to
those versions (``spool.protocol.error_versions``), which aiokafka raises as
``ProducerFenced``. Each case: producer A opens a transaction, producer B starts with
the same transactional.id (a new epoch: A is fenced and its transaction aborted),
then A's next coordinator request gets the version's code. TxnOffsetCommit, which a
client sends only right after its own AddOffsetsToTxn, is checked at every version
with the raw client, as is AddPartitionsToTxn above v1 (PRODUCER_FENCED from v2).
"""

from __future__ import annotations

import asyncio
import gc
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka import TopicPartition as ATopicPartition
from aiokafka.errors import ProducerFenced

from spool.protocol._generated import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from spool.protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient


def _create(bootstrap: str, topic: str) -> None:
    c = RawClient(bootstrap)
    try:
        r = c.request(19, 4, CreateTopicsRequest(
            topics=[CreatableTopic(name=topic, num_partitions=2, replication_factor=1)],
            timeout_ms=10_000))
        assert r.topics[0].error_code == 0
    finally:
        c.close()


async def _fenced_pair(bootstrap: str, topic: str) -> tuple[AIOKafkaProducer, AIOKafkaProducer]:
    """A in a transaction with a record on partition 0, then B with A's transactional.id."""
    tid = f"fence-{topic}"
    a = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    await a.start()
    await a.begin_transaction()
    await a.send_and_wait(topic, b"from-a", partition=0)
    b = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    await b.start()  # InitProducerId: a new epoch fences A
    return a, b


def _run(bootstrap: str, topic: str, step) -> BaseException | None:
    """Run ``step(a)`` after the fencing; the exception A's client raised (None if none)."""
    async def go() -> BaseException | None:
        a, b = await _fenced_pair(bootstrap, topic)
        try:
            await asyncio.wait_for(step(a), 20)
        except ProducerFenced as e:
            return e
        except Exception as e:  # the wrong answer: say which
            return e
        finally:
            await b.stop()
            await a.stop()
        return None

    try:
        return asyncio.run(go())
    finally:
        # aiokafka leaves futures holding ProducerFenced unretrieved: finalize them here, not
        # in a later garbage collection that may fall inside pytest's compile() of a module
        # (CPython 3.11 then fails with "AST constructor recursion depth mismatch")
        gc.collect()


@pytest.mark.timeout(90)
def test_add_partitions_to_txn_v0_fenced(broker, topic_name):
    _create(broker.bootstrap, topic_name)

    async def step(a):  # partition 1 is new to the transaction: AddPartitionsToTxn v0
        await a.send_and_wait(topic_name, b"a-again", partition=1)

    assert isinstance(_run(broker.bootstrap, topic_name, step), ProducerFenced)


@pytest.mark.timeout(90)
def test_add_offsets_to_txn_v0_fenced(broker, topic_name):
    _create(broker.bootstrap, topic_name)

    async def step(a):
        await a.send_offsets_to_transaction({ATopicPartition(topic_name, 0): 3}, f"g-{topic_name}")

    assert isinstance(_run(broker.bootstrap, topic_name, step), ProducerFenced)


@pytest.mark.timeout(90)
def test_end_txn_v0_fenced(broker, topic_name):
    _create(broker.bootstrap, topic_name)

    async def step(a):
        await a.commit_transaction()

    assert isinstance(_run(broker.bootstrap, topic_name, step), ProducerFenced)


def _coordinator_ready(c: RawClient, key: str, key_type: int) -> None:
    for _ in range(100):
        r = c.request(10, 1, FindCoordinatorRequest(key=key, key_type=key_type))
        if r.error_code == 0:
            return
        asyncio.run(asyncio.sleep(0.1))
    raise AssertionError(f"no coordinator for {key}")


def _stale_epoch(c: RawClient, tid: str) -> tuple[int, int]:
    """(producer id, an epoch the coordinator has fenced) for ``tid``."""
    _coordinator_ready(c, tid, 1)
    first = c.request(22, 0, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000))
    assert first.error_code == 0, first
    second = c.request(22, 0, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000))
    assert second.error_code == 0 and second.producer_epoch > first.producer_epoch
    return first.producer_id, first.producer_epoch


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions_to_txn_raw(broker, topic_name, version):
    _create(broker.bootstrap, topic_name)
    tid = f"raw-apt-{uuid.uuid4().hex[:8]}"
    c = RawClient(broker.bootstrap)
    try:
        pid, stale = _stale_epoch(c, tid)
        r = c.request(24, version, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=stale,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic_name, partitions=[0])]))
    finally:
        c.close()
    code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    assert code == (Errors.PRODUCER_FENCED if version >= 2 else Errors.INVALID_PRODUCER_EPOCH)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_txn_offset_commit_raw(broker, topic_name, version):
    """Kafka's TxnOffsetCommit answers a fenced producer INVALID_PRODUCER_EPOCH at every
    version (TxnOffsetCommitResponse's documented errors)."""
    _create(broker.bootstrap, topic_name)
    tid, group = f"raw-toc-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    c = RawClient(broker.bootstrap)
    try:
        pid, stale = _stale_epoch(c, tid)
        _coordinator_ready(c, group, 0)
        r = c.request(28, version, TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=stale,
            topics=[TxnOffsetCommitRequestTopic(name=topic_name, partitions=[
                TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
    finally:
        c.close()
    assert r.topics[0].partitions[0].error_code == Errors.INVALID_PRODUCER_EPOCH
