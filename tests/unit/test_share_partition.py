"""SharePartition (spool.share.partition) on Kafka's SharePartitionTest examples."""

from __future__ import annotations

import pytest

from spool.protocol.errors import Errors
from spool.share.batches import StateBatch
from spool.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    AckBatch,
    AcquiredRecords,
    SharePartition,
)

M1, M2 = "member-1", "member-2"


def ack(first: int, last: int, *types: int) -> AckBatch:
    return AckBatch(first, last, tuple(types))


def states(sp: SharePartition) -> list[tuple[int, int, str, int, str | None]]:
    names = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED",
             ARCHIVED: "ARCHIVED"}
    return [(r.first_offset, r.last_offset, names[r.state], r.delivery_count, r.member_id)
            for r in sp.describe().in_flight]


def test_acquire_with_max_fetch_records_takes_whole_batches() -> None:
    sp = SharePartition(0)
    assert sp.acquire(M1, [(0, 4)], 10, 0) == [AcquiredRecords(0, 4, 1)]
    assert sp.next_fetch_offset() == 5
    # the same log read from 0, now one batch of 25: 0-4 are held, 5-24 come whole
    assert sp.acquire(M1, [(0, 24)], 10, 0) == [AcquiredRecords(5, 24, 1)]
    assert sp.end_offset == 25


def test_acquire_stops_at_the_batch_holding_the_max_records_th() -> None:
    sp = SharePartition(10)
    assert sp.acquire(M1, [(10, 14), (15, 29), (30, 44)], 10, 0) == [AcquiredRecords(10, 29, 1)]
    assert sp.next_fetch_offset() == 30


def test_acquire_same_batch_again_gives_nothing() -> None:
    sp = SharePartition(10)
    assert sp.acquire(M1, [(10, 14)], 500, 0) == [AcquiredRecords(10, 14, 1)]
    assert sp.acquire(M1, [(10, 14)], 500, 0) == []
    assert sp.acquire(M2, [(10, 11)], 500, 0) == []
    assert states(sp) == [(10, 14, "ACQUIRED", 1, M1)]


def test_released_subset_is_acquired_again_with_delivery_count_2() -> None:
    sp = SharePartition(10)
    sp.acquire(M1, [(10, 14)], 500, 0)
    assert sp.acknowledge(M1, [ack(12, 13, RELEASE)]).error_code == Errors.NONE
    assert sp.next_fetch_offset() == 12
    assert states(sp) == [(10, 11, "ACQUIRED", 1, M1), (12, 13, "AVAILABLE", 1, None),
                          (14, 14, "ACQUIRED", 1, M1)]
    assert sp.acquire(M2, [(10, 14)], 500, 0) == [AcquiredRecords(12, 13, 2)]
    assert sp.next_fetch_offset() == 15


def test_ack_types_per_offset_and_spso_moves_past_the_done_prefix() -> None:
    sp = SharePartition(0)
    sp.acquire(M1, [(0, 9)], 500, 0)
    result = sp.acknowledge(M1, [ack(0, 4, ACCEPT, REJECT, GAP, ACCEPT, RELEASE),
                                 ack(5, 9, ACCEPT)])
    assert result.error_code == Errors.NONE
    assert sp.start_offset == 4
    assert states(sp) == [(4, 4, "AVAILABLE", 1, None), (5, 9, "ACKNOWLEDGED", 1, None)]
    sp.acquire(M2, [(0, 9)], 500, 0, fetch_offset=4)
    sp.acknowledge(M2, [ack(4, 4, ACCEPT)])
    assert (sp.start_offset, sp.end_offset, states(sp)) == (10, 10, [])


def test_ack_of_records_not_acquired_or_of_another_member_changes_nothing() -> None:
    sp = SharePartition(0)
    sp.acquire(M1, [(0, 4)], 500, 0)
    sp.acquire(M2, [(5, 9)], 500, 0)
    before = states(sp)
    # the first batch is fine, the second is M2's: nothing of the request is applied
    result = sp.acknowledge(M1, [ack(0, 4, ACCEPT), ack(5, 9, ACCEPT)])
    assert result.error_code == Errors.INVALID_RECORD_STATE
    assert states(sp) == before
    sp.acknowledge(M1, [ack(2, 2, RELEASE)])
    assert sp.acknowledge(M1, [ack(2, 3, ACCEPT)]).error_code == Errors.INVALID_RECORD_STATE
    assert sp.acknowledge(M1, [ack(3, 12, ACCEPT)]).error_code == Errors.INVALID_REQUEST


