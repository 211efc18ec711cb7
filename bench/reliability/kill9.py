"""kill -9 rounds under idempotent acks=all producers, then a history check.

    python -m bench.reliability.kill9 [--rounds 50] [--producers 2] [--partitions 3] [--quick]

Starts a broker, creates one topic, and runs ``--producers`` confluent-kafka
producers (``enable.idempotence=true``, ``acks=all``), each in its own thread
writing records ``p<producer>-<seq>`` round-robin over the partitions as fast
as the client lets it. Every ``--up`` seconds (jittered) the broker is killed
with SIGKILL and restarted on the same data; the restart time is measured
twice: until it listens, and until it serves (Metadata names the topic with
all its partitions and a ListOffsets answers). A history records every
delivery report (topic, partition, offset, value) the client got without error.

After the last restart the producers stop and flush, and every partition is
read from offset 0 to its high watermark. Checked and recorded in
``docs/reliability/kill9.json``: acked records lost (an acked offset missing
or holding another value; must be 0), duplicates (a payload id stored more
than once; must be 0 with idempotence), order (within a partition each
producer's sequence numbers increase with the offset; violations must be 0),
delivery errors and fatal producer errors, acked totals, restart times
(median, p90, max), tracebacks in the broker log.
"""

from __future__ import annotations

import argparse
import collections
import logging
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.common import (
    DEFAULT_OUT,
    parse_overrides,
    percentile,
    raise_nofile,
    started_broker,
    write_result,
)
from spool.protocol._generated import ListOffsetsRequest, MetadataRequest
from spool.protocol._generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from tests.helpers.raw_client import RawClient

TOPIC = "kill9"
QUIET = logging.getLogger("kill9.librdkafka")  # the client's connection-refused noise
QUIET.setLevel(logging.CRITICAL)


