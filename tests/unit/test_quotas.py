"""spool.security.quotas: Kafka's quota precedence, rate windows and throttle times."""

from __future__ import annotations

import pytest

from spool.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    Rate,
    ThrottlingQuotaExceeded,
    has_client_quotas,
)

P = PRODUCER_BYTE_RATE


def ent(user=..., client=...):
    parts = []
    if client is not ...:
        parts.append(("client-id", client))
    if user is not ...:
        parts.append(("user", user))
    return tuple(parts)


LEVELS = [  # Kafka's documented precedence, most specific first
    (ent(user="alice", client="app"), ("alice", "app")),
    (ent(user="alice", client=None), ("alice", "app")),
    (ent(user="alice"), ("alice", "")),
    (ent(user=None, client="app"), ("alice", "app")),
    (ent(user=None, client=None), ("alice", "app")),
    (ent(user=None), ("alice", "")),
    (ent(client="app"), ("", "app")),
    (ent(client=None), ("", "app")),
]


def test_precedence_walks_kafkas_eight_levels_in_order():
    quotas = {entity: {P: 100.0 + i} for i, (entity, _) in enumerate(LEVELS)}
    for i, (entity, tags) in enumerate(LEVELS):
        m = ClientQuotaManager(P)
        assert m.resolve(quotas, "alice", "app") == (tags, 100.0 + i), entity
        del quotas[entity]
    assert ClientQuotaManager(P).resolve(quotas, "alice", "app") is None


def test_precedence_is_per_quota_key():
    quotas = {ent(user="alice"): {CONSUMER_BYTE_RATE: 5.0}, ent(client=None): {P: 7.0}}
    assert ClientQuotaManager(P).resolve(quotas, "alice", "app") == (("", "app"), 7.0)
    assert ClientQuotaManager(CONSUMER_BYTE_RATE).resolve(quotas, "alice", "app") == (
        ("alice", ""), 5.0)


def test_empty_client_id_has_no_client_id_quota():
    quotas = {ent(client=None): {P: 7.0}}
    assert ClientQuotaManager(P).resolve(quotas, "ANONYMOUS", "") is None


def test_default_user_quota_is_one_rate_per_user():
    quotas = {ent(user=None): {P: 1000.0}}
    m = ClientQuotaManager(P, samples=11, window_s=1)
    assert m.record(quotas, "alice", "a", 20_000, 0) > 0
    assert m.record(quotas, "bob", "b", 5_000, 0) == 0
    # alice's client ids share her rate
    assert m.record(quotas, "alice", "other", 1, 0) > 0


def test_client_default_quota_is_one_rate_per_client_id():
    quotas = {ent(client=None): {P: 1000.0}}
    m = ClientQuotaManager(P)
    assert m.record(quotas, "alice", "a", 20_000, 0) > 0
    assert m.record(quotas, "bob", "a", 1, 0) > 0  # same client id, another user: shared
    assert m.record(quotas, "alice", "b", 5_000, 0) == 0


def test_throttle_time_is_kafkas_formula():
    # 11 samples of 1 s: the window is at least 10 s, so 10_000 bytes at once is 1000 B/s
    quotas = {ent(client="app"): {P: 1000.0}}
    m = ClientQuotaManager(P, samples=11, window_s=1)
    assert m.record(quotas, "u", "app", 10_000, 0) == 0
    # 20_000 over 10 s is 2000 B/s: (2000 - 1000) / 1000 * 10_000 ms
    assert m.record(quotas, "u", "app", 10_000, 0) == 10_000
    # at 15 s the first samples have had no event for 11 windows: forgotten
    assert m.record(quotas, "u", "app", 10_000, 15_000) == 0
    # 0.5 s later: 40_000 over 10.5 s (0.5 s since the oldest sample, padded by 10 windows)
    assert m.record(quotas, "u", "app", 30_000, 15_500) == 29_500


