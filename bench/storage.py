"""Storage benchmark: append and read throughput, and 1,000-partition startup.

    python -m bench.storage [--mb 256] [--dir DIR] [--partitions 1000]

Measures, in one run on one disk (``--dir``, default a temp dir):

* append throughput of ``PartitionLog.append`` with 1 MiB and 16 KiB batches
  beside a plain sequential ``os.write`` of the same bytes to a file in the
  same directory (the ratio is what the log costs over the raw disk/page
  cache), each also with a final fsync;
* read throughput of file regions: ``PartitionLog.read`` (consumer-sized
  1 MiB fetches) sent with ``os.sendfile`` to /dev/null and through a
  socketpair drained by a thread, and read with ``os.pread``;
* startup time of a LogManager over 1,000 partitions holding data, after a
  clean shutdown and after a crash (recovery scans every active segment).

Timing lives here, never in asserting tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

from spool.records.builder import BatchBuilder
from spool.storage.checkpoint import CLEAN_SHUTDOWN_MARKER
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from spool.storage.manager import LogManager

MiB = 1 << 20


def make_batch(size: int, record_size: int = 1024) -> bytearray:
    b = BatchBuilder(0)
    now = int(time.time() * 1000)
    value = os.urandom(record_size)
    for _ in range(max(1, size // (record_size + 16))):
        b.append(None, value, timestamp=now)
    return bytearray(b.build())


def bench_raw(path: Path, batch: bytearray, count: int) -> tuple[float, float]:
    """Seconds to os.write ``count`` copies of ``batch``, and to that plus a final fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(count):
            os.write(fd, batch)
        t1 = time.perf_counter()
        os.fsync(fd)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
    path.unlink()
    return t1 - t0, t2 - t0


def bench_append(path: Path, batch: bytearray, count: int, keep: bool = False):
    """Seconds to append ``count`` batches, and to that plus ``flush()``; the log if kept."""
    log = PartitionLog(path, LogConfig(segment_bytes=256 * MiB))
    t0 = time.perf_counter()
    for _ in range(count):
        log.append(batch)
    t1 = time.perf_counter()
    log.flush()
    t2 = time.perf_counter()
    if not keep:
        log.close()
        shutil.rmtree(path)
        log = None
    return t1 - t0, t2 - t0, log


def bench_append_vs_raw(base: Path, size: int, mb: int, reps: int) -> dict[str, float]:
    """Alternate raw writes and log appends of the same bytes; each run is fsynced and
    deleted before the next so dirty-page throttling hits neither. Best of ``reps``."""
    batch = make_batch(size)
    count = max(1, mb * MiB // len(batch))
    total = count * len(batch) / 1e6
    best = {"raw": 0.0, "log": 0.0, "raw+fsync": 0.0, "log+fsync": 0.0}
    for rep in range(reps):
        rt, rft = bench_raw(base / "raw.bin", batch, count)
        lt, lft, _ = bench_append(base / f"bench-{rep}", batch, count)
        for key, secs in (("raw", rt), ("raw+fsync", rft), ("log", lt), ("log+fsync", lft)):
            best[key] = max(best[key], total / secs)
    best["appends/s"] = best["log"] * 1e6 / len(batch)
    return best


def bench_reads(log: PartitionLog, fetch_bytes: int) -> dict[str, float]:
    total = log.size_in_bytes
    out: dict[str, float] = {}

    def walk(consume) -> float:
        offset, t0 = log.log_start_offset, time.perf_counter()
        while offset < log.log_end_offset:
            sl = log.read(offset, fetch_bytes)
            consume(sl)
            offset = last_offset_after(sl)
        return time.perf_counter() - t0

    def last_offset_after(sl) -> int:
        # the next fetch offset: one past the last batch of the slice
        pos, end, nxt = sl.position, sl.position + sl.length, sl.first_offset
        while pos < end:
            head = os.pread(sl.fileno(), 27, pos)
            nxt = int.from_bytes(head[0:8], "big") + int.from_bytes(head[23:27], "big") + 1
            pos += 12 + int.from_bytes(head[8:12], "big")
        return nxt

    null = os.open(os.devnull, os.O_WRONLY)
    try:
        out["sendfile /dev/null"] = total / walk(
            lambda sl: os.sendfile(null, sl.fileno(), sl.position, sl.length)
        )
    finally:
        os.close(null)

    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MiB)
    done = threading.Event()

    def drain() -> None:
        buf = bytearray(4 * MiB)
        while not done.is_set():
            if not b.recv_into(buf):
                return

    t = threading.Thread(target=drain, daemon=True)
    t.start()

    def send(sl) -> None:
        pos, left = sl.position, sl.length
        while left:
            n = os.sendfile(a.fileno(), sl.fileno(), pos, left)
            pos, left = pos + n, left - n

    out["sendfile socketpair"] = total / walk(send)
    done.set()
    a.close()
    t.join()
    b.close()
    out["pread"] = total / walk(lambda sl: sl.read())
    return out


def bench_startup(root: Path, partitions: int) -> dict[str, float]:
    props = {"log.index.size.max.bytes": str(64 * 1024)}
    mgr = LogManager([str(root)], props)
    log = mgr.create_partition("bench", 0)
    for _ in range(20):
        log.append(make_batch(4096))
    mgr.shutdown()
    for p in range(1, partitions):
        shutil.copytree(root / "bench-0", root / f"bench-{p}")
    out = {}
    for label in ("clean", "after crash"):
        if label == "after crash":
            (root / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
        t0 = time.perf_counter()
        mgr = LogManager([str(root)], props)
        out[label] = time.perf_counter() - t0
        assert len(mgr.partitions()) == partitions
        mgr.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=64, help="MiB appended per run")
    ap.add_argument("--reps", type=int, default=5, help="alternating runs per case (best kept)")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--partitions", type=int, default=1000)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="spool-bench-", dir=args.dir))
    try:
        print(f"dir: {base}  ({args.mb} MiB per run, best of {args.reps})\n")
        print("append            raw MB/s  log MB/s  ratio  appends/s | +fsync: raw  log  ratio")
        for label, size in (("1 MiB batches", MiB), ("16 KiB batches", 16 * 1024)):
            r = bench_append_vs_raw(base, size, args.mb, args.reps)
            print(f"{label:<16} {r['raw']:>9.0f} {r['log']:>9.0f} {r['log'] / r['raw']:>6.2f}"
                  f" {r['appends/s']:>10.0f} | {r['raw+fsync']:>11.0f} {r['log+fsync']:>4.0f}"
                  f" {r['log+fsync'] / r['raw+fsync']:>6.2f}")
        batch = make_batch(16 * 1024)
        _, _, log = bench_append(base / "read-0", batch, args.mb * MiB // len(batch), keep=True)
        print("\nread, 1 MiB fetches of 16 KiB batches (page cache)   MB/s")
        for name, rate in bench_reads(log, MiB).items():
            print(f"  {name:<22} {rate / 1e6:>8.0f}")
        log.close()
        startup_dir = base / "startup"
        startup_dir.mkdir()
        print(f"\nstartup, {args.partitions} partitions (20 x 4 KiB batches each)")
        for name, secs in bench_startup(startup_dir, args.partitions).items():
            print(f"  {name:<22} {secs:>8.2f} s")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
