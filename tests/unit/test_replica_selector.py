"""KIP-392's rack-aware choice (spool.replica.selector): the replica a consumer in a rack is
sent to, as Kafka's RackAwareReplicaSelector and findPreferredReadReplica choose it, on a real
leader Partition whose followers fetched."""

from __future__ import annotations

import pytest

from spool.cluster.image import PartitionRegistration
from spool.replica.partition import Partition
from spool.replica.selector import RACK_AWARE, check_selector_class, preferred_read_replica
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


@pytest.fixture
def clock():
    return FakeClock(1_700_000_000_000)


def leader(tmp_path, clock, replicas=(1, 2, 3, 4), isr=(1, 2, 3, 4)) -> Partition:
    log = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock, hw_follows_leo=False)
    part = Partition("t", 0, log, 1)
    part.make_leader(PartitionRegistration(replicas=replicas, isr=isr, leader=1, leader_epoch=3,
                                           partition_epoch=1), clock.now_ms())
    for i in range(10):
        part.append_as_leader(make_batch(1, tag=i), acks=1, now_ms=clock.now_ms())
    return part


def choose(part, rack, offset=0, clock=None, live=RACKS):
    return preferred_read_replica(part, offset, rack, live.get, clock.now_ms())


def test_the_leader_serves_without_a_rack_or_in_its_own(tmp_path, clock):
    part = leader(tmp_path, clock)
    for f in (2, 3, 4):
        part.update_follower_fetch(f, 10, clock.now_ms())
    assert choose(part, None, clock=clock) == -1
    assert choose(part, "", clock=clock) == -1
    assert choose(part, "a", clock=clock) == -1  # the leader's own rack
    assert choose(part, "z", clock=clock) == -1  # nobody there
    assert choose(part, "c", clock=clock) == 3


def test_in_the_rack_the_most_caught_up_in_sync_follower_that_has_the_offset(tmp_path, clock):
    part = leader(tmp_path, clock)
    part.update_follower_fetch(2, 8, clock.now_ms())
    part.update_follower_fetch(4, 10, clock.now_ms())
    assert choose(part, "b", clock=clock) == 4  # the higher log end offset
    part.update_follower_fetch(2, 10, clock.now_ms())
    clock.advance(5)
    part.update_follower_fetch(4, 10, clock.now_ms())
    # equal log end offsets: the one caught up most recently
    assert choose(part, "b", clock=clock) == 4
    # a follower that does not have the offset yet cannot serve it
    part.update_follower_fetch(4, 6, clock.now_ms())
    assert choose(part, "b", offset=7, clock=clock) == 2
    part.update_follower_fetch(2, 6, clock.now_ms())
    assert choose(part, "b", offset=7, clock=clock) == -1
    # a follower whose log end offset is unknown (no Fetch in this epoch) neither
    assert choose(part, "c", clock=clock) == -1


def test_a_follower_out_of_the_isr_or_not_live_is_never_chosen(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(1, 2, 3))
    for f in (2, 3, 4):
        part.update_follower_fetch(f, 10, clock.now_ms())
    assert choose(part, "b", clock=clock) == 2  # 4 is out of the ISR
    assert choose(part, "b", clock=clock, live={1: "a", 3: "c", 4: "b"}) == -1  # 2 not live


def test_the_selector_class_is_kafkas_name_or_nothing():
    assert check_selector_class(None) is None
    assert check_selector_class("") is None
    assert check_selector_class(RACK_AWARE) == RACK_AWARE
    assert RACK_AWARE == "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    with pytest.raises(ValueError, match="com.example.Nearest cannot be found"):
        check_selector_class("com.example.Nearest")
