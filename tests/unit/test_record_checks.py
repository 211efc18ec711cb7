"""spool.storage.record_checks: a batch refused for some of its records names each one."""

from __future__ import annotations

import pytest

from spool.protocol.errors import Errors
from spool.records.batch import BatchHeader
from spool.records.builder import BatchBuilder
from spool.records.compression import ZSTD
from spool.storage.config import LogConfig
from spool.storage.record_checks import (
    RecordError,
    RecordErrors,
    check_records,
    needs_record_checks,
)

NOW = 1_700_000_000_000
HOUR = 3_600_000


def batch(items: list[tuple[bytes | None, int]], codec: int = 0) -> bytes:
    b = BatchBuilder(0, compression=codec)
    for key, ts in items:
        b.append(key, b"v", timestamp=ts)
    return b.build()


def refused(records: bytes, cfg: LogConfig) -> RecordErrors:
    assert needs_record_checks(cfg, BatchHeader.parse(records), NOW)
    with pytest.raises(RecordErrors) as e:
        check_records(records, cfg, NOW, "t-0")
    return e.value


@pytest.mark.parametrize("codec", [0, ZSTD])
def test_null_keys_on_a_compacted_topic_are_named_by_index(codec):
    cfg = LogConfig(cleanup_policy=("compact",))
    e = refused(batch([(b"a", NOW), (None, NOW), (b"c", NOW), (None, NOW)], codec), cfg)
    msg = "Compacted topic cannot accept message without key in topic partition t-0"
    assert e.errors == [RecordError(1, Errors.INVALID_RECORD, msg),
                        RecordError(3, Errors.INVALID_RECORD, msg)]
    assert (e.code, e.message) == (
        Errors.INVALID_RECORD,
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{msg}'), "
        f"RecordError(batchIndex=3, message='{msg}')]")


def test_timestamps_out_of_range_are_invalid_timestamp():
    cfg = LogConfig(message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=HOUR)
    e = refused(batch([(b"a", NOW - 2 * HOUR), (b"b", NOW), (b"c", NOW + 2 * HOUR)]), cfg)
    lo, hi = NOW - HOUR, NOW + HOUR
    assert e.errors == [
        RecordError(0, Errors.INVALID_TIMESTAMP, f"Timestamp {NOW - 2 * HOUR} of message with "
                    f"offset 0 is out of range. The timestamp should be within [{lo}, {hi}]"),
        RecordError(2, Errors.INVALID_TIMESTAMP, f"Timestamp {NOW + 2 * HOUR} of message with "
                    f"offset 2 is out of range. The timestamp should be within [{lo}, {hi}]")]
    assert (e.code, e.message) == (
        Errors.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp")


def test_a_key_error_wins_over_a_timestamp_error_of_the_same_record():
    cfg = LogConfig(cleanup_policy=("compact",), message_timestamp_after_max_ms=HOUR)
    e = refused(batch([(None, NOW + 2 * HOUR), (b"b", NOW + 2 * HOUR)]), cfg)
    assert [(r.batch_index, r.code) for r in e.errors] == [
        (0, Errors.INVALID_RECORD), (1, Errors.INVALID_TIMESTAMP)]
    assert e.code == Errors.INVALID_TIMESTAMP


def test_most_topics_skip_the_records():
    fine = batch([(None, NOW - 100 * HOUR), (None, NOW)])
    h = BatchHeader.parse(fine)
    assert not needs_record_checks(LogConfig(), h, NOW)
    assert not needs_record_checks(LogConfig(message_timestamp_after_max_ms=HOUR), h, NOW)
    assert not needs_record_checks(LogConfig(message_timestamp_type="LogAppendTime",
                                             message_timestamp_before_max_ms=HOUR), h, NOW)
    check_records(batch([(b"a", NOW)]), LogConfig(cleanup_policy=("compact",)), NOW, "t-0")


def test_a_record_without_a_timestamp_is_not_out_of_range():
    """Kafka's LogValidator checks only CreateTime records that carry a timestamp: one
    with none (-1) is appended whatever message.timestamp.before.max.ms says."""
    cfg = LogConfig(message_timestamp_before_max_ms=HOUR)
    e = refused(batch([(b"a", -1), (b"b", NOW - 2 * HOUR), (b"c", -1)]), cfg)
    assert [(r.batch_index, r.code) for r in e.errors] == [(1, Errors.INVALID_TIMESTAMP)]
    check_records(batch([(b"a", -1), (b"b", NOW)]), cfg, NOW, "t-0")
