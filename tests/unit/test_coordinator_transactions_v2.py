"""KIP-890 in the transaction coordinator's state machine: the transaction version 2 end
(Kafka's table of retries and epoch bumps), the exhausted epoch, verify_only, and the
flexible (v1) transaction log value."""

from __future__ import annotations

import itertools

import pytest

from spool.coordinator.transaction import (
    MAX_EPOCH,
    TransactionCoordinator,
    TxnMetadata,
    TxnState,
    decode_value,
    encode_value,
)
from spool.protocol.errors import Errors, KafkaError

S = TxnState
PID = 7


def code(fn) -> int:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def coordinator_with(m: TxnMetadata) -> TransactionCoordinator:
    coord = TransactionCoordinator(max_timeout_ms=60_000)
    coord.replay(m.transactional_id, decode_value(m.transactional_id, encode_value(m, 1)))
    return coord


def end(coord, epoch: int, commit: bool, pid: int = PID):
    return coord.end_txn("t", pid, epoch, commit, 50, tv2=True, new_pid=lambda: 900)


def test_flexible_value_round_trips_and_v0_still_reads():
    m = TxnMetadata("tx-é", 42, 7, 30_000, S.PREPARE_COMMIT, frozenset({("a", 0), ("b", 3)}),
                    1234, 1000, previous_producer_id=41, next_producer_id=43, client_tv=2)
    v1 = encode_value(m, 1)
    assert v1[:2] == b"\x00\x01"
    assert decode_value("tx-é", v1) == m
    plain = m.but(previous_producer_id=-1, next_producer_id=-1, client_tv=0)
    assert decode_value("tx-é", encode_value(plain, 1)) == plain
    assert decode_value("tx-é", encode_value(m, 0)) == plain  # v0 has no tagged fields
    with pytest.raises(ValueError):
        decode_value("x", v1[:-5])


@pytest.mark.parametrize("state, commit, retry, expected", [
    # Kafka's table (TransactionCoordinator.endTransaction): EB epoch bump, NONE no change
    (S.EMPTY, False, True, Errors.PRODUCER_FENCED),
    (S.EMPTY, False, False, "EB"),
    (S.EMPTY, True, True, Errors.PRODUCER_FENCED),
    (S.EMPTY, True, False, Errors.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, True, "NONE"),
    (S.COMPLETE_ABORT, False, False, "EB"),
    (S.COMPLETE_ABORT, True, True, Errors.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, True, False, Errors.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, False, True, Errors.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, False, False, "EB"),
    (S.COMPLETE_COMMIT, True, True, "NONE"),
    (S.COMPLETE_COMMIT, True, False, Errors.INVALID_TXN_STATE),
])
def test_end_of_a_completed_or_empty_transaction(state, commit, retry, expected):
    coord = coordinator_with(TxnMetadata("t", PID, 5, 1000, state))
    epoch = 4 if retry else 5
    if isinstance(expected, int):
        assert code(lambda: end(coord, epoch, commit)) == expected
    elif expected == "NONE":
        assert end(coord, epoch, commit) is None
    else:
        m = end(coord, epoch, commit)
        assert (m.state, m.producer_epoch, m.partitions) == (S.PREPARE_ABORT, 6, frozenset())


def test_ongoing_end_bumps_the_epoch_and_markers_carry_it():
    coord = coordinator_with(TxnMetadata("t", PID, 5, 1000, S.ONGOING, frozenset({("a", 0)}),
                                         10, 10))
    assert code(lambda: end(coord, 4, True)) == Errors.PRODUCER_FENCED
    m = end(coord, 5, True)
    assert (m.state, m.producer_epoch, m.partitions, m.client_tv) == (
        S.PREPARE_COMMIT, 6, {("a", 0)}, 2)
    assert coord.answer_v2(m) == (PID, 6)
    coord.replay("t", m)
    assert code(lambda: end(coord, 5, True)) == Errors.CONCURRENT_TRANSACTIONS  # a retry
    assert code(lambda: end(coord, 5, False)) == Errors.INVALID_TXN_STATE
    done = coord.completed(m, 60)
    assert (done.state, done.producer_id, done.producer_epoch) == (S.COMPLETE_COMMIT, PID, 6)


