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
    diverged,
    epoch_batch,
    follow,
    leader_batches,
)

pytestmark = pytest.mark.timeout(180)


def test_a_follower_without_leader_epochs_truncates_to_its_high_watermark(
        fresh_broker, topic_name, tmp_path):
    b = fresh_broker.start()
    create(b, topic_name, 1)
    # [0, 3), then the leader's [3, 8) in epoch 0, the follower's [3, 6): not the leader's
    part = diverged(b, topic_name, tmp_path, epoch_batch(3, 5, 0, 1), epoch_batch(3, 3, 0, 90))
    plog = part.log
    plog.update_high_watermark(3)
    plog.leader_epochs.clear()
    assert (plog.leader_epochs.latest_epoch(), plog.log_end_offset) == (-1, 6)

    follow(b, part, caught_up(part, 8))
    b.stop()
    assert batches(plog, 8) == leader_batches(b, topic_name, 0, 8)
    plog.close()
