"""LogConfig: Kafka's names, broker synonyms and their precedence, validation, sources."""

from __future__ import annotations

import dataclasses

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import (
    LONG_MAX,
    MIB,
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
    static = {"log.retention.hours": "2", "log.roll.hours": "1", "log.segment.bytes": str(5 * MIB)}
    c = LogConfig.from_props({"segment.bytes": str(7 * MIB)}, static)
    assert c.segment_bytes == 7 * MIB
    assert c.retention_ms == 2 * 3_600_000 and c.segment_ms == 3_600_000
    c = LogConfig.from_props({}, {**static, "log.retention.minutes": "3"})
    assert c.retention_ms == 180_000  # minutes beat hours
    c = LogConfig.from_props({}, {**static, "log.retention.ms": "-1"})
    assert c.retention_ms == -1
    c = LogConfig.from_props({}, static, {"log.segment.bytes": str(6 * MIB)})
    assert c.segment_bytes == 6 * MIB  # dynamic beats static


def test_describe_reports_sources_and_synonyms():
    entries = {
        e.name: e
        for e in describe_topic_configs(
            {"retention.ms": "10"}, {"log.retention.ms": "20"}, {"log.retention.hours": "1",
                                                                 "log.segment.bytes": str(MIB)}
        )
    }
    assert set(entries) == set(TOPIC_CONFIGS) - {"internal.segment.bytes"}
    r = entries["retention.ms"]
    assert (r.value, r.source) == ("10", ConfigSource.TOPIC_CONFIG)
    assert [s[0] for s in r.synonyms] == ["retention.ms", "log.retention.ms", "log.retention.hours"]
    assert entries["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["flush.ms"].is_default and entries["flush.ms"].value == str(LONG_MAX)
    assert entries["cleanup.policy"].value == "delete"
    assert resolve("preallocate").value == "false"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"segment.bytes": "abc"}, "segment.bytes=abc: expected an integer >= 1048576"),
        ({"segment.bytes": "14"}, "segment.bytes=14: expected an integer >= 1048576"),
        ({"segment.bytes": "1_048_576"}, "segment.bytes=1_048_576: expected an integer >= 1048576"),
        ({"segment.bytes": str(2**31)},
         "segment.bytes=2147483648: expected an integer >= 1048576 and at most 2147483647"),
        ({"segment.index.bytes": "3"}, "segment.index.bytes=3: expected an integer >= 4"),
        ({"retention.ms": "-2"}, "retention.ms=-2: expected an integer >= -1"),
        ({"retention.ms": "1.5"}, "retention.ms=1.5: expected an integer >= -1"),
        ({"max.message.bytes": "-1"}, "max.message.bytes=-1: expected an integer >= 0"),
        ({"cleanup.policy": "delete,shred"},
         "cleanup.policy=delete,shred: expected a comma-separated list of compact, delete"),
        ({"message.timestamp.type": "WallTime"},
         "message.timestamp.type=WallTime: expected one of CreateTime, LogAppendTime"),
        ({"compression.type": "gzip"},
         "compression.type=gzip: expected producer (Spool keeps each batch as its producer "
         "compressed it; it does not recompress)"),
        ({"compression.gzip.level": "10"},
         "compression.gzip.level=10: expected an integer -1 or between 1 and 9"),
        ({"compression.lz4.level": "0"}, "compression.lz4.level=0: expected an integer between 1 and 17"),
        ({"min.cleanable.dirty.ratio": "1.5"},
         "min.cleanable.dirty.ratio=1.5: expected a number between 0 and 1"),
        ({"min.cleanable.dirty.ratio": "nan"},
         "min.cleanable.dirty.ratio=nan: expected a number between 0 and 1"),
        ({"preallocate": "yes"}, "preallocate=yes: expected true or false"),
        ({"remote.storage.enable": "true"},
         "remote.storage.enable=true: expected false (Spool has no tiered storage)"),
        ({"internal.segment.bytes": "13"}, "internal.segment.bytes=13: expected an integer >= 14"),
        ({"no.such.key": "1"}, "unknown topic config no.such.key"),
        ({"retention.msx": "1"}, "unknown topic config retention.msx (did you mean 'retention.ms'?)"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
         "min.compaction.lag.ms exceeds max.compaction.lag.ms"),
    ],
)
def test_invalid_values_say_key_value_and_what_is_allowed(props, message):
    with pytest.raises(KafkaError) as e:
        LogConfig.from_props(props)
    assert (e.value.code, e.value.message) == (Errors.INVALID_CONFIG, message)
    with pytest.raises(KafkaError) as e:
        validate_topic_overrides(props)
    assert e.value.code == Errors.INVALID_CONFIG and "invalid literal" not in e.value.message


