"""The per-record checks of a produced batch (Kafka's ``LogValidator``), naming each culprit.

Two rules look inside a batch, record by record, in Kafka's order:

- a compacted topic (``cleanup.policy`` has ``compact``) refuses a record without
  a key: INVALID_RECORD, "Compacted topic cannot accept message without key in
  topic partition t-0";
- a ``CreateTime`` topic refuses a record whose timestamp is more than
  ``message.timestamp.before.max.ms`` before now or ``message.timestamp.after.max.ms``
  after it: INVALID_TIMESTAMP, "Timestamp T of message with offset O is out of
  range. The timestamp should be within [lo, hi]" (a record without a timestamp, -1,
  passes).

``check_records`` raises ``RecordErrors`` when any record fails: the batch is refused
whole (nothing of it is appended), and ``errors`` lists every failed record by its
index in the batch (0 = the first), so that the produce response can carry them
(KIP-467, Produce v8+) and a client fails only those records and sends the others
again. The error code is INVALID_TIMESTAMP when any record has a bad timestamp, else
INVALID_RECORD, with Kafka's summary message.

Cost: ``needs_record_checks`` says from the batch header and the topic's config
alone whether any record could fail; the records are decoded (and inflated) only
then: for compacted topics, for topics that set ``message.timestamp.before.max.ms``,
and for batches whose newest timestamp is past ``message.timestamp.after.max.ms``.
"""

from __future__ import annotations

from typing import NamedTuple

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader
from spool.records.record import iter_records
from spool.storage.config import LONG_MAX, LogConfig

NO_TIMESTAMP = -1


class RecordError(NamedTuple):
    """One refused record: its index in the batch, Kafka's error code and message."""

    batch_index: int
    code: int
    message: str


class RecordErrors(KafkaError):
    """A batch refused because of some of its records (Kafka's RecordValidationException)."""

    def __init__(self, errors: list[RecordError]) -> None:
        if any(e.code == Errors.INVALID_TIMESTAMP for e in errors):
            code = Errors.INVALID_TIMESTAMP
            message = "One or more records have been rejected due to invalid timestamp"
        else:
            code = Errors.INVALID_RECORD
            shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
                              for e in errors[:3])
            message = (f"One or more records have been rejected due to {len(errors)} record "
                       f"errors in total, and only showing the first three errors at most: "
                       f"[{shown}]")
        super().__init__(code, message)
        self.errors = errors


def _checks_timestamps(cfg: LogConfig) -> bool:
    return cfg.message_timestamp_type == "CreateTime"


def needs_record_checks(cfg: LogConfig, header: BatchHeader, now_ms: int) -> bool:
    """Whether some record of the batch could fail (module doc); False for most topics."""
    if cfg.compact_enabled:
        return True
    if not _checks_timestamps(cfg):
        return False
    if cfg.message_timestamp_before_max_ms < LONG_MAX:
        return True  # the oldest record is not in the header
    return header.max_timestamp - now_ms > cfg.message_timestamp_after_max_ms


def check_records(records: bytes | bytearray | memoryview, cfg: LogConfig, now_ms: int,
                  topic_partition: str) -> None:
    """Raise ``RecordErrors`` if any record of the batch at 0 fails (module doc)."""
    compacted = cfg.compact_enabled
    timestamps = _checks_timestamps(cfg)
    before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
    errors: list[RecordError] = []
    for i, rec in enumerate(iter_records(records, 0)):
        if compacted and rec.key is None:
            errors.append(RecordError(
                i, Errors.INVALID_RECORD, "Compacted topic cannot accept message without key "
                f"in topic partition {topic_partition}"))
        elif timestamps and rec.timestamp != NO_TIMESTAMP and (
                now_ms - rec.timestamp > before or rec.timestamp - now_ms > after):
            errors.append(RecordError(
                i, Errors.INVALID_TIMESTAMP,
                f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of "
                f"range. The timestamp should be within [{now_ms - before}, {now_ms + after}]"))
    if errors:
        raise RecordErrors(errors)
