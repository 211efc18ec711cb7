"""Kafka's GroupConfig rules (spool.cluster.group_config) and broker.group_configs.get."""

from __future__ import annotations

import pytest

from spool.broker.config import BrokerConfig
from spool.broker.group_configs import GroupConfigs
from spool.cluster import group_config
from spool.protocol.errors import Errors, KafkaError


def _broker(*overrides: str) -> BrokerConfig:
    return BrokerConfig.load(None, overrides)


def _refused(values: dict[str, str], *overrides: str, group: str = "g") -> KafkaError:
    with pytest.raises(KafkaError) as e:
        group_config.validate(group, values, _broker(*overrides).get)
    return e.value


def test_unset_keys_fall_back_to_the_broker_keys_then_kafka_defaults() -> None:
    cfg = _broker("group.consumer.session.timeout.ms=50000",
                  "group.share.record.lock.duration.ms=20000")
    assert group_config.effective("consumer.session.timeout.ms", {}, cfg.get) == 50000
    assert group_config.effective("consumer.heartbeat.interval.ms", {}, cfg.get) == 5000
    assert group_config.effective("share.record.lock.duration.ms", {}, cfg.get) == 20000
    assert group_config.effective("share.delivery.count.limit", {}, cfg.get) == 5
    assert group_config.effective("share.auto.offset.reset", {}, cfg.get) == "latest"
    assert group_config.effective("share.isolation.level", {}, cfg.get) == "read_uncommitted"
    own = {"consumer.session.timeout.ms": "55000", "share.auto.offset.reset": "earliest"}
    assert group_config.effective("consumer.session.timeout.ms", own, cfg.get) == 55000
    assert group_config.effective("share.auto.offset.reset", own, cfg.get) == "earliest"


def test_group_configs_get_before_start_reads_the_broker_keys() -> None:
    class NotStarted:
        config = _broker("group.share.delivery.count.limit=3")

    assert GroupConfigs(NotStarted()).get("g", "share.delivery.count.limit") == 3
    with pytest.raises(KeyError):
        GroupConfigs(NotStarted()).get("g", "session.timeout.ms")


def test_unknown_key_and_empty_name() -> None:
    e = _refused({"session.timeout.ms": "10"})
    assert (e.code, e.message) == (Errors.INVALID_CONFIG, "Unknown group config name: "
                                   "session.timeout.ms")
    e = _refused({"share.isolation.level": "read_committed"}, group="")
    assert (e.code, e.message) == (Errors.INVALID_REQUEST,
                                   "Default group resources are not allowed.")


def test_values_bounded_by_the_broker_min_max_keys() -> None:
    e = _refused({"consumer.session.timeout.ms": "44999"})
    assert (e.code, e.message) == (Errors.INVALID_CONFIG, "consumer.session.timeout.ms must be "
                                   "greater than or equal to group.consumer.min.session.timeout.ms")
    e = _refused({"share.heartbeat.interval.ms": "15001"})
    assert e.message == ("share.heartbeat.interval.ms must be less than or equal to "
                         "group.share.max.heartbeat.interval.ms")
    e = _refused({"share.record.lock.duration.ms": "14000"})
    assert e.message == ("share.record.lock.duration.ms must be greater than or equal to "
                         "group.share.min.record.lock.duration.ms")
    group_config.validate("g", {"consumer.session.timeout.ms": "6000"},
                          _broker("group.consumer.min.session.timeout.ms=6000").get)
    # the bounds are inclusive at both ends
    group_config.validate("g", {"share.heartbeat.interval.ms": "15000"}, _broker().get)
    e = _refused({"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "6000"},
                 "group.consumer.min.session.timeout.ms=1000",
                 "group.consumer.min.heartbeat.interval.ms=1000")
    assert e.message == ("consumer.session.timeout.ms must be greater than "
                         "consumer.heartbeat.interval.ms")
    assert _refused({"share.delivery.count.limit": "11"}).code == Errors.INVALID_CONFIG


@pytest.mark.parametrize("key,value", [
    ("consumer.session.timeout.ms", "abc"), ("consumer.heartbeat.interval.ms", "0"),
    ("share.auto.offset.reset", "none"), ("share.auto.offset.reset", "by_duration:-PT1H"),
    ("share.isolation.level", "READ_COMMITTED"), ("share.record.lock.duration.ms", "999"),
])
def test_bad_values_name_the_key(key: str, value: str) -> None:
    e = _refused({key: value})
    assert e.code == Errors.INVALID_CONFIG and e.message.startswith(f"{key}={value}")


def test_by_duration() -> None:
    assert group_config.parse_by_duration("by_duration:PT1H") == 3_600_000
    assert group_config.parse_by_duration("by_duration:P1DT0.5S") == 86_400_500
    assert group_config.parse_by_duration("by_duration:pt1.5s") == 1500
    assert group_config.parse_by_duration("by_duration:PT") is None
    group_config.validate("g", {"share.auto.offset.reset": "by_duration:PT10M"}, None)
