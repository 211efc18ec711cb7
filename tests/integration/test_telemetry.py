"""Client telemetry (KIP-714) on a real single node: CLIENT_METRICS resources set with
IncrementalAlterConfigs and listed by ListConfigResources, GetTelemetrySubscriptions and
PushTelemetry with Kafka's errors, and librdkafka (confluent-kafka) pushing its metrics,
read back from the broker's admin endpoint."""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer

from spool.protocol._generated import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    PushTelemetryRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.describe_configs_request import DescribeConfigsResource
from spool.protocol._generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from spool.protocol.errors import Errors
from tests.helpers.cli import spool_cli
from tests.helpers.raw_client import RawClient, request_once

pytestmark = pytest.mark.timeout(180)

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2
ZERO = uuid.UUID(int=0)


@pytest.fixture
def telemetry_broker(fresh_broker):
    fresh_broker.overrides.update({"spool.admin.http.listener": "127.0.0.1:0",
                                   "telemetry.max.bytes": "4096"})
    return fresh_broker.start()


def admin_port(b) -> int:
    return int(b.http_urls["admin"].rpartition(":")[2])


def kept(b, client_instance_id: str | None = None) -> list[dict]:
    url = f"http://127.0.0.1:{admin_port(b)}/telemetry"
    if client_instance_id:
        url += f"?client_instance_id={client_instance_id}"
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def alter(b, name: str, *ops: tuple[str, int, str | None]):
    resp = request_once(b.bootstrap, 44, 1, IncrementalAlterConfigsRequest(
        validate_only=False, resources=[AlterConfigsResource(
            resource_type=CLIENT_METRICS, resource_name=name,
            configs=[AlterableConfig(name=k, config_operation=op, value=v)
                     for k, op, v in ops])]))
    r = resp.responses[0]
    return r.error_code, r.error_message


def described(b, name: str) -> dict[str, tuple[str, int]]:
    resp = request_once(b.bootstrap, 32, 4, DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name,
                                           configuration_keys=None)],
        include_synonyms=False, include_documentation=False))
    assert resp.results[0].error_code == 0
    return {c.name: (c.value, c.config_source) for c in resp.results[0].configs}


def listed(b, version: int, types: list[int] | None = None):
    resp = request_once(b.bootstrap, 74, version,
                        ListConfigResourcesRequest(resource_types=types or []))
    return resp.error_code, sorted((c.resource_name, c.resource_type if version else 16)
                                   for c in resp.config_resources)


def test_client_metrics_resources_are_configs(telemetry_broker, topic_name):
    b = telemetry_broker
    assert alter(b, "prod", ("metrics", SET, "org.apache.kafka.producer."),
                 ("interval.ms", SET, "2000")) == (0, None)
    assert alter(b, "prod", ("metrics", APPEND, "org.apache.kafka.consumer.")) == (0, None)
    assert described(b, "prod") == {
        "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7),
        "interval.ms": ("2000", 7)}
    assert described(b, "nobody") == {}

    refused = {
        ("interval.ms", SET, "50"): (Errors.INVALID_REQUEST, "Invalid value 50 for interval.ms, "
                                     "interval must be between 100 and 3600000 (1 hour)"),
        ("nope", SET, "1"): (Errors.INVALID_REQUEST, "Unknown client metrics configuration: nope"),
        ("match", SET, "client_colour=red"): (Errors.INVALID_CONFIG,
                                              "Illegal client matching pattern: client_colour=red"),
    }
    for op, answer in refused.items():
        assert alter(b, "prod", op) == answer
    assert alter(b, "", ("metrics", SET, "*"))[0] == Errors.INVALID_REQUEST
    assert described(b, "prod")["interval.ms"] == ("2000", 7)  # nothing of the refused

    request_once(b.bootstrap, 19, 7, CreateTopicsRequest(
        timeout_ms=10000, validate_only=False, topics=[CreatableTopic(
            name=topic_name, num_partitions=1, replication_factor=1, assignments=[],
            configs=[])]))
    assert listed(b, 0) == (0, [("prod", 16)])
    assert listed(b, 1, [CLIENT_METRICS]) == (0, [("prod", 16)])
    code, everything = listed(b, 1)
    assert code == 0 and ("prod", 16) in everything and (topic_name, 2) in everything \
        and ("0", 4) in everything and ("0", 8) in everything
    assert listed(b, 1, [5]) == (Errors.UNSUPPORTED_VERSION, [])  # TRANSACTIONAL_ID

    # a resource whose values are all deleted is gone
    assert alter(b, "prod", ("metrics", DELETE, None), ("interval.ms", DELETE, None)) == (0, None)
    assert listed(b, 0) == (0, [])


