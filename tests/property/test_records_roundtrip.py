"""Builder -> reader round trip over random records, offsets, timestamps and codecs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spool.records import BatchBuilder, check_batch, iter_records, validate_batch
from spool.records.varint import (
    read_varint,
    read_varlong,
    varint_size,
    write_varint,
    write_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
maybe_bytes = st.none() | st.binary(max_size=300)
header = st.tuples(st.text(max_size=10), maybe_bytes)
record = st.tuples(
    maybe_bytes,  # key
    maybe_bytes,  # value
    st.lists(header, max_size=4),
    st.integers(0, 2**45),  # timestamp
    st.integers(1, 1000),  # gap to the previous offset delta
)


@given(INT32)
def test_varint_round_trip(v: int) -> None:
    raw = write_varint(v)
    assert read_varint(raw, 0) == (v, len(raw)) and len(raw) == varint_size(v)


@given(INT64)
def test_varlong_round_trip(v: int) -> None:
    raw = write_varlong(v)
    assert read_varlong(raw, 0) == (v, len(raw)) and len(raw) == varint_size(v)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=25),
    codec=st.integers(0, 4),
    base_offset=st.integers(0, 2**62),
    gaps=st.booleans(),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**30)),
)
def test_builder_round_trip(records, codec, base_offset, gaps, producer) -> None:
    pid, epoch, seq = producer
    b = BatchBuilder(
        base_offset, compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    expected = []
    delta = -1
    for key, value, headers, ts, gap in records:
        delta = delta + gap if gaps else delta + 1
        assert b.append(key, value, timestamp=ts, headers=headers, offset_delta=delta) == delta
        expected.append((base_offset + delta, ts, key, value, headers))
    raw = b.build()

    h = check_batch(raw)
    assert h.size == len(raw) and h.compression == codec
    assert h.records_count == len(records) and h.last_offset_delta == delta
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (pid, epoch, seq)
    assert h.base_timestamp == records[0][3]
    assert h.max_timestamp == max(r[3] for r in records)
    if not gaps:
        validate_batch(raw)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(raw)]
    assert got == expected

    # Rebuilding from the decoded records (what compaction does) is byte-identical.
    again = BatchBuilder(
        base_offset, compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    for r in iter_records(raw):
        again.append_record(r)
    assert again.build() == raw
