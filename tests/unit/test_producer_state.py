"""Producer state in PartitionLog: idempotence rules, transactions (LSO, .txnindex),
snapshots and replay after a clean close or a crash, expiry."""

from __future__ import annotations

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.records.builder import BatchBuilder, build_control_batch
from spool.storage import txn_index
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.storage.producer_state import ONGOING
from spool.util.clock import FakeClock

T0 = 1_700_000_000_000
SMALL = LogConfig(internal_segment_bytes=2000, index_interval_bytes=150, segment_index_bytes=4096)


def batch(pid: int, epoch: int, seq: int, n: int = 2, txn: bool = False, ts: int = T0) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    for i in range(n):
        b.append(b"k%d" % i, b"v" * 50, timestamp=ts)
    return bytearray(b.build())


def marker(pid: int, epoch: int, commit: bool) -> bytearray:
    return bytearray(build_control_batch(pid, epoch, commit, 0, 0, T0))


def open_log(tmp_path, clock=None) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", SMALL, clock=clock or FakeClock(T0))


def code_of(fn) -> int:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def test_duplicate_is_answered_with_the_original_offsets(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(-1, -1, -1))  # a non-idempotent batch first: offsets 0-1
    first = log.append(batch(7, 0, 0))
    log.append(batch(7, 0, 2))
    again = log.append(batch(7, 0, 0))
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (2, 3)
    assert log.log_end_offset == 6  # nothing written for the duplicate


def test_sequence_and_epoch_errors(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(7, 3, 0))
    assert code_of(lambda: log.append(batch(7, 3, 5))) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(lambda: log.append(batch(7, 2, 2))) == Errors.INVALID_PRODUCER_EPOCH
    assert code_of(lambda: log.append(batch(8, 0, 4))) == Errors.UNKNOWN_PRODUCER_ID
    assert code_of(lambda: log.append(batch(7, 4, 1))) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append(batch(7, 4, 0))  # a new epoch starts at 0
    assert code_of(lambda: log.append(batch(7, 3, 2))) == Errors.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 4


def test_only_the_last_five_batches_are_remembered(tmp_path):
    log = open_log(tmp_path)
    for i in range(7):
        log.append(batch(7, 0, 2 * i))
    assert log.append(batch(7, 0, 4)).first_offset == 4  # the 5th newest: a duplicate
    assert code_of(lambda: log.append(batch(7, 0, 2))) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_wraps_around(tmp_path):
    """After sequence 2**31-1 comes 0 (Kafka's wrap), also inside one batch."""
    log = open_log(tmp_path)
    log.append(batch(7, 0, 0, n=1))
    entry = log.producers.producers[7]
    # Reaching 2**31 sequences for real takes 2**31 records: pretend the producer's only
    # cached batch (offset 0) carried sequences 2**31-2 .. 2**31-1.
    entry.batches.clear()
    entry.batches.append((2**31 - 2, 2**31 - 1, 0, 0))
    for wrong in (1, 5, 2**31 - 1):  # only 0 follows 2**31-1
        assert code_of(lambda s=wrong: log.append(batch(7, 0, s, n=1))) \
            == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    info = log.append(batch(7, 0, 0, n=2))  # sequences 0, 1: the wrap is accepted
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (1, 2, 3)
    assert log.append(batch(7, 0, 0, n=2)).first_offset == 1  # and cached: a duplicate
    entry.batches.append((2**31 - 3, 2**31 - 2, 2, 2))  # next: 2**31-1, 0 in one batch
    info = log.append(batch(7, 0, 2**31 - 1, n=2))
    assert (info.first_offset, log.log_end_offset) == (3, 5)
    assert entry.batches[-1][:2] == (2**31 - 1, 0)
    assert log.append(batch(7, 0, 1, n=1)).first_offset == 5