# -- the raw protocol ---------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(num: int, data: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def otlp_gauge(name: str, value: int) -> bytes:
    """MetricsData with one gauge point (as_int) named ``name``."""
    point = _varint(3 << 3 | 1) + struct.pack("<Q", 123) + _varint(6 << 3 | 1) + \
        struct.pack("<q", value)
    metric = _len_field(1, name.encode()) + _len_field(5, _len_field(1, point))
    return _len_field(1, _len_field(2, _len_field(2, metric)))


def test_subscriptions_and_pushes_by_kafkas_rules(telemetry_broker):
    b = telemetry_broker
    c = RawClient(b.bootstrap)
    try:
        c.request(18, 3, ApiVersionsRequest(client_software_name="raw-tests",
                                            client_software_version="9.9"))
        # no subscription: nothing requested, the default interval
        s = c.request(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=ZERO))
        assert (s.error_code, s.requested_metrics, s.push_interval_ms) == (0, [], 300000)
        assert s.client_instance_id != ZERO and s.telemetry_max_bytes == 4096
        assert s.accepted_compression_types == [4, 3, 1, 2]
        first = s.client_instance_id
        # asked again within the interval: throttled
        again = c.request(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=first))
        assert again.error_code == Errors.THROTTLING_QUOTA_EXCEEDED

        # subscriptions for this client's software (matched) and another's (not)
        # an interval no stall between two requests of this test outlasts: the push right
        # after an accepted one must be throttled however slow the machine
        assert alter(b, "mine", ("metrics", SET, "raw."), ("interval.ms", SET, "1000"),
                     ("match", SET, "client_software_name=raw-.*")) == (0, None)
        assert alter(b, "theirs", ("metrics", SET, "other."), ("interval.ms", SET, "150"),
                     ("match", SET, "client_software_name=librdkafka")) == (0, None)
        # a changed subscription set is re-evaluated at once, without the throttle
        s = c.request(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=first))
        assert (s.error_code, s.requested_metrics, s.push_interval_ms) == (0, ["raw."], 1000)

        def push(payload: bytes, sub: int, compression: int = 0, terminating=False) -> int:
            return c.request(72, 0, PushTelemetryRequest(
                client_instance_id=first, subscription_id=sub, terminating=terminating,
                compression_type=compression, metrics=payload)).error_code

        assert push(otlp_gauge("raw.one", 1), s.subscription_id + 1) == \
            Errors.UNKNOWN_SUBSCRIPTION_ID
        time.sleep(1.1)  # the push interval
        assert push(b"x" * 5000, s.subscription_id) == Errors.TELEMETRY_TOO_LARGE
        time.sleep(1.1)
        assert push(b"not gzip", s.subscription_id, compression=1) == Errors.INVALID_RECORD
        time.sleep(1.1)
        assert push(gzip.compress(otlp_gauge("raw.two", 42)), s.subscription_id,
                    compression=1) == 0
        assert push(otlp_gauge("raw.three", 3), s.subscription_id) == \
            Errors.THROTTLING_QUOTA_EXCEEDED  # before the interval
        assert push(otlp_gauge("raw.last", 7), s.subscription_id, terminating=True) == 0
        assert push(otlp_gauge("raw.after", 8), s.subscription_id) == Errors.INVALID_REQUEST
        zero = c.request(72, 0, PushTelemetryRequest(
            client_instance_id=ZERO, subscription_id=0, terminating=False, compression_type=0,
            metrics=b""))
        assert zero.error_code == Errors.INVALID_REQUEST
    finally:
        c.close()

    pushes = kept(b, str(first))
    assert [(p["compression"], p["terminating"], [(m["name"], m["value"]) for m in p["metrics"]])
            for p in pushes] == [("gzip", False, [("raw.two", 42)]),
                                 ("none", True, [("raw.last", 7)])]
    assert pushes[0]["client_software_name"] == "raw-tests"
    assert pushes[0]["client_software_version"] == "9.9"


# -- a real client ------------------------------------------------------------------------

