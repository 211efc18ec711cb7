"""Records-layer throughput: batch validation (CRC-bound) and record decoding/encoding.

    .venv/bin/python -m bench.records [--seconds 1.0]

Prints one line per case: validate_batch MB/s over 1 MiB and 16 KiB batches;
iter_records and BatchBuilder records/s for 1000-record batches of 100-byte
values, uncompressed and lz4. Timing lives here, never in an asserting test.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from spool.records import LZ4, NONE, BatchBuilder, iter_records, validate_batch


def _batch(n: int, value_size: int, codec: int) -> bytes:
    b = BatchBuilder(0, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0)
    half = os.urandom(value_size // 2)
    for i in range(n):
        value = half + b"%08d" % i * (value_size // 16) + half
        b.append(b"key-%d" % i, value[:value_size], timestamp=1_700_000_000_000 + i)
    return b.build()


def _rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``fn``, measured for about ``seconds``."""
    fn()
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        calls += 1
    return calls / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    s = ap.parse_args().seconds

    for label, size in (("1 MiB", 1 << 20), ("16 KiB", 16 << 10)):
        n = max(1, (size - 61) // 110)
        raw = _batch(n, 100, NONE)
        per_s = _rate(lambda raw=raw: validate_batch(raw), s)
        print(f"validate_batch  {label:>7} batch  {per_s * len(raw) / 1e6:9.0f} MB/s")

    for label, codec in (("none", NONE), ("lz4", LZ4)):
        raw = _batch(1000, 100, codec)
        per_s = _rate(lambda raw=raw: sum(1 for _ in iter_records(raw)), s)
        print(f"iter_records    1000 x 100 B {label:>4}  {per_s * 1000:9.0f} records/s")

    for label, codec in (("none", NONE), ("lz4", LZ4)):
        per_s = _rate(lambda codec=codec: _batch(1000, 100, codec), s)
        print(f"BatchBuilder    1000 x 100 B {label:>4}  {per_s * 1000:9.0f} records/s")


if __name__ == "__main__":
    main()
