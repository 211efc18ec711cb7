"""Record decoding and building: fields, timestamps, offsets, control records, malformed records."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from spool.protocol.errors import Errors, KafkaError
from spool.records import (
    GZIP,
    ZSTD,
    BatchBuilder,
    ControlRecord,
    Record,
    build_control_batch,
    check_batch,
    compress,
    iter_records,
)
from spool.records.varint import write_varint, write_varlong

HEADER = struct.Struct(">qiibIhiqqqhii")


def wrap(block: bytes, count: int, *, attributes: int = 0, base_offset: int = 0) -> bytes:
    """A batch with a correct header and CRC around an arbitrary records block."""
    size = 61 + len(block)
    head = HEADER.pack(
        base_offset, size - 12, 0, 2, 0, attributes, count - 1, 100, 100, -1, -1, -1, count
    )
    out = bytearray(head + block)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def record(
    *,
    attrs: bytes = b"\x00",
    ts: int = 0,
    off: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: bytes = b"\x00",
    length_adjust: int = 0,
) -> bytes:
    body = attrs + write_varlong(ts) + write_varint(off)
    for field in (key, value):
        body += write_varint(-1) if field is None else write_varint(len(field)) + field
    body += headers
    return write_varint(len(body) + length_adjust) + body


def corrupt(raw: bytes) -> None:
    with pytest.raises(KafkaError) as e:
        list(iter_records(raw))
    assert e.value.code == Errors.CORRUPT_MESSAGE


def test_hand_encoded_records_decode() -> None:
    hdrs = write_varint(2) + b"\x02a" + b"\x02x" + b"\x02b" + write_varint(-1)
    first = record(ts=5, off=0, key=None, value=b"")
    block = first + record(ts=-3, off=1, value=None, headers=hdrs)
    recs = list(iter_records(wrap(block, 2, base_offset=40)))
    assert recs == [
        Record(40, 105, None, b"", [], 0),
        Record(41, 97, b"k", None, [("a", b"x"), ("b", None)], 0),
    ]


def test_malformed_records() -> None:
    ok = record()
    corrupt(wrap(ok, 2))  # fewer records than recordsCount
    corrupt(wrap(ok + ok, 1))  # bytes left over
    corrupt(wrap(ok + b"\x00", 1))
    corrupt(wrap(record(length_adjust=1), 1))  # length past the block
    corrupt(wrap(record(length_adjust=-1), 1))  # length shorter than the fields
    corrupt(wrap(record(length_adjust=1) + b"\x00", 1))  # record ends after its fields
    corrupt(wrap(record(key=None)[:-1] + b"\x05", 1))
    corrupt(wrap(b"\x80\x80\x80\x80\x80\x80", 1))  # over-long varint
    corrupt(wrap(b"\x0b", 1))  # negative length
    corrupt(wrap(b"\x02\x00", 1))  # length 1: too short to hold a record
    corrupt(wrap(ok, -1))  # negative recordsCount
    corrupt(wrap(record(headers=write_varint(-1)), 1))
    corrupt(wrap(record(headers=write_varint(1) + write_varint(-1)), 1))  # null header key
    corrupt(wrap(record(headers=write_varint(1) + b"\x02a" + write_varint(-2)), 1))
    corrupt(wrap(record(headers=write_varint(50) + b"\x02a\x00"), 1))
    corrupt(wrap(record(headers=write_varint(1) + b"\x40a\x00"), 1))  # header key overruns
    bad_key = record(key=b"kk")
    corrupt(wrap(bad_key.replace(b"\x04kk", b"\x0ckk"), 1))  # key length past the record
    corrupt(wrap(record(key=None).replace(b"\x01\x02v", b"\x03\x02v"), 1))  # key length -2
    corrupt(wrap(compress(GZIP, ok)[:-4], 1, attributes=GZIP))


def test_invalid_utf8_header_key_round_trips() -> None:
    hdrs = write_varint(1) + write_varint(2) + b"\xff\xfe" + write_varint(0)
    (rec,) = iter_records(wrap(record(headers=hdrs), 1))
    b = BatchBuilder(0)
    b.append_record(rec)
    (again,) = iter_records(b.build())
    assert again.headers == rec.headers
    assert again.headers[0][0].encode("utf-8", "surrogateescape") == b"\xff\xfe"


def test_builder_offsets_timestamps_and_gaps() -> None:
    b = BatchBuilder(1000, compression=ZSTD, producer_id=3, producer_epoch=1, base_sequence=0)
    assert b.append(b"a", b"1", timestamp=50) == 0
    assert b.append(b"b", b"2", timestamp=20, offset_delta=4) == 4
    assert b.append(None, b"3", timestamp=70) == 5
    with pytest.raises(ValueError):
        b.append(b"x", b"y", timestamp=1, offset_delta=5)
    raw = b.build()
    h = check_batch(raw)
    assert (h.last_offset_delta, h.records_count) == (5, 3)
    assert (h.base_timestamp, h.max_timestamp) == (50, 70)
    assert [(r.offset, r.timestamp) for r in iter_records(raw)] == [
        (1000, 50),
        (1004, 20),
        (1005, 70),
    ]


def test_compaction_style_rebuild() -> None:
    src = BatchBuilder(500)
    for i in range(6):
        src.append(b"k%d" % (i % 2), b"v%d" % i, timestamp=10 + i)
    kept = [r for r in iter_records(src.build()) if r.offset >= 504]
    out = BatchBuilder(500, last_offset_delta=5, delete_horizon_ms=99)
    for r in kept:
        out.append_record(r)
    raw = out.build()
    h = check_batch(raw)
    assert (h.records_count, h.last_offset_delta, h.next_offset) == (2, 5, 506)
    assert h.has_delete_horizon and h.base_timestamp == 99
    assert list(iter_records(raw)) == kept

    empty = BatchBuilder(500, last_offset_delta=5, producer_id=8, producer_epoch=0).build()
    h = check_batch(empty)
    assert (h.records_count, h.last_offset_delta, h.producer_id) == (0, 5, 8)
    assert list(iter_records(empty)) == []
    empty_lz4 = BatchBuilder(0, compression=3, last_offset_delta=2).build()
    assert len(empty_lz4) == 61 and check_batch(empty_lz4).compression == 3
    assert list(iter_records(empty_lz4)) == []
    with pytest.raises(ValueError):
        BatchBuilder(0).build()
    with pytest.raises(ValueError):
        b = BatchBuilder(0, last_offset_delta=0)
        b.append(b"a", b"b", timestamp=0, offset_delta=1)
        b.build()


def test_log_append_time_builder() -> None:
    b = BatchBuilder(0, log_append_time=777)
    b.append(b"a", b"1", timestamp=5)
    b.append(b"b", b"2", timestamp=9)
    h = check_batch(raw := b.build())
    assert h.is_log_append_time and (h.base_timestamp, h.max_timestamp) == (777, 777)
    assert [r.timestamp for r in iter_records(raw)] == [777, 777]


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    raw = build_control_batch(4242, 7, commit, 13, 900, 1_700_000_000_000)
    assert len(raw) == 78  # the size of Kafka's own transaction markers
    h = check_batch(raw)
    assert h.is_control and h.is_transactional and h.base_sequence == -1
    assert (h.producer_id, h.producer_epoch, h.base_offset) == (4242, 7, 900)
    (rec,) = iter_records(raw)
    assert rec.key == (b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00")
    assert rec.value == b"\x00\x00\x00\x00\x00\x0d"
    marker = ControlRecord.decode(rec.key, rec.value)
    assert marker == ControlRecord(1 if commit else 0, 13, 0)
    assert marker.is_commit is commit and marker.is_abort is not commit


def test_control_record_decode_errors() -> None:
    for key, value in [
        (None, b"\x00" * 6),
        (b"\x00\x00\x00", b"\x00" * 6),
        (b"\xff\xff\x00\x01", b"\x00" * 6),
        (b"\x00\x00\x00\x01", b"\x00" * 5),
        (b"\x00\x00\x00\x01", None),
        (b"\x00\x00\x00\x01", b"\xff\xff\x00\x00\x00\x00"),
    ]:
        with pytest.raises(KafkaError) as e:
            ControlRecord.decode(key, value)
        assert e.value.code == Errors.CORRUPT_MESSAGE
    # Newer versions and KRaft's own control types parse without a coordinator epoch.
    assert ControlRecord.decode(b"\x00\x01\x00\x01" + b"xx", b"\x00\x01\x00\x00\x00\x02+") == (
        ControlRecord(1, 2, 1)
    )
    assert ControlRecord.decode(b"\x00\x00\x00\x03", None) == ControlRecord(3, -1, 0)


@pytest.mark.parametrize("size", [40, 100, 1024, 20_000])  # length varints of 1, 2, 2, 3 bytes
def test_record_count_walk_counts_records_of_every_length_varint(size: int) -> None:
    from spool.records.batch import BatchHeader
    from spool.records.builder import BatchBuilder
    from spool.records.record import check_record_count

    b = BatchBuilder()
    for _ in range(5):
        b.append(None, b"x" * size, timestamp=0)
    buf = bytearray(b.build())
    check_record_count(buf, 0, BatchHeader.parse(buf))  # exactly 5: accepted
    for claimed in (4, 6):
        h = BatchHeader.parse(buf)._replace(records_count=claimed)
        with pytest.raises(KafkaError) as e:
            check_record_count(buf, 0, h)
        assert e.value.code == Errors.INVALID_RECORD
    # the last record cut short: premature end
    cut = buf[:-(size + 4)]
    struct.pack_into(">i", cut, 8, len(cut) - 12)
    with pytest.raises(KafkaError) as e:
        check_record_count(cut, 0, BatchHeader.parse(cut))
    assert e.value.code == Errors.INVALID_RECORD


def _walk_one_by_one(buf: bytes, count: int) -> int | None:
    """The record-count walk's reference: every length varint read in turn; the error code
    the walk must give, or None when the block holds exactly ``count`` records."""
    from spool.records.record import MIN_RECORD_SIZE
    from spool.records.varint import read_varint

    end, pos = len(buf), 0
    if count < 0 or count * MIN_RECORD_SIZE > end:
        return Errors.INVALID_RECORD
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                u = (b & 0x7F) | (buf[pos + 1] << 7)
                n, pos = (u >> 1) ^ -(u & 1), pos + 2
            else:
                n, pos = read_varint(buf, pos)
            if n < MIN_RECORD_SIZE - 1 or pos + n > end:
                return Errors.INVALID_RECORD
            pos += n
    except IndexError:
        return Errors.INVALID_RECORD
    except KafkaError as e:
        return e.code
    return None if pos == end else Errors.INVALID_RECORD


def _varint_bytes(value: int, extra: int) -> bytes:
    """``value`` zigzag-encoded, padded with ``extra`` redundant continuation bytes (a longer
    encoding of the same number, which Kafka's reader accepts)."""
    u = (value << 1) ^ (value >> 31)
    out = bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    out.append(u)
    for _ in range(extra):
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def test_record_count_walk_answers_exactly_as_one_by_one_on_any_lengths() -> None:
    """Runs of one length are jumped over (strided compares), anything else walked: every
    block gets the answer and error code of the one-by-one walk, including length varints
    written longer than needed, runs broken by a longer encoding of the same length, claimed
    counts off by a few, and cut or padded blocks."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from spool.records.record import _walk_records

    record = st.tuples(st.sampled_from([6, 7, 40, 63, 64, 100, 101, 1000, 9000]),
                       st.sampled_from([0, 0, 0, 0, 1, 2]))  # (length, redundant bytes)
    runs = st.lists(st.tuples(record, st.integers(1, 300)), min_size=0, max_size=6)

    @settings(max_examples=600, deadline=None, derandomize=True)
    @given(runs, st.sampled_from([0, 0, 0, 0, -1, 1, -2, 3]),
           st.sampled_from([b"", b"", b"", b"\x00", b"\x0c" + b"x" * 6]),
           st.sampled_from([0, 0, 0, 0, 1, 3]))
    def check(shape, off_by, tail, cut):
        block = bytearray()
        count = 0
        for (length, extra), times in shape:
            one = _varint_bytes(length, extra) + bytes(range(length % 256))[:length].ljust(
                length, b"\x80")
            block += one * times
            count += times
        block += tail
        if cut:
            del block[len(block) - cut:]
        data = bytes(block)
        claimed = count + off_by
        want = _walk_one_by_one(data, claimed)
        for buf in (data, bytearray(data), memoryview(bytearray(data))):
            try:
                _walk_records(buf, 0, len(data), claimed)
                got = None
            except KafkaError as e:
                got = e.code
            assert got == want, (shape, off_by, tail, cut, type(buf))

    check()