def test_librdkafka_pushes_its_metrics(telemetry_broker, topic_name):
    b = telemetry_broker
    assert alter(b, "producers", ("metrics", SET, "org.apache.kafka.producer."),
                 ("interval.ms", SET, "500")) == (0, None)
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.metrics.push": True,
                  "client.id": "telemetry-test"})
    deadline = time.monotonic() + 30
    seen: list[dict] = []
    while time.monotonic() < deadline:
        p.produce(topic_name, b"v")
        p.poll(0.2)
        seen = [x for x in kept(b) if x["client_id"] == "telemetry-test"]
        if len(seen) >= 2:
            break
    p.flush(10)
    assert len(seen) >= 2, f"pushes: {seen}"
    names = {m["name"] for x in seen for m in x["metrics"]}
    assert names and all(n.startswith("org.apache.kafka.producer.") for n in names)
    assert "org.apache.kafka.producer.record.queue.time.max" in names
    assert {x["client_software_name"] for x in seen} == {"confluent-kafka-python"}
    assert {x["compression"] for x in seen} <= {"zstd", "lz4", "gzip", "snappy", "none"}

    # the CLI reads the same
    proc = subprocess.run([sys.executable, "-m", "spool.cli.main", "telemetry", "show", "--json",
                           "--admin-endpoint", f"127.0.0.1:{admin_port(b)}"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert any(x["client_id"] == "telemetry-test" for x in json.loads(proc.stdout))


def test_no_subscription_means_no_push(telemetry_broker, topic_name):
    b = telemetry_broker
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.metrics.push": True,
                  "client.id": "unsubscribed"})
    for _ in range(10):
        p.produce(topic_name, b"v")
        p.poll(0.2)
    p.flush(10)
    assert kept(b) == []


def test_client_metrics_cli(telemetry_broker):
    b = telemetry_broker

    def cli(*args: str) -> subprocess.CompletedProcess[str]:  # in-process: tests.helpers.cli
        return spool_cli("client-metrics", *args, "--bootstrap-server", b.bootstrap)

    proc = cli("alter", "--name", "prod", "--metrics", "org.apache.kafka.producer.",
               "--interval", "1000", "--match", "client_id=app-.*")
    assert (proc.returncode, proc.stdout) == (0, "Altered client metrics config for prod.\n")
    assert cli("list").stdout == "prod\n"
    assert cli("describe", "--name", "prod").stdout == (
        "Client metrics configs for prod are:\n  interval.ms=1000\n  match=client_id=app-.*\n"
        "  metrics=org.apache.kafka.producer.\n")
    assert json.loads(cli("list", "--json").stdout) == ["prod"]
    assert json.loads(cli("describe", "--json").stdout) == [
        {"name": "prod", "configs": {"interval.ms": "1000", "match": "client_id=app-.*",
                                     "metrics": "org.apache.kafka.producer."}}]
    made = json.loads(cli("alter", "--generate-name", "--metrics", "*", "--json").stdout)["name"]
    assert str(uuid.UUID(made)) == made
    assert sorted(json.loads(cli("list", "--json").stdout)) == sorted(["prod", made])
    deleted = cli("delete", "--name", made, "--json")
    assert (deleted.returncode, json.loads(deleted.stdout)) == (0, {"name": made,
                                                                    "deleted": ["metrics"]})
    assert alter(b, "prod", ("match", SET, "client_id=app-.*"))[0] == 0  # same as the tool
    proc = cli("alter", "--name", "prod", "--match", "")  # an empty value deletes the key
    assert proc.returncode == 0
    assert described(b, "prod") == {"interval.ms": ("1000", 7),
                                    "metrics": ("org.apache.kafka.producer.", 7)}

    proc = cli("alter", "--name", "prod", "--interval", "10")
    assert proc.returncode == 1
    assert proc.stderr == ("spool: prod: INVALID_REQUEST: Invalid value 10 for interval.ms, "
                           "interval must be between 100 and 3600000 (1 hour)\n")
    assert cli("alter", "--interval", "1000").returncode == 2  # no name
    assert cli("alter", "--name", "prod").returncode == 2  # nothing to alter

    proc = cli("delete", "--name", "prod")
    assert (proc.returncode, proc.stdout) == (0, "Deleted client metrics config for prod.\n")
    assert cli("list").stdout == ""
