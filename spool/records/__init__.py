"""RecordBatch v2, the unit Kafka clients produce, brokers store and consumers fetch.

One batch on the wire and on disk::

    +--------------------------- 61-byte header (batch.py) ---------------------------+
    | baseOffset | batchLength | partitionLeaderEpoch | magic=2 | crc | attributes | ... |
    | lastOffsetDelta | baseTimestamp | maxTimestamp | producerId | producerEpoch       |
    | baseSequence | recordsCount                                                       |
    +---------------------------------------------------------------------------------+
    | records (record.py), one compressed block if codec != 0 (compression.py)        |
    +---------------------------------------------------------------------------------+

Modules, each with its own contract: ``batch`` (header view, CRC, checks,
in-place patches; the hot path, no copies), ``record`` (decoding records and
control records), ``builder`` (encoding batches and transaction markers),
``compression`` (codecs 0-4), ``varint`` (zigzag varints). Errors are
``KafkaError`` with Kafka's codes. This package imports only
``spool.protocol.errors`` from spool.
"""

from spool.records.batch import (
    CODEC_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    check_batch,
    compute_crc,
    crc_is_valid,
    iter_batches,
    patch_base_offset,
    patch_log_append_time,
    patch_partition_leader_epoch,
    validate_batch,
)
from spool.records.builder import BatchBuilder, build_control_batch
from spool.records.compression import (
    CODEC_IDS,
    CODEC_NAMES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
)
from spool.records.record import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    ControlRecord,
    Record,
    decode_records,
    iter_records,
)

__all__ = [
    "BatchBuilder",
    "BatchHeader",
    "CODEC_IDS",
    "CODEC_MASK",
    "CODEC_NAMES",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CONTROL_MASK",
    "ControlRecord",
    "DELETE_HORIZON_MASK",
    "GZIP",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "LZ4",
    "NONE",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "Record",
    "SNAPPY",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "ZSTD",
    "build_control_batch",
    "check_batch",
    "compress",
    "compute_crc",
    "crc_is_valid",
    "decode_records",
    "decompress",
    "iter_batches",
    "iter_records",
    "patch_base_offset",
    "patch_log_append_time",
    "patch_partition_leader_epoch",
    "validate_batch",
]
