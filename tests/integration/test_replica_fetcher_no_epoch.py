"""ReplicaFetcherManager against a real leader (the set-up of test_replica_fetcher): a
follower whose leader epoch cache is empty has no epoch to ask OffsetForLeaderEpoch about,
so it truncates to its high watermark before fetching (Kafka's rule: below the HW every
record is the leader's; above it nothing is known). Its divergent tail above the HW is
gone and it then holds exactly the leader's log."""

from __future__ import annotations

import pytest

from tests.integration.test_replica_fetcher import (
    batches,
    caught_up,
    create,
    epoch_batch,
    follow,
    follower,
    leader_batches,
    leader_log,
    produce,
)

pytestmark = pytest.mark.timeout(180)


def test_a_follower_without_leader_epochs_truncates_to_its_high_watermark(
        fresh_broker, topic_name, tmp_path):
    b = fresh_broker.start()
    create(b, topic_name, 1)
    produce(b.bootstrap, topic_name, 1, 3, "e0")  # [0, 3)
    b.stop()
    leader = leader_log(b, topic_name, 0)
    leader.append(epoch_batch(3, 5, 0, 1), assign_offsets=False)  # [3, 8), epoch 0
    common = batches(leader, 3)
    leader.close()
    b.start()

    part = follower(tmp_path, topic_name, 0)
    plog = part.log
    for data in common:
        plog.append(bytearray(data), assign_offsets=False)
    plog.append(epoch_batch(3, 3, 0, 90), assign_offsets=False)  # [3, 6): not the leader's
    plog.update_high_watermark(3)
    plog.leader_epochs.clear()
    assert (plog.leader_epochs.latest_epoch(), plog.log_end_offset) == (-1, 6)

    follow(b, part, caught_up(part, 8))
    b.stop()
    assert batches(plog, 8) == leader_batches(b, topic_name, 0, 8)
    plog.close()
