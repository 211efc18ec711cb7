"""Fetch throughput over TLS against plaintext: one broker, both listeners, the same run.

    python -m bench.tls [--runs 3] [--records 200000] [--no-write]

Starts one Spool broker with a PLAINTEXT and an SSL listener (a test CA's
certificate, ``tests.helpers.certs``; TLS 1.3, OpenSSL's default suite
AES-256-GCM), produces ``--records`` records of 1 KiB to one partition over
plaintext, then, in each run (the order alternating between runs so the
machine's noise falls on both):

* raw fetch: every record pulled with 64 MiB FetchRequests (v11) by a bare
  socket client on Spool's codec (``bench.limits.raw_fetch``), over each
  listener: what the broker can send. Plaintext goes from the segment to the
  socket with ``sendfile``; TLS reads the segment and encrypts (Python 3.11's
  ``ssl`` has no kernel TLS), so the client decrypting is in the figure too;
* confluent-kafka: one consumer reading everything from offset 0 over each
  listener (``bench.workloads.consume``): what a user sees.

Reported: MB/s of record bytes and records/s, median of the runs (min-max),
the TLS / plaintext ratio, and the broker's CPU seconds per GB served. Results
go to ``docs/bench-tls.json`` and to the section between ``<!-- tls:begin -->``
and ``<!-- tls:end -->`` of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import tempfile
import time
from pathlib import Path

from bench import workloads
from bench.brokers import usage
from bench.compare import stats
from bench.limits import raw_fetch
from bench.reliability.common import commit
from bench.report import write_section
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.certs import Pki

DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- tls:begin -->"
END = "<!-- tls:end -->"
SIZE = 1024
CASES = ("PLAINTEXT", "SSL")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the docs section from docs/bench-tls.json, run nothing")
    args = ap.parse_args()
    if args.report_only:
        write(section(json.loads((DOCS / "bench-tls.json").read_text())), DOCS / "BENCHMARKS.md")
        return
    n = args.records
    raw: dict[str, list[float]] = {c: [] for c in CASES}
    consumer: dict[str, list[float]] = {c: [] for c in CASES}
    cpu: dict[str, list[float]] = {c: [] for c in CASES}
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        pki = Pki(Path(tmp) / "pki")
        server = pki.issue("CN=localhost")
        broker = BrokerProcess(Path(tmp) / "data", {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.keystore_pem)})
        broker.start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            bootstrap = {c: f"127.0.0.1:{broker.listener_ports[c]}" for c in CASES}
            extra = {"PLAINTEXT": {},
                     "SSL": {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem)}}
            context = {"PLAINTEXT": None,
                       "SSL": ssl.create_default_context(cafile=str(pki.ca_pem))}
            topic = f"bench-tls-{time.time_ns()}"
            workloads.create_topic(bootstrap["PLAINTEXT"], topic, 1)
            workloads.produce(bootstrap["PLAINTEXT"], topic, n, SIZE)
            os.sync()
            for run in range(args.runs):
                for case in CASES if run % 2 == 0 else tuple(reversed(CASES)):
                    before = usage(pid)[0]
                    got = raw_fetch(bootstrap[case], topic, 0, n, context[case])
                    raw[case].append(got["MB/s"])
                    cpu[case].append((usage(pid)[0] - before) / (got["bytes"] / 1e9))
                    seconds = workloads.consume(bootstrap[case], topic, 1, n, extra[case])
                    consumer[case].append(n / seconds)
                print(f"run {run + 1}/{args.runs}: " + ", ".join(
                    f"{c} raw {raw[c][-1]:,.0f} MB/s, consumer {consumer[c][-1]:,.0f} rec/s"
                    for c in CASES), flush=True)
        finally:
            broker.stop()
    results = {
        "commit": commit(), "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "loadavg_at_end": os.getloadavg()[0], "runs": args.runs, "records": n, "size": SIZE,
        "cores": os.cpu_count(), "openssl": ssl.OPENSSL_VERSION,
        "tcp_available_ulp": _ulps(),
        "raw_fetch_mb_s": {c: stats(v) for c, v in raw.items()},
        "consumer_records_s": {c: stats(v) for c, v in consumer.items()},
        "broker_cpu_s_per_gb": {c: stats(v) for c, v in cpu.items()},
    }
    text = section(results)
    print(text)
    if not args.no_write:
        (DOCS / "bench-tls.json").write_text(json.dumps(results, indent=1) + "\n")
        write(text, DOCS / "BENCHMARKS.md")
        print("wrote docs/BENCHMARKS.md, docs/bench-tls.json")


def _ulps() -> str:
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_ulp").read_text().strip()
    except OSError:
        return "?"


def _cell(s: dict, fmt: str = ",.0f") -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"


def section(r: dict) -> str:
    raw, con, cpu = r["raw_fetch_mb_s"], r["consumer_records_s"], r["broker_cpu_s_per_gb"]
    ratio_raw = raw["SSL"]["median"] / raw["PLAINTEXT"]["median"]
    ratio_con = con["SSL"]["median"] / con["PLAINTEXT"]["median"]
    out = [
        "## Fetch over TLS (`python -m bench.tls`)",
        "",
        f"{r['records']:,} records of {r['size']} B in one partition, read back over the "
        f"PLAINTEXT and the SSL listener of one broker, median of {r['runs']} runs (min-max), "
        f"{r['cores']} shared cores, {r['openssl']}; measured at commit `{r['commit']}`, "
        f"finished {r['finished_utc']} UTC, 1-min load average at the end "
        f"{r['loadavg_at_end']:.1f}. Plaintext fetches go out with `sendfile`; TLS fetches "
        f"are read from the segment and encrypted in the broker (Python 3.11's `ssl` has no "
        f"kernel TLS, `OP_ENABLE_KTLS` came in 3.12; this machine's kernel offers no `tls` "
        f"TCP ULP either: /proc/sys/net/ipv4/tcp_available_ulp lists `"
        f"{r.get('tcp_available_ulp', '?')}`), and the bare client decrypts them.",
        "",
        "| | PLAINTEXT | SSL | SSL / PLAINTEXT |",
        "|---|---|---|---|",
        f"| raw fetch, MB/s of records (64 MiB fetches) | {_cell(raw['PLAINTEXT'])} "
        f"| {_cell(raw['SSL'])} | {ratio_raw:.2f} |",
        f"| confluent-kafka consumer, records/s | {_cell(con['PLAINTEXT'])} "
        f"| {_cell(con['SSL'])} | {ratio_con:.2f} |",
        f"| broker CPU seconds per GB (raw fetch) | {_cell(cpu['PLAINTEXT'], '.2f')} "
        f"| {_cell(cpu['SSL'], '.2f')} | |",
        "",
        f"The broker's own cost of TLS is the CPU line: "
        f"{cpu['SSL']['median'] - cpu['PLAINTEXT']['median']:.2f} s more per GB (reading the "
        f"segment, encrypting, copying out of OpenSSL's buffer), a ceiling of about "
        f"{1 / cpu['SSL']['median']:.1f} GB/s of fetches per core over TLS against "
        f"{1 / cpu['PLAINTEXT']['median']:.1f} GB/s with sendfile. The raw figures are "
        f"lower than that because the client decrypts on the same cores, in Python's ssl, "
        f"16 KiB record at a time; the consumer row is what a user of confluent-kafka sees.",
    ]
    return "\n".join(out) + "\n"


def write(text: str, page: Path) -> None:
    write_section(page, BEGIN, END, text)


if __name__ == "__main__":
    main()
