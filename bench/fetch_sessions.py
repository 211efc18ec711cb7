"""What fetch sessions (KIP-227) save: broker CPU per Fetch over many partitions.

The same client against the same broker with ``max.incremental.fetch.session.cache.slots``
0 (no sessions: every Fetch names every partition and is answered with every partition)
and 1000 (Kafka's default: after the first, each Fetch names only what changed and is
answered only with what has news).

- consumer: one broker, one topic of ``--partitions`` partitions with one record each; a
  client (spool.net's NodeClient with spool.replica.fetch_session's handler, as the replica
  fetcher uses it) sends ``--fetches`` Fetch v12 requests one after the other, every
  partition at its high watermark, ``max_wait_ms`` 0: the steady state of a consumer of
  many quiet partitions. Figures: the broker's CPU microseconds per Fetch (/proc), the
  request and response sizes, the client's wall time per Fetch.
- follower: a 3-node cluster (combined nodes), a topic of ``--partitions`` partitions,
  RF=3; the brokers' CPU seconds over ``--idle-seconds`` with nothing produced (each
  fetcher long-polls, ``replica.fetch.wait.max.ms`` 500) and while ``--records`` records of
  1 KiB are produced with acks=all.

Every run goes under the shared lock: ``flock /tmp/spool-bench.lock python -m
bench.fetch_sessions``; ``--write`` merges the run into ``docs/bench-sessions.json`` (one
``--slots`` value per run keeps each locked run short) and writes the section of
``docs/BENCHMARKS.md`` between ``<!-- sessions:begin -->`` and ``<!-- sessions:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import workloads
from bench.brokers import spool_broker, usage
from bench.reliability.common import commit
from bench.reliability.replication import full_isr
from bench.report import write_section
from spool.net.client import NodeClient
from spool.protocol._generated import FetchRequest
from spool.protocol._generated.fetch_request import FetchPartition
from spool.replica.fetch_session import FetchSessionHandler
from tests.helpers.cluster_proc import Cluster

SLOTS = ("0", "1000")
DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- sessions:begin -->"
END = "<!-- sessions:end -->"


def fill(bootstrap: str, topic: str, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(partitions):
        p.produce(topic, b"x" * 100, partition=i)
    assert p.flush(60) == 0


async def consumer_fetches(port: int, topic: str, partitions: int, fetches: int,
                           pid: int) -> dict:
    client = NodeClient("127.0.0.1", port, client_id="bench-sessions",
                        max_response_bytes=64 << 20)
    handler = FetchSessionHandler()
    wanted = {(topic, i): FetchPartition(partition=i, fetch_offset=1,
                                         partition_max_bytes=1 << 20)
              for i in range(partitions)}
    req_bytes = resp_parts = 0

    async def one() -> None:
        nonlocal req_bytes, resp_parts
        sid, epoch, topics, forgotten = handler.build(wanted)
        req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0,
                           session_id=sid, session_epoch=epoch, topics=topics,
                           forgotten_topics_data=forgotten)
        req_bytes += len(req.to_bytes(12))
        resp = await client.request(req, 12)
        assert resp.error_code == 0 and handler.handle_response(resp), resp.error_code
        resp_parts += sum(len(t.partitions) for t in resp.responses)

    try:
        for _ in range(5):  # warm up (and open the session)
            await one()
        req_bytes = resp_parts = 0
        cpu0, wall0 = usage(pid)[0], time.perf_counter()
        for _ in range(fetches):
            await one()
        cpu, wall = usage(pid)[0] - cpu0, time.perf_counter() - wall0
    finally:
        await client.close()
    return {"broker_cpu_us_per_fetch": cpu / fetches * 1e6,
            "client_wall_us_per_fetch": wall / fetches * 1e6,
            "request_bytes": req_bytes / fetches, "partitions_answered": resp_parts / fetches,
            "session": handler.session_id != 0}


def consumer_case(tmp: Path, slots: str, partitions: int, fetches: int) -> dict:
    (tmp / f"c{slots}").mkdir()
    with spool_broker(tmp / f"c{slots}", {
            "max.incremental.fetch.session.cache.slots": slots}) as b:
        topic = f"bench-sessions-{time.time_ns()}"
        workloads.create_topic(b.bootstrap, topic, partitions)
        fill(b.bootstrap, topic, partitions)
        port = int(b.bootstrap.rsplit(":", 1)[1])
        return asyncio.run(consumer_fetches(port, topic, partitions, fetches, b.pid))


def cluster_cpu(cluster: Cluster) -> float:
    return sum(usage(n.pid)[0] for n in cluster.brokers)


def follower_case(tmp: Path, slots: str, partitions: int, idle_s: float, records: int) -> dict:
    cluster = Cluster(tmp / f"f{slots}", proxied=False, log_level="WARNING",
                      overrides={"max.incremental.fetch.session.cache.slots": slots})
    try:
        cluster.start()
        cluster.wait_formed()
        topic = f"bench-sessions-rf3-{time.time_ns()}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(120)
        cluster.wait_until(f"{topic}: ISR of 3", full_isr(cluster, topic, partitions), 300)
        time.sleep(2)
        cpu0 = cluster_cpu(cluster)
        time.sleep(idle_s)
        idle = cluster_cpu(cluster) - cpu0
        cpu0 = cluster_cpu(cluster)
        secs = workloads.produce(cluster.bootstrap, topic, records, 1024, "all")
        busy = cluster_cpu(cluster) - cpu0
    finally:
        cluster.stop()
    return {"idle_cpu_s_per_s": idle / idle_s, "produce_cpu_s": busy,
            "produce_rec_per_s": records / secs}


def section(r: dict) -> str:
    """The BENCHMARKS.md section of the results (``docs/bench-sessions.json``)."""
    rows = []
    for slots in SLOTS:
        c, f = r.get("consumer", {}).get(slots), r.get("follower", {}).get(slots)
        if c is None or f is None:
            continue
        name = "no sessions (slots=0)" if slots == "0" else f"sessions (slots={slots})"
        rows.append(
            f"| {name} | {c['broker_cpu_us_per_fetch']:,.0f} | {c['request_bytes']:,.0f} | "
            f"{c['partitions_answered']:,.0f} | {f['idle_cpu_s_per_s']:.3f} | "
            f"{f['produce_rec_per_s']:,.0f} | {f['produce_cpu_s']:.2f} | "
            f"{c['loadavg']:.1f} / {f['loadavg']:.1f} |")
    n, rec = r["partitions"], r["records"]
    return (
        "## Fetch sessions (KIP-227)\n\n"
        f"`flock /tmp/spool-bench.lock python -m bench.fetch_sessions --write` ({r['commit']}, "
        f"{r['finished_utc']} UTC, {r['cores']} cores shared). The same clients against "
        "brokers with `max.incremental.fetch.session.cache.slots` 0 and 1000. Consumer: "
        f"Fetch v12 of {n:,} quiet partitions (each at its high watermark, max_wait 0), "
        f"{r['fetches']} in a row, one broker. Followers: a 3-node cluster, {n:,} "
        f"partitions RF=3: idle (every fetcher long-polls 500 ms), then {rec:,} x 1 KiB "
        "acks=all (CPU: the three brokers').\n\n"
        "| | consumer: broker CPU us / Fetch | request bytes | partitions answered | "
        "followers idle: CPU s / s | acks=all rec/s | acks=all CPU s | load (1 min) |\n"
        "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "What is left with a session is the read: every partition of the session is looked "
        "at on every Fetch (Kafka does the same), about 1.5 us per partition here; the "
        "request and the answer no longer grow with the partitions.\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--fetches", type=int, default=300)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--skip-follower", action="store_true")
    ap.add_argument("--slots", nargs="*", default=list(SLOTS),
                    help="max.incremental.fetch.session.cache.slots values to run")
    ap.add_argument("--write", action="store_true",
                    help="merge into docs/bench-sessions.json, write the BENCHMARKS.md section")
    args = ap.parse_args()
    page = DOCS / "bench-sessions.json"
    results: dict = json.loads(page.read_text()) if args.write and page.exists() else {}
    results.update({"partitions": args.partitions, "fetches": args.fetches,
                    "records": args.records, "cores": os.cpu_count(), "commit": commit(),
                    "finished_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())})
    with tempfile.TemporaryDirectory(dir=".") as d:
        tmp = Path(d)
        for slots in args.slots:
            r = consumer_case(tmp, slots, args.partitions, args.fetches)
            r["loadavg"] = os.getloadavg()[0]
            results.setdefault("consumer", {})[slots] = r
            print(f"consumer, {args.partitions} partitions, slots={slots}: "
                  f"broker {r['broker_cpu_us_per_fetch']:,.0f} us CPU/fetch, client "
                  f"{r['client_wall_us_per_fetch']:,.0f} us/fetch, request "
                  f"{r['request_bytes']:,.0f} B, {r['partitions_answered']:,.0f} partitions "
                  f"answered, session={r['session']}; load {r['loadavg']:.2f}", flush=True)
            if args.skip_follower:
                continue
            r = follower_case(tmp, slots, args.partitions, args.idle_seconds, args.records)
            r["loadavg"] = os.getloadavg()[0]
            results.setdefault("follower", {})[slots] = r
            print(f"followers, {args.partitions} partitions RF=3, slots={slots}: idle "
                  f"{r['idle_cpu_s_per_s']:.3f} CPU s/s (3 brokers); {args.records:,} x 1 KiB "
                  f"acks=all: {r['produce_rec_per_s']:,.0f} rec/s, {r['produce_cpu_s']:.2f} "
                  f"CPU s; load {r['loadavg']:.2f}", flush=True)
    if args.write:
        page.write_text(json.dumps(results, indent=1) + "\n")
        write_section(DOCS / "BENCHMARKS.md", BEGIN, END, section(results))
        print("wrote docs/bench-sessions.json, docs/BENCHMARKS.md")


if __name__ == "__main__":
    main()
