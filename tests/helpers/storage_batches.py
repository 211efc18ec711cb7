"""Test batches for the storage tests: a tiny, self-contained RecordBatch v2 encoder.

Uncompressed only (compressed batches come from ``spool.records.builder``).
Record values carry their own index so tests can check what came back.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def make_batch(
    count: int = 1,
    *,
    timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    value_size: int = 10,
    base_offset: int = 0,
    tag: int = 0,
) -> bytearray:
    """One uncompressed batch of ``count`` records; values are ``tag:i`` padded to size."""
    ts_list = timestamps if timestamps is not None else [timestamp] * count
    assert len(ts_list) == count and count >= 1
    base_ts = ts_list[0]
    body = bytearray()
    for i, ts in enumerate(ts_list):
        value = f"{tag}:{i}:".encode().ljust(value_size, b"x")
        rec = (
            b"\x00"
            + _varint(ts - base_ts)
            + _varint(i)
            + _varint(-1)
            + _varint(len(value))
            + value
            + _varint(0)
        )
        body += _varint(len(rec)) + rec
    out = bytearray(61 + len(body))
    _HEADER.pack_into(
        out, 0, base_offset, len(out) - 12, -1, 2, 0, 0, count - 1,
        base_ts, max(ts_list), -1, -1, -1, count,
    )
    out[61:] = body
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return out
