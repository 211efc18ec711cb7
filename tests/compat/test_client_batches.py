"""Our records layer against real clients' RecordBatch v2 code, both directions, every codec.

* Goldens: batches librdkafka, kafka-python and aiokafka producers really sent
  (``tests/data/batches/*.bin``, captured by ``capture.py`` with a fake broker)
  decode to exactly what the sidecar JSON says was produced.
* Their builders -> our reader: kafka-python 3.0.12's and aiokafka 0.14.0's
  (C and pure-Python) ``DefaultRecordBatchBuilder``.
* Our builder -> their readers: the same libraries' ``DefaultRecordBatch``.
"""

from __future__ import annotations

import json
from pathlib import Path

import aiokafka.record.default_records as aio
import kafka.record.default_records as kp
import pytest

from spool.records import (
    CODEC_IDS,
    BatchBuilder,
    build_control_batch,
    check_batch,
    iter_batches,
    iter_records,
    validate_batch,
)

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "batches"
CODECS = [0, 1, 2, 3, 4]

# (key, value, headers, timestamp): null key/value, empty value, many headers, compressible.
SAMPLE = [
    (b"key-0", b"hello " * 50, [("trace", b"abc")], 1_700_000_000_000),
    (None, b"no key " * 40, [], 1_700_000_000_005),
    (b"tombstone", None, [], 1_699_999_999_000),
    (b"empty", b"", [("a", b"1"), ("b", b""), ("\u00e9t\u00e9", b"\xff")], 1_700_000_000_100),
    (b"\x00\xff", b"x" * 3000, [("n", None)], 1_700_000_000_010),
]


def _expected(sample=SAMPLE, base_offset: int = 0):
    return [(base_offset + i, k, v, h, t) for i, (k, v, h, t) in enumerate(sample)]


def _ours(raw: bytes, pos: int = 0):
    return [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in iter_records(raw, pos)]


def _theirs(batch):
    out = []
    for r in batch:
        value = None if r.value is None else bytes(r.value)
        key = None if r.key is None else bytes(r.key)
        out.append((r.offset, key, value, list(r.headers), r.timestamp))
    return out


BUILDERS = {
    "kafka-python": kp.DefaultRecordBatchBuilder,
    "aiokafka": aio.DefaultRecordBatchBuilder,
    "aiokafka-py": aio._DefaultRecordBatchBuilderPy,
}
READERS = {
    "kafka-python": kp.DefaultRecordBatch,
    "aiokafka": aio.DefaultRecordBatch,
    "aiokafka-py": aio._DefaultRecordBatchPy,
}


# --- goldens captured from real producers --------------------------------------------


def _golden_names() -> list[str]:
    return sorted(p.stem for p in GOLDEN.glob("*.bin"))


def test_goldens_exist_for_every_client_and_codec() -> None:
    names = _golden_names()
    for codec in CODECS:
        name = [n for n, c in CODEC_IDS.items() if c == codec][0]
        assert f"librdkafka-2.16.0-{name}" in names
        assert f"aiokafka-0.14.0-{name}" in names
        if name != "snappy":
            assert f"kafka-python-3.0.12-{name}" in names


@pytest.mark.parametrize("name", _golden_names())
def test_golden_batches_decode_exactly(name: str) -> None:
    raw = (GOLDEN / f"{name}.bin").read_bytes()
    meta = json.loads((GOLDEN / f"{name}.json").read_text())
    codec = CODEC_IDS[meta["codec"]]
    got = []
    end = 0
    for pos, _ in iter_batches(raw):
        h = validate_batch(raw, pos)
        assert h.compression == codec, "the client did not compress: the golden proves nothing"
        assert (h.producer_id, h.producer_epoch) == (meta["producer_id"], meta["producer_epoch"])
        if h.producer_id >= 0:
            assert h.base_sequence == len(got)
        records = list(iter_records(raw, pos))
        assert [r.offset - h.base_offset for r in records] == list(range(h.records_count))
        got += records
        end = pos + h.size
    assert end == len(raw)
    expected = meta["records"]
    assert len(got) == len(expected)
    for r, e in zip(got, expected, strict=True):
        assert r.key == (None if e["key"] is None else bytes.fromhex(e["key"]))
        assert r.value == (None if e["value"] is None else bytes.fromhex(e["value"]))
        assert r.headers == [(k, None if v is None else bytes.fromhex(v)) for k, v in e["headers"]]
        assert r.timestamp == e["timestamp"]


def test_snappy_framings_in_the_wild() -> None:
    """librdkafka writes raw snappy, aiokafka (like Java) xerial framing: both decode."""
    raw = (GOLDEN / "librdkafka-2.16.0-snappy.bin").read_bytes()
    assert not raw[61:].startswith(b"\x82SNAPPY\x00")
    raw = (GOLDEN / "aiokafka-0.14.0-snappy.bin").read_bytes()
    assert raw[61:].startswith(b"\x82SNAPPY\x00")


# --- their builders -> our reader -------------------------------------------------------


@pytest.mark.parametrize("library", list(BUILDERS))
@pytest.mark.parametrize("codec", CODECS)
def test_their_builder_our_reader(library: str, codec: int) -> None:
    builder = BUILDERS[library](2, codec, 0, 11, 2, 100, 1 << 20)
    for i, (k, v, h, t) in enumerate(SAMPLE):
        assert builder.append(i, t, k, v, h) is not None
    raw = bytes(builder.build())
    h = validate_batch(raw)
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (11, 2, 100)
    assert h.max_timestamp == max(t for *_, t in SAMPLE)
    assert _ours(raw) == _expected()


# --- our builder -> their readers -------------------------------------------------------


def _our_batch(codec: int, base_offset: int = 0, **kwargs) -> bytes:
    b = BatchBuilder(base_offset, compression=codec, **kwargs)
    for k, v, h, t in SAMPLE:
        b.append(k, v, timestamp=t, headers=h)
    return b.build()


@pytest.mark.parametrize("library", list(READERS))
@pytest.mark.parametrize("codec", CODECS)
def test_our_builder_their_reader(library: str, codec: int) -> None:
    raw = _our_batch(codec, 5000, producer_id=8, producer_epoch=1, base_sequence=3)
    batch = READERS[library](raw)
    assert batch.validate_crc()
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (8, 1, 3)
    assert batch.next_offset == 5000 + len(SAMPLE)
    assert _theirs(batch) == _expected(base_offset=5000)


@pytest.mark.parametrize("library", list(READERS))
def test_their_reader_special_batches(library: str) -> None:
    # LogAppendTime: every record carries the batch's time.
    raw = _our_batch(3, log_append_time=1_234)
    batch = READERS[library](raw)
    assert batch.timestamp_type == 1
    assert {r.timestamp for r in batch} == {1_234}

    # Compaction output: offsets with gaps, lastOffsetDelta kept.
    b = BatchBuilder(100, last_offset_delta=9)
    b.append(b"a", b"1", timestamp=5, offset_delta=2)
    b.append(b"b", b"2", timestamp=6, offset_delta=7)
    batch = READERS[library](b.build())
    assert batch.validate_crc() and batch.next_offset == 110
    assert [r.offset for r in batch] == [102, 107]

    # A transaction marker.
    raw = build_control_batch(77, 3, True, 5, 40, 1_000)
    check_batch(raw)
    batch = READERS[library](raw)
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    (marker,) = list(batch)
    assert marker.offset == 40 and bytes(marker.key) == b"\x00\x00\x00\x01"
