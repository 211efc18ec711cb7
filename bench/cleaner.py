"""Log cleaner benchmark: MB/s of dirty log cleaned, and the disk footprint before/after.

    python -m bench.cleaner [--mb 64] [--keys 10000] [--value 100] [--codec none] [--dir DIR]

Writes ``--mb`` of keyed updates (``--keys`` distinct keys, ``--value``-byte
values of random hex text, 100 records per batch, 8 MiB segments) to a compacted log, then runs
one cleaning of the whole dirty section (``LogCleaner.clean``, the code the
cleaner thread runs) and reports: dirty MB read per second (Kafka's "cleaned
MB/s"), records per second, the MB/s of the offset-map pass and of the
rewrite pass, and the log's size before and after. ``--codec`` (none, gzip,
snappy, lz4, zstd) compresses the produced batches; rebuilt batches keep it.

Timing lives here, never in asserting tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from spool.records.builder import BatchBuilder
from spool.records.compression import CODEC_IDS
from spool.storage.cleaner_manager import LogCleaner, log_to_clean
from spool.storage.manager import LogManager

MiB = 1 << 20


def fill(plog, mb: int, keys: int, value_size: int, codec: int) -> int:
    # hex text of random bytes: compresses about 2x, like typical JSON-ish payloads
    values = [os.urandom(value_size // 2 + 1).hex().encode()[:value_size] for _ in range(997)]
    now = int(time.time() * 1000)
    i = 0
    while plog.size_in_bytes < mb * MiB:
        b = BatchBuilder(0, compression=codec)
        for _ in range(100):
            b.append(b"key-%08d" % (i % keys), values[i % 997], timestamp=now)
            i += 1
        plog.append(b.build())
    return i


def run(mb: int, keys: int, value_size: int, codec_name: str, root: Path) -> dict[str, float]:
    mgr = LogManager([str(root)], {"log.segment.delete.delay.ms": "0"})
    plog = mgr.create_partition("bench", 0, {
        "cleanup.policy": "compact", "segment.bytes": str(8 * MiB), "file.delete.delay.ms": "0",
    })
    n = fill(plog, mb, keys, value_size, CODEC_IDS[codec_name])
    before = plog.size_in_bytes
    cleaner = LogCleaner(mgr)
    now = int(time.time() * 1000)
    ltc = log_to_clean(plog.tp, plog, None, now)
    t0 = time.perf_counter()
    res = cleaner.clean(ltc, now)
    elapsed = time.perf_counter() - t0
    after = plog.size_in_bytes
    s = res.stats
    mgr.shutdown()
    return {
        "records": n, "dirty_mb": ltc.cleanable_bytes / 1e6, "seconds": elapsed,
        "mb_per_s": ltc.cleanable_bytes / 1e6 / elapsed,
        "records_per_s": s.records_read / elapsed,
        "map_mb": s.map_bytes_read / 1e6, "rewrite_mb": s.bytes_read / 1e6,
        "before_mb": before / 1e6, "after_mb": after / 1e6, "kept": s.records_kept,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--codec", default="none", choices=sorted(CODEC_IDS))
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="spool-bench-cleaner-", dir=args.dir))
    try:
        r = run(args.mb, args.keys, args.value, args.codec, root / "data")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"cleaner: {r['records']:,} records ({args.keys:,} keys, {args.value} B values, "
          f"codec {args.codec}), {r['dirty_mb']:.1f} MB dirty")
    print(f"  cleaned in {r['seconds']:.2f} s: {r['mb_per_s']:.1f} MB/s of dirty log, "
          f"{r['records_per_s'] / 1e3:.0f}k records/s "
          f"(offset map pass {r['map_mb']:.1f} MB + rewrite pass {r['rewrite_mb']:.1f} MB read)")
    print(f"  log size {r['before_mb']:.1f} MB -> {r['after_mb']:.2f} MB "
          f"({r['kept']:,} records kept)")


if __name__ == "__main__":
    main()
