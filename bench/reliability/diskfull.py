"""Disk full and freed again: the broker stays up and nothing acknowledged is lost.

    python -m bench.reliability.diskfull [--size-mib 96] [--cycles 3] [--quick]

Needs root (it mounts a tmpfs of ``--size-mib`` MiB as ``log.dirs`` and
unmounts it at the end). Starts a broker on it (1 MiB segments and indexes,
so rolls happen while the disk fills; its log goes elsewhere), creates a
topic, and a confluent-kafka producer (acks=all, 10 s message timeout)
writes 1 KiB records as fast as it can while a cycle runs. Each of
``--cycles`` cycles fills the free space but ``--headroom-mib`` with a
filler file, lets the producer go, waits until no record has been acknowledged for ``--stall``
seconds and ``--observe`` more (the client's errors while full), checks the
broker (process alive, an ApiVersions probe answered), deletes the filler,
and measures the seconds until 100 more records are acknowledged (then the
producer pauses, so the next filler has the freed space); if none come
within ``--resume-limit`` the broker is restarted and that is recorded.
A last cycle (``--restart-while-full``, on by default) kills the broker with
SIGKILL while the disk is full and starts it again before freeing the space.
At the end every partition is read back.

Recorded in ``docs/reliability/diskfull.json`` per cycle: records acked
before the disk filled, delivery errors by name, broker alive and answering
while full, its exit code if it died, the restart-while-full outcome, seconds
until writes resume after space returns; overall: acked records missing on
read-back (must be 0), broker crashes, storage error lines and tracebacks in
the broker log.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reliability.common import (
    DEFAULT_OUT,
    Broker,
    keep_log,
    parse_overrides,
    probe,
    write_result,
)

TOPIC = "full"
PARTITIONS = 3
QUIET = logging.getLogger("diskfull.librdkafka")
QUIET.setLevel(logging.CRITICAL)
OVERRIDES = {"log.segment.bytes": "1048576", "log.index.size.max.bytes": "1048576"}


@contextlib.contextmanager
def tmpfs(path: Path, size_mib: int):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)],
                   check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(filler: Path, leave: int) -> int:
    """Grow ``filler`` until ``leave`` bytes are free (written, not sparse); its size."""
    chunk = b"\0" * (1 << 20)
    with open(filler, "ab") as f:
        while free_bytes(filler.parent) - len(chunk) > leave:
            try:
                f.write(chunk)
                f.flush()
            except OSError:
                break
    return filler.stat().st_size


class Writer:
    """A producer thread writing ``w<n>`` records as fast as the client accepts them."""

    def __init__(self, bootstrap: str) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: collections.Counter[str] = collections.Counter()
        self.last_ack = time.monotonic()
        self.n = 0
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                           "message.timeout.ms": 10_000, "queue.buffering.max.messages": 5000,
                           "reconnect.backoff.max.ms": 500, "logger": QUIET})
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err: Any, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value()[:16]
                self.last_ack = time.monotonic()
            else:
                self.errors[err.name()] += 1

    def _run(self) -> None:
        pad = b"." * 1000
        while not self._stop.is_set():
            if self.paused.is_set():
                self.p.poll(0.05)
                continue
            try:
                self.p.produce(TOPIC, value=b"w%015d" % self.n + pad, partition=self.n % PARTITIONS,
                               on_delivery=self._done)
                self.n += 1
            except BufferError:
                self.p.poll(0.05)
                continue
            self.p.poll(0)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def acks(self) -> int:
        with self.lock:
            return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.p.flush(30)


def wait_stall(w: Writer, stall: float, limit: float) -> float:
    """Seconds until no ack came for ``stall`` seconds (or ``limit`` passed)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        time.sleep(0.2)
        if time.monotonic() - w.last_ack > stall:
            break
    return time.monotonic() - t0


def fill_until_stalled(broker: Broker, w: Writer, filler: Path, mnt: Path,
                       args: argparse.Namespace) -> dict[str, Any]:
    w.p.flush(30)  # the writer is paused: nothing of its lands after the filler
    filler_bytes = fill(filler, args.headroom_mib << 20)
    w.last_ack = time.monotonic()
    w.paused.clear()
    before = w.acks()
    with w.lock:
        errors_before = collections.Counter(w.errors)
    fill_s = wait_stall(w, args.stall, args.fill_limit)
    time.sleep(args.observe)  # what the client hears while the disk stays full
    with w.lock:
        errors = dict(w.errors - errors_before)
    return {
        "filler_mib": round(filler_bytes / (1 << 20), 1),
        "free_kib_when_stalled": free_bytes(mnt) // 1024,
        "acked_while_filling": w.acks() - before,
        "seconds_to_stall": round(fill_s, 1),
        "delivery_errors_while_full": errors,
        "broker_alive_while_full": broker.alive(),
        "probe_s_while_full": probe(broker.bootstrap, 5.0) if broker.alive() else None,
    }


