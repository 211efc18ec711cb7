"""RecordsDecoder: fetched RecordBatch v2 bytes -> Arrow rows, as Kafka's consumer sees them.

The property test builds random logs with spool.records (codecs, null keys and
values, headers, LogAppendTime, compaction gaps, empty batches, transactions
committed and aborted with their markers), cuts them into fetch responses the
way a broker would (whole batches, sometimes a partial trailing batch, the
aborted transactions overlapping each response), feeds them in order and
checks the rows against the records the log was built from.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.protocol.errors import Errors, KafkaError
from spool.records import BatchBuilder, build_control_batch, patch_log_append_time
from spool.spark import arrow_records
from spool.spark.arrow_records import RecordsDecoder
from spool.spark.schema import arrow_schema

PIDS = (7, 8)
TOPIC = "t"
PARTITION = 3

HEADER_KEYS = ("", "trace-id", "é", "日本", "\x00k")


@dataclass
class Row:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    timestamp_type: int
    headers: list
    pid: int = -1  # the transaction's producer, -1 when not transactional


@dataclass
class Log:
    batches: list[tuple[bytes, int, int]] = field(default_factory=list)  # raw, first, next
    rows: list[Row] = field(default_factory=list, repr=False)
    committed: set[tuple[int, int]] = field(default_factory=set)  # (pid, first_offset)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # pid, first, marker
    txn_of_row: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)


@st.composite
def logs(draw) -> Log:
    log = Log()
    rnd = random.Random(draw(st.integers(0, 1 << 32)))  # per record: draws cost too much
    offset = draw(st.integers(0, 300))
    ts = draw(st.integers(0, 1 << 41))
    open_txn: dict[int, int] = {}  # pid -> first offset

    def close(pid: int, commit: bool) -> None:
        nonlocal offset
        first = open_txn.pop(pid)
        raw = build_control_batch(pid, 0, commit, 5, offset, ts)
        log.batches.append((raw, offset, offset + 1))
        if commit:
            log.committed.add((pid, first))
        else:
            log.aborted.append((pid, first, offset))
        offset += 1

    for _ in range(draw(st.integers(1, 14))):
        offset += draw(st.sampled_from([0, 0, 0, 1, 4]))  # whole batches compacted away
        kind = draw(st.sampled_from(["data", "txn", "txn", "marker", "marker", "empty"]))
        if kind == "marker":
            if open_txn:
                close(draw(st.sampled_from(sorted(open_txn))), draw(st.booleans()))
            continue
        if kind == "empty":  # compaction removed every record, kept the batch
            last = draw(st.integers(0, 5))
            raw = BatchBuilder(offset, last_offset_delta=last).build()
            log.batches.append((raw, offset, offset + last + 1))
            offset += last + 1
            continue
        pid = draw(st.sampled_from(PIDS)) if kind == "txn" else -1
        log_append = draw(st.sampled_from([None, None, None, ts + 77]))
        b = BatchBuilder(
            offset,
            compression=draw(st.integers(0, 4)),
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            is_transactional=pid >= 0,
        )
        delta = -1
        # uniform: records of one size (runs the decoder checks at once), until an offset
        # delta of 64 or a gap makes the next ones longer
        uniform = draw(st.booleans())
        key = rnd.choice([None, rnd.randbytes(rnd.randint(0, 20))])
        value = rnd.choice([None, rnd.randbytes(rnd.randint(0, 20)), rnd.randbytes(200)])
        for _ in range(rnd.choice([rnd.randint(1, 6), rnd.randint(1, 6), rnd.randint(20, 90)])):
            delta += 1 + rnd.choice([0] * 30 + [2, 200] if uniform else [0, 0, 0, 0, 2, 200])
            stamp = ts + (0 if uniform else rnd.choice([0, 1, -1, 70, -70, 9000, 1 << 35]))
            hdrs = [] if uniform else [
                (rnd.choice(HEADER_KEYS), rnd.choice([None, rnd.randbytes(rnd.randint(0, 8))]))
                for _ in range(rnd.choice([0, 0, 1, 3]))
            ]
            if not uniform:
                key = rnd.choice([None, rnd.randbytes(rnd.randint(0, 20))])
                value = rnd.choice([None, rnd.randbytes(rnd.randint(0, 20)),
                                    rnd.randbytes(rnd.randint(60, 300))])
            b.append(key, value, timestamp=stamp, headers=hdrs, offset_delta=delta)
            log.rows.append(
                Row(offset + delta, key, value,
                    stamp if log_append is None else log_append,
                    0 if log_append is None else 1, hdrs, pid)
            )
        if pid >= 0:
            open_txn.setdefault(pid, offset)
            for r in log.rows[len(log.rows) - len(b):]:
                log.txn_of_row[r.offset] = (pid, open_txn[pid])
        if draw(st.booleans()):
            extra = draw(st.integers(0, 3))
            b.last_offset_delta = delta + extra  # trailing records compacted away
            delta += extra
        raw = b.build()
        if log_append is not None:  # as a broker stamps it: the records keep their deltas
            raw = bytearray(raw)
            patch_log_append_time(raw, 0, log_append)
            raw = bytes(raw)
        log.batches.append((raw, offset, offset + delta + 1))
        offset += delta + 1
    if not log.batches:
        log.batches.append((BatchBuilder(offset, last_offset_delta=0).build(), offset, offset + 1))
    for pid in sorted(open_txn):  # what a read_committed fetch sees stops at the LSO
        close(pid, draw(st.booleans()))
    return log


def visible(log: Log, row: Row, read_committed: bool) -> bool:
    if not read_committed or row.pid < 0:
        return True
    return log.txn_of_row[row.offset] in log.committed


def aborted_in(log: Log, lo: int, hi: int) -> list[tuple[int, int]]:
    """What a broker returns: the aborted transactions overlapping [lo, hi)."""
    return [(pid, first) for pid, first, marker in log.aborted if marker >= lo and first < hi]


def as_rows(batch: pa.RecordBatch, include_headers: bool) -> list[tuple]:
    assert batch.schema == arrow_schema(include_headers)
    assert batch.column("topic").to_pylist() == [TOPIC] * batch.num_rows
    assert batch.column("partition").to_pylist() == [PARTITION] * batch.num_rows
    cols = [
        batch.column("offset").to_pylist(),
        batch.column("key").to_pylist(),
        batch.column("value").to_pylist(),
        batch.column("timestamp").cast(pa.int64()).to_pylist(),
        batch.column("timestampType").to_pylist(),
    ]
    if include_headers:
        cols.append([[(h["key"], h["value"]) for h in hs]
                     for hs in batch.column("headers").to_pylist()])
    return list(zip(*cols, strict=True))


def expected_row(row: Row, include_headers: bool) -> tuple:
    out = (row.offset, row.key, row.value, row.timestamp * 1000, row.timestamp_type)
    return (*out, list(row.headers)) if include_headers else out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(
    log=logs(),
    read_committed=st.booleans(),
    include_headers=st.booleans(),
    data=st.data(),
)
def test_feeds_match_the_log(log: Log, read_committed: bool, include_headers: bool, data) -> None:
    first, last = log.batches[0][1], log.batches[-1][2]
    start = data.draw(st.integers(first, last), label="start")
    end = data.draw(st.integers(start, last + 2), label="end")
    decoder = RecordsDecoder(TOPIC, PARTITION, include_headers, read_committed)
    got: list[tuple] = []
    i, fetch_at = 0, start
    partial = b""
    while i < len(log.batches):
        # j == i: a response holding only a partial batch
        j = data.draw(st.sampled_from([i + 1, i + 1, i + 2, i + 4, i]), label="cut")
        j = min(j, len(log.batches))
        chunk = b"".join(raw for raw, _, _ in log.batches[i:j])
        if j < len(log.batches) and data.draw(st.booleans(), label="partial"):
            raw = log.batches[j][0]
            partial = raw[: data.draw(st.integers(0, len(raw) - 1), label="partial size")]
        hi = log.batches[j - 1][2] if j > i else fetch_at
        batch, nxt = decoder.feed(chunk + partial, aborted_in(log, fetch_at, hi), fetch_at, end)
        assert nxt == (max(fetch_at, log.batches[j - 1][2]) if j > i else fetch_at)
        if batch is not None:
            assert batch.num_rows > 0
            got.extend(as_rows(batch, include_headers))
        i, fetch_at, partial = j, nxt, b""
    want = [
        expected_row(r, include_headers)
        for r in log.rows
        if start <= r.offset < end and visible(log, r, read_committed)
    ]
    assert got == want


def test_null_keys_and_values_come_out_null() -> None:
    b = BatchBuilder(10)
    b.append(None, b"v", timestamp=5)
    b.append(b"k", None, timestamp=6)
    b.append(b"", b"", timestamp=7)
    batch, nxt = RecordsDecoder(TOPIC, PARTITION, False, False).feed(b.build(), None, 10, 99)
    assert nxt == 13
    assert batch.column("key").to_pylist() == [None, b"k", b""]
    assert batch.column("value").to_pylist() == [b"v", None, b""]
    assert batch.column("key").null_count == 1


def test_log_append_time_uses_max_timestamp_and_type_1() -> None:
    b = BatchBuilder(0)
    b.append(b"k", b"v", timestamp=5)
    b.append(b"k", b"v", timestamp=9)
    raw = bytearray(b.build())
    patch_log_append_time(raw, 0, 1_700_000_000_123)  # the broker's stamp; deltas stay
    batch, _ = RecordsDecoder(TOPIC, PARTITION, False, False).feed(bytes(raw), None, 0, 2)
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1_700_000_000_123_000] * 2
    assert batch.column("timestampType").to_pylist() == [1, 1]


def test_only_control_or_partial_batches_give_no_rows() -> None:
    decoder = RecordsDecoder(TOPIC, PARTITION, False, True)
    marker = build_control_batch(4, 0, True, 0, 20, 1)
    assert decoder.feed(marker, None, 20, 100) == (None, 21)
    b = BatchBuilder(21)
    b.append(b"k", b"v", timestamp=1)
    assert decoder.feed(b.build()[:-1], None, 21, 100) == (None, 21)
    assert decoder.feed(b"", None, 21, 100) == (None, 21)


def test_an_aborted_transaction_spanning_two_fetches_is_dropped_in_both() -> None:
    """The broker lists the aborted transaction once; the decoder remembers it."""
    decoder = RecordsDecoder(TOPIC, PARTITION, False, True)
    first = BatchBuilder(0, producer_id=7, producer_epoch=0, base_sequence=0,
                         is_transactional=True)
    first.append(b"k", b"aborted", timestamp=1)
    second = BatchBuilder(1, producer_id=7, producer_epoch=0, base_sequence=1,
                          is_transactional=True)
    second.append(b"k", b"aborted too", timestamp=1)
    assert decoder.feed(first.build(), [(7, 0)], 0, 100) == (None, 1)
    assert decoder.feed(second.build(), [], 1, 100) == (None, 2)
    assert decoder.feed(build_control_batch(7, 0, False, 0, 2, 1), [], 2, 100) == (None, 3)
    after = BatchBuilder(3, producer_id=7, producer_epoch=0, base_sequence=2,
                         is_transactional=True)
    after.append(b"k", b"committed", timestamp=1)
    batch, nxt = decoder.feed(after.build(), [], 3, 100)
    assert (batch.column("value").to_pylist(), nxt) == ([b"committed"], 4)


def test_corrupt_records_raise_corrupt_message() -> None:
    b = BatchBuilder(0)
    b.append(b"k", b"value", timestamp=1)
    raw = bytearray(b.build())
    raw[61] = 0x7E  # the record's length varint now claims 63 bytes
    with pytest.raises(KafkaError) as e:
        RecordsDecoder(TOPIC, PARTITION, False, False).feed(bytes(raw), None, 0, 1)
    assert e.value.code == Errors.CORRUPT_MESSAGE


def test_magic_other_than_2_is_unsupported() -> None:
    b = BatchBuilder(0)
    b.append(b"k", b"v", timestamp=1)
    raw = bytearray(b.build())
    struct.pack_into(">b", raw, 16, 1)
    with pytest.raises(KafkaError) as e:
        RecordsDecoder(TOPIC, PARTITION, False, False).feed(bytes(raw), None, 0, 1)
    assert e.value.code == Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_runs_of_equal_records_then_longer_ones() -> None:
    """Offset deltas from 64 take two bytes: the record size changes mid-batch."""
    b = BatchBuilder(1000, compression=0)
    values = [bytes([i % 256]) * 100 for i in range(300)]
    for i, v in enumerate(values):
        b.append(None if i % 100 == 7 else b"key", v, timestamp=10 + i % 2)
    batch, nxt = RecordsDecoder(TOPIC, PARTITION, False, False).feed(b.build(), None, 1000, 1300)
    assert nxt == 1300
    assert batch.column("offset").to_pylist() == list(range(1000, 1300))
    assert batch.column("value").to_pylist() == values
    assert batch.column("key").null_count == 3
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [
        (10 + i % 2) * 1000 for i in range(300)
    ]


def test_compressed_responses_decode_in_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inflated blocks are decoded a few at a time (bounded memory), joined into one batch."""
    raws, values = [], []
    for i in range(6):
        b = BatchBuilder(i * 10, compression=3 if i % 3 else 0)
        for j in range(10):
            values.append(b"%d-%d" % (i, j) * 20)
            b.append(None if j == 3 else b"k%d" % j, values[-1], timestamp=j,
                     headers=[("h", b"%d" % j)])
        raws.append(b.build())
    monkeypatch.setattr(arrow_records, "GROUP_BYTES", 500)
    batch, nxt = RecordsDecoder(TOPIC, PARTITION, True, False).feed(b"".join(raws), None, 5, 57)
    assert nxt == 60
    assert batch.column("offset").to_pylist() == list(range(5, 57))
    assert batch.column("value").to_pylist() == values[5:57]
    assert batch.column("key").null_count == 5
    assert batch.column("headers").to_pylist()[:2] == [
        [{"key": "h", "value": b"5"}], [{"key": "h", "value": b"6"}]
    ]
