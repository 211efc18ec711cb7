"""Scale curves: Spool (beside Tansu where Tansu can) as partitions, topics and connections grow.

    python -m bench.scale [--runs 3] [--only partitions,startup,metadata,connections]
                          [--big 10000] [--scale 1.0] [--no-write]

- ``partitions``: one producer (confluent-kafka, acks=1, linger.ms=5, batch.size 1 MiB)
  writes 200,000 x 1 KiB to a topic of 1, 10, 100 and 1,000 partitions (each partition
  first written to once, timed apart: a partition's first append writes its
  leader-epoch checkpoint), dealt over the partitions in turn, 10,000 / n records at a
  time (``produce_batch``'s ``partition``; librdkafka's sticky partitioner would put each
  10 ms of keyless records into one partition), so each Produce request carries many
  partitions with small batches: the per-partition
  cost. Records/s and broker CPU seconds. Then produce latency at a fixed rate (10,000 x
  1 KiB records/s for ``--latency-seconds``, acks=1, linger.ms=0, record i to partition
  i % n): p50
  and p99 ms from produce() to the delivery report, and the broker's CPU per record then.
- ``startup`` (Spool only: Tansu keeps its data in memory): ``bench.scale_startup``, at
  ``--startup-sizes`` partitions (1,000 and 10,000; each at most the cap below).
- ``metadata``: ``--big`` topics of 1 partition (created 500 a CreateTopics request);
  then a full Metadata request (v12, all topics) and a one-topic one, timed from the
  request sent to the response's last byte (not decoded), on one connection: p50/p99 ms.
- ``connections``: ``bench.scale_conns`` with 1, 100 and 1,000 connections on a topic of
  10 partitions, 16 x 1 KiB per request, 5 in flight per connection, ``--conn-seconds``.

Both brokers run side by side for a part and take turns within each run. The whole
default run takes about 17 min on 2 quiet cores (partitions 4-7, connections 2-3,
metadata 4, start-up 6); ``--only`` runs parts alone (each under ~5 min) and merges them
into the JSON. This machine's
descriptor limit (``ulimit -Hn``) caps a Spool broker's partitions (2 descriptors a
partition, ``spool.broker.broker``): ``--big`` is lowered to the cap (to a multiple of
100) and the figure used is reported. Results: docs/bench-scale.json, the
``<!-- scale:begin -->`` section of docs/BENCHMARKS.md, docs/bench-scale.png
(``bench.scale_report``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import scale_conns, scale_startup, workloads
from bench.brokers import Running, spool_broker, tansu_broker, usage
from spool.protocol._generated import MetadataRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from tests.helpers.raw_client import RawClient

DOCS = Path(__file__).resolve().parent.parent / "docs"
PARTITIONS = [1, 10, 100, 1000]
CONNECTIONS = [1, 100, 1000]
RECORDS, SIZE, RATE = 200_000, 1024, 10_000
PARTS = ("partitions", "startup", "metadata", "connections")


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def spool_cap() -> int:
    """The most user partitions a Spool broker here may hold (internal topics at 1 each)."""
    from spool.broker.broker import DESCRIPTOR_RESERVE, DESCRIPTORS_PER_PARTITION

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    by_fds = (soft - min(DESCRIPTOR_RESERVE, soft // 4)) // DESCRIPTORS_PER_PARTITION
    return min(20_000, by_fds) - 3


def produce_rr(bootstrap: str, topic: str, partitions: int, records: int, size: int,
               per: int | None = None) -> float:
    """Seconds to produce ``records``, dealt over the partitions in turn, ``per`` (default
    ``CHUNK / partitions``, at least 1) to a partition at a time (``produce_batch`` with its
    ``partition`` argument: a message dict's own "partition" is ignored)."""
    p = Producer({"bootstrap.servers": bootstrap, **workloads.PRODUCER})
    per = per or max(1, workloads.CHUNK // partitions)
    block = [{"value": b"x" * size}] * per
    t0 = time.perf_counter()
    sent, part = 0, 0
    while sent < records:
        n = min(per, records - sent)
        done = 0
        while done < n:
            done += p.produce_batch(topic, block[: n - done], partition=part)
            p.poll(0)
            if done < n:
                p.poll(0.002)
        sent += n
        part = (part + 1) % partitions
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return elapsed


def latency_rr(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
               size: int) -> list[float]:
    """Milliseconds from produce() to its delivery report at ``rate``/s, round robin."""
    lat: list[float] = []

    def on_delivery(err, msg):
        if err is None:
            lat.append((time.time_ns() - workloads._TS.unpack_from(msg.value())[0]) / 1e6)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    n_total = workloads.paced(p, topic, rate, seconds, size, on_delivery, partitions=partitions)
    if len(lat) < n_total:
        raise RuntimeError(f"latency: {len(lat)} of {n_total} delivered")
    return lat


def delete_topic(bootstrap: str, topic: str) -> None:
    try:
        AdminClient({"bootstrap.servers": bootstrap}).delete_topics([topic])[topic].result(60)
    except Exception:  # noqa: BLE001 - memory-only reference brokers may not delete
        pass


def part_partitions(brokers: list[Running], runs: int, records: int, seconds: float) -> dict:
    out: dict = {}
    for n in PARTITIONS:
        per: dict[str, dict[str, list[float]]] = {b.name: {} for b in brokers}
        for run in range(runs):
            for b in brokers if run % 2 == 0 else list(reversed(brokers)):
                topic = f"scale-p{n}-{time.time_ns()}"
                os.sync()
                workloads.create_topic(b.bootstrap, topic, n)
                cpu_w = usage(b.pid)[0]
                first = produce_rr(b.bootstrap, topic, n, n, SIZE, per=1)  # 1 record each
                cpu0 = usage(b.pid)[0]
                s = produce_rr(b.bootstrap, topic, n, records, SIZE)
                cpu1 = usage(b.pid)[0]
                lat = latency_rr(b.bootstrap, topic, n, RATE, seconds, SIZE)
                cpu2 = usage(b.pid)[0]
                m = per[b.name]
                for k, v in (("produce", records / s), ("produce_cpu", cpu1 - cpu0),
                             ("first_s", first), ("first_cpu", cpu0 - cpu_w),
                             ("p50", pct(lat, 0.5)), ("p99", pct(lat, 0.99)),
                             ("latency_cpu_us", (cpu2 - cpu1) / len(lat) * 1e6)):
                    m.setdefault(k, []).append(v)
                delete_topic(b.bootstrap, topic)
        print(f"{n} partitions: " + "; ".join(
            f"{name} {statistics.median(m['produce']):,.0f} rec/s, "
            f"CPU {statistics.median(m['produce_cpu']):.2f} s, p50 "
            f"{statistics.median(m['p50']):.1f} ms, p99 {statistics.median(m['p99']):.1f} ms"
            for name, m in per.items()), flush=True)
        out[str(n)] = {name: {k: stats(v) for k, v in m.items()} for name, m in per.items()}
    return {"records": records, "size": SIZE, "rate": RATE, "latency_seconds": seconds,
            "by_partitions": out}


def create_topics(bootstrap: str, names: list[str]) -> float:
    """Seconds to create ``names`` (1 partition each), 500 a request."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.perf_counter()
    for i in range(0, len(names), 500):
        futs = admin.create_topics([NewTopic(t, 1) for t in names[i:i + 500]],
                                   operation_timeout=300, request_timeout=300)
        for f in futs.values():
            f.result(600)
    return time.perf_counter() - t0


def metadata_latency(bootstrap: str, request, count: int) -> dict:
    c = RawClient(bootstrap, timeout=120)
    try:
        c.send(3, 12, request)
        first = c.recv_frame()
        lat = []
        for _ in range(count):
            t0 = time.perf_counter()
            c.send(3, 12, request)
            c.recv_frame()
            lat.append((time.perf_counter() - t0) * 1000)
    finally:
        c.close()
    return {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "bytes": len(first) + 4}


def part_metadata(brokers: list[Running], topics: int, runs: int) -> dict:
    out: dict = {"topics": topics}
    for b in brokers:
        names = [f"md-{i:05d}" for i in range(topics)]
        cpu0 = usage(b.pid)[0]
        created = create_topics(b.bootstrap, names)
        r: dict = {"create_s": created, "create_cpu": usage(b.pid)[0] - cpu0}
        full = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        one = MetadataRequest(topics=[MetadataRequestTopic(name=names[topics // 2])],
                              allow_auto_topic_creation=False)
        for key, req, count in (("all", full, 20), ("one", one, 500)):
            rs = [metadata_latency(b.bootstrap, req, count) for _ in range(runs)]
            r[key] = {"p50": stats([x["p50"] for x in rs]), "p99": stats([x["p99"] for x in rs]),
                      "bytes": rs[0]["bytes"]}
        print(f"metadata {topics} topics, {b.name}: created in {created:.1f} s; all topics "
              f"p50 {r['all']['p50']['median']:.1f} ms p99 {r['all']['p99']['median']:.1f} ms "
              f"({r['all']['bytes']:,} B); one topic p50 {r['one']['p50']['median']:.2f} ms "
              f"p99 {r['one']['p99']['median']:.2f} ms", flush=True)
        out[b.name] = r
    return out


def part_connections(brokers: list[Running], runs: int, seconds: float) -> dict:
    out: dict = {}
    for n in CONNECTIONS:
        per: dict[str, dict[str, list[float]]] = {b.name: {} for b in brokers}
        for run in range(runs):
            for b in brokers if run % 2 == 0 else list(reversed(brokers)):
                topic = f"scale-c{n}-{time.time_ns()}"
                workloads.create_topic(b.bootstrap, topic, 10)
                r = scale_conns.produce_connections(b.bootstrap, b.pid, topic, 10, n, seconds)
                if r["errors"] or r["closed_by_broker"]:
                    raise RuntimeError(f"{b.name}, {n} connections: {r}")
                m = per[b.name]
                for k in ("records_per_s", "broker_cpu", "client_cpu"):
                    m.setdefault(k, []).append(r[k])
                m.setdefault("broker_cpu_us_per_record", []).append(
                    r["broker_cpu"] / max(1, r["requests"] * scale_conns.BATCH_RECORDS) * 1e6)
                delete_topic(b.bootstrap, topic)
        print(f"{n} connections: " + "; ".join(
            f"{name} {statistics.median(m['records_per_s']):,.0f} rec/s, broker "
            f"{statistics.median(m['broker_cpu_us_per_record']):.1f} us CPU/record, client CPU "
            f"{statistics.median(m['client_cpu']):.1f} s"
            for name, m in per.items()), flush=True)
        out[str(n)] = {name: {k: stats(v) for k, v in m.items()} for name, m in per.items()}
    return {"seconds": seconds, "partitions": 10, "batch_records": scale_conns.BATCH_RECORDS,
            "depth": scale_conns.DEPTH, "by_connections": out}


def stamp(part: dict, runs: int) -> dict:
    """``part`` with its runs, the time and the 1-min load average when it ended."""
    return {**part, "runs": runs, "load_average": os.getloadavg()[0],
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default=",".join(PARTS))
    ap.add_argument("--big", type=int, default=10_000, help="partitions/topics at the top")
    ap.add_argument("--startup-sizes", type=lambda v: [int(x) for x in v.split(",")],
                    default=[1000, 10_000], help="partitions, each at most --big's cap")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    ap.add_argument("--latency-seconds", type=float, default=3.0)
    ap.add_argument("--conn-seconds", type=float, default=4.0)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args()
    parts = [p for p in args.only.split(",") if p]
    big = min(args.big, spool_cap() // 100 * 100)
    path = DOCS / "bench-scale.json"
    results: dict = json.loads(path.read_text()) if path.exists() else {}
    results.update({"runs": args.runs, "spool_partition_cap": spool_cap()})
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        tmpd = Path(tmp).resolve()
        for sub in ("a", "m"):
            (tmpd / sub).mkdir()
        if "partitions" in parts or "connections" in parts:
            with spool_broker(tmpd / "a") as spool, tansu_broker() as tansu:
                if "partitions" in parts:
                    results["partitions"] = stamp(part_partitions(
                        [spool, tansu], args.runs, int(RECORDS * args.scale),
                        args.latency_seconds), args.runs)
                if "connections" in parts:
                    results["connections"] = stamp(part_connections(
                        [spool, tansu], args.runs, args.conn_seconds), args.runs)
        if "metadata" in parts:
            with spool_broker(tmpd / "m", scale_startup.OVERRIDES) as spool, \
                    tansu_broker() as tansu:
                results["metadata"] = stamp(part_metadata([spool, tansu], big, args.runs),
                                            args.runs)
        if "startup" in parts:
            sizes = sorted({min(n, big) for n in args.startup_sizes})
            results.setdefault("startup", {}).update(
                {str(n): stamp(scale_startup.startup(tmpd, n, args.runs), args.runs)
                 for n in sizes})
    results["load_average"] = os.getloadavg()[0]
    results["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if not args.no_write:
        from bench import scale_report

        path.write_text(json.dumps(results, indent=1) + "\n")
        scale_report.write(results, DOCS)
        print("wrote docs/BENCHMARKS.md, docs/bench-scale.json, docs/bench-scale.png")
    else:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
