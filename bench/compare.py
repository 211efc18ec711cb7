"""Spool against a reference broker (Tansu 0.6, Rust, in memory), side by side, one run.

    python -m bench.compare [--runs 5] [--scale 1.0] [--no-write]

Workloads (issue "Performance"): (a) produce 1,000,000 x 100 B, one
partition; (b) 200,000 x 1 KiB; (c) both on 6 partitions; (d) consume each
back; (e) produce latency p50/p99 at 10,000 records/s; (f) end-to-end
latency at that rate. Both brokers run for the whole benchmark and take
turns within each run, so the machine's noise falls on both; every run
starts after ``sync()``, so one run's writeback does not slow the next. Reported:
records/s and MB/s (median of the runs, with min and max), broker CPU
seconds per workload and peak RSS, the client's enqueue-only ceiling, and
the physical limits (sequential write, file-to-loopback-socket, raw fetch).
Results go to ``docs/bench-compare.json`` and, through ``bench.report``, to
``docs/BENCHMARKS.md`` and ``docs/bench-compare.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench import limits, workloads
from bench.brokers import Running, spool_broker, tansu_broker, usage

DOCS = Path(__file__).resolve().parent.parent / "docs"
THROUGHPUT = [  # name, partitions, records, size
    ("a: 1M x 100 B, 1 partition", 1, 1_000_000, 100),
    ("b: 200k x 1 KiB, 1 partition", 1, 200_000, 1024),
    ("c: 1M x 100 B, 6 partitions", 6, 1_000_000, 100),
    ("c: 200k x 1 KiB, 6 partitions", 6, 200_000, 1024),
]
RATE = 10_000


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def throughput_run(b: Running, partitions: int, records: int, size: int, tag: str,
                   raw_fetch: bool) -> dict[str, float]:
    topic = f"bench-{tag}-{time.time_ns()}"
    os.sync()  # start every run with no dirty pages left over from the previous one
    workloads.create_topic(b.bootstrap, topic, partitions)
    cpu0, _ = usage(b.pid)
    p_s = workloads.produce(b.bootstrap, topic, records, size)
    cpu1, _ = usage(b.pid)
    c_s = workloads.consume(b.bootstrap, topic, partitions, records)
    cpu2, _ = usage(b.pid)
    out = {"produce": records / p_s, "consume": records / c_s,
           "produce_cpu": cpu1 - cpu0, "consume_cpu": cpu2 - cpu1}
    if raw_fetch:
        out["raw_fetch"] = limits.raw_fetch(b.bootstrap, topic, 0, records)["MB/s"]
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(30)
    except Exception:  # noqa: BLE001 - a reference broker may not delete; memory only
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    ap.add_argument("--latency-seconds", type=float, default=3.0)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args()
    results: dict = {"runs": args.runs, "scale": args.scale, "throughput": {}, "latency": {},
                     "ceiling": {}, "limits": {}, "brokers": {}}
    with tempfile.TemporaryDirectory(dir=".") as tmp, spool_broker(Path(tmp)) as spool, \
            tansu_broker() as tansu:
        brokers = [spool, tansu]
        for name, parts, records, size in THROUGHPUT:
            n = max(1000, int(records * args.scale))
            per: dict[str, dict[str, list[float]]] = {b.name: {} for b in brokers}
            for run in range(args.runs):
                for b in brokers if run % 2 == 0 else reversed(brokers):
                    raw = size == 1024 and parts == 1
                    r = throughput_run(b, parts, n, size, f"{parts}-{size}", raw)
                    for k, v in r.items():
                        per[b.name].setdefault(k, []).append(v)
                print(f"{name} run {run + 1}/{args.runs}: " + ", ".join(
                    f"{b.name} {per[b.name]['produce'][-1]:,.0f}/{per[b.name]['consume'][-1]:,.0f}"
                    for b in brokers), flush=True)
            results["throughput"][name] = {
                "records": n, "size": size, "partitions": parts,
                **{b: {k: stats(v) for k, v in m.items()} for b, m in per.items()}}
        for kind, fn in (("produce", workloads.produce_latency),
                         ("end-to-end", workloads.end_to_end_latency)):
            per_l: dict[str, dict[str, list[float]]] = {b.name: {"p50": [], "p99": []} for b in brokers}
            for _run in range(args.runs):
                for b in brokers:
                    topic = f"lat-{kind}-{time.time_ns()}"
                    workloads.create_topic(b.bootstrap, topic, 1)
                    lat = fn(b.bootstrap, topic, RATE, args.latency_seconds)
                    per_l[b.name]["p50"].append(pct(lat, 0.50))
                    per_l[b.name]["p99"].append(pct(lat, 0.99))
            print(f"latency {kind}: " + ", ".join(
                f"{b} p50 {statistics.median(v['p50']):.2f} ms p99 {statistics.median(v['p99']):.2f} ms"
                for b, v in per_l.items()), flush=True)
            results["latency"][kind] = {b: {k: stats(v) for k, v in m.items()} for b, m in per_l.items()}
        for b in brokers:
            cpu, rss = usage(b.pid)
            results["brokers"][b.name] = {"cpu_seconds_total": cpu, "peak_rss_mb": rss / 1e6}
        for size in (100, 1024):
            n = int(1_000_000 * args.scale) if size == 100 else int(200_000 * args.scale)
            rates = [n / workloads.enqueue_only(n, size) for _ in range(args.runs)]
            results["ceiling"][str(size)] = stats(rates)
        nbytes = int(200_000 * args.scale) * 1024
        results["limits"]["sequential_write"] = limits.sequential_write(Path(tmp), nbytes)
        blob = Path(tmp) / "blob.bin"
        with open(blob, "wb") as f:
            for _ in range(max(1, nbytes // (1 << 20))):
                f.write(b"\0" * (1 << 20))
        results["limits"]["file_to_socket"] = limits.file_to_socket(blob)
    print(json.dumps(results["limits"], indent=1))
    if not args.no_write:
        from bench import report

        (DOCS / "bench-compare.json").write_text(json.dumps(results, indent=1) + "\n")
        report.write(results, DOCS)
        print("wrote docs/BENCHMARKS.md, docs/bench-compare.json, docs/bench-compare.png")


if __name__ == "__main__":
    main()
