"""The transaction coordinator's state machine and its __transaction_state records
(no I/O: operations return metadata, replay applies it)."""

from __future__ import annotations

import itertools

import pytest

from spool.coordinator.transaction import (
    MAX_EPOCH,
    TransactionCoordinator,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from spool.coordinator.txn_offsets import PendingTxnOffsets
from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader
from spool.records.builder import BatchBuilder, build_control_batch

S = TxnState


def run(coord: TransactionCoordinator, m: TxnMetadata | None) -> TxnMetadata | None:
    if m is not None:
        coord.replay(m.transactional_id, decode_value(m.transactional_id, encode_value(m)))
    return m


def code(fn) -> int:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


@pytest.fixture
def coord():
    return TransactionCoordinator(max_timeout_ms=60_000)


def pids():
    counter = itertools.count(100)
    return lambda: next(counter)


def test_records_round_trip():
    m = TxnMetadata("tx-é", 42, 7, 30_000, S.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}),
                    1234, 1000)
    assert decode_key(encode_key("tx-é")) == "tx-é"
    assert decode_value("tx-é", encode_value(m)) == m
    with pytest.raises(ValueError):
        decode_value("x", encode_value(m)[:-3])


def test_a_full_transaction(coord):
    new_pid = pids()
    abort, m = coord.init_producer_id("t", 10_000, -1, -1, 0, new_pid)
    assert abort is None and (m.producer_id, m.producer_epoch, m.state) == (100, 0, S.EMPTY)
    run(coord, m)
    m = run(coord, coord.add_partitions("t", 100, 0, {("a", 0)}, 5))
    assert m.state == S.ONGOING and m.start_ms == 5
    assert coord.add_partitions("t", 100, 0, {("a", 0)}, 6) is None  # nothing new
    m = run(coord, coord.add_partitions("t", 100, 0, {("b", 1)}, 7))
    assert m.partitions == {("a", 0), ("b", 1)} and m.start_ms == 5
    m = run(coord, coord.end_txn("t", 100, 0, True, 8))
    assert m.state == S.PREPARE_COMMIT
    assert code(lambda: coord.add_partitions("t", 100, 0, {("a", 0)}, 9)) == Errors.CONCURRENT_TRANSACTIONS
    assert coord.pending_completion() == [m]
    m = run(coord, coord.completed(m, 9))
    assert m.state == S.COMPLETE_COMMIT
    assert coord.end_txn("t", 100, 0, True, 10) is None  # a retried EndTxn
    assert code(lambda: coord.end_txn("t", 100, 0, False, 10)) == Errors.INVALID_TXN_STATE


def test_fencing_bumps_the_epoch_and_aborts_the_open_transaction(coord):
    new_pid = pids()
    run(coord, coord.init_producer_id("t", 10_000, -1, -1, 0, new_pid)[1])
    run(coord, coord.add_partitions("t", 100, 0, {("a", 0)}, 1))
    abort, m = coord.init_producer_id("t", 10_000, -1, -1, 2, new_pid)
    assert (abort.state, abort.producer_epoch, abort.partitions) == (S.PREPARE_ABORT, 1, {("a", 0)})
    assert (m.state, m.producer_id, m.producer_epoch, m.partitions) == (S.EMPTY, 100, 1, frozenset())
    run(coord, m)
    assert code(lambda: coord.add_partitions("t", 100, 0, {("a", 0)}, 3)) == Errors.PRODUCER_FENCED
    assert code(lambda: coord.end_txn("t", 99, 1, True, 3)) == Errors.INVALID_PRODUCER_ID_MAPPING
    # KIP-360: the current producer may ask for a bump; an older one is fenced
    assert code(lambda: coord.init_producer_id("t", 10_000, 100, 0, 4, new_pid)) == Errors.PRODUCER_FENCED
    assert coord.init_producer_id("t", 10_000, 100, 1, 4, new_pid)[1].producer_epoch == 2


def test_epoch_exhaustion_gives_a_new_producer_id(coord):
    new_pid = pids()
    run(coord, TxnMetadata("t", 5, MAX_EPOCH - 1, 1000, S.COMPLETE_ABORT))
    _, m = coord.init_producer_id("t", 1000, -1, -1, 0, new_pid)
    assert (m.producer_id, m.producer_epoch) == (100, 0)


def test_timeouts(coord):
    assert code(lambda: coord.init_producer_id("t", 60_001, -1, -1, 0, pids())) == \
        Errors.INVALID_TRANSACTION_TIMEOUT
    assert code(lambda: coord.init_producer_id("t", 0, -1, -1, 0, pids())) == \
        Errors.INVALID_TRANSACTION_TIMEOUT
    run(coord, coord.init_producer_id("t", 1000, -1, -1, 0, pids())[1])
    run(coord, coord.add_partitions("t", 100, 0, {("a", 0)}, 10))
    assert coord.timed_out(1009) == []
    (m,) = coord.timed_out(1010)
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 1)


def test_expiry_of_idle_completed_ids(coord):
    run(coord, TxnMetadata("idle", 1, 0, 1000, S.COMPLETE_COMMIT, last_update_ms=0))
    run(coord, TxnMetadata("open", 2, 0, 1000, S.ONGOING, last_update_ms=0, start_ms=0))
    assert coord.expired(100, 100) == ["idle"]
    coord.load(encode_key("idle"), None)  # the tombstone
    assert "idle" not in coord.txns


def test_pending_offsets_wait_for_the_marker():
    pending = PendingTxnOffsets()
    applied = []
    b = BatchBuilder(producer_id=9, producer_epoch=0, is_transactional=True)
    b.append(b"k1", b"v1", timestamp=0)
    b.append(b"k2", b"v2", timestamp=0)
    data = b.build()
    pending.load_batch(3, BatchHeader.parse(data), data, lambda k, v: applied.append(k))
    assert applied == [] and pending.pending_partitions(9) == [3]
    abort = build_control_batch(9, 0, False, 0, 0, 0)
    pending.load_batch(3, BatchHeader.parse(abort), abort, lambda k, v: applied.append(k))
    assert applied == [] and pending.pending_partitions(9) == []
    pending.load_batch(3, BatchHeader.parse(data), data, lambda k, v: applied.append(k))
    commit = build_control_batch(9, 0, True, 0, 0, 0)
    pending.load_batch(3, BatchHeader.parse(commit), commit, lambda k, v: applied.append(k))
    assert applied == [b"k1", b"k2"]
