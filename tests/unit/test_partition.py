"""Partition (spool.replica.partition): the leader's HW rule over the maximal ISR, Kafka's
lastCaughtUpTimeMs rule, ISR shrink/expand candidates, min.insync.replicas errors, and
the follower side, on real PartitionLogs in tmp dirs with a fake clock."""

from __future__ import annotations

import pytest

from spool.cluster.image import PartitionRegistration
from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader, iter_batches
from spool.replica.partition import Partition
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.util.clock import FakeClock
from tests.helpers.storage_batches import make_batch

LAG_MS = 10_000
ME = 1


@pytest.fixture
def clock():
    return FakeClock(1_700_000_000_000)


def open_log(tmp_path, name="t-0", *, min_isr=1, clock=None):
    return PartitionLog(tmp_path / name, LogConfig(min_insync_replicas=min_isr),
                        clock=clock or FakeClock(), hw_follows_leo=False)


def reg(leader=ME, isr=(1, 2, 3), replicas=(1, 2, 3), epoch=5, pepoch=7):
    return PartitionRegistration(replicas=replicas, isr=isr, leader=leader,
                                 leader_epoch=epoch, partition_epoch=pepoch)


def leader(tmp_path, clock, **kw):
    part = Partition("t", 0, open_log(tmp_path, min_isr=kw.pop("min_isr", 1)), ME)
    assert part.make_leader(reg(**kw), clock.now_ms()) is True
    return part


def append(part, n=1, acks=1, clock=None):
    return part.append_as_leader(make_batch(n), acks=acks,
                                 now_ms=clock.now_ms() if clock else 0)


def test_leader_appends_in_its_epoch_and_hw_waits_for_every_isr_member(tmp_path, clock):
    part = leader(tmp_path, clock)
    assert (part.is_leader, part.leader_epoch, part.isr) == (True, 5, (1, 2, 3))
    info = append(part, 3, clock=clock)
    assert (info.first_offset, info.last_offset) == (0, 2)
    batch = part.log.read_bytes(0)
    assert [h.partition_leader_epoch for _, h in iter_batches(batch)] == [5]
    assert (part.log_end_offset, part.high_watermark) == (3, 0)
    assert part.update_follower_fetch(2, 3, clock.now_ms()) is False  # 3 has not fetched
    assert part.high_watermark == 0
    assert part.update_follower_fetch(3, 2, clock.now_ms()) is True
    assert part.high_watermark == 2  # min(3, 3, 2)
    assert part.update_follower_fetch(3, 3, clock.now_ms()) is True
    assert part.high_watermark == 3


def test_hw_never_goes_down(tmp_path, clock):
    part = leader(tmp_path, clock)
    append(part, 4, clock=clock)
    part.update_follower_fetch(2, 4, clock.now_ms())
    part.update_follower_fetch(3, 4, clock.now_ms())
    assert part.high_watermark == 4
    # a follower that truncated fetches from lower down: the HW stays
    assert part.update_follower_fetch(3, 1, clock.now_ms()) is False
    assert part.high_watermark == 4


def test_isr_of_the_leader_alone_moves_hw_at_each_append(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(1,))
    append(part, 2, clock=clock)
    assert part.high_watermark == part.log_end_offset == 2
    assert part.replication_status(2) == (True, 0)


def test_new_leader_knows_no_follower_leo_until_they_fetch(tmp_path, clock):
    part = leader(tmp_path, clock)
    append(part, 2, clock=clock)
    for r in (2, 3):
        part.update_follower_fetch(r, 2, clock.now_ms())
    assert part.high_watermark == 2
    append(part, 2, clock=clock)
    assert part.make_leader(reg(epoch=6, pepoch=8), clock.now_ms()) is True
    assert all(st.log_end_offset == -1 for st in part.followers.values())
    assert part.epoch_start_offset == 4
    part.update_follower_fetch(2, 4, clock.now_ms())
    assert part.high_watermark == 2  # 3 has not fetched in epoch 6
    part.update_follower_fetch(3, 4, clock.now_ms())
    assert part.high_watermark == 4