@pytest.mark.parametrize("batches", [
    [ack(3, 2, ACCEPT)],                     # first > last
    [ack(0, 2, ACCEPT), ack(2, 3, ACCEPT)],  # overlapping
    [ack(0, 2, ACCEPT, ACCEPT)],             # types neither one nor one per offset
    [ack(0, 0, 4)],                          # unknown type
])
def test_malformed_acknowledgements_are_invalid_requests(batches: list[AckBatch]) -> None:
    sp = SharePartition(0)
    sp.acquire(M1, [(0, 4)], 500, 0)
    assert sp.acknowledge(M1, batches).error_code == Errors.INVALID_REQUEST
    assert states(sp) == [(0, 4, "ACQUIRED", 1, M1)]


def test_ack_below_the_start_offset_is_invalid_record_state() -> None:
    # Kafka: a batch wholly below the start offset is not in flight ("Batch record not
    # found"); of one spanning it, the in-flight part is acknowledged
    sp = SharePartition(0)
    sp.acquire(M1, [(0, 9)], 500, 0)
    sp.acknowledge(M1, [ack(0, 4, ACCEPT)])
    assert sp.acknowledge(M1, [ack(0, 4, ACCEPT)]).error_code == Errors.INVALID_RECORD_STATE
    assert sp.start_offset == 5
    assert sp.acknowledge(M1, [ack(3, 9, ACCEPT)]).error_code == Errors.NONE
    assert sp.start_offset == 10


def test_lock_expiry_then_delivery_count_limit_archives() -> None:
    # Kafka's testAcquisitionLockTimeoutCauseMaxDeliveryCountExceed
    sp = SharePartition(0, max_delivery_count=2, record_lock_duration_ms=100)
    sp.acquire(M1, [(0, 9)], 500, 0)
    sp.acquire(M1, [(10, 19)], 500, 50)
    assert sp.next_deadline() == 100
    assert sp.expire(99) == 0
    assert sp.expire(150) == 20
    assert sp.next_deadline() is None
    assert sp.next_fetch_offset() == 0
    assert sp.acquire(M2, [(10, 19)], 500, 200) == [AcquiredRecords(10, 19, 2)]
    assert sp.expire(300) == 10
    assert states(sp) == [(0, 9, "AVAILABLE", 1, None), (10, 19, "ARCHIVED", 2, None)]
    assert sp.start_offset == 0


def test_release_at_the_limit_archives_and_released_member_frees_its_records() -> None:
    sp = SharePartition(0, max_delivery_count=2)
    sp.acquire(M1, [(0, 4)], 500, 0)
    sp.acknowledge(M1, [ack(0, 4, RELEASE)])
    sp.acquire(M1, [(0, 4)], 500, 0)
    sp.acquire(M2, [(5, 9)], 500, 0)
    assert sp.release_member(M1) == 5
    assert states(sp) == [(5, 9, "ACQUIRED", 1, M2)]
    assert sp.start_offset == 5


def test_an_available_record_at_the_limit_is_archived_not_delivered() -> None:
    sp = SharePartition.from_state(0, [StateBatch(0, 4, AVAILABLE, 3)], log_start_offset=0,
                                   log_end_offset=10, max_delivery_count=3)
    assert sp.acquire(M1, [(0, 4), (5, 9)], 500, 0) == [AcquiredRecords(5, 9, 1)]
    assert sp.start_offset == 5


def test_gaps_between_batches_and_aborted_transactions_are_archived() -> None:
    sp = SharePartition(0)
    # 3 is a commit marker, 4-6 an aborted transaction's records, 7 its marker
    got = sp.acquire(M1, [(0, 2), (4, 6), (8, 9)], 500, 0, last_stable_offset=10,
                     aborted=[(4, 6)])
    assert got == [AcquiredRecords(0, 2, 1), AcquiredRecords(8, 9, 1)]
    assert states(sp) == [(0, 2, "ACQUIRED", 1, M1), (3, 7, "ARCHIVED", 0, None),
                          (8, 9, "ACQUIRED", 1, M1)]


def test_read_committed_acquires_nothing_at_or_above_the_lso() -> None:
    sp = SharePartition(0)
    assert sp.acquire(M1, [(0, 4), (5, 9)], 500, 0, last_stable_offset=7) == [
        AcquiredRecords(0, 6, 1)]
    assert sp.end_offset == 7
    assert sp.acquire(M1, [(5, 9)], 500, 0, last_stable_offset=7) == []


