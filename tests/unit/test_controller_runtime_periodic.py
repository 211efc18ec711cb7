"""The active controller's periodic writes (``ControllerRuntime``) over a single-voter
``RaftDriver`` on disk, with a fake clock: leader balancing every
``leader.imbalance.check.interval.seconds`` (when ``auto.leader.rebalance.enable``), unclean
elections for topics that allow them every ``unclean.leader.election.interval.ms``; neither
runs before its interval has passed."""

from __future__ import annotations

import asyncio
import functools
import uuid
from concurrent.futures import ThreadPoolExecutor

from spool.broker.controller_runtime import ControllerRuntime
from spool.broker.raft_driver import RaftDriver
from spool.cluster.image import Endpoint
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.cluster.raft.config import RaftConfig
from spool.cluster.raft.disk import DiskRaftLog, FileQuorumStateStore
from spool.protocol._generated import IncrementalAlterConfigsRequest, PartitionChangeRecord
from spool.protocol._generated import incremental_alter_configs_request as iacq
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from spool.util.clock import FakeClock

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"


async def started(tmp, clock, config: ControllerConfig):
    pool = ThreadPoolExecutor(2)

    async def run_blocking(fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(
            pool, functools.partial(fn, *args, **kwargs))

    driver = RaftDriver(1, {1: ("127.0.0.1", 9)}, DiskRaftLog(tmp, clock=clock),
                        FileQuorumStateStore(tmp), RaftConfig(election_timeout_ms=50),
                        run_blocking, clock=clock)
    runtime = ControllerRuntime(driver, config, cluster_id=CLUSTER_ID)
    await driver.start()
    for _ in range(500):
        if runtime.active:
            return driver, runtime, pool
        clock.advance(20)
        await asyncio.sleep(0.01)
    raise AssertionError("never active")


async def eventually(check, what: str) -> None:
    for _ in range(300):  # the tick runs every 0.5 s (real time)
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


def test_balancing_and_unclean_elections_run_at_their_intervals(tmp_path):
    async def main():
        clock = FakeClock(1_000_000)
        config = ControllerConfig(broker_session_timeout_ms=10**9,
                                  leader_imbalance_check_interval_ms=10_000,
                                  unclean_leader_election_interval_ms=20_000)
        driver, rt, pool = await started(tmp_path, clock, config)

        async def write(fn):
            return await rt.write(lambda c, offset, now: fn(c, offset, now))

        for b in (1, 2, 3):
            epoch = (await write(lambda c, offset, now, b=b: c.register_broker(
                broker_id=b, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=b),
                listeners=[Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b, 0)],
                features=[("metadata.version", 1, 14)], next_offset=offset,
                now_ms=now))).broker_epoch
            await write(lambda c, offset, now, b=b, epoch=epoch: c.heartbeat(
                broker_id=b, broker_epoch=epoch, want_fence=False, want_shutdown=False,
                current_metadata_offset=offset, now_ms=now))
        await write(lambda c, _o, _n: c.create_topics(CreateTopicsRequest(topics=[
            CreatableTopic(name=n, num_partitions=-1, replication_factor=-1, configs=[],
                           assignments=[CreatableReplicaAssignment(partition_index=0,
                                                                   broker_ids=r)])
            for n, r in (("t", [2, 3]), ("u", [1, 2]))], timeout_ms=1, validate_only=False)))
        img = rt.controller.image
        t, u = img.topic("t").topic_id, img.topic("u").topic_id
        # t is led by 3 although 2 (its preferred replica) is in sync; u's only in-sync
        # replica is broker 1, which is then fenced: u has no leader
        await write(lambda c, _o, _n: ControllerResult([
            PartitionChangeRecord(topic_id=t, partition_id=0, leader=3),
            PartitionChangeRecord(topic_id=u, partition_id=0, isr=[1])], None))
        b1 = rt.controller.image.brokers[1].epoch
        await write(lambda c, offset, now: c.heartbeat(
            broker_id=1, broker_epoch=b1, want_fence=True, want_shutdown=False,
            current_metadata_offset=offset, now_ms=now))
        await write(lambda c, _o, _n: c.incremental_alter_configs(
            IncrementalAlterConfigsRequest(validate_only=False, resources=[
                iacq.AlterConfigsResource(resource_type=2, resource_name="u", configs=[
                    iacq.AlterableConfig(name="unclean.leader.election.enable",
                                         config_operation=0, value="true")])])))

        def leaders():
            img = rt.controller.image
            return img.partition(t, 0).leader, img.partition(u, 0).leader

        assert leaders() == (3, -1)
        await asyncio.sleep(1.2)  # ticks run; no interval has passed yet
        assert leaders() == (3, -1)
        clock.advance(10_000)
        await eventually(lambda: leaders()[0] == 2, "t balanced")
        assert leaders() == (2, -1)
        clock.advance(10_000)
        await eventually(lambda: leaders()[1] == 2, "u gets an unclean leader")
        assert rt.controller.image.partition(u, 0).isr == (2,)
        await rt.shutdown()
        await driver.shutdown()
        pool.shutdown()

    asyncio.run(main())