def test_same_epoch_registration_keeps_follower_state_and_stale_one_is_ignored(tmp_path, clock):
    part = leader(tmp_path, clock)
    append(part, 2, clock=clock)
    part.update_follower_fetch(2, 2, clock.now_ms())
    assert part.make_leader(reg(isr=(1, 2), pepoch=8), clock.now_ms()) is False
    assert part.followers[2].log_end_offset == 2
    assert part.high_watermark == 2  # 3 left the ISR: the HW follows 1 and 2
    assert part.make_leader(reg(isr=(1, 2, 3), pepoch=7), clock.now_ms()) is False
    assert (part.isr, part.partition_epoch) == ((1, 2), 8)


def test_maximal_isr_holds_the_hw_while_an_expansion_is_in_flight(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(1, 2))
    append(part, 3, clock=clock)
    part.update_follower_fetch(2, 3, clock.now_ms())
    assert part.high_watermark == 3
    append(part, 2, clock=clock)
    part.update_follower_fetch(3, 3, clock.now_ms())  # 3 has reached the HW (3)
    assert part.isr_expand_candidates() == (3,)
    part.begin_isr_change((1, 2, 3))
    assert part.maximal_isr == (1, 2, 3)
    assert part.isr_expand_candidates() == ()  # one change in flight at a time
    assert part.update_follower_fetch(2, 5, clock.now_ms()) is False  # waits for 3 too
    assert part.high_watermark == 3
    assert part.update_follower_fetch(3, 5, clock.now_ms()) is True
    assert part.high_watermark == 5
    assert part.complete_isr_change((1, 2, 3), 5, 8) is False
    assert (part.isr, part.partition_epoch, part.pending_isr) == ((1, 2, 3), 8, None)


def test_failed_or_stale_isr_change_applies_nothing(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(1, 2))
    part.begin_isr_change((1, 2, 3))
    part.complete_isr_change(None, 5, -1)
    assert (part.isr, part.pending_isr) == ((1, 2), None)
    part.begin_isr_change((1,))
    part.complete_isr_change((1,), 5, 7)  # not newer than partition epoch 7
    assert part.isr == (1, 2)
    part.begin_isr_change((1,))
    part.complete_isr_change((1,), 4, 9)  # another leader epoch
    assert part.isr == (1, 2)


def test_shrink_lets_the_hw_advance(tmp_path, clock):
    part = leader(tmp_path, clock)
    append(part, 3, clock=clock)
    part.update_follower_fetch(2, 3, clock.now_ms())
    assert part.high_watermark == 0
    append(part, 2, clock=clock)
    clock.advance(LAG_MS + 1)
    assert part.isr_shrink_candidates(clock.now_ms(), LAG_MS) == (2, 3)
    part.update_follower_fetch(2, 5, clock.now_ms())
    assert part.isr_shrink_candidates(clock.now_ms(), LAG_MS) == (3,)
    part.begin_isr_change((1, 2))
    assert part.maximal_isr == (1, 2, 3)  # a shrink in flight still waits for 3
    assert part.high_watermark == 0
    assert part.complete_isr_change((1, 2), 5, 8) is True
    assert part.high_watermark == 5


def test_last_caught_up_rule(tmp_path, clock):
    """Kafka's: caught up at the fetch's time when the fetch reaches the leader's LEO;
    at the previous fetch's time when it reaches the LEO the leader had then."""
    part = leader(tmp_path, clock)
    start = clock.now_ms()
    append(part, 10, clock=clock)  # LEO 10
    clock.advance(1000)
    t1 = clock.now_ms()
    part.update_follower_fetch(2, 4, t1)  # behind: not caught up, leader LEO 10 noted
    assert part.followers[2].last_caught_up_ms == start  # an ISR member starts caught up
    append(part, 5, clock=clock)  # LEO 15
    clock.advance(1000)
    part.update_follower_fetch(2, 10, clock.now_ms())  # reached what the leader had at t1
    assert part.followers[2].last_caught_up_ms == t1
    clock.advance(1000)
    t3 = clock.now_ms()
    part.update_follower_fetch(2, 15, t3)
    assert part.followers[2].last_caught_up_ms == t3
    # caught up: LEO equal to the leader's, whatever the time
    clock.advance(LAG_MS * 5)
    assert 2 not in part.isr_shrink_candidates(clock.now_ms(), LAG_MS)
    append(part, 1, clock=clock)
    assert 2 in part.isr_shrink_candidates(clock.now_ms(), LAG_MS)


