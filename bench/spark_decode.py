"""Decode alone: fetched RecordBatch v2 bytes -> Arrow (spool.spark.arrow_records), records/s.

    python -m bench.spark_decode [--cases 1000000x100,200000x1024] [--codecs none,lz4]
                                 [--keys none,8] [--response-mib 16] [--runs 3] [--headers]
                                 [--vary]

For each case (records x value bytes), codec and key size ("none" = null
keys, as bench/spark.py produces), the records are built in batches the way
librdkafka sends them to a broker (at most 10000 records or 1 MiB each;
timestamps 0-2 ms apart), cut into fetch responses of about
``--response-mib`` MiB (whole batches), and fed to one ``RecordsDecoder`` on
one core. ``--vary`` gives every value a random size in [size/2, 3*size/2)
(records of one size are walked in runs checked by numpy; mixed sizes take
the per-record Python walk: this shows that bound). Prints the median of ``--runs`` (min-max beside it) as records/s
and as MB/s of record bytes decoded (the records blocks, uncompressed).
Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from spool.records import CODEC_IDS, HEADER_SIZE, BatchBuilder, decompress
from spool.spark.arrow_records import RecordsDecoder

BATCH_RECORDS = 10_000
BATCH_BYTES = 1 << 20


def build(
    records: int, size: int, codec: int, key_size: int | None, response_bytes: int,
    vary: bool = False,
) -> tuple[list[bytes], int]:
    """Fetch responses holding ``records`` records, and the uncompressed record bytes."""
    value = os.urandom(size * 2)
    sizes = [random.randrange(size // 2, size * 3 // 2) for _ in range(997)] if vary else [size]
    responses: list[bytes] = []
    current: list[bytes] = []
    current_size = 0
    raw_bytes = 0
    offset = 0
    ts = 1_700_000_000_000
    while offset < records:
        b = BatchBuilder(offset, compression=codec)
        n = min(BATCH_RECORDS, max(1, BATCH_BYTES // (size + 10)), records - offset)
        for i in range(n):
            key = None if key_size is None else (b"%0*d" % (key_size, offset + i))[-key_size:]
            b.append(key, value[: sizes[(offset + i) % len(sizes)]],
                     timestamp=ts + (offset + i) // 3)
        raw = b.build()
        raw_bytes += len(decompress(codec, raw[HEADER_SIZE:]))
        offset += n
        current.append(raw)
        current_size += len(raw)
        if current_size >= response_bytes:
            responses.append(b"".join(current))
            current, current_size = [], 0
    if current:
        responses.append(b"".join(current))
    return responses, raw_bytes


def decode_all(responses: list[bytes], include_headers: bool) -> int:
    decoder = RecordsDecoder("bench", 0, include_headers, False)
    rows = 0
    at = 0
    for response in responses:
        batch, at = decoder.feed(response, None, at, 1 << 62)
        rows += 0 if batch is None else batch.num_rows
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="1000000x100,200000x1024")
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--keys", default="none,8")
    ap.add_argument("--response-mib", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--headers", action="store_true", help="decode with includeHeaders")
    ap.add_argument("--vary", action="store_true", help="values of mixed sizes")
    a = ap.parse_args()
    for case in a.cases.split(","):
        records, size = (int(x) for x in case.split("x"))
        for codec_name in a.codecs.split(","):
            for key in a.keys.split(","):
                key_size = None if key == "none" else int(key)
                responses, raw_bytes = build(
                    records, size, CODEC_IDS[codec_name], key_size, a.response_mib << 20, a.vary
                )
                times = []
                for _ in range(a.runs):
                    t = time.process_time()
                    rows = decode_all(responses, a.headers)
                    times.append(time.process_time() - t)
                    assert rows == records, (rows, records)
                med = statistics.median(times)
                print(
                    f"{records}x{size}B{'~' if a.vary else ''} {codec_name:4} key={key:4} headers={int(a.headers)}: "
                    f"{records / med / 1e6:6.2f} M rec/s ({records / max(times) / 1e6:.2f}-"
                    f"{records / min(times) / 1e6:.2f}), {raw_bytes / med / 1e6:7.0f} MB/s",
                    flush=True,
                )


if __name__ == "__main__":
    main()