def test_broker_synonyms_have_the_topic_key_constraints():
    with pytest.raises(KafkaError) as e:
        LogConfig.from_props({}, {"log.segment.bytes": "14"})
    assert e.value.message == "log.segment.bytes=14: expected an integer >= 1048576"
    with pytest.raises(KafkaError) as e:
        validate_broker_overrides({"log.retention.hours": "x"})
    assert e.value.message == "log.retention.hours=x: expected an integer >= -1"


def test_segment_bytes_minimum_is_kafka_4s_one_mib():
    assert LogConfig.from_props({"segment.bytes": str(MIB)}).segment_size == MIB
    with pytest.raises(KafkaError):
        LogConfig.from_props({"segment.bytes": str(MIB - 1)})
    with pytest.raises(KafkaError):  # even built directly
        LogConfig(segment_bytes=1000)


def test_internal_segment_bytes_is_a_hidden_test_only_override():
    c = LogConfig.from_props({"internal.segment.bytes": "1000"})
    assert (c.segment_size, c.segment_bytes) == (1000, 1_073_741_824)
    assert LogConfig.from_props(c.to_props()) == c
    assert "internal.segment.bytes" not in LogConfig.from_props().to_props()
    assert LogConfig(internal_segment_bytes=600).segment_size == 600
    names = {v.name for v in describe_topic_configs({"internal.segment.bytes": "1000"})}
    assert "internal.segment.bytes" not in names and "segment.bytes" in names
    assert validate_topic_overrides({"internal.segment.bytes": "1000"}) == {
        "internal.segment.bytes": "1000"
    }


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
    with pytest.raises(KafkaError) as e:
        validate_broker_overrides({"bogus": "1"})
    assert e.value.message == "unknown broker config bogus"
    with pytest.raises(KafkaError) as e:
        validate_broker_overrides({"num.partitons": "1"})
    assert e.value.message == "unknown broker config num.partitons (did you mean 'num.partitions'?)"


def test_round_trip_and_helpers():
    c = LogConfig.from_props({"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"})
    assert c.compact_enabled and not c.delete_enabled and c.uses_log_append_time
    assert LogConfig.from_props(c.to_props()) == c
    assert broker_setting("num.partitions") == 1
    assert broker_setting("num.partitions", {"num.partitions": "4"}) == 4


def test_stored_values_an_older_version_accepted_are_dropped_not_fatal():
    """A metadata log written before segment.bytes had its 1 MiB minimum still loads."""
    cfg, problems = LogConfig.from_stored(
        {"segment.bytes": "14", "retention.ms": "1000"}, {}, {"log.segment.bytes": "100"}
    )
    assert (cfg.segment_bytes, cfg.retention_ms) == (1_073_741_824, 1000)
    assert problems == [
        "segment.bytes=14: expected an integer >= 1048576",
        "log.segment.bytes=100: expected an integer >= 1048576",
    ]
    entries = {v.name: v for v in describe_topic_configs({"segment.bytes": "14"})}
    assert entries["segment.bytes"].is_default
