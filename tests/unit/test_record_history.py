"""The record history checker (tests/helpers/history.py, ``check_records``) catches each kind
of violation it names in a history made bad on purpose, and passes one that holds."""

from __future__ import annotations

from tests.helpers.history import (
    ACKED,
    FAILED,
    UNKNOWN,
    Consumed,
    Read,
    RecordHistory,
    check_records,
    parse_record_value,
    record_value,
)

T = "t"


def produce(h: RecordHistory, key: bytes, partition: int, outcome: str, offset: int = -1,
            writer: int = 0):
    a = h.begin(writer, T, key)
    return h.end(a, outcome, partition, offset if outcome == ACKED else -1,
                 "" if outcome == ACKED else "X")


def rec(a, offset: int, partition: int | None = None) -> Consumed:
    return Consumed(T, a.partition if partition is None else partition, offset, a.key,
                    record_value(a.writer, a.seq, pad=3))


def good_history():
    """Two writers, two partitions, keys a and b; one unknown attempt that was written and one
    that was not; one failed attempt (not written)."""
    h = RecordHistory()
    a0 = produce(h, b"a", 0, ACKED, 0)
    a1 = produce(h, b"b", 0, ACKED, 1)
    a2 = produce(h, b"a", 0, ACKED, 2)
    b0 = produce(h, b"a", 1, ACKED, 0, writer=1)
    u = produce(h, b"a", 1, UNKNOWN, writer=1)
    b1 = produce(h, b"a", 1, ACKED, 2, writer=1)
    produce(h, b"b", 1, UNKNOWN, writer=1)  # never written
    produce(h, b"b", 0, FAILED)
    read = Read("replica 1", [rec(a0, 0), rec(a1, 1), rec(a2, 2),
                              rec(b0, 0), rec(u, 1, partition=1), rec(b1, 2)],
                {(T, 0): 3, (T, 1): 3})
    return h, read, (a0, a1, a2, b0, u, b1)


def test_values_name_their_attempt():
    assert parse_record_value(record_value(3, 41)) == (3, 41)
    assert parse_record_value(record_value(3, 41, pad=100)) == (3, 41)
    assert parse_record_value(b"hello") is None and parse_record_value(None) is None


def test_a_history_that_holds_has_no_violations():
    h, read, _ = good_history()
    rep = check_records(h, read)
    assert rep.violations == [] and not rep, rep.summary()
    assert h.counts() == {ACKED: 5, UNKNOWN: 2, FAILED: 1}


def test_an_acknowledged_record_missing_is_lost():
    h, read, (a0, a1, a2, *_) = good_history()
    read.records = [r for r in read.records if parse_record_value(r.value) != a1.id]
    rep = check_records(h, read)
    assert len(rep.lost) == 1 and rep.violations == rep.lost, rep.summary()
    assert "w0-1 key=b'b' t-0@1 -> acked" in rep.lost[0]
    assert "(read up to offset 3)" in rep.lost[0]


def test_a_partition_read_empty_loses_its_acknowledged_records():
    h, read, _ = good_history()
    read.records = [r for r in read.records if r.partition != 1]
    rep = check_records(h, read)
    assert len(rep.lost) == 2 and rep.violations == rep.lost, rep.summary()


def test_a_partition_not_read_at_all_loses_nothing():
    h, read, _ = good_history()
    read.records = [r for r in read.records if r.partition != 1]
    del read.ends[(T, 1)]
    assert check_records(h, read).violations == []


def test_a_record_twice_is_duplicated_acked_or_not():
    h, read, (a0, a1, a2, b0, u, b1) = good_history()
    read.records.append(rec(a2, 3))
    read.records.append(rec(u, 4, partition=1))
    rep = check_records(h, read)
    assert len(rep.duplicated) == 2 and rep.violations == rep.duplicated, rep.summary()
    assert "found 2 times, at t-0@2, t-0@3" in rep.duplicated[0]