@pytest.mark.parametrize("crash", [False, True])
def test_state_survives_reopen(tmp_path, crash):
    log = open_log(tmp_path)
    for i in range(30):  # several segments: snapshots at each roll
        log.append(batch(7, 0, 2 * i))
    assert len(log.segments) >= 3
    if not crash:
        log.close()
    log2 = open_log(tmp_path)
    assert log2.append(batch(7, 0, 58)).first_offset == 58
    assert code_of(lambda: log2.append(batch(7, 0, 61))) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    log2.append(batch(7, 0, 60))
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))  # Kafka's file names


def test_damaged_snapshot_falls_back_to_the_log(tmp_path):
    log = open_log(tmp_path)
    for i in range(10):
        log.append(batch(7, 0, 2 * i))
    log.close()
    for snap in (tmp_path / "t-0").glob("*.snapshot"):
        snap.write_bytes(b"\x00\x01garbage")
    log2 = open_log(tmp_path)
    assert log2.append(batch(7, 0, 18)).first_offset == 18


def test_transaction_sets_the_lso_and_abort_indexes(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(-1, -1, -1))                   # 0-1
    log.append(batch(5, 0, 0, txn=True))           # 2-3 open
    log.append(batch(6, 0, 0, txn=True))           # 4-5 open
    assert log.last_stable_offset == 2
    assert code_of(lambda: log.append(batch(5, 0, 2))) == Errors.INVALID_TXN_STATE
    log.append(marker(5, 0, commit=False))         # 6: abort of 5
    assert log.last_stable_offset == 4
    log.append(marker(6, 0, commit=True))          # 7
    assert log.last_stable_offset == log.high_watermark == 8
    assert log.aborted_transactions(0, 8) == [(5, 2)]
    assert log.aborted_transactions(7, 8) == []
    entries = txn_index.read(txn_index.path_of(log.dir, 0))
    assert entries == [txn_index.AbortedTxn(5, 2, 6, 4)]
    # the index is a cache: removed, it is rebuilt from the log
    log.close()
    for s in (tmp_path / "t-0").glob("*.snapshot"):
        s.unlink()
    txn_index.path_of(log.dir, 0).unlink()
    log2 = open_log(tmp_path)
    assert log2.aborted_transactions(0, 8) == [(5, 2)]


def test_open_transaction_survives_a_crash(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(-1, -1, -1))
    log.append(batch(5, 0, 0, txn=True))
    log2 = open_log(tmp_path)  # no close: a crash
    assert log2.last_stable_offset == 2
    log2.append(marker(5, 0, commit=True))
    assert log2.last_stable_offset == log2.high_watermark


def test_marker_with_a_bumped_epoch_fences_the_old_one(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(5, 0, 0, txn=True))
    log.append(marker(5, 1, commit=False))
    assert code_of(lambda: log.append(batch(5, 0, 2, txn=True))) == Errors.INVALID_PRODUCER_EPOCH
    log.append(batch(5, 1, 0, txn=True))


def test_idle_producers_expire(tmp_path):
    clock = FakeClock(T0)
    log = open_log(tmp_path, clock)
    log.append(batch(7, 0, 0))
    log.append(batch(8, 0, 0, txn=True))
    assert log.expire_producers(T0 + 1000, 1000) == 1  # 8 has an open transaction
    assert code_of(lambda: log.append(batch(7, 0, 2))) == Errors.UNKNOWN_PRODUCER_ID
    log.append(batch(7, 0, 0))


def test_a_flood_of_fresh_producer_ids_is_bounded(tmp_path):
    log = open_log(tmp_path)
    log.producers.max_producers = 50
    log.append(batch(1, 0, 0, txn=True))  # an open transaction is never evicted
    for pid in range(100, 200):
        log.append(batch(pid, 0, 0))
    assert set(log.producers.producers) == {1, *range(151, 200)}
    log.append(batch(160, 0, 2))  # writing again makes it the most recent
    for pid in range(300, 320):
        log.append(batch(pid, 0, 0))
    state = log.producers.producers
    assert len(state) == 50
    assert set(state) == {1, 160, *range(172, 200), *range(300, 320)}
    assert log.last_stable_offset == 0
    # the evicted producer is unknown again; the kept one still detects its duplicate
    assert code_of(lambda: log.append(batch(100, 0, 2))) == Errors.UNKNOWN_PRODUCER_ID
    dup = log.append(batch(160, 0, 2))
    assert dup.num_records == 0
    log.close()
    reopened = open_log(tmp_path)
    reopened.producers.max_producers = 50
    assert set(reopened.producers.producers) == set(state)
    reopened.close()


