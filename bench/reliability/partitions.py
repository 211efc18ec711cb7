"""A client creates partitions until the broker refuses; others are still served; restart.

    python -m bench.reliability.partitions [--per-topic 100] [--max-partitions 1000000] [--quick]

Starts a broker with its defaults and a bystander topic. One raw client sends
CreateTopics (``--per-topic`` partitions per topic, one topic per request)
until an answer carries an error, then topics of one partition until that
too is refused (the broker is full), or until the broker stops answering or
``--max-partitions`` / ``--max-seconds`` is reached. Meanwhile a bystander
confluent-kafka producer (acks=all) writes one record every 50 ms and an
ApiVersions probe runs every second. After the refusal the script also asks
for one topic of 1,000,000 partitions and auto-creates a topic through
Metadata, recording the answers. Then the broker is stopped with SIGTERM and
started again, then killed with SIGKILL and started again; each start is
timed until it serves (Metadata lists every created topic and partition).

Recorded in ``docs/reliability/partitions.json``: partitions created, the
refusing error (code, name, message), the answers to the two extra requests,
the bystander's records acked/failed and its slowest delivery, probe
latencies and unanswered probes, RSS and descriptors at the cap, stop and
start times, partitions listed after each restart, bystander records intact.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.common import (
    DEFAULT_OUT,
    Broker,
    Prober,
    fds,
    mib,
    parse_overrides,
    raise_nofile,
    rss,
    started_broker,
    write_result,
)
from spool.protocol._generated import CreateTopicsRequest, MetadataRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import error_name
from tests.helpers.raw_client import RawClient

BYSTANDER = "bystander"
QUIET = logging.getLogger("partitions.librdkafka")
QUIET.setLevel(logging.CRITICAL)


def create(client: RawClient, name: str, partitions: int) -> dict[str, Any]:
    resp = client.request(19, 5, CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
        timeout_ms=60_000, validate_only=False))
    t = resp.topics[0]
    return {"code": t.error_code, "name": error_name(t.error_code), "message": t.error_message}


def partition_counts(bootstrap: str) -> dict[str, int]:
    c = RawClient(bootstrap, timeout=120)
    try:
        md = c.request(3, 1, MetadataRequest(topics=None))
        return {t.name: len(t.partitions) for t in md.topics if t.error_code == 0}
    finally:
        c.close()


class Bystander:
    """One acks=all record every 50 ms to a topic of its own; delivery latencies kept."""

    def __init__(self, bootstrap: str) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                           "message.timeout.ms": 30_000, "logger": QUIET})
        self.acked = 0
        self.failed = 0
        self.slowest = 0.0
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()

            def done(err: Any, _msg: Any, t0: float = t0) -> None:
                if err is None:
                    self.acked += 1
                    self.slowest = max(self.slowest, time.monotonic() - t0)
                else:
                    self.failed += 1

            self.p.produce(BYSTANDER, value=b"b-%d" % self.sent, on_delivery=done)
            self.sent += 1
            while time.monotonic() - t0 < 0.05:
                self.p.poll(0.01)

    def start(self) -> Bystander:
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        left = self.p.flush(60)
        return {"sent": self.sent, "acked": self.acked, "failed": self.failed,
                "unflushed": left, "slowest_delivery_s": round(self.slowest, 2)}


def bystander_intact(bootstrap: str, acked_at_least: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bystander-check",
                  "enable.auto.commit": False, "logger": QUIET})
    c.assign([TopicPartition(BYSTANDER, 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < acked_at_least and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(10_000, 1.0) if m.error() is None]
    c.close()
    return len(got)


def timed_serve(broker: Broker, expect: dict[str, int], timeout: float = 600) -> dict[str, Any]:
    try:
        listen = broker.timed_start(timeout)
    except RuntimeError as e:
        return {"failed_to_start": str(e)[-600:], "all_topics_back": False}
    t0 = time.monotonic()
    counts: dict[str, int] = {}
    while time.monotonic() - t0 < timeout:
        try:
            counts = partition_counts(broker.bootstrap)
            if all(counts.get(k) == v for k, v in expect.items()):
                break
        except (OSError, ConnectionError):
            pass
        time.sleep(0.1)
    return {"listen_s": round(listen, 2), "serve_s": round(listen + time.monotonic() - t0, 2),
            "partitions_listed": sum(counts.values()),
            "all_topics_back": all(counts.get(k) == v for k, v in expect.items())}


def run(args: argparse.Namespace) -> dict[str, Any]:
    raise_nofile()
    with started_broker("partitions", args, stop_timeout=300) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": QUIET})
        admin.create_topics([NewTopic(BYSTANDER, 1)])[BYSTANDER].result(30)
        start_fds, start_rss = fds(broker.pid), rss(broker.pid)
        bystander = Bystander(broker.bootstrap).start()
        prober = Prober(broker.bootstrap, every=1.0, timeout=5.0).start()
        client = RawClient(broker.bootstrap, timeout=120)
        created: dict[str, int] = {}
        refusal: dict[str, Any] | None = None
        first_refusal: dict[str, Any] | None = None
        t0 = time.monotonic()
        i = 0
        per_topic = args.per_topic
        while sum(created.values()) < args.max_partitions:
            if time.monotonic() - t0 > args.max_seconds:
                refusal = {"stopped": f"time budget of {args.max_seconds} s reached"}
                break
            name = f"many-{i:06d}"
            try:
                got = create(client, name, per_topic)
            except (OSError, ConnectionError) as e:
                refusal = {"stopped": f"the broker stopped answering: {e!r}"}
                break
            if got["code"] != 0:
                if per_topic > 1:  # what is left fits only smaller topics: fill it up
                    first_refusal, per_topic = got, 1
                    continue
                refusal = got
                break
            created[name] = per_topic
            i += 1
            if i % 50 == 0:
                print(f"  {sum(created.values()):,} partitions, "
                      f"{fds(broker.pid)} fds", flush=True)
        create_s = time.monotonic() - t0
        at_cap = {"rss_mib": mib(rss(broker.pid)), "fds": fds(broker.pid)}
        extra: dict[str, Any] = {}
        try:
            extra["one_million_partitions"] = create(client, "one-million", 1_000_000)
            md = client.request(3, 4, MetadataRequest(
                topics=[MetadataRequestTopic(name="auto-after-cap")],
                allow_auto_topic_creation=True))
            extra["auto_create_after_cap"] = error_name(md.topics[0].error_code)
            if md.topics[0].error_code == 0:
                created["auto-after-cap"] = len(md.topics[0].partitions)
        except (OSError, ConnectionError) as e:
            extra["error"] = repr(e)
        client.close()
        time.sleep(1.0)
        probes = prober.stop()
        by = bystander.stop()
        alive = broker.alive()
        expect = {**created, BYSTANDER: 1}
        if extra.get("one_million_partitions", {}).get("code") == 0:
            expect["one-million"] = 1_000_000
        t1 = time.monotonic()
        stop_code = broker.stop(timeout=300)
        stop_s = time.monotonic() - t1
        after_term = timed_serve(broker, expect)
        broker.kill()
        after_kill = timed_serve(broker, expect)
        intact = bystander_intact(broker.bootstrap, by["acked"]) if broker.alive() else None
        result = {
            "per_topic": args.per_topic,
            "partitions_created": sum(created.values()),
            "topics_created": len(created),
            "create_s": round(create_s, 1),
            "refusal": refusal,
            "first_refusal": first_refusal,
            **extra,
            "broker_alive_after_refusal": alive,
            "bystander": by,
            "bystander_ok": by["failed"] == 0 and by["acked"] == by["sent"],
            "probes": probes,
            "start": {"rss_mib": mib(start_rss), "fds": start_fds},
            "at_cap": at_cap,
            "sigterm_exit_code": stop_code,
            "stop_s": round(stop_s, 2),
            "restart_after_sigterm": after_term,
            "restart_after_kill9": after_kill,
            "bystander_records_read_back": intact,
            "tracebacks": broker.tracebacks(),
            "traceback_examples": broker.log_lines(b"Traceback", 3),
            "overrides": parse_overrides(args.override),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--max-partitions", type=int, default=1_000_000)
    ap.add_argument("--max-seconds", type=float, default=900)
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--quick", action="store_true",
                    help="CI size: max.broker.partitions=300, 10 partitions a topic, "
                         "at most 60 s of creation")
    args = ap.parse_args(argv)
    if args.quick:
        args.per_topic = min(args.per_topic, 10)
        args.max_seconds = min(args.max_seconds, 60)
        if not any(o.startswith("max.broker.partitions=") for o in args.override):
            args.override.append("max.broker.partitions=300")
    r = run(args)
    path = write_result(args.out, "partitions", r)
    print(f"partitions: {r['partitions_created']:,} created in {r['create_s']} s, refused with "
          f"{r['refusal']}; bystander {r['bystander']}; probes {r['probes']}; restart after "
          f"SIGTERM {r['restart_after_sigterm']}, after kill -9 {r['restart_after_kill9']}; {path}")
    ok = (r["refusal"] is not None and "code" in r["refusal"] and r["broker_alive_after_refusal"] and r["bystander_ok"] and r["probes"]["unanswered"] == 0
          and r["restart_after_sigterm"]["all_topics_back"]
          and r["restart_after_kill9"]["all_topics_back"] and r["sigterm_exit_code"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