def test_a_client_that_waits_its_throttle_time_is_held_at_the_quota():
    quotas = {ent(client="app"): {P: 1_000_000.0}}
    m = ClientQuotaManager(P, samples=11, window_s=1)
    now, sent, start = 0, 0, None
    while now < 120_000:
        throttle = m.record(quotas, "u", "app", 64_000, now)
        if now >= 30_000:  # past the first windows' burst
            if start is None:
                start = now
            sent += 64_000
        now += max(throttle, 5)  # a request every 5 ms unless told to wait
    rate = sent / ((now - start) / 1000)
    assert 0.9e6 < rate < 1.1e6


def test_quota_changes_apply_to_the_rate_already_counted():
    m = ClientQuotaManager(P)
    assert m.record({ent(client="app"): {P: 10_000.0}}, "u", "app", 50_000, 0) == 0
    assert m.record({ent(client="app"): {P: 1000.0}}, "u", "app", 1, 10) > 0


def test_unrecord_takes_a_value_back():
    quotas = {ent(client="app"): {CONSUMER_BYTE_RATE: 1000.0}}
    m = ClientQuotaManager(CONSUMER_BYTE_RATE)
    assert m.record(quotas, "u", "app", 9_000, 0) == 0
    assert m.record(quotas, "u", "app", 5_000, 1) > 0
    m.unrecord(quotas, "u", "app", 5_000, 1)
    assert m.record(quotas, "u", "app", 1_000, 2) == 0


def test_max_value_in_window():
    quotas = {ent(client="app"): {CONSUMER_BYTE_RATE: 1000.0}}
    m = ClientQuotaManager(CONSUMER_BYTE_RATE, samples=11, window_s=2)
    assert m.max_value_in_window(quotas, "u", "app") == 1000.0 * 10 * 2
    assert m.max_value_in_window(quotas, "u", "other") is None


def test_request_percentage_throttle_is_capped_at_one_window():
    quotas = {ent(client="app"): {REQUEST_PERCENTAGE: 10.0}}
    m = ClientQuotaManager(REQUEST_PERCENTAGE, samples=11, window_s=1, max_throttle_ms=1000)
    assert m.record(quotas, "u", "app", 5000.0, 0) == 1000


def test_rate_forgets_samples_without_events():
    r = Rate(samples=3, window_ms=1000)
    r.record(3000, 0)
    assert r.measure(0) == 1500.0  # at least 2 windows
    assert r.measure(3000) == 0.0


def test_strict_mutation_quota_refuses_once_the_bucket_is_empty():
    quotas = {ent(client="adm"): {"controller_mutation_rate": 10.0}}
    m = ControllerMutationQuotaManager(samples=11, window_s=1)  # burst: 110 partitions
    q = m.quota_for(quotas, "u", "adm", strict=True)
    q.record(200, 1_000_000)  # the bucket was full: one request may overdraw it
    with pytest.raises(ThrottlingQuotaExceeded) as e:
        q.record(1, 1_000_000)
    assert e.value.throttle_time_ms == 9000  # 90 tokens short at 10 a second
    assert q.is_exceeded and q.throttle_time_ms(1_001_000) == 8000
    q2 = m.quota_for(quotas, "u", "adm", strict=True)
    q2.record(1, 1_009_000)  # refilled to 0 by then
    assert m.quota_for(quotas, "u", "other", strict=True) is None


def test_permissive_mutation_quota_accepts_and_reports_the_throttle():
    quotas = {ent(client="adm"): {"controller_mutation_rate": 10.0}}
    m = ControllerMutationQuotaManager(samples=11, window_s=1)
    q = m.quota_for(quotas, "u", "adm", strict=False)
    q.record(200, 1_000_000)
    q.record(10, 1_000_000)
    assert not q.is_exceeded
    assert q.throttle_time_ms(1_000_000) == 10_000


def test_an_ip_quota_is_not_a_client_quota():
    assert not has_client_quotas({})
    assert not has_client_quotas({(("ip", None),): {"connection_creation_rate": 5.0}})
    assert has_client_quotas({(("ip", None),): {"connection_creation_rate": 5.0},
                              ent(user=None): {REQUEST_PERCENTAGE: 50.0}})
