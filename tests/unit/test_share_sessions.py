"""spool.broker.share_sessions: KIP-932 share session epochs, partitions and limits."""

from __future__ import annotations

import uuid

import pytest

from spool.broker.share_sessions import MAX_EPOCH, ShareSessionCache, next_epoch
from spool.protocol.errors import Errors, KafkaError

T = uuid.uuid4()
A, B, C = (T, 0), (T, 1), (T, 2)


def code(fn, *args) -> int:
    with pytest.raises(KafkaError) as e:
        fn(*args)
    return e.value.code


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(-1) == -1


def test_initial_epoch_opens_and_later_epochs_must_follow():
    cache = ShareSessionCache(10)
    session, full = cache.fetch_context("g", "m", 0, [A, B], [], False)
    assert full and session.epoch == 1 and list(session.partitions) == [A, B]
    assert code(cache.fetch_context, "g", "m", 2, [], [], False) == \
        Errors.INVALID_SHARE_SESSION_EPOCH
    same, full = cache.fetch_context("g", "m", 1, [C], [A], True)
    assert same is session and not full
    assert list(session.partitions) == [B, C] and session.epoch == 2
    # ShareAcknowledge moves the same epoch on
    cache.acknowledge_context("g", "m", 2)
    assert session.epoch == 3
    assert code(cache.acknowledge_context, "g", "m", 2) == Errors.INVALID_SHARE_SESSION_EPOCH


def test_session_errors():
    cache = ShareSessionCache(10)
    assert code(cache.fetch_context, "g", "m", 1, [A], [], False) == \
        Errors.SHARE_SESSION_NOT_FOUND
    assert code(cache.fetch_context, "g", "m", -1, [], [], True) == \
        Errors.SHARE_SESSION_NOT_FOUND
    assert code(cache.acknowledge_context, "g", "m", 1) == Errors.SHARE_SESSION_NOT_FOUND
    assert code(cache.acknowledge_context, "g", "m", 0) == Errors.INVALID_SHARE_SESSION_EPOCH
    # acknowledgements in an initial fetch
    assert code(cache.fetch_context, "g", "m", 0, [A], [], True) == Errors.INVALID_REQUEST
    assert len(cache) == 0


def test_final_epoch_needs_the_session_and_does_not_move_it():
    cache = ShareSessionCache(10)
    session, _ = cache.fetch_context("g", "m", 0, [A], [], False)
    assert cache.fetch_context("g", "m", -1, [], [], True) == (None, False)
    cache.acknowledge_context("g", "m", -1)
    assert session.epoch == 1 and cache.get("g", "m") is session


def test_limit_reached_and_reopening_replaces():
    closed = []
    cache = ShareSessionCache(2, on_close=closed.append)
    cache.fetch_context("g", "m1", 0, [A], [], False)
    cache.fetch_context("g", "m2", 0, [A], [], False)
    assert code(cache.fetch_context, "g", "m3", 0, [A], [], False) == \
        Errors.SHARE_SESSION_LIMIT_REACHED
    # the same member opening again replaces its session (no release: it goes on)
    s, _ = cache.fetch_context("g", "m1", 0, [B], [], False)
    assert list(s.partitions) == [B] and len(cache) == 2 and closed == []


def test_connection_gone_ends_its_sessions_only():
    closed = []
    cache = ShareSessionCache(10, on_close=closed.append)
    conn1, conn2 = object(), object()
    cache.fetch_context("g", "m1", 0, [A], [], False, conn1)
    cache.fetch_context("h", "m1", 0, [A], [], False, conn1)
    cache.fetch_context("g", "m2", 0, [A], [], False, conn2)
    cache.connection_gone(conn1)
    assert sorted(s.key for s in closed) == [("g", "m1"), ("h", "m1")]
    assert cache.get("g", "m2") is not None and len(cache) == 1


def test_subsequent_answers_name_changed_partitions_only():
    cache = ShareSessionCache(10)
    session, _ = cache.fetch_context("g", "m", 0, [A], [], False)
    assert not session.must_answer(A, False, 0)
    cache.fetch_context("g", "m", 1, [B], [], False)
    assert session.must_answer(B, False, 0)  # newly added: named once
    assert not session.must_answer(B, False, 0)
    assert session.must_answer(A, True, 0)  # records
    assert session.must_answer(A, False, Errors.NOT_LEADER_OR_FOLLOWER)
    assert session.must_answer(A, False, 0)  # the error went away: named again once
    assert not session.must_answer(A, False, 0)