def read_back(bootstrap: str) -> dict[tuple[int, int], bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "diskfull-check",
                  "enable.auto.commit": False, "logger": QUIET})
    out: dict[tuple[int, int], bytes] = {}
    try:
        for part in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, part), timeout=30)
            c.assign([TopicPartition(TOPIC, part, lo)])
            deadline = time.monotonic() + 120
            last = lo - 1
            while last < hi - 1 and time.monotonic() < deadline:
                for m in c.consume(10_000, 1.0):
                    if m.error() is None:
                        out[(part, m.offset())] = m.value()[:16]
                        last = m.offset()
    finally:
        c.close()
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    if os.geteuid() != 0:
        raise SystemExit("diskfull: needs root to mount a tmpfs")
    with tempfile.TemporaryDirectory(prefix="spool-diskfull-") as tmp, \
            tmpfs(Path(tmp) / "mnt", args.size_mib) as mnt:
        overrides = {**OVERRIDES, **parse_overrides(args.override)}
        broker = Broker(mnt / "data", overrides)
        broker.log_path = Path(tmp) / "broker.log"  # the log must not land on the full disk
        broker.start()
        crashes: list[int | None] = []
        cycles: list[dict[str, Any]] = []
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": QUIET})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(30)
            filler = mnt / "filler.bin"
            w = Writer(broker.bootstrap)
            w.paused.set()
            w.start()
            for cycle in range(args.cycles + (1 if args.restart_while_full else 0)):
                restart_full = cycle == args.cycles
                c = fill_until_stalled(broker, w, filler, mnt, args)
                if not broker.alive():
                    crashes.append(broker.proc.returncode if broker.proc else None)
                    c["exit_code_when_full"] = crashes[-1]
                if restart_full:
                    broker.kill()
                    try:
                        c["restart_while_full_s"] = round(broker.timed_start(60), 2)
                        time.sleep(1.0)
                        c["alive_after_restart_while_full"] = broker.alive()
                        c["probe_s_after_restart_while_full"] = probe(broker.bootstrap, 5.0)
                    except RuntimeError as e:
                        c["restart_while_full_failed"] = str(e)[-400:]
                filler.unlink()
                freed_at = time.monotonic()
                base = w.acks()
                while w.acks() < base + 100 and time.monotonic() - freed_at < args.resume_limit:
                    time.sleep(0.05)
                    if not broker.alive():
                        break
                c["resumed_without_restart"] = w.acks() >= base + 100
                c["seconds_to_resume"] = round(time.monotonic() - freed_at, 2)
                if not c["resumed_without_restart"]:
                    if not broker.alive():
                        crashes.append(broker.proc.returncode if broker.proc else None)
                        c["exit_code_after_free"] = crashes[-1]
                    broker.kill()
                    c["restart_after_free_s"] = round(broker.timed_start(60), 2)
                    base = w.acks()
                    t1 = time.monotonic()
                    while w.acks() < base + 100 and time.monotonic() - t1 < args.resume_limit:
                        time.sleep(0.05)
                    c["resumed_after_restart"] = w.acks() >= base + 100
                # the next cycle's filler, not this writer, takes the freed space back
                w.paused.set()
                w.p.flush(30)
                c["phase"] = "kill -9 and restart while full" if restart_full else "fill and free"
                cycles.append(c)
                print(f"  cycle {cycle + 1}: {c}", flush=True)
            w.stop()
            stored = read_back(broker.bootstrap)
            missing = [k for k, v in w.acked.items() if stored.get(k) != v]
            storage_lines = (broker.log_lines(b"No space", 3) + broker.log_lines(b"STORAGE", 3)
                             + broker.log_lines(b"Errno 28", 3))
            result = {
                "tmpfs_mib": args.size_mib,
                "headroom_mib": args.headroom_mib,
                "cycles": cycles,
                "acked": len(w.acked),
                "acked_lost": len(missing),
                "lost_examples": [list(k) for k in missing[:5]],
                "stored": len(stored),
                "delivery_errors": dict(w.errors),
                "broker_crashes": len(crashes),
                "crash_exit_codes": crashes,
                "every_cycle_resumed": all(c["resumed_without_restart"]
                                           or c.get("resumed_after_restart") for c in cycles),
                "every_cycle_resumed_without_restart": all(c["resumed_without_restart"]
                                                           for c in cycles),
                "broker_alive_at_end": broker.alive(),
                "storage_error_log_lines": storage_lines,
                "tracebacks": broker.tracebacks(),
                "traceback_examples": broker.log_lines(b"Traceback", 3),
                "overrides": overrides,
            }
        finally:
            broker.stop()
            keep_log(broker, args.out / "diskfull-broker.log")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=96)
    ap.add_argument("--headroom-mib", type=int, default=16)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--stall", type=float, default=5.0, help="seconds without an ack = full")
    ap.add_argument("--fill-limit", type=float, default=120.0)
    ap.add_argument("--observe", type=float, default=12.0,
                    help="seconds to stay full after the stall (> the client's 10 s timeout)")
    ap.add_argument("--resume-limit", type=float, default=30.0,
                    help="seconds to wait for acks after space returns before restarting")
    ap.add_argument("--restart-while-full", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--quick", action="store_true",
                    help="CI size: one fill-and-free cycle and the restart-while-full one, 48 MiB")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mib, args.headroom_mib, args.cycles = 48, 8, 1
        args.stall, args.observe, args.resume_limit = 3.0, 11.0, 15.0
    r = run(args)
    path = write_result(args.out, "diskfull", r)
    print(f"diskfull: {r['acked']:,} acked, lost {r['acked_lost']}, crashes {r['broker_crashes']} "
          f"{r['crash_exit_codes']}, resumed {r['every_cycle_resumed']}, "
          f"tracebacks {r['tracebacks']}; {path}")
    ok = r["acked_lost"] == 0 and r["broker_crashes"] == 0 and r["every_cycle_resumed"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