def test_expansion_needs_the_epoch_start_offset(tmp_path, clock):
    part = Partition("t", 0, open_log(tmp_path), ME)
    part.make_leader(reg(isr=(1, 2)), clock.now_ms())
    append(part, 4, clock=clock)
    part.update_follower_fetch(2, 4, clock.now_ms())
    part.make_leader(reg(isr=(1, 2), epoch=6, pepoch=8), clock.now_ms())  # starts at 4
    assert part.high_watermark == 4
    part.update_follower_fetch(3, 3, clock.now_ms())
    assert part.isr_expand_candidates() == ()
    part.update_follower_fetch(3, 4, clock.now_ms())
    assert part.isr_expand_candidates() == (3,)


def test_min_insync_replicas(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(1,), min_isr=2)
    with pytest.raises(KafkaError) as e:
        append(part, 1, acks=-1, clock=clock)
    assert e.value.code == Errors.NOT_ENOUGH_REPLICAS
    assert part.log_end_offset == 0  # nothing appended
    info = append(part, 1, acks=1, clock=clock)  # acks=1 ignores min.insync.replicas
    assert info.last_offset == 0


def test_replication_status_of_a_delayed_produce(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(1, 2), min_isr=2)
    info = append(part, 2, acks=-1, clock=clock)
    required = info.last_offset + 1
    assert part.replication_status(required) == (False, 0)
    part.update_follower_fetch(2, 2, clock.now_ms())
    assert part.replication_status(required) == (True, 0)
    info = append(part, 1, acks=-1, clock=clock)
    part.begin_isr_change((1,))
    part.complete_isr_change((1,), 5, 8)  # the HW reaches it with an ISR of 1
    assert part.replication_status(info.last_offset + 1) == (
        True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    part.make_follower(reg(leader=2, epoch=6, pepoch=9))
    assert part.replication_status(info.last_offset + 1) == (
        True, Errors.NOT_LEADER_OR_FOLLOWER)


def test_not_leader_refuses_leader_work(tmp_path, clock):
    part = Partition("t", 0, open_log(tmp_path), ME)
    assert part.make_follower(reg(leader=2)) is True
    assert part.make_follower(reg(leader=2, pepoch=8)) is False  # same leader and epoch
    for call in (lambda: append(part, 1, clock=clock),
                 lambda: part.update_follower_fetch(3, 0, clock.now_ms())):
        with pytest.raises(KafkaError) as e:
            call()
        assert e.value.code == Errors.NOT_LEADER_OR_FOLLOWER
    assert part.isr_shrink_candidates(clock.now_ms(), 0) == ()
    lead = leader(tmp_path / "x", clock)
    with pytest.raises(KafkaError) as e:
        lead.update_follower_fetch(9, 0, clock.now_ms())  # not a replica
    assert e.value.code == Errors.NOT_LEADER_OR_FOLLOWER


def test_follower_keeps_the_leaders_offsets_truncates_and_takes_its_hw(tmp_path, clock):
    lead = leader(tmp_path / "a", clock, isr=(1,))
    append(lead, 3, clock=clock)
    append(lead, 2, clock=clock)
    data = lead.log.read_bytes(0)
    foll = Partition("t", 0, open_log(tmp_path / "b"), 2)
    foll.make_follower(reg(leader=ME))
    info = foll.append_as_follower(bytearray(data))
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert foll.log.read_bytes(0) == data
    assert BatchHeader.parse(foll.log.read_bytes(3)).partition_leader_epoch == 5
    foll.update_high_watermark_from_leader(99)
    assert foll.high_watermark == 5  # as far as the follower's log reaches
    foll.truncate_to(3)
    assert (foll.log_end_offset, foll.high_watermark) == (3, 3)
