"""Group configs (GROUP resource, 32) on a real broker, set and read with confluent-kafka's
``ConfigResource(ResourceType.GROUP, ...)``: Kafka's keys, sources, synonyms and errors."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from spool.protocol._generated import (
    ConsumerGroupHeartbeatRequest,
    DescribeConfigsRequest,
    ListConfigResourcesRequest,
    ShareGroupHeartbeatRequest,
)
from spool.protocol._generated.describe_configs_request import DescribeConfigsResource
from tests.helpers.broker_configs import raw_alter, raw_describe, raw_incremental
from tests.helpers.raw_client import RawClient, request_once

pytestmark = pytest.mark.timeout(120)
GROUP, GROUP_CONFIG, DEFAULT_CONFIG = 32, 8, 5
SET, DELETE, APPEND = 0, 1, 2
KEYS = ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
        "share.auto.offset.reset", "share.delivery.count.limit", "share.heartbeat.interval.ms",
        "share.isolation.level", "share.partition.max.record.locks",
        "share.record.lock.duration.ms", "share.session.timeout.ms"]


def _set(admin: AdminClient, group: str, **ops: str | None) -> int:
    """IncrementalAlterConfigs SET (None: DELETE) of ``ops`` (dots as __): the error code."""
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("__", "."), v, incremental_operation=(
            AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE))
        for k, v in ops.items()])
    try:
        admin.incremental_alter_configs([res])[res].result(15)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def _described(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    res = ConfigResource(ResourceType.GROUP, group)
    return {k: (e.value, int(e.source)) for k, e in admin.describe_configs([res])[res].result(15)
            .items()}


def test_set_describe_delete_with_confluent_kafka(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _described(admin, group) == {  # a group nobody configured: Kafka's defaults
        "consumer.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG),
        "consumer.session.timeout.ms": ("45000", DEFAULT_CONFIG),
        "share.auto.offset.reset": ("latest", DEFAULT_CONFIG),
        "share.delivery.count.limit": ("5", DEFAULT_CONFIG),
        "share.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG),
        "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG),
        "share.partition.max.record.locks": ("2000", DEFAULT_CONFIG),
        "share.record.lock.duration.ms": ("30000", DEFAULT_CONFIG),
        "share.session.timeout.ms": ("45000", DEFAULT_CONFIG)}
    assert _set(admin, group, consumer__session__timeout__ms="50000",
                share__auto__offset__reset="earliest", share__isolation__level="read_committed",
                share__record__lock__duration__ms="15000", share__delivery__count__limit="3") == 0
    got = _described(admin, group)
    assert sorted(got) == KEYS
    assert {k: v for k, v in got.items() if v[1] == GROUP_CONFIG} == {
        "consumer.session.timeout.ms": ("50000", GROUP_CONFIG),
        "share.auto.offset.reset": ("earliest", GROUP_CONFIG),
        "share.isolation.level": ("read_committed", GROUP_CONFIG),
        "share.record.lock.duration.ms": ("15000", GROUP_CONFIG),
        "share.delivery.count.limit": ("3", GROUP_CONFIG)}
    raw = raw_describe(broker.bootstrap, group, rtype=GROUP)  # with synonyms, as Kafka 4.2
    assert raw["consumer.session.timeout.ms"] == (
        "50000", GROUP_CONFIG, False, False, [("consumer.session.timeout.ms", "50000", 8)])
    assert raw["consumer.heartbeat.interval.ms"][4] == [
        ("consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG)]

    assert _set(admin, group, consumer__session__timeout__ms=None,
                share__auto__offset__reset="by_duration:PT1H") == 0
    got = _described(admin, group)
    assert got["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    assert got["share.auto.offset.reset"] == ("by_duration:PT1H", GROUP_CONFIG)

    c = RawClient(broker.bootstrap)  # the group is listed among the config resources
    try:
        listed = c.request(74, 1, ListConfigResourcesRequest(resource_types=[GROUP]))
    finally:
        c.close()
    assert (group, GROUP) in {(r.resource_name, r.resource_type) for r in listed.config_resources}


def test_refusals_name_the_key_and_change_nothing(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _set(admin, group, share__record__lock__duration__ms="20000") == 0
    bootstrap = broker.bootstrap
    assert raw_incremental(bootstrap, group, ("session.timeout.ms", "50000", SET),
                           rtype=GROUP) == (KafkaError.INVALID_CONFIG,
                                            "Unknown group config name: session.timeout.ms")
    assert raw_incremental(bootstrap, group, ("consumer.session.timeout.ms", "30000", SET),
                           rtype=GROUP) == (
        KafkaError.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than or equal "
        "to group.consumer.min.session.timeout.ms")
    assert raw_incremental(bootstrap, group, ("share.record.lock.duration.ms", "60001", SET),
                           rtype=GROUP) == (
        KafkaError.INVALID_CONFIG, "share.record.lock.duration.ms must be less than or equal "
        "to group.share.max.record.lock.duration.ms")
    code, message = raw_incremental(bootstrap, group, ("share.isolation.level", "none", SET),
                                    rtype=GROUP)
    assert code == KafkaError.INVALID_CONFIG and message.startswith("share.isolation.level=none")
    assert raw_incremental(bootstrap, group, ("share.isolation.level", "x", APPEND),
                           rtype=GROUP) == (
        KafkaError.INVALID_CONFIG,
        "Can't APPEND to key share.isolation.level because its type is not LIST.")
    assert raw_incremental(bootstrap, "", ("share.isolation.level", "read_committed", SET),
                           rtype=GROUP) == (KafkaError.INVALID_REQUEST,
                                            "Default group resources are not allowed.")
    assert _described(admin, group)["share.record.lock.duration.ms"] == ("20000", GROUP_CONFIG)

    c = RawClient(bootstrap)
    try:
        resp = c.request(32, 4, DescribeConfigsRequest(
            include_synonyms=False, include_documentation=False, resources=[
                DescribeConfigsResource(resource_type=GROUP, resource_name="",
                                        configuration_keys=None)]))
    finally:
        c.close()
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (KafkaError.INVALID_REQUEST, "Group name must not be empty")]


def test_legacy_alter_configs_replaces_the_whole_set(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _set(admin, group, share__delivery__count__limit="4",
                share__isolation__level="read_committed") == 0
    assert raw_alter(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"},
                     rtype=GROUP) == (0, None)
    assert {k: v for k, v in _described(admin, group).items() if v[1] == GROUP_CONFIG} == {
        "share.auto.offset.reset": ("earliest", GROUP_CONFIG)}


def test_spool_configs_for_groups(broker):
    group = f"g-{uuid.uuid4().hex[:8]}"

    def spool(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "spool.cli.main", "configs", *args,
                               "-b", broker.bootstrap], capture_output=True, text=True,
                              timeout=60)

    done = spool("alter", "--group", group, "--add-config",
                 "share.auto.offset.reset=earliest,share.delivery.count.limit=3")
    assert done.returncode == 0, done.stderr
    listed = json.loads(spool("describe", "--entity-type", "groups", "--entity-name", group,
                              "--json").stdout)
    assert [(r["name"], r["value"], r["source"]) for r in listed] == [
        ("share.auto.offset.reset", "earliest", "GROUP_CONFIG"),
        ("share.delivery.count.limit", "3", "GROUP_CONFIG")]
    everything = json.loads(spool("describe", "--group", group, "--all", "--json").stdout)
    assert [r["name"] for r in everything] == KEYS
    refused = spool("alter", "--group", group, "--add-config", "share.delivery.count.limit=11")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"spool: '{group}': share.delivery.count.limit must be between 2 and 10 (inclusive) "
        "(INVALID_CONFIG)"]
    unknown = spool("alter", "--group", group, "--add-config", "nope=1")
    assert (unknown.returncode, unknown.stderr.splitlines()) == (
        1, [f"spool: '{group}': Unknown group config name: nope (INVALID_CONFIG)"])


def test_heartbeats_carry_the_groups_own_intervals(broker, topic_name):
    """The coordinators read a group's values (broker.group_configs): a member joining a
    group with its own heartbeat interval is told that interval, another group the
    broker's."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _set(admin, group, consumer__heartbeat__interval__ms="6000",
                share__heartbeat__interval__ms="7000") == 0

    def consumer_interval(g: str) -> int:
        resp = request_once(broker.bootstrap, 68, 1, ConsumerGroupHeartbeatRequest(
            group_id=g, member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic_name], topic_partitions=[]))
        assert resp.error_code == 0, resp.error_message
        return resp.heartbeat_interval_ms

    def share_interval(g: str) -> int:
        resp = request_once(broker.bootstrap, 76, 1, ShareGroupHeartbeatRequest(
            group_id=g, member_id=uuid.uuid4().hex, member_epoch=0,
            subscribed_topic_names=[topic_name]))
        assert resp.error_code == 0, resp.error_message
        return resp.heartbeat_interval_ms

    assert consumer_interval(group) == 6000
    assert consumer_interval(f"{group}-other") == 5000
    assert share_interval(f"{group}-share") == 5000
    assert _set(admin, f"{group}-share", share__heartbeat__interval__ms="7000") == 0
    assert share_interval(f"{group}-share") == 7000
