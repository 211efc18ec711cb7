"""What replication costs: RF=3 acks=all on a 3-broker local cluster beside one node, acks=1.

    python -m bench.replication [--runs 3] [--scale 1.0] [--latency-seconds 5] [--no-write]

Starts, for the whole benchmark, a single Spool broker (``make run``'s
configuration, data on disk) and a 3-node cluster (combined
broker,controller nodes, tests/helpers/cluster_proc.py, default timeouts), all
on 127.0.0.1 on this machine's cores. Each run, in turn (the order alternates
between runs, so the machine's noise falls on both), after ``sync()``:

* produce 200,000 x 1 KiB (``--scale``) to a new 1-partition topic, with the
  throughput workload of ``bench.workloads`` (linger.ms=5, batch.size 1 MiB,
  ``produce_batch``): on the single node with acks=1, and on the cluster with
  replication factor 3, ``min.insync.replicas=2``, acks=all (every record on
  all three replicas before it is acknowledged), and, for reference, acks=1;
* produce latency at 10,000 records/s for ``--latency-seconds`` (100 B,
  ``bench.workloads.produce_latency``): produce() to delivery report, p50 and
  p99, same three cases, with linger.ms=0 (a request per record or two: what
  per-request cost does) and with linger.ms=5 (librdkafka's default).

Before each workload the topic's ISR must hold its three replicas and one record
produced with the case's acks must be acknowledged (warm-up: a new topic's
followers may start fetching only after ``replica.fetch.backoff.ms``, 1 s,
which would otherwise show as the first second's latency).
Reported: records/s and MB/s (median of the runs, min-max) and the ratio the
issue asks for (RF=3 acks=all / single-node acks=1, at least 0.5), latency
percentiles. Results go to ``docs/bench-replication.json`` and to the
section between ``<!-- replication:begin -->`` and ``<!-- replication:end -->``
of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench import workloads
from bench.brokers import spool_broker
from bench.compare import pct, stats
from bench.reliability.common import commit
from bench.reliability.replication import full_isr
from bench.report import write_section
from tests.helpers.cluster_proc import Cluster

DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- replication:begin -->"
END = "<!-- replication:end -->"
RATE = 10_000
SIZE = 1024
CASES = ("single node, acks=1", "RF=3, acks=all", "RF=3, acks=1")
LINGERS_MS = (0, 5)


def cluster_topic(cluster: Cluster, tag: str) -> str:
    topic = f"bench-rf3-{tag}-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})]
                        )[topic].result(30)
    cluster.wait_until(f"{topic}: ISR of 3", full_isr(cluster, topic, 1), 60)
    return topic


def single_topic(bootstrap: str, tag: str) -> str:
    topic = f"bench-single-{tag}-{time.time_ns()}"
    workloads.create_topic(bootstrap, topic, 1)
    return topic


def warm_up(bootstrap: str, topic: str, acks: str) -> None:
    """One record acknowledged with ``acks`` (see the module doc)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    p.produce(topic, value=b"warm-up")
    if p.flush(60):
        raise RuntimeError(f"{topic}: the warm-up record was not acknowledged")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the record count")
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args()
    n = max(1000, int(200_000 * args.scale))
    tput: dict[str, list[float]] = {c: [] for c in CASES}
    lat: dict[str, dict[str, list[float]]] = {
        f"{c}, linger.ms={ms}": {"p50": [], "p99": []} for c in CASES for ms in LINGERS_MS}
    with tempfile.TemporaryDirectory(dir=".") as tmp, spool_broker(Path(tmp)) as single:
        cluster = Cluster(Path(tmp) / "cluster", proxied=False, log_level="WARNING")
        try:
            cluster.start()
            cluster.wait_formed()

            def target(case: str, tag: str) -> tuple[str, str, str]:
                if case.startswith("single"):
                    out = single.bootstrap, single_topic(single.bootstrap, tag), "1"
                else:
                    acks = "all" if "acks=all" in case else "1"
                    out = cluster.bootstrap, cluster_topic(cluster, tag), acks
                warm_up(*out)
                return out

            for run in range(args.runs):
                for case in CASES if run % 2 == 0 else tuple(reversed(CASES)):
                    bootstrap, topic, acks = target(case, f"t{run}")
                    os.sync()
                    tput[case].append(n / workloads.produce(bootstrap, topic, n, SIZE, acks))
                print(f"throughput run {run + 1}/{args.runs}: " + ", ".join(
                    f"{c} {tput[c][-1]:,.0f}" for c in CASES), flush=True)
                for case in CASES:
                    for ms in LINGERS_MS:
                        bootstrap, topic, acks = target(case, f"l{run}-{ms}")
                        got = workloads.produce_latency(bootstrap, topic, RATE,
                                                        args.latency_seconds, acks=acks,
                                                        linger_ms=ms)
                        key = f"{case}, linger.ms={ms}"
                        lat[key]["p50"].append(pct(got, 0.50))
                        lat[key]["p99"].append(pct(got, 0.99))
                print(f"latency run {run + 1}/{args.runs}: " + ", ".join(
                    f"{c} p50 {m['p50'][-1]:.2f} p99 {m['p99'][-1]:.2f} ms"
                    for c, m in lat.items()), flush=True)
        finally:
            cluster.stop()
    results = {
        "commit": commit(), "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "loadavg_at_end": os.getloadavg()[0], "runs": args.runs, "records": n, "size": SIZE, "rate": RATE,
        "latency_seconds": args.latency_seconds, "cores": os.cpu_count(),
        "throughput": {c: stats(v) for c, v in tput.items()},
        "latency": {c: {k: stats(v) for k, v in m.items()} for c, m in lat.items()},
    }
    results["ratio"] = (results["throughput"]["RF=3, acks=all"]["median"]
                        / results["throughput"]["single node, acks=1"]["median"])
    text = section(results)
    print(text)
    if not args.no_write:
        (DOCS / "bench-replication.json").write_text(json.dumps(results, indent=1) + "\n")
        write(text, DOCS / "BENCHMARKS.md")
        print("wrote docs/BENCHMARKS.md, docs/bench-replication.json")


