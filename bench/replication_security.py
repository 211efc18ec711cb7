"""What authenticated replication costs: RF=3 acks=all with the brokers' own traffic in plaintext
and over SASL_SSL.

    python -m bench.replication_security [--runs 3] [--scale 1.0] [--no-write]

Starts two 3-node local clusters (combined broker,controller nodes) side by side for the whole
benchmark: one all PLAINTEXT (tests/helpers/cluster_proc.py's default), one whose brokers
replicate over a SASL_SSL inter-broker listener (PLAIN) and whose quorum runs over an SSL
controller listener with client certificates (tests/helpers/secure_cluster.py). The test's
producer reaches both on PLAINTEXT, so the difference is the replica fetches (and the
controller traffic): TLS on every byte a follower copies, without kernel TLS (Python 3.11).
Each run, in turn (the order alternates between runs), after ``sync()``: produce 200,000 x
1 KiB (``--scale``) with ``bench.workloads.produce`` to a new 1-partition topic with
replication factor 3, ``min.insync.replicas=2``, acks=all (so each acknowledgement waits for a
follower's fetch), once its ISR is full and a warm-up record is acknowledged. Reported:
records/s and MB/s (median of the runs, min-max) and the ratio SASL_SSL / PLAINTEXT, in
``docs/bench-replication-security.json`` and the section between
``<!-- replication-security:begin -->`` and ``<!-- replication-security:end -->`` of
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench import workloads
from bench.compare import stats
from bench.reliability.common import commit
from bench.replication import cluster_topic, warm_up
from bench.report import write_section
from tests.helpers.cluster_proc import Cluster
from tests.helpers.secure_cluster import secure_cluster, wait_formed

DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- replication-security:begin -->"
END = "<!-- replication-security:end -->"
SIZE = 1024
CASES = ("PLAINTEXT", "SASL_SSL")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the record count")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args()
    n = max(1000, int(200_000 * args.scale))
    tput: dict[str, list[float]] = {c: [] for c in CASES}
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        clusters = {
            "PLAINTEXT": Cluster(Path(tmp) / "plain", proxied=False, log_level="WARNING"),
            "SASL_SSL": secure_cluster(Path(tmp) / "secure", log_level="WARNING"),
        }
        try:
            for c in clusters.values():
                c.start()
                wait_formed(c)
            for run in range(args.runs):
                for case in CASES if run % 2 == 0 else tuple(reversed(CASES)):
                    c = clusters[case]
                    topic = cluster_topic(c, f"s{run}")
                    warm_up(c.bootstrap, topic, "all")
                    os.sync()
                    tput[case].append(n / workloads.produce(c.bootstrap, topic, n, SIZE, "all"))
                print(f"run {run + 1}/{args.runs}: " + ", ".join(
                    f"{c} {tput[c][-1]:,.0f} records/s" for c in CASES), flush=True)
        finally:
            for c in clusters.values():
                c.stop()
    results = {
        "commit": commit(), "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "loadavg_at_end": os.getloadavg()[0], "runs": args.runs, "records": n, "size": SIZE,
        "cores": os.cpu_count(), "throughput": {c: stats(v) for c, v in tput.items()},
    }
    results["ratio"] = (results["throughput"]["SASL_SSL"]["median"]
                        / results["throughput"]["PLAINTEXT"]["median"])
    text = section(results)
    print(text)
    if not args.no_write:
        (DOCS / "bench-replication-security.json").write_text(json.dumps(results, indent=1)
                                                              + "\n")
        write_section(DOCS / "BENCHMARKS.md", BEGIN, END, text)
        print("wrote docs/BENCHMARKS.md, docs/bench-replication-security.json")


def section(r: dict) -> str:
    size = r["size"]
    out = [
        "## Replication over SASL_SSL (`python -m bench.replication_security`)",
        "",
        f"{r['records']:,} records of {size} B to one partition with replication factor 3, "
        f"acks=all, median of {r['runs']} runs (min-max), two 3-node local clusters side by "
        f"side on {r['cores']} shared cores: the brokers' own traffic in plaintext, and over "
        f"SASL_SSL (PLAIN) between brokers with mutual TLS to the controllers "
        f"(bench/replication_security.py says how; the producer uses PLAINTEXT on both). "
        f"Measured at commit `{r['commit']}`, finished {r['finished_utc']} UTC, 1-min load "
        f"average at the end {r['loadavg_at_end']:.1f} (other work ran meanwhile).",
        "",
        "| inter-broker | produce records/s | MB/s |",
        "|---|---|---|",
    ]
    for case, s in r["throughput"].items():
        out.append(f"| {case} | {s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f}) "
                   f"| {s['median'] * size / 1e6:,.1f} |")
    a, b = r["throughput"]["PLAINTEXT"], r["throughput"]["SASL_SSL"]
    overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
    out += ["", f"SASL_SSL / PLAINTEXT = **{r['ratio']:.2f}**"
            + (" (the runs' ranges overlap: on this machine the difference is within the "
               "noise)" if overlap else "")
            + ". Python 3.11 has no kernel TLS: a leader encrypts each fetch response in the "
            "process (spool.broker.tls_connection) instead of sendfile()."]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
