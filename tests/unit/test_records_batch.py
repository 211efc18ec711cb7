"""The batch header: checks, produce policy, every single-bit flip, every truncation, patches."""

from __future__ import annotations

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.records import (
    LZ4,
    BatchBuilder,
    BatchHeader,
    build_control_batch,
    check_batch,
    compute_crc,
    crc_is_valid,
    iter_batches,
    iter_records,
    patch_base_offset,
    patch_log_append_time,
    patch_partition_leader_epoch,
    validate_batch,
)
from spool.records.batch import MESSAGE_TOO_LARGE


def _batch(n: int = 3, **kwargs) -> bytes:
    b = BatchBuilder(0, **kwargs)
    for i in range(n):
        b.append(b"k%d" % i, b"value %d" % i, timestamp=1000 + i, headers=[("h", b"x")])
    return b.build()


def _code(fn, *args, **kwargs) -> int | None:
    try:
        fn(*args, **kwargs)
    except KafkaError as e:
        return e.code
    return None


def test_header_fields() -> None:
    raw = _batch(3, producer_id=9, producer_epoch=2, base_sequence=40, partition_leader_epoch=5)
    h = validate_batch(raw)
    assert h == BatchHeader.parse(raw)
    assert (h.records_count, h.last_offset_delta, h.size) == (3, 2, len(raw))
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1002)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (9, 2, 40, 42)
    assert h.partition_leader_epoch == 5 and h.magic == 2 and crc_is_valid(raw)


@pytest.mark.parametrize("codec", [0, LZ4])
def test_every_single_bit_flip(codec: int) -> None:
    raw = _batch(4, compression=codec)
    for byte in range(len(raw)):
        for bit in range(8):
            bad = bytearray(raw)
            bad[byte] ^= 1 << bit
            code = _code(validate_batch, bad)
            if byte < 8 or 12 <= byte < 16:  # baseOffset, partitionLeaderEpoch: outside the CRC
                assert code is None, (byte, bit)
            elif byte == 16:
                assert code == Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT
            else:  # batchLength, crc, and everything the CRC covers
                assert code == Errors.CORRUPT_MESSAGE, (byte, bit)


def test_every_truncation() -> None:
    raw = _batch(3)
    for n in range(len(raw)):
        cut = raw[:n]
        assert _code(validate_batch, cut) == Errors.CORRUPT_MESSAGE
        assert _code(check_batch, cut) == Errors.CORRUPT_MESSAGE
        assert _code(lambda c=cut: list(iter_records(c))) == Errors.CORRUPT_MESSAGE
        assert list(iter_batches(cut)) == []


def test_iter_batches_over_a_log() -> None:
    batches = [_batch(2), build_control_batch(1, 0, True, 0, 2, 5), _batch(5)]
    log = b"".join(batches)
    positions = [pos for pos, _ in iter_batches(log + batches[2][:30])]
    assert positions == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    bad = bytearray(log)
    bad[8:12] = b"\x00\x00\x00\x05"
    assert _code(lambda: list(iter_batches(bad))) == Errors.CORRUPT_MESSAGE


def test_produce_policy() -> None:
    marker = build_control_batch(7, 1, False, 0, 0, 10)
    assert check_batch(marker).is_control
    assert _code(validate_batch, marker) == Errors.INVALID_RECORD
    assert validate_batch(marker, allow_control=True).is_transactional

    b = BatchBuilder(0)
    b.append(b"a", b"1", timestamp=1, offset_delta=0)
    b.append(b"b", b"2", timestamp=1, offset_delta=3)
    gappy = b.build()
    assert check_batch(gappy).last_offset_delta == 3
    assert _code(validate_batch, gappy) == Errors.INVALID_RECORD

    txn_without_pid = _batch(1, is_transactional=True)
    assert _code(validate_batch, txn_without_pid) == Errors.INVALID_RECORD

    raw = _batch(3)
    assert _code(validate_batch, raw, max_size=len(raw) - 1) == MESSAGE_TOO_LARGE
    assert validate_batch(raw, max_size=len(raw)).records_count == 3


def test_bad_codec_in_attributes() -> None:
    raw = bytearray(_batch(1))
    raw[22] |= 0x07  # codec 7, then fix the CRC so only the codec is wrong
    raw[17:21] = compute_crc(raw, 0, len(raw)).to_bytes(4, "big")
    assert _code(check_batch, raw) == Errors.CORRUPT_MESSAGE


def test_patches_keep_the_batch_valid() -> None:
    raw = bytearray(_batch(3))
    patch_base_offset(raw, 0, 1234)
    patch_partition_leader_epoch(raw, 0, 77)
    h = validate_batch(raw)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 77)
    assert [r.offset for r in iter_records(raw)] == [1234, 1235, 1236]

    patch_log_append_time(raw, 0, 999_999)
    h = validate_batch(raw)
    assert h.is_log_append_time and h.max_timestamp == 999_999
    assert {r.timestamp for r in iter_records(raw)} == {999_999}


def test_batch_at_an_offset_in_a_larger_buffer() -> None:
    raw = _batch(2)
    buf = bytearray(b"\xee" * 17 + raw + b"\xee" * 5)
    assert validate_batch(buf, 17).records_count == 2
    assert [r.key for r in iter_records(memoryview(buf), 17)] == [b"k0", b"k1"]
    patch_base_offset(buf, 17, 50)
    assert validate_batch(buf, 17).base_offset == 50
