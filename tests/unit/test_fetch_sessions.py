"""spool.broker.fetch_sessions: the cache's eviction rule (Kafka's FetchSessionCache), with
the time given to each call (the broker passes its clock's), and the session's bookkeeping."""

from __future__ import annotations

import itertools

from spool.broker.fetch_sessions import (
    EVICTION_MS,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSessionCache,
    next_epoch,
)
from spool.broker.metrics_state import fetch_session_metrics
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from spool.protocol.primitives import ZERO_UUID


def parts(n: int) -> dict:
    return {("t", i): CachedPartition("t", ZERO_UUID, FetchPartition(partition=i))
            for i in range(n)}


def cache(slots: int) -> FetchSessionCache:
    ids = itertools.count(1)
    return FetchSessionCache(slots, rng=lambda lo, hi: next(ids))


def test_epochs_wrap_to_1_and_final_stays_final():
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, -1]


def test_a_young_session_is_kept_from_a_consumer_but_not_from_a_follower():
    c = cache(1)
    first = c.maybe_create(0, False, False, parts(5))
    assert c.maybe_create(10, False, False, parts(50)) == INVALID_SESSION_ID
    follower = c.maybe_create(20, True, False, parts(1))
    assert follower != INVALID_SESSION_ID and c.get(first) is None
    assert c.evictions == 1
    # a young follower's session is evictable by nobody
    assert c.maybe_create(30, True, False, parts(100)) == INVALID_SESSION_ID


def test_a_session_unused_for_two_minutes_goes_first():
    c = cache(2)
    a = c.maybe_create(0, True, False, parts(100))
    b = c.maybe_create(0, False, False, parts(1))
    c.touch(c.get(b), EVICTION_MS)
    new = c.maybe_create(EVICTION_MS + 1, False, False, parts(1))
    assert new != INVALID_SESSION_ID
    assert (c.get(a), c.get(b) is not None) == (None, True)  # a: stale, even privileged


def test_old_sessions_go_to_a_more_valuable_new_one_smallest_first():
    c = cache(2)
    small = c.maybe_create(0, False, False, parts(2))
    big = c.maybe_create(0, False, False, parts(10))
    now = EVICTION_MS + 5
    c.touch(c.get(small), now)  # both in use: none stale, both older than EVICTION_MS
    c.touch(c.get(big), now)
    assert c.maybe_create(now, False, False, parts(2)) == INVALID_SESSION_ID  # not worth more
    assert c.maybe_create(now, False, False, parts(3)) != INVALID_SESSION_ID
    assert (c.get(small), c.get(big) is not None) == (None, True)


def test_no_slots_no_sessions():
    assert cache(0).maybe_create(0, True, False, parts(1)) == INVALID_SESSION_ID


def test_update_adds_replaces_and_forgets_in_order():
    c = cache(1)
    s = c.get(c.maybe_create(0, False, False, parts(3)))
    s.update([FetchTopic(topic="t", partitions=[FetchPartition(partition=1, fetch_offset=9),
                                                FetchPartition(partition=3)]),
              FetchTopic(topic="u", partitions=[FetchPartition(partition=0)])],
             [ForgottenTopic(topic="t", partitions=[0])])
    assert list(s.partitions) == [("t", 1), ("t", 2), ("t", 3), ("u", 0)]
    assert s.partitions[("t", 1)].fetch.fetch_offset == 9
    assert [(t.topic, [p.partition for p in t.partitions]) for t in s.fetch_topics()] == [
        ("t", [1, 2, 3]), ("u", [0])]


def test_the_caches_metrics_count_sessions_partitions_and_evictions():
    def scraped(c: FetchSessionCache) -> dict[str, float]:
        return {s.name: s.value for m in fetch_session_metrics(c) for s in m.samples}

    p = "kafka_server_fetchsessioncache_"
    c = cache(2)
    assert scraped(c) == {p + "numincrementalfetchsessions": 0,
                          p + "numincrementalfetchpartitionscached": 0,
                          p + "incrementalfetchsessionevictions_total": 0}
    c.maybe_create(0, False, False, parts(5))
    c.maybe_create(0, False, False, parts(3))
    # both unused for over EVICTION_MS: the least recently used, then lowest id, goes (5)
    c.maybe_create(EVICTION_MS + 1, True, False, parts(4))
    assert scraped(c) == {p + "numincrementalfetchsessions": 2,
                          p + "numincrementalfetchpartitionscached": 7,
                          p + "incrementalfetchsessionevictions_total": 1}
