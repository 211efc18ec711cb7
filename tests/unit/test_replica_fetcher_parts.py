"""The fetcher's parts that need no leader: cutting a response to whole batches, the fetcher
index, which fetcher holds which partition as leaders change."""

from __future__ import annotations

import asyncio

from spool.cluster.image import PartitionRegistration
from spool.replica.fetcher import (
    FetchConfig,
    ReplicaFetcherManager,
    fetcher_index,
    whole_batches,
)
from spool.replica.partition import Partition
from spool.storage.log import PartitionLog
from tests.helpers.storage_batches import make_batch


def test_whole_batches_drops_a_cut_last_batch():
    a, b = make_batch(3, tag=1), make_batch(2, base_offset=3, tag=2)
    data = memoryview(bytes(a + b))
    assert bytes(whole_batches(data)) == bytes(a + b)
    for cut in (1, 20, len(b) - 1):
        assert bytes(whole_batches(data[: len(a) + cut])) == bytes(a)
    assert bytes(whole_batches(data[:30])) == b""
    assert bytes(whole_batches(memoryview(b""))) == b""


def test_fetcher_index_is_stable_and_in_range():
    got = [fetcher_index("orders", p, 3) for p in range(12)]
    assert got == [fetcher_index("orders", p, 3) for p in range(12)]
    assert set(got) == {0, 1, 2}
    assert {fetcher_index("orders", p, 1) for p in range(5)} == {0}


def test_add_moves_a_partition_between_fetchers_and_idle_fetchers_stop(tmp_path):
    def follower(p: int, leader: int, epoch: int) -> Partition:
        part = Partition("t", p, PartitionLog(tmp_path / f"t-{p}", hw_follows_leo=False), 1)
        part.make_follower(PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3),
                                                 leader=leader, leader_epoch=epoch))
        return part

    async def go():
        # no address for any leader: every fetcher only backs off (no network here)
        fm = ReplicaFetcherManager(1, FetchConfig(backoff_ms=50, num_fetchers=1),
                                   lambda node: None, lambda part: None)
        a, b, c = follower(0, 2, 0), follower(1, 2, 0), follower(2, 1, 0)
        fm.add([a, b, c])  # a partition this node leads is not fetched
        assert list(fm.fetchers) == [(2, 0)] and fm.fetch_state("t", 2) is None
        old = fm.fetch_state("t", 0)
        a.make_follower(PartitionRegistration(replicas=(1, 2, 3), isr=(1, 3), leader=3,
                                              leader_epoch=1, partition_epoch=1))
        fm.add([a])  # new leader: moved to leader 3's fetcher, the old state retired
        assert old.removed and fm.fetch_state("t", 0).leader_epoch == 1
        assert sorted(fm.fetchers) == [(2, 0), (3, 0)]
        await fm.remove([b])
        assert list(fm.fetchers) == [(3, 0)]  # leader 2's fetcher had nothing left: stopped
        await fm.shutdown()
        assert fm.fetchers == {} and fm.fetch_state("t", 0) is None
        for part in (a, b, c):
            part.log.close()

    asyncio.run(go())
