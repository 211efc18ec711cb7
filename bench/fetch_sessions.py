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
bench.fetch_sessions``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import workloads
from bench.brokers import spool_broker, usage
from bench.reliability.replication import full_isr
from spool.net.client import NodeClient
from spool.protocol._generated import FetchRequest
from spool.protocol._generated.fetch_request import FetchPartition
from spool.replica.fetch_session import FetchSessionHandler
from tests.helpers.cluster_proc import Cluster

SLOTS = ("0", "1000")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--fetches", type=int, default=300)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--skip-follower", action="store_true")
    ap.add_argument("--slots", nargs="*", default=list(SLOTS),
                    help="max.incremental.fetch.session.cache.slots values to run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as d:
        tmp = Path(d)
        for slots in args.slots:
            r = consumer_case(tmp, slots, args.partitions, args.fetches)
            print(f"consumer, {args.partitions} partitions, slots={slots}: "
                  f"broker {r['broker_cpu_us_per_fetch']:,.0f} us CPU/fetch, client "
                  f"{r['client_wall_us_per_fetch']:,.0f} us/fetch, request "
                  f"{r['request_bytes']:,.0f} B, {r['partitions_answered']:,.0f} partitions "
                  f"answered, session={r['session']}; load {os.getloadavg()[0]:.2f}",
                  flush=True)
        if args.skip_follower:
            return
        for slots in args.slots:
            r = follower_case(tmp, slots, args.partitions, args.idle_seconds, args.records)
            print(f"followers, {args.partitions} partitions RF=3, slots={slots}: idle "
                  f"{r['idle_cpu_s_per_s']:.3f} CPU s/s (3 brokers); {args.records:,} x 1 KiB "
                  f"acks=all: {r['produce_rec_per_s']:,.0f} rec/s, {r['produce_cpu_s']:.2f} "
                  f"CPU s; load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