def test_a_transactional_batch_needs_its_verification_guard(tmp_path):
    """KIP-890 part 1: the first transactional batch of a producer's transaction is
    appended only with the guard of the verification that admitted it."""
    plog = open_log(tmp_path)
    unverified = object()
    assert code_of(lambda: plog.append(batch(1, 0, 0, txn=True), verification_guard=unverified)
                   ) == Errors.INVALID_TXN_STATE
    guard = plog.start_transaction_verification(1, 0, 0, T0)
    plog.append(batch(1, 0, 0, txn=True), verification_guard=guard)
    # the transaction is open here now: later batches need no verification
    assert plog.start_transaction_verification(1, 2, 0, T0) is ONGOING
    plog.append(batch(1, 0, 2, txn=True), verification_guard=ONGOING)
    plog.append(marker(1, 0, commit=True))
    # ... until its marker closes it: the same guard object admits nothing any more
    assert code_of(lambda: plog.append(batch(1, 0, 4, txn=True), verification_guard=ONGOING)
                   ) == Errors.INVALID_TXN_STATE
    assert plog.log_end_offset == 5


def test_a_marker_voids_a_verification_under_way(tmp_path):
    """The ABA case: verified, then the transaction aborted before the append."""
    plog = open_log(tmp_path)
    guard = plog.start_transaction_verification(1, 0, 0, T0)
    plog.append(marker(1, 1, commit=False))  # the coordinator aborted it meanwhile
    assert code_of(lambda: plog.append(batch(1, 1, 0, txn=True), verification_guard=guard)
                   ) == Errors.INVALID_TXN_STATE
    assert plog.log_end_offset == 1 and plog.producers.open_transactions() == {}


def test_a_higher_sequence_waits_for_the_lowest_one_being_verified(tmp_path):
    plog = open_log(tmp_path)
    guard = plog.start_transaction_verification(1, 2, 0, T0)
    assert plog.start_transaction_verification(1, 0, 0, T0) is guard  # seq 0 came later
    assert code_of(lambda: plog.append(batch(1, 0, 2, txn=True), verification_guard=guard)
                   ) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    plog.append(batch(1, 0, 0, txn=True), verification_guard=guard)
    plog.append(batch(1, 0, 2, txn=True), verification_guard=ONGOING)
    assert plog.log_end_offset == 4


def test_a_transaction_version_2_marker_must_be_above_the_producers_epoch(tmp_path):
    """Kafka 4.2: a version 2 coordinator bumps the epoch before its markers, so a marker at
    the producer's epoch is late or repeated; it would close the next transaction."""
    plog = open_log(tmp_path)
    guard = plog.start_transaction_verification(1, 0, 0, T0)
    plog.append(batch(1, 0, 0, txn=True), verification_guard=guard)
    plog.append(marker(1, 1, commit=True), transaction_version=2)  # epoch 0 -> 1
    guard = plog.start_transaction_verification(1, 0, 1, T0)
    plog.append(batch(1, 1, 0, txn=True), verification_guard=guard)  # the next transaction
    assert code_of(lambda: plog.append(marker(1, 1, commit=False), transaction_version=2)
                   ) == Errors.INVALID_PRODUCER_EPOCH
    assert plog.producers.open_transactions() == {1: 3}  # still open
    plog.append(marker(1, 1, commit=False))  # below version 2 the same epoch is accepted
    assert plog.producers.open_transactions() == {}