def test_max_in_flight_refuses_new_records_not_available_ones() -> None:
    sp = SharePartition(0, max_in_flight=10)
    sp.acquire(M1, [(0, 4), (5, 9), (10, 14)], 500, 0)
    assert sp.end_offset == 10
    assert not sp.can_acquire()
    assert sp.acquire(M2, [(10, 14)], 500, 0) == []
    sp.acknowledge(M1, [ack(5, 9, RELEASE)])
    assert sp.can_acquire()
    assert sp.acquire(M2, [(5, 9), (10, 14)], 500, 0) == [AcquiredRecords(5, 9, 2)]
    sp.acknowledge(M1, [ack(0, 4, ACCEPT)])
    assert sp.acquire(M2, [(10, 14)], 500, 0) == [AcquiredRecords(10, 14, 1)]


def test_persisted_form_and_changes() -> None:
    sp = SharePartition(0)
    sp.acquire(M1, [(0, 9)], 500, 0)
    assert sp.take_changes() == (0, (StateBatch(0, 9, AVAILABLE, 1),))
    assert sp.take_changes() is None
    sp.acknowledge(M1, [ack(0, 9, ACCEPT, ACCEPT, RELEASE, ACCEPT, ACCEPT, REJECT, ACCEPT,
                            ACCEPT, ACCEPT, ACCEPT)])
    assert sp.take_changes() == (2, (StateBatch(2, 2, AVAILABLE, 1),
                                     StateBatch(3, 4, ACKNOWLEDGED, 1),
                                     StateBatch(5, 5, ARCHIVED, 1),
                                     StateBatch(6, 9, ACKNOWLEDGED, 1)))
    sp.acquire(M2, [(0, 9), (10, 19)], 500, 0, fetch_offset=2)
    start, batches = sp.to_state()
    assert (start, batches) == (2, (StateBatch(2, 2, AVAILABLE, 2),
                                    StateBatch(3, 4, ACKNOWLEDGED, 1),
                                    StateBatch(5, 5, ARCHIVED, 1),
                                    StateBatch(6, 9, ACKNOWLEDGED, 1),
                                    StateBatch(10, 19, AVAILABLE, 1)))
    back = SharePartition.from_state(start, batches, log_start_offset=0, log_end_offset=20)
    assert back.to_state() == (start, batches)
    assert back.next_fetch_offset() == 2


def test_initial_start_offset_from_share_auto_offset_reset_and_log_start() -> None:
    latest = SharePartition.from_state(-1, (), log_start_offset=5, log_end_offset=50)
    earliest = SharePartition.from_state(-1, (), log_start_offset=5, log_end_offset=50,
                                         auto_offset_reset="earliest")
    assert (latest.start_offset, earliest.start_offset) == (50, 5)
    assert latest.take_changes() == (50, ())
    # persisted start below the log start (retention deleted records): starts at the log start
    sp = SharePartition.from_state(3, [StateBatch(3, 9, AVAILABLE, 1)], log_start_offset=6,
                                   log_end_offset=50)
    assert (sp.start_offset, states(sp)) == (6, [(6, 9, "AVAILABLE", 1, None)])
    # holes between persisted batches are never-delivered records
    sp = SharePartition.from_state(0, [StateBatch(2, 3, ACKNOWLEDGED, 1)], log_start_offset=0,
                                   log_end_offset=50)
    assert states(sp) == [(0, 1, "AVAILABLE", 0, None), (2, 3, "ACKNOWLEDGED", 1, None)]
    assert sp.acquire(M1, [(0, 1)], 500, 0) == [AcquiredRecords(0, 1, 1)]


def test_log_start_moving_past_in_flight_records() -> None:
    sp = SharePartition(0)
    sp.acquire(M1, [(0, 9)], 500, 0)
    sp.update_log_start_offset(5)
    assert (sp.start_offset, states(sp)) == (5, [(5, 9, "ACQUIRED", 1, M1)])
    assert sp.acknowledge(M1, [ack(0, 9, ACCEPT)]).error_code == Errors.NONE
    assert sp.start_offset == 10
    sp.update_log_start_offset(20)
    assert (sp.start_offset, sp.end_offset) == (20, 20)


def test_lock_expiry_at_the_limit_is_a_change_to_persist() -> None:
    sp = SharePartition(0, max_delivery_count=2, record_lock_duration_ms=100)
    sp.acquire(M1, [(0, 4), (5, 9)], 500, 0)
    sp.acknowledge(M1, [ack(5, 9, RELEASE)])
    sp.acquire(M2, [(5, 9)], 500, 0)
    assert sp.take_changes() == (0, (StateBatch(0, 4, AVAILABLE, 1),
                                     StateBatch(5, 9, AVAILABLE, 2)))
    assert sp.expire(100) == 10
    assert sp.take_changes() == (0, (StateBatch(0, 4, AVAILABLE, 1),
                                     StateBatch(5, 9, ARCHIVED, 2)))