def section(r: dict) -> str:
    size = r["size"]
    out = [
        "## Replication (`python -m bench.replication`)",
        "",
        f"{r['records']:,} records of {size} B to one partition, median of {r['runs']} runs "
        f"(min-max), a single node and a 3-node local cluster running side by side on "
        f"{r['cores']} shared cores (bench/replication.py says how); measured at commit "
        f"`{r['commit']}`, finished {r['finished_utc']} UTC, 1-min load average at the end "
        f"{r['loadavg_at_end']:.1f} (other work ran meanwhile).",
        "",
        "| case | produce records/s | MB/s |",
        "|---|---|---|",
    ]
    for case, s in r["throughput"].items():
        out.append(f"| {case} | {s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f}) "
                   f"| {s['median'] * size / 1e6:,.1f} |")
    out += ["", f"RF=3 acks=all / single node acks=1 = **{r['ratio']:.2f}** (the issue asks for "
            f"at least 0.5: {'met' if r['ratio'] >= 0.5 else 'NOT met'}).", "",
            f"Produce latency at {r['rate']:,} records/s (100 B, "
            f"{r['latency_seconds']:.0f} s), produce() to delivery report, milliseconds:", "",
            "| case | p50 | p99 |", "|---|---|---|"]
    for case, m in r["latency"].items():
        out.append(f"| {case} | {m['p50']['median']:.2f} | {m['p99']['median']:.2f} "
                   f"({m['p99']['min']:.2f}-{m['p99']['max']:.2f}) |")
    return "\n".join(out) + "\n"


def write(text: str, page: Path) -> None:
    write_section(page, BEGIN, END, text)


if __name__ == "__main__":
    main()
