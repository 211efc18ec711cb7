"""tests.helpers.share's checker: it reports what the share-group tests must catch."""

from __future__ import annotations

from tests.helpers.share import ShareLog, check_delivery_counts, check_exactly_once


def _log(events: list[tuple]) -> ShareLog:
    """("d", consumer, offset, count) a delivery, ("a", consumer, offset, type, error) an ack,
    in time order."""
    log = ShareLog()
    for e in events:
        if e[0] == "d":
            log.delivered(*e[1:])
        else:
            log.acked(*e[1:])
    return log


def test_a_clean_history_holds():
    log = _log([("d", "a", 0, 1), ("d", "b", 1, 1), ("a", "a", 0, "RELEASE", None),
                ("d", "b", 0, 2), ("a", "b", 0, "ACCEPT", None), ("a", "b", 1, "ACCEPT", None)])
    assert check_exactly_once(log, 2) == []
    assert check_delivery_counts(log) == []


def test_twice_accepted_missing_and_outside_are_reported():
    log = _log([("d", "a", 0, 1), ("a", "a", 0, "ACCEPT", None), ("d", "b", 0, 1),
                ("a", "b", 0, "ACCEPT", None), ("d", "b", 5, 1), ("a", "b", 5, "ACCEPT", None)])
    out = check_exactly_once(log, 3)
    assert any("offset 0 finished 2 times: ACCEPT by a, ACCEPT by b" in v for v in out), out
    assert any("offset 5 finished, outside [0, 3)" in v for v in out), out
    assert any("2 offsets never accepted or rejected, e.g. [1, 2]" in v for v in out), out


def test_an_offset_both_accepted_and_rejected_is_finished_twice():
    log = _log([("d", "a", 0, 1), ("a", "a", 0, "REJECT", None), ("a", "b", 0, "ACCEPT", None)])
    assert check_exactly_once(log, 1) == ["offset 0 finished 2 times: REJECT by a, ACCEPT by b"]


def test_delivery_after_a_confirmed_accept_or_reject_is_reported():
    log = _log([("d", "a", 0, 1), ("a", "a", 0, "REJECT", None), ("d", "b", 0, 2),
                ("d", "a", 1, 1), ("a", "a", 1, "ACCEPT", None), ("d", "a", 1, 2)])
    out = check_exactly_once(log, 2)
    assert any(v.startswith("offset 0 delivered to b") and "REJECT by a" in v for v in out), out
    assert any(v.startswith("offset 1 delivered to a") and "ACCEPT by a" in v for v in out), out


def test_an_older_acquisition_returned_late_is_not_a_redelivery():
    log = _log([("d", "a", 0, 1), ("d", "b", 0, 2), ("a", "b", 0, "ACCEPT", None, 2),
                ("d", "a", 0, 1), ("d", "c", 0, 2)])
    out = check_exactly_once(log, 1)
    assert out == [out[0]] and out[0].startswith("offset 0 delivered to c (delivery count 2)"), out


def test_a_failed_accept_counts_only_when_its_outcome_is_unknown():
    log = _log([("d", "a", 0, 1), ("a", "a", 0, "ACCEPT", "KafkaError: broker gone")])
    assert check_exactly_once(log, 1, unknown_ok=True) == []
    assert check_exactly_once(log, 1) == ["1 offsets never accepted or rejected, e.g. [0]"]


def test_delivery_counts_must_start_at_1_and_increase():
    assert check_delivery_counts(_log([("d", "a", 0, 2)])) == [
        "offset 0: delivery counts [2] (to ['a'])"]
    assert check_delivery_counts(_log([("d", "a", 0, 1), ("d", "b", 0, 1)])) != []
