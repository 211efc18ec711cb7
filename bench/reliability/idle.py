"""Many idle connections held open while a normal client keeps working.

    python -m bench.reliability.idle [--connections 10000] [--records 50000] [--quick]

Raises this process's descriptor limit to its hard limit (the broker child
inherits it), starts a broker, and opens ``--connections`` TCP connections
to it; each sends one ApiVersions request and reads the answer, then stays
idle. While they are held, a confluent-kafka producer (acks=all) writes
``--records`` records and a consumer reads them all back, checked value by
value. Then every idle connection is checked still open, all are closed,
and the broker's RSS and descriptors are sampled again.

Recorded in ``docs/reliability/idle.json``: connections opened and answered,
still open at the end, the client's records acked and read back intact, its
produce+consume seconds, RSS and descriptor count of the broker before,
while held, and after closing, per-connection RSS, probe latency while held.
"""

from __future__ import annotations

import argparse
import logging
import selectors
import socket
import struct
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.common import (
    DEFAULT_OUT,
    PROBE_FRAME,
    fds,
    mib,
    parse_overrides,
    probe,
    raise_nofile,
    rss,
    started_broker,
    write_result,
)

TOPIC = "idle-work"
QUIET = logging.getLogger("idle.librdkafka")
QUIET.setLevel(logging.CRITICAL)


def open_idle(port: int, n: int) -> tuple[list[socket.socket], int, list[str]]:
    """Open ``n`` connections, one ApiVersions each; (sockets, answered, errors)."""
    socks: list[socket.socket] = []
    errors: list[str] = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(PROBE_FRAME)
            socks.append(s)
        except OSError as e:
            errors.append(repr(e))
            if len(errors) > 20:
                break
    answered = 0
    sel = selectors.DefaultSelector()
    pending: dict[socket.socket, bytearray] = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        pending[s] = bytearray()
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            buf = pending[s]
            buf += chunk
            if not chunk or (len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]):
                if chunk:
                    answered += 1
                sel.unregister(s)
                del pending[s]
    sel.close()
    return socks, answered, errors


def still_open(socks: list[socket.socket]) -> int:
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = 0
    for key, _ in sel.select(timeout=0.5):
        try:
            if key.fileobj.recv(1) == b"":  # type: ignore[union-attr]
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    sel.close()
    return len(socks) - closed


def client_work(bootstrap: str, records: int) -> dict[str, Any]:
    t0 = time.monotonic()
    acked = 0
    errors = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked, errors
        if err is None:
            acked += 1
        else:
            errors += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "logger": QUIET})
    for i in range(records):
        while True:
            try:
                p.produce(TOPIC, key=b"%d" % i, value=b"idle-%d" % i, partition=i % 3,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(120)
    produced_s = time.monotonic() - t0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "idle-check",
                  "enable.auto.commit": False, "logger": QUIET})
    c.assign([TopicPartition(TOPIC, part, 0) for part in range(3)])
    got: dict[bytes, bytes] = {}
    deadline = time.monotonic() + 120
    while len(got) < records and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got[m.key()] = m.value()
    c.close()
    intact = sum(1 for i in range(records) if got.get(b"%d" % i) == b"idle-%d" % i)
    return {"records": records, "acked": acked, "delivery_errors": errors, "unflushed": left,
            "read_back_intact": intact, "produce_s": round(produced_s, 2),
            "produce_consume_s": round(time.monotonic() - t0, 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    limit = raise_nofile()
    with started_broker("idle", args) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": QUIET})
        admin.create_topics([NewTopic(TOPIC, 3)])[TOPIC].result(30)
        warm = client_work(broker.bootstrap, 1000)
        before = (rss(broker.pid), fds(broker.pid))
        t0 = time.monotonic()
        socks, answered, errors = open_idle(broker.port, args.connections)
        open_s = time.monotonic() - t0
        held = (rss(broker.pid), fds(broker.pid))
        probe_held = probe(broker.bootstrap, 10.0)
        work = client_work(broker.bootstrap, args.records)
        time.sleep(args.hold)
        during = (rss(broker.pid), fds(broker.pid))
        open_at_end = still_open(socks)
        for s in socks:
            s.close()
        deadline = time.monotonic() + 30
        while fds(broker.pid) > before[1] + 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        after = (rss(broker.pid), fds(broker.pid))
        probe_after = probe(broker.bootstrap, 10.0)
        result = {
            "connections": args.connections,
            "nofile_limit": limit,
            "opened": len(socks),
            "answered": answered,
            "open_errors": errors[:5],
            "open_s": round(open_s, 1),
            "still_open_at_end": open_at_end,
            "client": work,
            "client_ok": (work["acked"] == work["records"]
                          and work["read_back_intact"] == work["records"]),
            "warmup_client": warm,
            "rss_mib": {"before": mib(before[0]), "held": mib(held[0]),
                        "held_after_work": mib(during[0]), "after_close": mib(after[0])},
            "fds": {"before": before[1], "held": held[1], "held_after_work": during[1],
                    "after_close": after[1]},
            "rss_kib_per_connection": round((held[0] - before[0]) / 1024 / max(1, len(socks)), 1),
            "probe_s_while_held": probe_held,
            "probe_s_after": probe_after,
            "broker_alive_at_end": broker.alive(),
            "tracebacks": broker.tracebacks(),
            "overrides": parse_overrides(args.override),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--hold", type=float, default=10.0, help="extra seconds to hold them idle")
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--quick", action="store_true", help="CI size: 1,000 connections")
    args = ap.parse_args(argv)
    if args.quick:
        args.connections = min(args.connections, 1000)
        args.records = min(args.records, 5000)
        args.hold = 1.0
    r = run(args)
    path = write_result(args.out, "idle", r)
    print(f"idle: {r['opened']:,}/{r['connections']:,} opened, {r['answered']:,} answered, "
          f"{r['still_open_at_end']:,} still open; client ok {r['client_ok']} "
          f"({r['client']['produce_consume_s']} s); RSS MiB {r['rss_mib']}; fds {r['fds']}; {path}")
    ok = r["client_ok"] and r["answered"] == r["connections"] and r["broker_alive_at_end"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
