"""spool.broker.telemetry: Kafka's ClientMetricsManager rules with a fake clock."""

from __future__ import annotations

import uuid

from spool.broker.telemetry import ClientMetricsManager, Push, TelemetryStore
from spool.cluster.client_metrics import subscriptions
from spool.protocol._generated import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from spool.protocol.errors import Errors


class Clock:
    def __init__(self):
        self.t = 1_000_000

    def __call__(self):
        return self.t


CLIENT = {"client_id": "app-1", "client_software_name": "librdkafka",
          "client_software_version": "2.16.0", "client_source_address": "10.0.0.7",
          "client_source_port": "40000"}


def manager(configs, clock, max_bytes=1000):
    return ClientMetricsManager(lambda: configs, max_bytes,
                                TelemetryStore(60_000, 10_000, clock), clock)


def get(m, iid=None, attrs=CLIENT):
    return m.get_subscriptions(GetTelemetrySubscriptionsRequest(
        client_instance_id=iid or uuid.UUID(int=0)), attrs)


def test_matching_unions_metrics_and_takes_the_smallest_interval():
    configs = {
        "a": {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000",
              "match": "client_id=app-.*"},
        "b": {"metrics": "org.apache.kafka.consumer.", "interval.ms": "2000",
              "match": "client_software_name=librdkafka,client_source_address=10\\.0\\..*"},
        "c": {"metrics": "*", "interval.ms": "100", "match": "client_id=other"},
    }
    r = get(manager(configs, Clock()))
    assert r.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert r.push_interval_ms == 2000
    configs["d"] = {"metrics": "*"}  # no match patterns: everyone
    r = get(manager(configs, Clock()))
    assert (r.requested_metrics, r.push_interval_ms) == (["*"], 2000)


def test_a_pattern_must_match_the_whole_value():
    configs = {"a": {"metrics": "x.", "match": "client_id=app"}}
    assert get(manager(configs, Clock())).requested_metrics == []


def test_push_interval_throttles_and_a_subscription_change_resets():
    clock = Clock()
    configs = {"a": {"metrics": "x.", "interval.ms": "1000"}}
    m = manager(configs, clock)
    r = get(m)
    iid = r.client_instance_id

    def push(sub, terminating=False, data=b""):
        return m.push(PushTelemetryRequest(client_instance_id=iid, subscription_id=sub,
                                           terminating=terminating, compression_type=0,
                                           metrics=data), CLIENT).error_code

    assert push(r.subscription_id) == 0  # right after the Get
    assert push(r.subscription_id) == Errors.THROTTLING_QUOTA_EXCEEDED
    clock.t += 1000
    assert push(r.subscription_id) == 0
    assert get(m, iid).error_code == Errors.THROTTLING_QUOTA_EXCEEDED
    configs["a"] = {"metrics": "y.", "interval.ms": "1000"}
    r2 = get(m, iid)  # re-evaluated at once
    assert (r2.error_code, r2.requested_metrics) == (0, ["y."])
    assert push(r.subscription_id) == Errors.UNKNOWN_SUBSCRIPTION_ID
    clock.t += 1000
    assert push(r2.subscription_id, data=b"x" * 1001) == Errors.TELEMETRY_TOO_LARGE


def test_instances_expire_after_three_intervals_or_a_minute():
    clock = Clock()
    m = manager({"a": {"metrics": "x.", "interval.ms": "30000"}}, clock)
    iid = get(m).client_instance_id
    clock.t += 90_001
    get(m, uuid.uuid4())  # any request forgets the expired
    assert iid not in m._instances


def test_store_keeps_pushes_for_the_retention_and_within_bytes():
    clock = Clock()
    store = TelemetryStore(1000, 250, clock)

    def push(n):
        return Push(clock.t, "c", {}, 1, "none", False, b"x" * n)

    store.add(push(100))
    clock.t += 600
    store.add(push(100))
    assert len(store.pushes()) == 2
    clock.t += 500  # the first is 1100 ms old
    assert [len(p.payload) for p in store.pushes()] == [100]
    store.add(push(100))
    store.add(push(100))  # 300 bytes > 250: the oldest goes
    assert len(store.pushes()) == 2


def test_subscriptions_skip_what_no_longer_parses():
    subs = subscriptions({"ok": {"metrics": "a,b"}, "bad": {"interval.ms": "x"}})
    assert [(s.name, s.metrics, s.interval_ms) for s in subs] == [("ok", ("a", "b"), 300000)]


def test_the_limit_is_on_what_is_sent_not_what_it_inflates_to():
    import gzip

    def ld(num, data):  # a protobuf length-delimited field (lengths < 16384 here)
        n = len(data)
        size = bytes([n]) if n < 128 else bytes([n & 0x7F | 0x80, n >> 7])
        return bytes([num << 3 | 2]) + size + data

    name = ("org.apache.kafka.producer." + "x" * 5000).encode()
    payload = ld(1, ld(2, ld(2, ld(1, name))))
    clock = Clock()
    m = manager({"a": {"metrics": "*"}}, clock, max_bytes=1000)
    r = get(m)
    sent = gzip.compress(payload)
    assert len(sent) < 1000 < len(payload)
    assert m.push(PushTelemetryRequest(
        client_instance_id=r.client_instance_id, subscription_id=r.subscription_id,
        terminating=False, compression_type=1, metrics=sent), CLIENT).error_code == 0
    assert [len(p.payload) for p in m.store.pushes()] == [len(payload)]


def test_a_long_interval_keeps_its_instance_three_intervals():
    clock = Clock()
    m = manager({"slow": {"metrics": "x.", "interval.ms": "40000",
                          "match": "client_id=app-1"}}, clock)
    slow = get(m).client_instance_id
    quick = get(m, attrs={**CLIENT, "client_id": "other"}).client_instance_id  # 300 s default
    clock.t += 100_000  # past a minute and 2.5 of slow's intervals
    get(m, uuid.uuid4())
    assert slow in m._instances and quick in m._instances
    clock.t += 21_000  # slow: past 3 x 40 s
    get(m, uuid.uuid4())
    assert slow not in m._instances and quick in m._instances