def test_acknowledged_records_of_one_key_in_the_other_order_are_reordered():
    h, read, (a0, a1, a2, *_) = good_history()
    # a0 and a2 (key a) swap places: each also moves off its acknowledged offset.
    read.records[0], read.records[2] = rec(a2, 0), rec(a0, 2)
    rep = check_records(h, read)
    assert len(rep.reordered) == 1, rep.summary()
    assert "key=b'a': w0-2 at offset 0 before w0-0 at offset 2" in rep.reordered[0]
    assert len(rep.misplaced) == 2 and not rep.lost and not rep.duplicated


def test_reordering_is_per_key_and_per_writer():
    """Records of different keys, or of different writers, may interleave in any order (the
    offsets the history was given are not checked here: no offsets acknowledged)."""
    h = RecordHistory()
    a = [produce(h, k, 0, ACKED, -1, writer=w) for w, k in
         ((0, b"a"), (0, b"b"), (1, b"a"), (1, b"a"))]
    ok = Read("consumer", [rec(a[1], 0), rec(a[2], 1), rec(a[0], 2), rec(a[3], 3)])
    assert check_records(h, ok).violations == []
    bad = Read("consumer", [rec(a[3], 0), rec(a[2], 1), rec(a[0], 2), rec(a[1], 3)])
    rep = check_records(h, bad)
    assert len(rep.reordered) == 1 and "w1-1 at offset 0 before w1-0" in rep.reordered[0]


def test_an_unacknowledged_record_out_of_order_is_not_reordered():
    h, read, (a0, a1, a2, b0, u, b1) = good_history()
    # the unknown attempt u landed after b1 (a retry may): order concerns acked records only
    read.records = [r for r in read.records if r.partition == 0] + [
        rec(b0, 0), rec(b1, 2), rec(u, 3, partition=1)]
    assert check_records(h, read).violations == []


def test_an_acknowledged_record_elsewhere_than_acknowledged_is_misplaced():
    h, read, (a0, a1, *_) = good_history()
    read.records[1] = rec(a1, 7)  # the only record of key b: no order to break
    rep = check_records(h, read)
    assert rep.violations == rep.misplaced and len(rep.misplaced) == 1, rep.summary()
    assert "w0-1 key=b'b' t-0@1 -> acked found at t-0@7" in rep.misplaced[0]
    read.records[1] = rec(a1, 1, partition=1)
    assert len(check_records(h, read).misplaced) == 1


def test_a_failed_record_in_the_log_or_one_nobody_sent_is_unexpected():
    h, read, _ = good_history()
    failed = h.by_outcome(FAILED)[0]
    read.records.append(rec(failed, 3))
    read.records.append(Consumed(T, 0, 4, b"a", record_value(7, 0)))
    read.records.append(Consumed(T, 0, 5, None, b"garbage"))
    rep = check_records(h, read)
    assert len(rep.unexpected) == 3 and rep.violations == rep.unexpected, rep.summary()
    assert sum("though it failed" in x for x in rep.unexpected) == 1, rep.unexpected
    assert sum("no attempt made it" in x for x in rep.unexpected) == 2, rep.unexpected
    # Another topic's records are not judged when topics are named.
    read.records = read.records[:6] + [Consumed("other", 0, 0, None, b"garbage")]
    assert check_records(h, read, topics={T}).violations == []


def test_confluent_callback_records_the_clients_answer():
    h = RecordHistory()

    class Msg:
        def __init__(self, p, o):
            self.p, self.o = p, o

        def partition(self):
            return self.p

        def offset(self):
            return self.o

    class Err:
        def name(self):
            return "NOT_ENOUGH_REPLICAS"

        def str(self):
            return "Broker: Not enough in-sync replicas"

    a, b = h.begin(0, T, b"k"), h.begin(0, T, b"k")
    h.confluent_callback(a)(None, Msg(2, 40))
    h.confluent_callback(b)(Err(), Msg(2, -1001))
    assert (a.outcome, a.partition, a.offset) == (ACKED, 2, 40)
    assert b.outcome == UNKNOWN and b.error.startswith("NOT_ENOUGH_REPLICAS: ")