def serving(bootstrap: str, partitions: int, timeout: float = 120.0) -> float:
    """Seconds until Metadata lists the topic's partitions and ListOffsets answers them."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            c = RawClient(bootstrap, timeout=5)
            try:
                md = c.request(3, 1, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
                t = md.topics[0]
                if t.error_code == 0 and len(t.partitions) == partitions:
                    lo = c.request(2, 1, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
                        name=TOPIC, partitions=[ListOffsetsPartition(partition_index=p, timestamp=-1)
                                                for p in range(partitions)])]))
                    if all(p.error_code == 0 for p in lo.topics[0].partitions):
                        return time.monotonic() - t0
            finally:
                c.close()
        except (OSError, ConnectionError):
            pass
        time.sleep(0.02)
    raise RuntimeError(f"broker did not serve {TOPIC} within {timeout} s")


class History:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> payload id
        self.delivery_errors: collections.Counter[str] = collections.Counter()
        self.fatal: list[str] = []
        self.sent = 0

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value().split(b"|", 1)[0]
            else:
                self.delivery_errors[err.name()] += 1

    def on_error(self, err: KafkaError) -> None:
        if err.fatal():
            with self.lock:
                self.fatal.append(str(err))


def produce_loop(bootstrap: str, pid: int, partitions: int, size: int, rate: int,
                 hist: History, stop: threading.Event) -> None:
    p = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": 300_000, "reconnect.backoff.max.ms": 200,
        "queue.buffering.max.messages": 200_000, "error_cb": hist.on_error, "logger": QUIET, "log_level": 0,
    })
    t0 = time.monotonic()
    pad = b"." * max(0, size - 16)
    seq = 0
    while not stop.is_set() and not hist.fatal:
        try:
            p.produce(TOPIC, value=b"p%d-%d|" % (pid, seq) + pad, partition=seq % partitions,
                      on_delivery=hist.on_delivery)
            seq += 1
        except BufferError:
            p.poll(0.05)
            continue
        if seq % 100 == 0:
            p.poll(0)
            ahead = seq / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    with hist.lock:
        hist.sent += seq
    left = p.flush(300)
    if left:
        with hist.lock:
            hist.delivery_errors["unflushed after 300 s"] += left


def read_all(bootstrap: str, partitions: int, size: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every stored record as (offset, payload id); a value not of the form written is kept whole."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill9-check",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
    out: dict[int, list[tuple[int, bytes]]] = {}
    try:
        for part in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, part), timeout=30)
            rows: list[tuple[int, bytes]] = []
            c.assign([TopicPartition(TOPIC, part, lo)])
            deadline = time.monotonic() + 300
            while (not rows or rows[-1][0] < hi - 1) and hi > lo and time.monotonic() < deadline:
                for m in c.consume(10_000, 1.0):
                    if m.error() is None:
                        v = m.value()
                        pid = v.split(b"|", 1)[0]
                        rows.append((m.offset(), pid if v == pid + b"|" + b"." * (size - 16) else v))
            out[part] = rows
    finally:
        c.close()
    return out


def check(hist: History, log: dict[int, list[tuple[int, bytes]]]) -> dict[str, Any]:
    stored = {(p, off): v for p, rows in log.items() for off, v in rows}
    lost = sum(1 for k, v in hist.acked.items() if stored.get(k) != v)
    ids = collections.Counter(stored.values())
    duplicates = sum(n - 1 for n in ids.values() if n > 1)
    order_violations = 0
    malformed = 0
    for rows in log.values():
        last: dict[bytes, int] = {}
        for _off, v in rows:
            pid, _, seq = v.partition(b"-")
            if not seq.isdigit():
                malformed += 1
                continue
            if int(seq) <= last.get(pid, -1):
                order_violations += 1
            last[pid] = int(seq)
    acked_ids = set(hist.acked.values())
    return {
        "acked": len(hist.acked),
        "stored": len(stored),
        "acked_lost": lost,
        "duplicates": duplicates,
        "order_violations": order_violations,
        "malformed_values": malformed,
        "stored_but_not_acked": len(set(ids) - acked_ids),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    raise_nofile()
    rng = random.Random(args.seed)
    with started_broker("kill9", args) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions)])[TOPIC].result(30)
        hist = History()
        stop = threading.Event()
        threads = [threading.Thread(target=produce_loop, daemon=True, args=(
            broker.bootstrap, i, args.partitions, args.size, args.rate, hist, stop))
            for i in range(args.producers)]
        for t in threads:
            t.start()
        listen_s: list[float] = []
        serve_s: list[float] = []
        acked_at_kill: list[int] = []
        t0 = time.monotonic()
        for r in range(args.rounds):
            time.sleep(args.up * rng.uniform(0.5, 1.5))
            with hist.lock:
                acked_at_kill.append(len(hist.acked))
            broker.kill()
            listen_s.append(broker.timed_start())
            serve_s.append(listen_s[-1] + serving(broker.bootstrap, args.partitions))
            if (r + 1) % 10 == 0:
                print(f"  round {r + 1}: {acked_at_kill[-1]:,} acked, "
                      f"restart {serve_s[-1]:.2f} s", flush=True)
        time.sleep(args.up)
        stop.set()
        for t in threads:
            t.join(360)
        elapsed = time.monotonic() - t0
        log = read_all(broker.bootstrap, args.partitions, args.size)
        result = {
            "rounds": args.rounds,
            "producers": args.producers,
            "partitions": args.partitions,
            "record_bytes": args.size,
            "rate_per_producer": args.rate,
            "seconds": round(elapsed, 1),
            **check(hist, log),
            "sent": hist.sent,
            "delivery_errors": dict(hist.delivery_errors),
            "fatal_producer_errors": hist.fatal[:5],
            "acked_growth_every_round": all(b > a for a, b in zip(acked_at_kill, acked_at_kill[1:], strict=False)),
            "restart_listen_s": _times(listen_s),
            "restart_serve_s": _times(serve_s),
            "broker_alive_at_end": broker.alive(),
            "tracebacks": broker.tracebacks(),
            "traceback_examples": broker.log_lines(b"Traceback", 3),
            "overrides": parse_overrides(args.override),
        }
    return result


def _times(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "p90": round(percentile(xs, 90), 2),
            "max": round(max(xs), 2), "min": round(min(xs), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--size", type=int, default=100, help="record value bytes (>= 16)")
    ap.add_argument("--rate", type=int, default=5000, help="records/s per producer, at most")
    ap.add_argument("--up", type=float, default=3.0, help="mean seconds between kills")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--quick", action="store_true",
                    help="CI size: 5 rounds 1 s apart, 2,000 records/s per producer")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = min(args.rounds, 5)
        args.up = min(args.up, 1.0)
        args.rate = min(args.rate, 2000)
    r = run(args)
    path = write_result(args.out, "kill9", r)
    print(f"kill9: {r['rounds']} rounds, {r['acked']:,} acked, lost {r['acked_lost']}, "
          f"duplicates {r['duplicates']}, order violations {r['order_violations']}, "
          f"restart median {r['restart_serve_s']['median']} s p90 {r['restart_serve_s']['p90']} s "
          f"max {r['restart_serve_s']['max']} s; {path}")
    ok = (r["acked_lost"] == 0 and r["duplicates"] == 0 and r["order_violations"] == 0
          and r["malformed_values"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
