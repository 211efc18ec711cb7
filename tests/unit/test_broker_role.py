"""BrokerRole: two brokers join a cluster (the real QuorumController behind an in-process
channel), are unfenced only once their local logs exist, and leave by controlled shutdown."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spool.broker.broker_role import BrokerRole
from spool.broker.controller_channel import ControllerChannel
from spool.cluster.loader import MetadataLoader
from spool.protocol._generated import CreateTopicsRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.storage.manager import LogManager
from tests.helpers.inprocess_controller import InProcessController


class Loaders:
    """One committed log, one loader per broker (each follows the same entries)."""

    def __init__(self, n):
        self.loaders = [MetadataLoader("c1") for _ in range(n)]

    def handle_commit(self, entries):
        for loader in self.loaders:
            loader.handle_commit(entries)


def test_two_brokers_join_serve_and_leave(tmp_path):
    async def main():
        fan = Loaders(2)
        ctrl = InProcessController(fan)
        channel = ControllerChannel({9: ("127.0.0.1", 1)}, lambda: 9, lambda h, p: ctrl)

        async def run_blocking(fn, *args):
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

        brokers, roles = [], []
        for node, loader in zip((1, 2), fan.loaders, strict=True):
            logs = LogManager([tmp_path / str(node)])
            b = SimpleNamespace(node_id=node, view=None, storage=SimpleNamespace(logs=logs),
                                run_blocking=run_blocking, ready_for_clients=asyncio.Event(),
                                controller_channel=channel,
                                leadership_changed=lambda *a: None,
                                controller_reachable=channel.reachable)
            brokers.append(b)
            roles.append(BrokerRole(b, loader, channel, cluster_id="c1",
                                    listeners=[("PLAINTEXT", "127.0.0.1", 9090 + node)],
                                    rack=f"rack{node}", heartbeat_interval_ms=5))
        await asyncio.wait_for(asyncio.gather(*(r.start() for r in roles)), 10)
        assert all(b.ready_for_clients.is_set() for b in brokers)  # clients served from now
        view = brokers[0].view
        assert [(b.node_id, b.port, b.rack) for b in view.brokers()] == [
            (1, 9091, "rack1"), (2, 9092, "rack2")]
        await ctrl.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="t", num_partitions=4, replication_factor=2, assignments=[], configs=[])],
            timeout_ms=1000, validate_only=False), 7)
        for b, role in zip(brokers, roles, strict=True):
            await role.publisher.wait_applied(ctrl.next_offset - 1)
            assert sorted(b.storage.logs.partitions()) == [("t", p) for p in range(4)]
        assert await roles[0].shutdown(10)
        t = brokers[1].view.topic("t")
        assert all(p.leader == 2 for p in t.partitions)  # moved before broker 1 stopped
        assert [b.node_id for b in brokers[1].view.brokers()] == [2]
        assert await roles[1].shutdown(10)  # the last one: nothing left to move
        for b in brokers:
            b.storage.logs.shutdown()

    asyncio.run(main())
