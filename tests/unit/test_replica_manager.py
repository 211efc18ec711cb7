"""ReplicaManager (spool.replica.manager) in a cluster broker's shape, on real PartitionLogs:
apply_changes (leaders, followers, leadership listeners), the delayed produce (completes on
the HW, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER when leadership goes,
NOT_ENOUGH_REPLICAS_AFTER_APPEND), and ISR changes sent as AlterPartition v3, one in flight
per partition, applied from the controller's answer. The broker around it is a stand-in:
a controller channel that records requests and answers what the test says."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from spool.broker.config import BrokerConfig
from spool.cluster.image import PartitionRegistration
from spool.cluster.local_changes import LocalReplicaChanges, TopicIdPartition
from spool.protocol._generated import AlterPartitionResponse
from spool.protocol._generated import alter_partition_response as apr
from spool.protocol.errors import Errors, KafkaError
from spool.replica.manager import ALTER_RETRY_MS, REPLICA_KEY, ReplicaManager
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

TOPIC_ID = uuid.uuid4()
TP = TopicIdPartition(TOPIC_ID, "t", 0)
ME = 1
LAG_MS = 10_000


class Channel:
    """A controller channel: records AlterPartition requests; answers them when told."""

    def __init__(self) -> None:
        self.requests: list = []
        self.answers: asyncio.Queue = asyncio.Queue()

    async def send(self, api_key, version, request, timeout_s):
        assert (api_key, version) == (56, 3)
        self.requests.append(request)
        return await self.answers.get()


class Broker:
    def __init__(self, tmp_path, min_isr=1) -> None:
        self.node_id = ME
        self.clock = FakeClock()
        self.cluster = SimpleNamespace(kraft=True, inter_broker_listener_name="PLAINTEXT")
        self.config = BrokerConfig.load(None, [f"replica.lag.time.max.ms={LAG_MS}"])
        self.executor = None
        self.logs = {("t", p): PartitionLog(tmp_path / f"t-{p}",
                                            LogConfig(min_insync_replicas=min_isr),
                                            clock=self.clock, hw_follows_leo=False)
                     for p in (0, 1)}
        logs = SimpleNamespace(get=lambda t, p: self.logs.get((t, p)), hw_follows_leo=False)
        self.log = self.logs[("t", 0)]
        self.storage = SimpleNamespace(logs=logs)
        brokers = {b: SimpleNamespace(epoch=100 + b, active=True) for b in (1, 2, 3)}
        self.view = SimpleNamespace(image=SimpleNamespace(brokers=brokers),
                                    partition=lambda t, p: None)
        self.controller_channel = Channel()
        self.woken: list = []

    async def run_blocking(self, fn, *args):
        return fn(*args)

    def notify_append(self, topic, partition):
        self.woken.append((topic, partition))

    def notify_key(self, key):
        self.woken.append(key)


def reg(leader=ME, isr=(1, 2, 3), epoch=5, pepoch=7):
    return PartitionRegistration(replicas=(1, 2, 3), isr=isr, leader=leader,
                                 leader_epoch=epoch, partition_epoch=pepoch)


def changes(leaders=None, followers=None, deletes=()):
    return LocalReplicaChanges(frozenset(deletes), leaders or {}, followers or {})


def manager(tmp_path, **kw):
    broker = Broker(tmp_path, **kw)
    rm = ReplicaManager(broker)
    events = []
    rm.add_leadership_listener(lambda *e: events.append(e))
    return broker, rm, events


def answer(isr, leader_epoch=5, partition_epoch=8, code=0):
    return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=[apr.TopicData(
        topic_id=TOPIC_ID, partitions=[apr.PartitionData(
            partition_index=0, error_code=code, leader_id=ME, leader_epoch=leader_epoch,
            isr=list(isr), leader_recovery_state=0, partition_epoch=partition_epoch)])])


def in_loop(test):
    """Run the async test on a fresh event loop."""
    def run(tmp_path):
        asyncio.run(test(tmp_path))
    run.__name__ = test.__name__
    return run


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


@in_loop
async def test_leadership_follows_the_images_and_listeners_hear_of_it(tmp_path):
    broker, rm, events = manager(tmp_path)
    rm.apply_changes(None, changes(leaders={TP: reg()}))
    part = rm.leader_partition("t", 0)
    assert (part.is_leader, part.leader_epoch, part.topic_id) == (True, 5, TOPIC_ID)
    await settle()  # the epoch's start reaches leader-epoch-checkpoint off the loop
    assert broker.log.leader_epochs.end_offset_for(5, 0) == (5, 0)
    rm.apply_changes(None, changes(leaders={TP: reg(isr=(1, 2), pepoch=8)}))  # ISR only
    rm.apply_changes(None, changes(followers={TP: reg(leader=2, epoch=6, pepoch=9)}))
    assert events == [("t", 0, True, 5), ("t", 0, False, 6)]
    with pytest.raises(KafkaError) as e:
        rm.leader_partition("t", 0)
    assert e.value.code == Errors.NOT_LEADER_OR_FOLLOWER and e.value.leader == 2
    rm.apply_changes(None, changes(deletes=[TP]))
    assert rm.get_partition("t", 0) is None


@in_loop
async def test_delayed_produce_completes_when_the_isr_has_the_batch(tmp_path):
    broker, rm, _ = manager(tmp_path)
    rm.apply_changes(None, changes(leaders={TP: reg()}))
    part = rm.leader_partition("t", 0)
    broker.woken.clear()
    info = rm.append_as_leader(part, make_batch(3), acks=-1, now_ms=broker.clock.now_ms())
    assert (REPLICA_KEY, "t", 0) in broker.woken  # followers' fetches wake on the append
    assert ("t", 0) not in broker.woken  # consumers' do not: the HW did not move
    waiting = asyncio.ensure_future(rm.wait_replicated("t", 0, info.last_offset, 5000))
    await settle()
    rm.follower_fetched(part, 2, 3, broker.clock.now_ms())
    await settle()
    assert not waiting.done()
    rm.follower_fetched(part, 3, 3, broker.clock.now_ms())
    await asyncio.wait_for(waiting, 1)
    assert part.high_watermark == 3 and ("t", 0) in broker.woken


@in_loop
async def test_delayed_produce_times_out_or_loses_leadership(tmp_path):
    broker, rm, _ = manager(tmp_path)
    rm.apply_changes(None, changes(leaders={TP: reg()}))
    part = rm.leader_partition("t", 0)
    info = rm.append_as_leader(part, make_batch(1), acks=-1, now_ms=0)
    with pytest.raises(KafkaError) as e:
        await rm.wait_replicated("t", 0, info.last_offset, 50)
    assert e.value.code == Errors.REQUEST_TIMED_OUT
    waiting = asyncio.ensure_future(rm.wait_replicated("t", 0, info.last_offset, 5000))
    await settle()
    rm.apply_changes(None, changes(followers={TP: reg(leader=2, epoch=6, pepoch=8)}))
    with pytest.raises(KafkaError) as e:
        await asyncio.wait_for(waiting, 1)
    assert e.value.code == Errors.NOT_LEADER_OR_FOLLOWER


@in_loop
async def test_isr_shrink_is_one_alter_partition_and_too_small_an_isr_fails_the_produce(
        tmp_path):
    broker, rm, _ = manager(tmp_path, min_isr=2)
    rm.apply_changes(None, changes(leaders={TP: reg()}))
    part = rm.leader_partition("t", 0)
    info = rm.append_as_leader(part, make_batch(2), acks=-1, now_ms=broker.clock.now_ms())
    waiting = asyncio.ensure_future(rm.wait_replicated("t", 0, info.last_offset, 5000))
    broker.clock.advance(LAG_MS + 1)
    rm.check_isr(broker.clock.now_ms())
    rm.check_isr(broker.clock.now_ms())  # one in flight: no second request
    await settle()
    reqs = broker.controller_channel.requests
    assert len(reqs) == 1
    r = reqs[0]
    p = r.topics[0].partitions[0]
    assert (r.broker_id, r.broker_epoch, r.topics[0].topic_id) == (ME, 101, TOPIC_ID)
    assert (p.leader_epoch, p.partition_epoch) == (5, 7)
    assert [(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs] == [(1, 101)]
    await broker.controller_channel.answers.put(answer([1]))
    with pytest.raises(KafkaError) as e:
        await asyncio.wait_for(waiting, 1)
    assert e.value.code == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert (part.isr, part.partition_epoch, part.high_watermark) == ((1,), 8, 2)
    with pytest.raises(KafkaError) as e:  # and the next acks=-1 append is refused
        rm.append_as_leader(part, make_batch(1), acks=-1, now_ms=broker.clock.now_ms())
    assert e.value.code == Errors.NOT_ENOUGH_REPLICAS


@in_loop
async def test_a_caught_up_follower_is_added_and_a_refusal_changes_nothing(tmp_path):
    broker, rm, _ = manager(tmp_path)
    rm.apply_changes(None, changes(leaders={TP: reg(isr=(1, 2))}))
    part = rm.leader_partition("t", 0)
    rm.append_as_leader(part, make_batch(2), acks=1, now_ms=broker.clock.now_ms())
    rm.follower_fetched(part, 3, 1, broker.clock.now_ms())  # past the HW (0, 2 never fetched)
    await settle()
    reqs = broker.controller_channel.requests
    assert [[s.broker_id for s in r.topics[0].partitions[0].new_isr_with_epochs]
            for r in reqs] == [[1, 2, 3]]
    await broker.controller_channel.answers.put(answer([1, 2], code=Errors.INELIGIBLE_REPLICA))
    await settle()
    assert (part.isr, part.pending_isr, part.partition_epoch) == ((1, 2), None, 7)


@in_loop
async def test_isr_changes_of_many_partitions_go_in_one_alter_partition(tmp_path):
    broker, rm, _ = manager(tmp_path)
    tp1 = TopicIdPartition(TOPIC_ID, "t", 1)
    rm.apply_changes(None, changes(leaders={TP: reg(), tp1: reg()}))
    parts = [rm.leader_partition("t", p) for p in (0, 1)]
    for part in parts:
        rm.append_as_leader(part, make_batch(1), acks=1, now_ms=broker.clock.now_ms())
    broker.clock.advance(LAG_MS + 1)
    rm.check_isr(broker.clock.now_ms())  # followers 2 and 3 never fetched: both shrink
    await settle()
    reqs = broker.controller_channel.requests
    assert [[(p.partition_index, [s.broker_id for s in p.new_isr_with_epochs])
             for p in t.partitions] for r in reqs for t in r.topics] == [[(0, [1]), (1, [1])]]
    resp = answer([1])
    resp.topics[0].partitions.append(apr.PartitionData(
        partition_index=1, error_code=Errors.INVALID_UPDATE_VERSION))
    await broker.controller_channel.answers.put(resp)
    await settle()
    # INVALID_UPDATE_VERSION: partition 1 keeps its change until the metadata settles it
    assert [(p.isr, p.pending_isr) for p in parts] == [((1,), None), ((1, 2, 3), (1,))]
    rm.apply_changes(None, changes(leaders={tp1: reg(isr=(1, 2, 3), pepoch=8)}))
    assert (parts[1].isr, parts[1].pending_isr) == ((1, 2, 3), None)


@in_loop
async def test_an_unanswered_isr_change_stays_pending_and_is_sent_again(tmp_path):
    broker, rm, _ = manager(tmp_path)
    rm.apply_changes(None, changes(leaders={TP: reg(isr=(1, 2))}))
    part = rm.leader_partition("t", 0)
    rm.append_as_leader(part, make_batch(2), acks=1, now_ms=broker.clock.now_ms())
    rm.follower_fetched(part, 3, 1, broker.clock.now_ms())
    await settle()
    await broker.controller_channel.answers.put(answer([1, 2, 3], code=Errors.NOT_CONTROLLER))
    await settle()
    # the controller may have applied it: the HW still waits for 3
    assert (part.isr, part.pending_isr, part.maximal_isr) == ((1, 2), (1, 2, 3), (1, 2, 3))
    await asyncio.sleep(ALTER_RETRY_MS / 1000 + 0.2)
    reqs = broker.controller_channel.requests
    assert [([s.broker_id for s in r.topics[0].partitions[0].new_isr_with_epochs],
             r.topics[0].partitions[0].partition_epoch) for r in reqs] == [
        ([1, 2, 3], 7), ([1, 2, 3], 7)]
    await broker.controller_channel.answers.put(answer([1, 2, 3]))
    await settle()
    assert (part.isr, part.pending_isr, part.partition_epoch) == ((1, 2, 3), None, 8)


@in_loop
async def test_a_late_answer_to_a_settled_change_leaves_the_newer_one_pending(tmp_path):
    broker, rm, _ = manager(tmp_path)
    rm.apply_changes(None, changes(leaders={TP: reg(isr=(1, 2))}))
    part = rm.leader_partition("t", 0)
    rm.append_as_leader(part, make_batch(2), acks=1, now_ms=broker.clock.now_ms())
    rm.follower_fetched(part, 3, 1, broker.clock.now_ms())  # proposes [1, 2, 3] at 7
    await settle()
    rm.apply_changes(None, changes(leaders={TP: reg(isr=(1, 2, 3), pepoch=8)}))  # settled
    part.begin_isr_change((1, 3))  # a newer change, as a shrink would propose
    await broker.controller_channel.answers.put(answer([1, 2], partition_epoch=8,
                                                       code=Errors.INELIGIBLE_REPLICA))
    await settle()
    assert (part.isr, part.pending_isr, part.partition_epoch) == ((1, 2, 3), (1, 3), 8)
