"""Frame fuzzer: mutated requests of every API sent to a running broker.

    python -m bench.reliability.fuzz [--frames 1000000] [--connections 48] [--max-seconds 3600]
                                     [--quick]

Starts a broker with its defaults (auto-creation and CreateTopics left on),
builds valid requests of every API key and version (``seeds``), and sends
``--frames`` frames, most of them mutated (bit flips, interesting byte and
int16/int32 values over length fields, truncations, splices of other frames,
inserted/deleted/duplicated ranges, a wrong frame size prefix), about 10%
left valid. Each of ``--connections`` asyncio connections sends one frame and
waits for its answer, the broker closing the connection, or ``--answer-timeout``
(then it closes the connection itself); a frame whose size prefix disagrees
with its length is sent and the connection closed. Meanwhile an ApiVersions
probe on a fresh connection every 5 s checks the broker answers within 5 s.

Recorded in ``docs/reliability/fuzz.json``: frames sent per API key and per
mutation, outcomes (answered, closed by the broker, unanswered), crashes
(the broker process exited; it is restarted and the last frames sent are
saved for a repro), unanswered probes (hangs), lines containing
``Traceback`` in the broker's log, the log's size, RSS and descriptor
samples over time and whether they stayed flat (``FLAT_RSS_PCT``,
``FLAT_FDS`` after ``--warmup`` seconds), what the descriptors were when
their count jumped, topics the broker ended with, frames per second.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import struct
import time
from pathlib import Path
from typing import Any

from bench.reliability.common import (
    DEFAULT_OUT,
    Broker,
    Prober,
    Sampler,
    mib,
    parse_overrides,
    probe,
    raise_nofile,
    started_broker,
    write_result,
)
from bench.reliability.seeds import Seed, build_seeds
from spool.protocol._generated import API_BY_KEY, ApiVersionsRequest, MetadataRequest
from tests.helpers.raw_client import RawClient

FLAT_RSS_PCT = 20  # "flat": RSS at the end at most this much above its value after warm-up
FLAT_FDS = 200  # ... and descriptors beyond one per partition dir at most this many above
RSS_PER_PARTITION = 8 * 1024  # RSS a partition may add (bench.reliability.partitions: ~6 KiB)
_I32 = (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x10000, 0xFFFF, 100_000_000, 0x7FFFFFFE, 255)
_I16 = (0, 1, -1, 0x7FFF, -0x8000, 0xFF, 0x100)
_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)


class Mutator:
    def __init__(self, rng: random.Random, seeds: list[Seed], valid_share: float) -> None:
        self.rng = rng
        self.seeds = seeds
        self.valid_share = valid_share
        self.ops = [
            ("bitflip", self.bitflip, 30), ("byte", self.byte, 15), ("int", self.int_over, 20),
            ("truncate", self.truncate, 10), ("splice", self.splice, 10),
            ("insert", self.insert, 5), ("delete", self.delete, 5), ("dup", self.dup, 5),
        ]
        self.weights = [w for _, _, w in self.ops]

    def frame(self) -> tuple[int, str, bytes, bool]:
        """(seed api key, mutation name, frame with size prefix, size prefix consistent?)."""
        rng = self.rng
        seed = rng.choice(self.seeds)
        if rng.random() < self.valid_share:
            return seed.api_key, "none", struct.pack(">i", len(seed.payload)) + seed.payload, True
        b = bytearray(seed.payload)
        names = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            name, fn, _w = rng.choices(self.ops, self.weights)[0]
            b = fn(b)
            names.append(name)
            if not b:
                break
        if rng.random() < 0.06:
            size = rng.choice((len(b) + rng.randint(1, 64), len(b) - rng.randint(1, 8), 0, -1,
                               0x7FFFFFFF, 104857601))
            return seed.api_key, "+".join([*names, "size"]), struct.pack(">i", size) + bytes(b), False
        return seed.api_key, "+".join(names), struct.pack(">i", len(b)) + bytes(b), True

    def _pos(self, b: bytearray) -> int:
        return self.rng.randrange(len(b)) if b else 0

    def bitflip(self, b: bytearray) -> bytearray:
        for _ in range(self.rng.randint(1, 4)):
            if b:
                i = self.rng.randrange(len(b) * 8)
                b[i >> 3] ^= 1 << (i & 7)
        return b

    def byte(self, b: bytearray) -> bytearray:
        for _ in range(self.rng.randint(1, 3)):
            if b:
                b[self._pos(b)] = self.rng.choice((*_BYTES, self.rng.randrange(256)))
        return b

    def int_over(self, b: bytearray) -> bytearray:
        """An interesting int16/int32 over any position: hits the length fields."""
        if self.rng.random() < 0.5 and len(b) >= 4:
            struct.pack_into(">i", b, self.rng.randrange(len(b) - 3), self.rng.choice(_I32))
        elif len(b) >= 2:
            struct.pack_into(">h", b, self.rng.randrange(len(b) - 1), self.rng.choice(_I16))
        return b

    def truncate(self, b: bytearray) -> bytearray:
        return b[: self._pos(b)]

    def splice(self, b: bytearray) -> bytearray:
        other = self.rng.choice(self.seeds).payload
        j = self.rng.randrange(len(other))
        i = self._pos(b)
        return b[:i] + other[j: j + self.rng.randint(1, 64)] + b[i + self.rng.randint(0, 16):]

    def insert(self, b: bytearray) -> bytearray:
        i = self._pos(b)
        junk = self.rng.choice((b"\xff\xff\xff\xff\x0f", self.rng.randbytes(self.rng.randint(1, 16))))
        return b[:i] + junk + b[i:]

    def delete(self, b: bytearray) -> bytearray:
        i = self._pos(b)
        return b[:i] + b[i + self.rng.randint(1, 16):]

    def dup(self, b: bytearray) -> bytearray:
        i = self._pos(b)
        return b[:i] + b[i: i + self.rng.randint(1, 32)] + b[i:]


class Stats:
    def __init__(self) -> None:
        self.sent = 0
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.by_api: collections.Counter[int] = collections.Counter()
        self.by_mutation: collections.Counter[str] = collections.Counter()
        self.connects = 0
        self.connect_failures = 0
        self.recent: collections.deque[bytes] = collections.deque(maxlen=2000)


async def _read_frame(reader: asyncio.StreamReader) -> None:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    await reader.readexactly(size)


async def worker(port: int, mut: Mutator, stats: Stats, budget: int, timeout: float,
                 paused: asyncio.Event, deadline: float) -> None:
    reader = writer = None
    while stats.sent < budget and time.monotonic() < deadline:
        await paused.wait()
        if writer is None:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                stats.connects += 1
            except OSError:
                stats.connect_failures += 1
                await asyncio.sleep(0.2)
                continue
        api, mname, frame, consistent = mut.frame()
        stats.sent += 1
        stats.by_api[api] += 1
        stats.by_mutation[mname.split("+")[0]] += 1
        stats.recent.append(frame)
        try:
            writer.write(frame)
            await writer.drain()
            if not consistent:
                stats.outcomes["sent, size prefix wrong, closed by us"] += 1
                raise ConnectionAbortedError
            await asyncio.wait_for(_read_frame(reader), timeout)
            stats.outcomes["answered"] += 1
            continue
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError):
            stats.outcomes["closed by the broker"] += 1
        except TimeoutError:
            stats.outcomes["unanswered within timeout, closed by us"] += 1
        except (ConnectionAbortedError, OSError):
            pass
        writer.close()
        writer = reader = None
    if writer is not None:
        writer.close()


async def drive(broker: Broker, mut: Mutator, stats: Stats, frames: int, connections: int,
                timeout: float, crashes: list[dict[str, Any]], out_dir: Path,
                max_seconds: float) -> None:
    paused = asyncio.Event()
    paused.set()
    deadline = time.monotonic() + max_seconds
    tasks = [asyncio.create_task(worker(broker.port, mut, stats, frames, timeout, paused, deadline))
             for _ in range(connections)]
    last_report = time.monotonic()
    while not all(t.done() for t in tasks):
        await asyncio.sleep(0.5)
        if not broker.alive():
            paused.clear()
            code = broker.proc.returncode if broker.proc else None
            repro = out_dir / f"fuzz-crash-{len(crashes)}.bin"
            repro.write_bytes(b"".join(stats.recent))
            crashes.append({"after_frames": stats.sent, "exit_code": code,
                            "log_tail": broker.log_tail(2000), "last_frames_file": str(repro)})
            print(f"CRASH after {stats.sent} frames, exit {code}; restarting", flush=True)
            broker.start()
            paused.set()
        if time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            print(f"  {stats.sent:,} frames, {dict(stats.outcomes)}", flush=True)
    for t in tasks:
        t.result()


def supported_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    c = RawClient(bootstrap)
    try:
        resp = c.request(18, 0, ApiVersionsRequest())
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    finally:
        c.close()


def topic_count(bootstrap: str) -> int | None:
    try:
        c = RawClient(bootstrap, timeout=30)
        try:
            return len(c.request(3, 1, MetadataRequest(topics=None)).topics)
        finally:
            c.close()
    except (OSError, ConnectionError):
        return None


def flatness(samples: list[tuple[float, int, int, int]], warmup: float) -> dict[str, Any]:
    """Flat = nothing grows but what the partitions the fuzz created account for."""
    after = [s for s in samples if s[0] >= warmup] or samples
    first, last = after[0], after[-1]
    dirs_gained = max(0, last[3] - first[3])
    rss_allowed = first[1] * (1 + FLAT_RSS_PCT / 100) + dirs_gained * RSS_PER_PARTITION
    return {
        "warmup_s": warmup,
        "rss_mib_after_warmup": mib(first[1]), "rss_mib_end": mib(last[1]),
        "rss_mib_max": mib(max(s[1] for s in samples)),
        "fds_after_warmup": first[2], "fds_end": last[2], "fds_max": max(s[2] for s in samples),
        "partition_dirs_after_warmup": first[3], "partition_dirs_end": last[3],
        "fds_beyond_partition_dirs_after_warmup": first[2] - first[3],
        "fds_beyond_partition_dirs_end": last[2] - last[3],
        "rss_growth_after_warmup_pct": round(100 * (last[1] - first[1]) / first[1], 1),
        "flat": (last[1] <= rss_allowed
                 and last[2] - last[3] <= first[2] - first[3] + FLAT_FDS),
        "flat_means": f"from the end of the warm-up to the end, RSS grew at most {FLAT_RSS_PCT}% "
                      f"plus {RSS_PER_PARTITION // 1024} KiB per partition directory gained, and "
                      f"descriptors beyond one per partition directory at most {FLAT_FDS}",
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    raise_nofile()
    rng = random.Random(args.seed)
    with started_broker("fuzz", args) as broker:
        supported = supported_versions(broker.bootstrap)
        seeds = build_seeds(rng, args.per_version, supported)
        mut = Mutator(rng, seeds, args.valid_share)
        stats = Stats()
        crashes: list[dict[str, Any]] = []
        sampler = Sampler(broker.pid, every=2.0, data_dir=broker.data_dir).start()
        prober = Prober(broker.bootstrap, every=5.0, timeout=5.0).start()
        t0 = time.monotonic()
        asyncio.run(drive(broker, mut, stats, args.frames, args.connections,
                          args.answer_timeout, crashes, args.out, args.max_seconds))
        elapsed = time.monotonic() - t0
        probes = prober.stop()
        samples = sampler.stop() if not crashes else sampler.samples
        alive = broker.alive()
        final_probe = alive and probe(broker.bootstrap) is not None
        topics = topic_count(broker.bootstrap)
        tracebacks = broker.tracebacks()
        result = {
            "frames": stats.sent,
            "frames_asked": args.frames,
            "seconds": round(elapsed, 1),
            "frames_per_s": round(stats.sent / elapsed),
            "connections": args.connections,
            "seed": args.seed,
            "seeds": len(seeds),
            "apis_in_seeds": len({s.api_key for s in seeds}),
            "apis_sent": len(stats.by_api),
            "apis_total": len(API_BY_KEY),
            "apis_broker_supports": len(supported),
            "frames_valid_share": args.valid_share,
            "outcomes": dict(stats.outcomes),
            "by_mutation": dict(stats.by_mutation),
            "by_api": {API_BY_KEY[k].name: n for k, n in sorted(stats.by_api.items())},
            "tcp_connections": stats.connects,
            "connect_failures": stats.connect_failures,
            "crashes": len(crashes),
            "crash_details": crashes,
            "hangs": probes["unanswered"],
            "probes": probes,
            "tracebacks": tracebacks,
            "traceback_examples": broker.log_lines(b"Traceback", 3)
            + broker.log_lines(b"Error", 5),
            "broker_log_bytes": broker.log_bytes(),
            "broker_alive_at_end": alive and final_probe,
            "topics_at_end": topics,
            "memory": flatness(samples, args.warmup),
            "fd_surges": sampler.surges[:10],
            "samples": [(round(t), mib(r), f, d)
                        for t, r, f, d in samples[:: max(1, len(samples) // 60)]],
            "overrides": parse_overrides(args.override),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=48)
    ap.add_argument("--max-seconds", type=float, default=3600,
                    help="stop sending after this long even if --frames are not all sent")
    ap.add_argument("--per-version", type=int, default=4, help="seeds per API key and version")
    ap.add_argument("--valid-share", type=float, default=0.1)
    ap.add_argument("--answer-timeout", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds before RSS is called flat")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--quick", action="store_true", help="CI size: 10,000 frames")
    args = ap.parse_args(argv)
    if args.quick:
        args.frames = min(args.frames, 10_000)
        args.warmup = 5.0
    result = run(args)
    path = write_result(args.out, "fuzz", result)
    print(f"fuzz: {result['frames']:,} frames in {result['seconds']} s "
          f"({result['frames_per_s']}/s), crashes {result['crashes']}, hangs {result['hangs']}, "
          f"tracebacks {result['tracebacks']}, RSS {result['memory']['rss_mib_after_warmup']} -> "
          f"{result['memory']['rss_mib_end']} MiB, fds {result['memory']['fds_after_warmup']} -> "
          f"{result['memory']['fds_end']}; {path}")
    ok = (result["crashes"] == 0 and result["hangs"] == 0 and result["tracebacks"] == 0
          and (args.quick or result["memory"]["flat"]))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
