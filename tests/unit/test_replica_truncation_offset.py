"""``truncation_offset`` (spool.replica.fetcher), where a follower truncates given the
leader's OffsetForLeaderEpoch answer, case by case with exact offsets (Kafka's
getOffsetTruncationState). The follower here has epochs 0 from 0 and 4 from 5, log end 9,
high watermark 2."""

from __future__ import annotations

import pytest

from spool.replica.fetcher import truncation_offset
from spool.storage.leader_epoch import EpochEntry, LeaderEpochCache

LEO, HW = 9, 2


@pytest.mark.parametrize(("leader_epoch", "end_offset", "expected"), [
    (-1, -1, (HW, True)),   # the leader knows no epoch <= ours: truncate to our HW
    (-1, 4, (4, True)),     # an answer without its epoch (OffsetForLeaderEpoch v0): its end
    (-1, 12, (LEO, True)),  # ... never past our log end
    (4, 7, (7, True)),      # our latest epoch ends at 7 on the leader: keep [0, 7)
    (4, 12, (LEO, True)),   # the leader has more of it: nothing to drop
    (3, 6, (5, False)),     # an epoch we never had: cut to the end of our epoch below it
                            # (0 ends at 5 here) and ask again for epoch 0
    (0, 3, (3, True)),      # ... which the leader ends at 3
])
def test_truncation_offset(tmp_path, leader_epoch, end_offset, expected):
    cache = LeaderEpochCache(tmp_path, [EpochEntry(0, 0), EpochEntry(4, 5)])
    assert truncation_offset(cache, LEO, HW, leader_epoch, end_offset) == expected
