"""LogConfig: Kafka's names, broker synonyms and their precedence, validation, sources."""

from __future__ import annotations

import dataclasses

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import (
    LONG_MAX,
    TOPIC_CONFIGS,
    TOPIC_TO_BROKER_KEY,
    ConfigSource,
    LogConfig,
    broker_setting,
    describe_topic_configs,
    resolve,
    validate_broker_overrides,
    validate_topic_overrides,
)


def test_table_and_dataclass_agree():
    fields = {f.name: f.default for f in dataclasses.fields(LogConfig)}
    assert set(fields) == {k.attr for k in TOPIC_CONFIGS.values()}
    for key in TOPIC_CONFIGS.values():
        assert fields[key.attr] == key.default, key.name


def test_kafka_defaults():
    c = LogConfig.from_props()
    assert c.segment_bytes == 1_073_741_824
    assert c.segment_ms == c.retention_ms == 604_800_000
    assert c.segment_index_bytes == 10_485_760 and c.index_interval_bytes == 4096
    assert c.retention_bytes == -1 and c.flush_messages == c.flush_ms == LONG_MAX
    assert c.cleanup_policy == ("delete",) and c.max_message_bytes == 1_048_588
    assert c.message_timestamp_type == "CreateTime" and c.min_insync_replicas == 1
    assert c.file_delete_delay_ms == 60_000 and c.min_cleanable_dirty_ratio == 0.5
    assert c.compression_type == "producer" and c.preallocate is False


def test_broker_key_names():
    assert TOPIC_TO_BROKER_KEY["segment.bytes"] == "log.segment.bytes"
    assert TOPIC_TO_BROKER_KEY["segment.ms"] == "log.roll.ms"
    assert TOPIC_TO_BROKER_KEY["retention.ms"] == "log.retention.ms"
    assert TOPIC_TO_BROKER_KEY["max.message.bytes"] == "message.max.bytes"
    assert TOPIC_TO_BROKER_KEY["segment.index.bytes"] == "log.index.size.max.bytes"
    assert TOPIC_TO_BROKER_KEY["flush.messages"] == "log.flush.interval.messages"
    assert TOPIC_TO_BROKER_KEY["min.cleanable.dirty.ratio"] == "log.cleaner.min.cleanable.ratio"
    assert "remote.storage.enable" not in TOPIC_TO_BROKER_KEY


def test_precedence_topic_dynamic_static_default():
    static = {"log.retention.hours": "2", "log.roll.hours": "1", "log.segment.bytes": "5000"}
    c = LogConfig.from_props({"segment.bytes": "7000"}, static)
    assert c.segment_bytes == 7000
    assert c.retention_ms == 2 * 3_600_000 and c.segment_ms == 3_600_000
    c = LogConfig.from_props({}, {**static, "log.retention.minutes": "3"})
    assert c.retention_ms == 180_000  # minutes beat hours
    c = LogConfig.from_props({}, {**static, "log.retention.ms": "-1"})
    assert c.retention_ms == -1
    c = LogConfig.from_props({}, static, {"log.segment.bytes": "6000"})
    assert c.segment_bytes == 6000  # dynamic beats static


def test_describe_reports_sources_and_synonyms():
    entries = {
        e.name: e
        for e in describe_topic_configs(
            {"retention.ms": "10"}, {"log.retention.ms": "20"}, {"log.retention.hours": "1",
                                                                 "log.segment.bytes": "4096"}
        )
    }
    assert set(entries) == set(TOPIC_CONFIGS)
    r = entries["retention.ms"]
    assert (r.value, r.source) == ("10", ConfigSource.TOPIC_CONFIG)
    assert [s[0] for s in r.synonyms] == ["retention.ms", "log.retention.ms", "log.retention.hours"]
    assert entries["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["flush.ms"].is_default and entries["flush.ms"].value == str(LONG_MAX)
    assert entries["cleanup.policy"].value == "delete"
    assert resolve("preallocate").value == "false"


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "abc"},
        {"segment.bytes": "10"},
        {"segment.bytes": str(2**31)},
        {"retention.ms": "-2"},
        {"cleanup.policy": "delete,shred"},
        {"message.timestamp.type": "WallTime"},
        {"compression.type": "brotli"},
        {"min.cleanable.dirty.ratio": "1.5"},
        {"preallocate": "yes"},
        {"no.such.key": "1"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
    ],
)
def test_invalid_values_raise_invalid_config(props):
    with pytest.raises(KafkaError) as e:
        LogConfig.from_props(props)
    assert e.value.code == Errors.INVALID_CONFIG


def test_validate_overrides_normalises_and_allows_deletes():
    assert validate_topic_overrides({"cleanup.policy": " compact , delete", "retention.ms": None}) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": None,
    }
    assert validate_broker_overrides({"log.retention.hours": "5", "num.partitions": "3"}) == {
        "log.retention.hours": "5",
        "num.partitions": "3",
    }
    with pytest.raises(KafkaError):
        validate_broker_overrides({"log.flush.interval.messages": "0"})
    with pytest.raises(KafkaError):
        validate_broker_overrides({"bogus": "1"})


def test_round_trip_and_helpers():
    c = LogConfig.from_props({"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"})
    assert c.compact_enabled and not c.delete_enabled and c.uses_log_append_time
    assert LogConfig.from_props(c.to_props()) == c
    assert broker_setting("num.partitions") == 1
    assert broker_setting("num.partitions", {"num.partitions": "4"}) == 4
