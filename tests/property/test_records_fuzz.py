"""Fuzz the batch and record decoders: random and mutated bytes may raise only KafkaError.

Mutations of the records area come with a recomputed CRC, so they reach the
decompressors and the record decoder instead of stopping at the CRC check.
"""

from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.protocol.errors import KafkaError
from spool.records import (
    BatchBuilder,
    build_control_batch,
    check_batch,
    iter_batches,
    iter_records,
    validate_batch,
)
from spool.records.compression import decompress


def _seed(codec: int) -> bytes:
    b = BatchBuilder(10, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0)
    for i in range(6):
        key = None if i == 2 else f"key{i}".encode()
        value = f"value-{i} ".encode() * 8
        b.append(key, value, timestamp=1000 + i, headers=[(f"h{i}", b"v")])
    return b.build()


SEEDS = [_seed(codec) for codec in range(5)] + [build_control_batch(3, 1, False, 2, 0, 5)]
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fix_crc(raw: bytearray) -> None:
    if len(raw) >= 21:
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))


def _exercise(raw: bytes | bytearray) -> None:
    """Every decoding entry point; any exception but KafkaError fails the test."""
    for fn in (
        lambda: validate_batch(raw),
        lambda: validate_batch(raw, allow_control=True, max_size=1 << 16),
        lambda: check_batch(raw),
        lambda: list(iter_batches(raw)),
        lambda: list(iter_records(raw, max_decompressed_size=1 << 16)),
    ):
        try:
            fn()
        except KafkaError:
            pass


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _exercise(data)
    # The same bytes as a records block behind a valid header, and as codec payloads.
    for attributes in range(5):
        raw = bytearray(SEEDS[0][:61] + data)
        struct.pack_into(">ih", raw, 8, len(raw) - 12, 0)
        struct.pack_into(">h", raw, 21, attributes)
        _fix_crc(raw)
        _exercise(raw)
        try:
            decompress(attributes, data, max_size=1 << 16)
        except KafkaError:
            pass


@FUZZ
@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(0, 10_000),
    fix_crc=st.booleans(),
    body_only=st.booleans(),
)
def test_mutated_batches(seed: bytes, edits, cut: int, fix_crc: bool, body_only: bool) -> None:
    raw = bytearray(seed)
    lo = 61 if body_only else 0
    for where, byte in edits:
        raw[lo + where % (len(raw) - lo)] = byte
    if cut % 3 == 0:
        del raw[cut % len(raw) :]
    if fix_crc:
        _fix_crc(raw)
    _exercise(raw)
    _exercise(bytes(raw) + seed)
