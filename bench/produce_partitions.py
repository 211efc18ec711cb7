"""The broker's cost of a Produce request over many partitions, without a client library.

    python -m bench.produce_partitions [--partitions 64,1000] [--records-per-batch 1]
        [--size 1024] [--requests 2000] [--connections 2] [--in-flight 5] [--runs 3]
        [--profile DIR]

One Spool broker; for each partition count P a topic of P partitions. Each request is
a pre-encoded Produce v9 (acks=1) carrying one batch per partition of
``records-per-batch`` records of ``size`` bytes: small batches over many partitions,
the shape where the per-partition cost dominates. ``connections`` sockets each keep
``in-flight`` requests outstanding (librdkafka's max.in.flight is 5), so the broker is
never idle waiting for the client. Reported per P: partition-batches/s, records/s, and
the broker's CPU seconds per 1,000 partition-batches (``bench.brokers.usage``: less
sensitive to the shared cores than the rates); every answer is checked for errors.
With ``--profile DIR`` py-spy records the broker during the last run of each P.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import workloads
from bench.brokers import Running, spool_broker, usage
from spool.protocol._generated import ProduceRequest, ProduceResponse
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.headers import encode_request_header
from spool.records.builder import BatchBuilder

VERSION = 9
_SIZE = struct.Struct(">i")


def batch(records: int, size: int) -> bytes:
    b = BatchBuilder()
    now = int(time.time() * 1000)
    for _ in range(records):
        b.append(None, b"x" * size, timestamp=now)
    return b.build()


def request_frame(topic: str, partitions: int, records: int, size: int, cid: int) -> bytes:
    one = batch(records, size)
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[
            PartitionProduceData(index=p, records=one) for p in range(partitions)])])
    body = encode_request_header(0, VERSION, cid, "bench", True) + req.to_bytes(VERSION)
    return _SIZE.pack(len(body)) + body


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        if not k:
            raise ConnectionError("broker closed the connection")
        got += k
    return bytes(buf)


def connection(port: int, frame: bytes, requests: int, in_flight: int, errors: list) -> None:
    """Send ``requests`` copies of ``frame`` keeping ``in_flight`` outstanding; check every
    answer."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    window = threading.Semaphore(in_flight)

    def send() -> None:
        for _ in range(requests):
            window.acquire()
            s.sendall(frame)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        for i in range(requests):
            (n,) = _SIZE.unpack(_recv_exact(s, 4))
            data = _recv_exact(s, n)
            window.release()
            if i == 0 or i == requests - 1:  # decode a few: every partition must be 0
                resp = ProduceResponse.decode(data, 5, VERSION)[0]
                bad = [p.error_code for t in resp.responses for p in t.partition_responses
                       if p.error_code]
                if bad:
                    errors.append(bad[:5])
        sender.join()
    finally:
        s.close()


def run(port: int, pid: int, frame: bytes, requests: int, conns: int, in_flight: int,
        partitions: int, records: int) -> dict[str, float]:
    errors: list = []
    per = requests // conns
    threads = [threading.Thread(target=connection, args=(port, frame, per, in_flight, errors))
               for _ in range(conns)]
    cpu0, _ = usage(pid)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = usage(pid)[0] - cpu0
    if errors:
        raise RuntimeError(f"produce errors: {errors}")
    pbatches = per * conns * partitions
    return {"wall_s": wall, "cpu_s": cpu, "pbatches_per_s": pbatches / wall,
            "records_per_s": pbatches * records / wall,
            "cpu_ms_per_1000_pbatches": 1000 * cpu / pbatches * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", default="64,1000")
    ap.add_argument("--records-per-batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=0,
                    help="requests per run (default: about 200,000 partition-batches)")
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--in-flight", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", type=Path, default=None)
    ap.add_argument("--bootstrap", default=None,
                    help="a broker already running (e.g. under cProfile), with --pid")
    ap.add_argument("--pid", type=int, default=0)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, (
            contextlib.nullcontext(Running("spool", args.bootstrap, args.pid)) if args.bootstrap
            else spool_broker(Path(tmp))) as b:
        port = int(b.bootstrap.rsplit(":", 1)[1])
        for p in (int(x) for x in args.partitions.split(",")):
            topic = f"pp-{p}-{time.time_ns()}"
            workloads.create_topic(b.bootstrap, topic, p)
            frame = request_frame(topic, p, args.records_per_batch, args.size, 1)
            requests = args.requests or max(args.connections * 10, 200_000 // p)
            requests -= requests % args.connections
            run(port, b.pid, frame, args.connections * 2, args.connections, args.in_flight,
                p, args.records_per_batch)  # warm up
            results = []
            for i in range(args.runs):
                spy = None
                if args.profile is not None and i == args.runs - 1:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    out = args.profile / f"produce-{p}p-{args.size}b.txt"
                    spy = subprocess.Popen(
                        [str(Path(sys.executable).parent / "py-spy"), "record", "--nonblocking",
                         "-r", "200", "-p", str(b.pid), "-f", "raw", "-o", str(out)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1.0)
                try:
                    results.append(run(port, b.pid, frame, requests, args.connections,
                                       args.in_flight, p, args.records_per_batch))
                finally:
                    if spy is not None:
                        spy.send_signal(2)
                        spy.wait(30)
            med = {k: statistics.median(r[k] for r in results) for k in results[0]}
            each = ", ".join(f"{r['cpu_ms_per_1000_pbatches']:.2f}" for r in results)
            print(f"{p:5d} partitions x {args.records_per_batch} x {args.size} B: "
                  f"{med['pbatches_per_s']:10,.0f} partition-batches/s "
                  f"{med['records_per_s']:10,.0f} records/s  broker CPU "
                  f"{med['cpu_ms_per_1000_pbatches']:.2f} ms per 1,000 partition-batches "
                  f"(runs: {each})",
                  flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
