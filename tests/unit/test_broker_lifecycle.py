"""BrokerLifecycleManager against the real QuorumController (its state machine behind an
in-process channel: each request's records commit at once, into the controller and into
the broker's MetadataLoader): register, catch up, unfence, controlled shutdown."""

from __future__ import annotations

import asyncio

import pytest

from spool.broker.controller_channel import ControllerChannel, ControllerUnavailable
from spool.broker.lifecycle import BrokerLifecycleManager, BrokerState
from spool.broker.producer_ids import ControllerProducerIdManager
from spool.cluster.loader import MetadataLoader
from spool.protocol._generated import CreateTopicsRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol.errors import Errors, KafkaError
from tests.helpers.inprocess_controller import InProcessController


def manager(channel, loader, node, *, leader=None):
    return BrokerLifecycleManager(
        channel, node_id=node, cluster_id="c1",
        listeners=[("PLAINTEXT", "127.0.0.1", 9090 + node, 0)], rack=f"r{node}",
        metadata_offset=lambda: loader.offset, heartbeat_interval_ms=5)


async def within(fut, s=10):
    return await asyncio.wait_for(asyncio.shield(fut), s)


def test_register_catch_up_unfence_then_controlled_shutdown():
    async def main():
        loader = MetadataLoader("c1")
        ctrl = InProcessController(loader)
        leader = {"id": -1}  # no controller known at first: the manager keeps trying
        channel = ControllerChannel({7: ("127.0.0.1", 1)}, lambda: leader["id"],
                                    lambda host, port: ctrl)
        b1, b2 = manager(channel, loader, 1), manager(channel, loader, 2)
        b1.start()
        b2.start()
        await asyncio.sleep(0.05)
        assert b1.state is BrokerState.STARTING and ctrl.requests == []
        leader["id"] = 7
        await within(b1.initial_catch_up)
        await within(b2.initial_catch_up)
        reg = loader.image.brokers[1]
        assert reg.fenced and reg.rack == "r1" and reg.listener("PLAINTEXT").port == 9091
        assert b1.state is BrokerState.RECOVERY  # not unfenced before it says it is ready
        b1.set_ready_to_unfence()
        b2.set_ready_to_unfence()
        await within(b1.initial_unfenced)
        await within(b2.initial_unfenced)
        assert not loader.image.brokers[1].fenced and b1.state is BrokerState.RUNNING
        await ctrl.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="t", num_partitions=4, replication_factor=2, assignments=[], configs=[])],
            timeout_ms=1000, validate_only=False), 7)
        led_by_1 = [p for p in loader.image.topic("t").partitions.values() if p.leader == 1]
        assert led_by_1
        b1.begin_controlled_shutdown()
        await within(b1.controlled_shutdown_finished)
        # the controller moved every leadership away before letting broker 1 stop
        assert all(p.leader == 2 for p in loader.image.topic("t").partitions.values())
        assert loader.image.brokers[1].fenced
        await b1.stop()
        await b2.stop()

    asyncio.run(main())


def test_a_heartbeat_the_controller_does_not_know_registers_again():
    async def main():
        loader = MetadataLoader("c1")
        ctrl = InProcessController(loader)
        channel = ControllerChannel({1: ("h", 1)}, lambda: 1, lambda host, port: ctrl)
        b = manager(channel, loader, 3)
        b.start()
        await within(b.initial_catch_up)
        epoch = b.broker_epoch
        b.broker_epoch = epoch + 100  # as if the controller's log had lost it
        while ctrl.requests.count("BrokerRegistrationRequest") < 2:
            await asyncio.sleep(0.005)
        while b.broker_epoch < 0:
            await asyncio.sleep(0.005)
        assert b.broker_epoch == epoch  # same incarnation: the same registration
        await b.stop()

    asyncio.run(main())


def test_no_controller_known_is_unavailable():
    async def main():
        channel = ControllerChannel({1: ("h", 1)}, lambda: -1, lambda host, port: None)
        try:
            await channel.send(63, 1, None, 1)
        except ControllerUnavailable as e:
            return str(e)

    assert "no active controller" in asyncio.run(main())


def test_producer_ids_come_in_blocks_from_the_controller_unique_across_brokers():
    async def main():
        loader = MetadataLoader("c1")
        ctrl = InProcessController(loader)
        channel = ControllerChannel({1: ("h", 1)}, lambda: 1, lambda host, port: ctrl)
        managers, ids = [], []
        for node in (1, 2):
            b = manager(channel, loader, node)
            b.start()
            await within(b.initial_catch_up)
            managers.append((b, ControllerProducerIdManager(channel, node,
                                                            lambda b=b: b.broker_epoch)))
        for _, pids in managers:
            with pytest.raises(KafkaError) as e:  # no block yet: retriable, one is asked for
                pids.next_id()
            assert e.value.code == Errors.COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.sleep(0)
        while any(p._prefetched is None for _, p in managers):
            await asyncio.sleep(0.005)
        for _ in range(2500):  # across block boundaries: the next block is prefetched
            for _, pids in managers:
                try:
                    ids.append(pids.next_id())
                except KafkaError:
                    await asyncio.sleep(0.01)
        assert len(ids) > 2000 and len(set(ids)) == len(ids)
        for b, _ in managers:
            await b.stop()

    asyncio.run(main())