def test_an_exhausted_epoch_moves_to_the_next_producer_id():
    coord = coordinator_with(TxnMetadata("t", PID, MAX_EPOCH - 1, 1000, S.ONGOING,
                                         frozenset({("a", 0)}), 10, 10))
    m = end(coord, MAX_EPOCH - 1, False)
    assert (m.producer_id, m.producer_epoch, m.next_producer_id) == (PID, MAX_EPOCH, 900)
    assert coord.answer_v2(m) == (900, 0)  # the client sees 32766, then 0
    coord.replay("t", decode_value("t", encode_value(m, 1)))
    done = coord.completed(coord.txns["t"], 60)
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id,
            done.next_producer_id) == (900, 0, PID, -1)
    coord.replay("t", done)
    assert end(coord, MAX_EPOCH - 1, False) is None  # the retry, from the old producer id
    assert end(coord, 0, False, pid=900).producer_epoch == 1


def test_verify_only_answers_per_partition():
    coord = coordinator_with(TxnMetadata("t", PID, 5, 1000, S.ONGOING, frozenset({("a", 0)}),
                                         10, 10))
    tps = [("a", 0), ("a", 1)]
    assert coord.verify_partitions("t", PID, 5, tps) == {
        ("a", 0): 0, ("a", 1): Errors.TRANSACTION_ABORTABLE}
    assert set(coord.verify_partitions("t", PID, 4, tps).values()) == {Errors.PRODUCER_FENCED}
    assert set(coord.verify_partitions("t", 8, 5, tps).values()) == {
        Errors.INVALID_PRODUCER_ID_MAPPING}
    assert set(coord.verify_partitions("nobody", PID, 5, tps).values()) == {
        Errors.INVALID_PRODUCER_ID_MAPPING}
    coord.replay("t", end(coord, 5, True))
    assert set(coord.verify_partitions("t", PID, 6, tps).values()) == {
        Errors.CONCURRENT_TRANSACTIONS}


def test_init_producer_id_retry_of_a_successful_bump_keeps_the_epoch():
    """KIP-360: a producer that asked for a bump and lost the answer asks again with its old
    epoch and gets the bumped one, not a second bump (Kafka's lastProducerEpoch)."""
    coord = coordinator_with(TxnMetadata("t", PID, 5, 1000, S.COMPLETE_COMMIT))
    pids = itertools.count(100)
    _, m = coord.init_producer_id("t", 1000, PID, 5, 0, lambda: next(pids))
    assert m.producer_epoch == 6
    coord.replay("t", m)
    _, again = coord.init_producer_id("t", 1000, PID, 5, 1, lambda: next(pids))
    assert again.producer_epoch == 6
    assert code(lambda: coord.init_producer_id("t", 1000, PID, 3, 1, lambda: 0)) == (
        Errors.PRODUCER_FENCED)


def test_fencing_at_transaction_version_2_ends_with_a_second_bump():
    """A timeout or a new instance fences the producer (epoch + 1) and, at a finalized
    transaction.version 2, the abort is a version 2 end: one more bump, markers included."""
    ongoing = TxnMetadata("t", PID, 5, 1000, S.ONGOING, frozenset({("a", 0)}), 10, 10)
    coord = coordinator_with(ongoing)
    (v1,) = coord.timed_out(2000)
    (v2,) = coord.timed_out(2000, tv2=True)
    assert (v1.state, v1.producer_epoch) == (S.PREPARE_ABORT, 6)
    assert (v2.state, v2.producer_epoch, v2.partitions) == (S.PREPARE_ABORT, 7, {("a", 0)})
    abort, m = coord.init_producer_id("t", 1000, -1, -1, 20, lambda: 900, tv2=True)
    assert (abort.producer_epoch, m.producer_epoch, m.state) == (7, 7, S.EMPTY)
