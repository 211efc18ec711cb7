"""ConnectionQuotas: Kafka's IP connection creation rate (recordIpConnectionMaybeThrottle)."""

from __future__ import annotations

from spool.security.quotas import ConnectionQuotas, ip_connection_rates

IP4 = ((("ip", "10.0.0.1"),), {"connection_creation_rate": 2.0})
DEFAULT = ((("ip", None),), {"connection_creation_rate": 5.0})
OTHER = ((("user", "alice"),), {"producer_byte_rate": 100.0})


def test_ip_entities_are_read_in_the_servers_form():
    quotas = dict([IP4, DEFAULT, OTHER, ((("ip", "::1"),), {"connection_creation_rate": 1.0})])
    assert ip_connection_rates(quotas) == ({"10.0.0.1": 2.0, "0:0:0:0:0:0:0:1": 1.0}, 5.0)
    assert not ConnectionQuotas(dict([OTHER])).enabled


def test_a_fresh_ip_opens_quota_times_num_minus_one_windows_then_is_throttled():
    cq = ConnectionQuotas(dict([IP4]), samples=11, window_s=1)
    now = 1_000_000
    assert [cq.record("10.0.0.1", now) for _ in range(20)] == [0] * 20  # 2/s * 10 s
    # the 21st: rate 21/10 s over 2: (2.1 - 2) / 2 * 10 s = 500 ms; it is not counted
    assert cq.record("10.0.0.1", now) == 500
    assert cq.record("10.0.0.1", now) == 500
    assert cq.record("10.0.0.2", now) == 0  # no quota of its own, no default: not counted
    assert "10.0.0.2" not in cq.rates


def test_the_throttle_is_at_most_one_window_and_the_default_applies_to_other_ips():
    cq = ConnectionQuotas(dict([DEFAULT]), samples=2, window_s=1)
    now = 5_000
    assert [cq.record("10.0.0.9", now) for _ in range(5)] == [0] * 5  # 5/s over 1 s
    assert cq.record("10.0.0.9", now) == 200  # (6 - 5) / 5 * 1000
    cq.update({})
    assert not cq.enabled and cq.record("10.0.0.9", now) == 0
    cq = ConnectionQuotas({(("ip", None),): {"connection_creation_rate": 0.5}}, 11, 1)
    assert [cq.record("h", now) for _ in range(5)] == [0] * 5
    assert cq.record("h", now) == 1000  # (0.6 - 0.5) / 0.5 * 10 s = 2 s, capped at 1 window


def test_the_broker_wide_rate_counts_every_connection_and_waits_at_most_one_window():
    from spool.security.quotas import BrokerConnectionRate

    rate = BrokerConnectionRate(2, samples=11, window_s=1)
    now = 7_000
    assert [rate.record(now) for _ in range(20)] == [0] * 20
    assert rate.record(now) == 500  # (2.1 - 2) / 2 * 10 s; counted all the same
    assert rate.record(now) == 1000  # (2.2 - 2) / 2 * 10 s = 1 s: one window at most
    rate.unrecord(now)
    assert rate.record(now) == 1000
