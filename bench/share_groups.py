"""Share-group consumption (KIP-932): 4 ShareConsumers on one partition against one classic
consumer reading the same records, same run.

    python -m bench.share_groups [--records 1000000] [--size 100] [--runs 5] [--no-write]

One Spool broker for the whole benchmark (``bench.brokers.spool_broker``; share heartbeats
of 500 ms so a share group forms quickly, a one-replica ``__share_group_state``, the default
30 s acquisition lock). Each run: a new one-partition topic, ``--records`` records of
``--size`` bytes produced with ``bench.workloads.produce``; then, in turn (the order
alternates between runs):

* classic: one ``Consumer`` with librdkafka's default fetch sizes (as the ShareConsumers
  have) and ``fetch.queue.backoff.ms=10`` (librdkafka prefetches until its queue holds
  ``queued.min.messages``, 100,000, then waits 1 s by default before fetching again, however
  fast the application drains it: a 1 s stall in most runs of 200,000 records, which
  would measure the client's backoff, not the broker) reads them all from offset 0,
  assigned (no group protocol, no commits), the clock started once it is connected, each
  ``consume`` asking for no more records than are left (so none ends on its timeout);
* share: a new share group (``share.auto.offset.reset=earliest`` set as a group config),
  4 ShareConsumers subscribed, the clock started once ShareGroupDescribe shows all 4
  assigned the partition (librdkafka joins without being polled, and fetches only when
  polled); then one thread each polls, implicit acknowledgement (each poll accepts what the
  previous poll returned), until the records they received cover every offset; the
  acceptances still pending then
  are sent by ``commit_sync`` after the clock stops (librdkafka 2.16's ``close`` leaves
  them to the lock).

Reported: records/s and MB/s (median of the runs, min-max), the broker's CPU seconds per
phase (including the last acceptances), how the share group's deliveries split among its 4
consumers and how many records were delivered more than once before every offset was; in
``docs/bench-share-groups.json`` and the section between ``<!-- share-groups:begin -->``
and ``<!-- share-groups:end -->`` of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, ShareConsumer, TopicPartition

from bench import workloads
from bench.brokers import spool_broker, usage
from bench.compare import stats
from bench.reliability.common import commit
from bench.report import write_section
from tests.helpers.share import set_group_config, wait_members

DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- share-groups:begin -->"
END = "<!-- share-groups:end -->"
CONSUMERS = 4
OVERRIDES = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "100",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
CASES = ("classic", "share")


def classic_consume(bootstrap: str, topic: str, records: int) -> float:
    """Seconds for one classic Consumer to read offsets [0, records) of partition 0, the
    clock started once it is connected (its metadata fetched)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "share-bench-classic",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 10, "log_level": 3})
    c.list_topics(topic, timeout=10)
    got = 0
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, 0, 0)])
    while got < records and time.perf_counter() - t0 < 600:
        # asks for no more than is left: returns as soon as that many are there
        got += sum(1 for m in c.consume(min(10_000, records - got), 1.0) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return elapsed


def share_consume(bootstrap: str, topic: str, records: int, group: str) -> tuple[float, dict]:
    """Seconds until 4 ShareConsumers have received every offset of [0, records); with the
    deliveries per consumer and the count of records delivered more than once."""
    set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    seen: set[int] = set()
    per: list[int] = [0] * CONSUMERS
    repeats = [0]
    lock = threading.Lock()
    done = threading.Event()
    failures: list[BaseException] = []

    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                "share.acknowledgement.mode": "implicit", "log_level": 3})
                 for _ in range(CONSUMERS)]
    for c in consumers:
        c.subscribe([topic])
    wait_members(bootstrap, group, CONSUMERS)  # librdkafka joins without being polled

    def run(i: int) -> None:
        c = consumers[i]  # used by this thread only from now on
        try:
            while not done.is_set():
                offsets = [m.offset() for m in c.poll(0.2) if m.error() is None]
                with lock:
                    if done.is_set():
                        break
                    per[i] += len(offsets)
                    before = len(seen)
                    seen.update(offsets)
                    repeats[0] += len(offsets) - (len(seen) - before)
                    if len(seen) >= records:
                        done.set()
            c.commit_sync(60)  # accepts the last poll's records (close would not)
            c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)
            done.set()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(CONSUMERS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    if not done.wait(600):
        raise RuntimeError(f"share group received {len(seen)} of {records} records")
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.join(120)
    if failures:
        raise failures[0]
    return elapsed, {"per_consumer": per, "delivered_more_than_once": repeats[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args()
    n = args.records
    tput: dict[str, list[float]] = {c: [] for c in CASES}
    cpu: dict[str, list[float]] = {c: [] for c in CASES}
    splits: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, spool_broker(Path(tmp), OVERRIDES) as b:
        for run in range(args.runs):
            topic = f"share-bench-{run}-{time.time_ns()}"
            workloads.create_topic(b.bootstrap, topic, 1)
            workloads.produce(b.bootstrap, topic, n, args.size)
            for case in CASES if run % 2 == 0 else tuple(reversed(CASES)):
                before = usage(b.pid)[0]
                if case == "classic":
                    elapsed = classic_consume(b.bootstrap, topic, n)
                else:
                    elapsed, split = share_consume(b.bootstrap, topic, n, f"share-bench-{run}")
                    splits.append(split)
                cpu[case].append(usage(b.pid)[0] - before)
                tput[case].append(n / elapsed)
            print(f"run {run + 1}/{args.runs}: " + ", ".join(
                f"{c} {tput[c][-1]:,.0f} records/s" for c in CASES), flush=True)
    results = {
        "commit": commit(), "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "loadavg_at_end": os.getloadavg()[0], "runs": args.runs, "records": n,
        "size": args.size, "cores": os.cpu_count(),
        "throughput": {c: stats(v) for c, v in tput.items()},
        "broker_cpu_seconds": {c: stats(v) for c, v in cpu.items()}, "share_runs": splits,
    }
    results["ratio"] = (results["throughput"]["share"]["median"]
                        / results["throughput"]["classic"]["median"])
    text = section(results)
    print(text)
    if not args.no_write:
        (DOCS / "bench-share-groups.json").write_text(json.dumps(results, indent=1) + "\n")
        write_section(DOCS / "BENCHMARKS.md", BEGIN, END, text)
        print("wrote docs/BENCHMARKS.md, docs/bench-share-groups.json")


def section(r: dict) -> str:
    size = r["size"]

    def rate(s: dict) -> str:
        return (f"{s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f}) "
                f"| {s['median'] * size / 1e6:,.1f}")

    out = [
        "## Share groups against a classic consumer (`python -m bench.share_groups`)",
        "",
        f"{r['records']:,} records of {size} B on one partition, read by one classic consumer "
        f"and by a share group of {CONSUMERS} ShareConsumers (implicit acknowledgement: every "
        f"record accepted), confluent-kafka 2.16.1, one Spool broker, median of {r['runs']} "
        f"runs (min-max), the two taking turns, on {r['cores']} shared cores (load average "
        f"{r['loadavg_at_end']:.1f} at the end) "
        f"(bench/share_groups.py says how). Commit {r['commit']}, {r['finished_utc']} UTC.",
        "",
        "| reader | records/s | MB/s | broker CPU s |",
        "|---|---|---|---|",
        f"| one classic consumer | {rate(r['throughput']['classic'])} "
        f"| {r['broker_cpu_seconds']['classic']['median']:.2f} |",
        f"| share group, {CONSUMERS} consumers | {rate(r['throughput']['share'])} "
        f"| {r['broker_cpu_seconds']['share']['median']:.2f} |",
        "",
        f"Share group / classic consumer: {r['ratio']:.2f}. Deliveries per share consumer, "
        "by run: " + "; ".join(", ".join(f"{x:,}" for x in s["per_consumer"])
                              for s in r["share_runs"])
        + "; records delivered more than once: "
        + ", ".join(str(s["delivered_more_than_once"]) for s in r["share_runs"]) + ".",
        "",
        "The broker is not the limit of either reader (its CPU seconds above, for the whole "
        "read): the classic consumer is one librdkafka instance and one Python loop turning "
        "100 B records into messages; the share group spreads that over 4 clients and pays, "
        "per ShareFetch (at most 500 records, librdkafka's max.poll.records), the acquisition "
        "and, on the next one, the acceptance of its records. The classic consumer runs with "
        "fetch.queue.backoff.ms=10: with librdkafka's default (1 s) it stalls once its "
        "100,000-message queue is full (about 170,000 records/s for 200,000 records).",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    main()
