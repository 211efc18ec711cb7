"""Spool against a reference broker (Tansu 0.6, Rust, in memory), side by side, one run.

    python -m bench.compare [--runs 5] [--scale 1.0] [--consumers 3] [--no-write]
                            [--only d] [--profile DIR]

Workloads (issue 22): (a) produce 1,000,000 x 100 B, one partition; (b) 200,000 x 1 KiB;
(c) both on 6 partitions; (d) both on 64 partitions; each consumed back; then produce and
end-to-end latency p50/p99 at 10,000 records/s. Both brokers run for the whole benchmark
and take turns within each run, so the machine's noise falls on both; every run starts
after ``sync()``, so one run's writeback does not slow the next.

Produce is one confluent-kafka producer (``bench.workloads.produce``); consume is
``--consumers`` consumer processes (``bench.consumers``), partitions dealt among them, the
slowest setting the time. Three by default: on this 2-core machine (Spool, 200k x 1 KiB
and 1M x 100 B, 6 and 64 partitions) one consumer process reads 410-590k records/s, two
520-720k, three 740-920k, four no more (690-940k); the consumers' CPU is the same in total
(0.3-0.4 s per 200 MB), and the broker's 0.03-0.05 s. The client's ceilings are measured in the same run, beside every
figure: produce into librdkafka's mock cluster (``bench.mock_cluster``, the same producer
config, in a process of its own) and enqueue-only (no network at all); consume from the
same processes' prefetch queues holding the same bytes (Spool's topic, fetched ahead).

Reported: records/s and MB/s (median of the runs, min-max), broker CPU seconds and client
CPU seconds per workload, peak RSS, the ceilings, the physical limits (sequential write,
file-to-loopback-socket, raw fetch), and the verdict of each of the issue's targets
(``bench.report.verdicts``). Results go to ``docs/bench-compare.json`` and, through
``bench.report``, to ``docs/BENCHMARKS.md`` and ``docs/bench-compare.png``.

``--profile DIR`` records the Spool broker with py-spy (raw folded stacks, 200 Hz,
``--nonblocking --idle``: waits too, so wall time can be split) during every produce and
consume, one file per workload, phase and run; the event loop's stacks are those through
``Runner.run``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench import limits, workloads
from bench.brokers import Running, spool_broker, tansu_broker, usage
from bench.consumers import ConsumerPool
from bench.mock_cluster import MockCluster

DOCS = Path(__file__).resolve().parent.parent / "docs"
THROUGHPUT = [  # name, partitions, records, size
    ("a: 1M x 100 B, 1 partition", 1, 1_000_000, 100),
    ("b: 200k x 1 KiB, 1 partition", 1, 200_000, 1024),
    ("c: 1M x 100 B, 6 partitions", 6, 1_000_000, 100),
    ("c: 200k x 1 KiB, 6 partitions", 6, 200_000, 1024),
    ("d: 1M x 100 B, 64 partitions", 64, 1_000_000, 100),
    ("d: 200k x 1 KiB, 64 partitions", 64, 200_000, 1024),
]
RATE = 10_000
PY_SPY = Path(sys.executable).parent / "py-spy"


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@contextlib.contextmanager
def profiled(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy on ``pid`` for the span of the block, raw folded stacks into ``out``."""
    if out is None:
        yield
        return
    proc = subprocess.Popen([str(PY_SPY), "record", "--nonblocking", "--idle", "-r", "200",
                             "-p", str(pid), "-f", "raw", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # py-spy attaches
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def throughput_run(b: Running, pool: ConsumerPool, partitions: int, records: int, size: int,
                   tag: str, raw_fetch: bool, profile: Path | None) -> dict[str, float]:
    """One produce and one consume of a new topic on ``b``; for Spool also the consume
    ceiling, from the same bytes."""
    topic = f"bench-{tag}-{time.time_ns()}"
    os.sync()  # start every run with no dirty pages left over from the previous one
    workloads.create_topic(b.bootstrap, topic, partitions)
    prof = {ph: profile / f"{tag}-{ph}.txt" if profile and b.name == "spool" else None
            for ph in ("produce", "consume")}
    cpu0, _ = usage(b.pid)
    with profiled(b.pid, prof["produce"]):
        p_s, p_client = workloads.produce_timed(b.bootstrap, topic, records, size)
    cpu1, _ = usage(b.pid)
    with profiled(b.pid, prof["consume"]):
        c_s, c_client = pool.consume(b.bootstrap, topic, partitions, records)
    cpu2, _ = usage(b.pid)
    out = {"produce": records / p_s, "consume": records / c_s,
           "produce_cpu": cpu1 - cpu0, "consume_cpu": cpu2 - cpu1,
           "produce_client_cpu": p_client, "consume_client_cpu": c_client}
    if b.name == "spool":
        counts = workloads.watermarks(b.bootstrap, topic, partitions)
        with ConsumerPool(pool.processes) as fresh:  # new processes: RSS starts low
            q_s, q_client = fresh.consume(b.bootstrap, topic, partitions, records, counts, size)
        out["ceiling_consume"] = records / q_s
        out["ceiling_consume_client_cpu"] = q_client
    if raw_fetch:
        out["raw_fetch"] = limits.raw_fetch(b.bootstrap, topic, 0, records)["MB/s"]
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(30)
    except Exception:  # noqa: BLE001 - a reference broker may not delete; memory only
        pass
    return out


def produce_ceilings(partitions: int, records: int, size: int) -> dict[str, float]:
    """The same producer into librdkafka's mock cluster (a fresh one: it keeps what it is
    sent), and enqueue-only."""
    with MockCluster() as mock:
        topic = f"ceiling-{partitions}-{size}"
        mock.create_topic(topic, partitions)
        m_cpu0, _ = usage(mock.pid)
        m_s, m_client = workloads.produce_timed(mock.bootstrap, topic, records, size)
        m_cpu1, _ = usage(mock.pid)
    return {"ceiling_produce_mock": records / m_s, "ceiling_produce_mock_client_cpu": m_client,
            "ceiling_produce_mock_broker_cpu": m_cpu1 - m_cpu0,
            "ceiling_produce_enqueue": records / workloads.enqueue_only(records, size)}


def throughput(brokers: list[Running], pool: ConsumerPool, args: argparse.Namespace,
               results: dict) -> None:
    for name, parts, records, size in THROUGHPUT:
        if args.only and not name.startswith(tuple(args.only)):
            continue
        n = max(1000, int(records * args.scale))
        per: dict[str, dict[str, list[float]]] = {b.name: {} for b in brokers}
        per["client"] = {}
        for run in range(args.runs):
            tag = f"{parts}p-{size}b-run{run + 1}"
            for b in brokers if run % 2 == 0 else reversed(brokers):
                raw = size == 1024 and parts == 1
                r = throughput_run(b, pool, parts, n, size, f"{b.name}-{tag}", raw, args.profile)
                for k, v in r.items():
                    key = b.name if not k.startswith("ceiling") else "client"
                    per[key].setdefault(k, []).append(v)
            for k, v in produce_ceilings(parts, n, size).items():
                per["client"].setdefault(k, []).append(v)
            print(f"{name} run {run + 1}/{args.runs} (produce/consume rec/s, broker CPU s): "
                  + ", ".join(f"{b.name} {per[b.name]['produce'][-1]:,.0f}/"
                              f"{per[b.name]['consume'][-1]:,.0f} "
                              f"({per[b.name]['produce_cpu'][-1]:.2f}/"
                              f"{per[b.name]['consume_cpu'][-1]:.2f})" for b in brokers)
                  + f"; ceilings: mock {per['client']['ceiling_produce_mock'][-1]:,.0f}, "
                  f"consume {per['client']['ceiling_consume'][-1]:,.0f}", flush=True)
        results["throughput"][name] = {
            "records": n, "size": size, "partitions": parts,
            "consumers": min(pool.processes, parts),
            **{b: {k: stats(v) for k, v in m.items()} for b, m in per.items()}}


def latency(brokers: list[Running], args: argparse.Namespace, results: dict) -> None:
    for kind, fn in (("produce", workloads.produce_latency),
                     ("end-to-end", workloads.end_to_end_latency)):
        per_l: dict[str, dict[str, list[float]]] = {
            b.name: {"p50": [], "p99": []} for b in brokers}
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
        results["latency"][kind] = {
            b: {k: stats(v) for k, v in m.items()} for b, m in per_l.items()}


def physical_limits(tmp: Path, args: argparse.Namespace, results: dict) -> None:
    nbytes = int(200_000 * args.scale) * 1024
    results["limits"]["sequential_write"] = limits.sequential_write(tmp, nbytes)
    blob = tmp / "blob.bin"
    with open(blob, "wb") as f:
        for _ in range(max(1, nbytes // (1 << 20))):
            f.write(b"\0" * (1 << 20))
    results["limits"]["file_to_socket"] = limits.file_to_socket(blob)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    ap.add_argument("--consumers", type=int, default=3,
                    help="consumer processes per consume (at most one per partition)")
    ap.add_argument("--latency-seconds", type=float, default=3.0)
    ap.add_argument("--only", nargs="*", help="workload letters to run (e.g. d); no latency")
    ap.add_argument("--profile", type=Path, help="py-spy the Spool broker into this directory")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    results: dict = {"runs": args.runs, "scale": args.scale, "consumers": args.consumers,
                     "load_average": {}, "throughput": {}, "latency": {}, "limits": {},
                     "brokers": {}}
    results["load_average"]["start"] = os.getloadavg()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=".") as tmp, spool_broker(Path(tmp)) as spool, \
            tansu_broker() as tansu, ConsumerPool(args.consumers) as pool:
        brokers = [spool, tansu]
        throughput(brokers, pool, args, results)
        if not args.only:
            latency(brokers, args, results)
        for b in brokers:
            cpu, rss = usage(b.pid)
            results["brokers"][b.name] = {"cpu_seconds_total": cpu, "peak_rss_mb": rss / 1e6}
        physical_limits(Path(tmp), args, results)
    results["load_average"]["end"] = os.getloadavg()
    results["seconds"] = time.monotonic() - t0
    from bench import report

    results["verdicts"] = report.verdicts(results)
    print(report.verdict_text(results["verdicts"]))
    print(f"{results['seconds']:.0f} s; load average (1, 5, 15 min) at the start "
          f"{results['load_average']['start']}, at the end {results['load_average']['end']}")
    if not args.no_write and not args.only:
        (DOCS / "bench-compare.json").write_text(json.dumps(results, indent=1) + "\n")
        report.write(results, DOCS)
        print("wrote docs/BENCHMARKS.md, docs/bench-compare.json, docs/bench-compare.png")


if __name__ == "__main__":
    main()
