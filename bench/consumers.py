"""Consume with several consumer processes, so one client process is not the cap.

    with ConsumerPool(2) as pool:
        seconds, client_cpu = pool.consume(bootstrap, topic, partitions, records)
        seconds, client_cpu = pool.consume(bootstrap, topic, partitions, records,
                                           prefetch=counts, size=1024)

``records`` is how many the topic holds; the workers read until together they have
them all (a shared counter: a broker's high watermarks are not trusted to count them).
Partitions are dealt round-robin to ``min(processes,
partitions)`` worker processes, each a confluent-kafka ``Consumer`` with
``bench.workloads.CONSUMER``'s config, assigned its partitions from offset 0 (no group
protocol: ``assign``). A partition is never split: Kafka gives one partition to one member
of a group, so the 1-partition workloads are read by one process.

Timing: every worker creates its consumer and assigns, then reports ready; the parent
sends "go" to all, and the figure is from the earliest start to the last record any worker
received (the slowest sets it). ``client_cpu`` is the workers' CPU seconds (all their threads) in
that window, summed.

``prefetch=True`` measures the consumer's ceiling: each worker first lets librdkafka
fetch everything it is assigned into its local queue (``queued.min.messages`` and
``queued.max.messages.kbytes`` raised to hold all of it) and waits until its RSS has grown
by at least its share of the payload (``counts[p]``: partition ``p``'s record count, e.g.
its high watermark, times the record size) and then stopped growing for 0.3 s (librdkafka has no public
signal for a full queue that does not consume from it; so use fresh processes, whose heap
has not already grown in an earlier run); then the same timed loop runs
with no broker in the way: the rate at which the same processes can take the same bytes
out of the client.

Workers are started once (spawn) and reused; ``close`` (or leaving the ``with``) ends them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized

PREFETCH = {"queued.min.messages": 10_000_000, "queued.max.messages.kbytes": 2_097_151}
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _wait_prefetched(payload: int, timeout: float = 120.0) -> None:
    """Until this process's RSS grew by ``payload`` bytes and then held still for 0.3 s."""
    start = _rss()
    last, since = start, time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = _rss()
        if now != last:
            last, since = now, time.monotonic()
        elif last - start >= payload and time.monotonic() - since >= 0.3:
            return
    raise RuntimeError(f"prefetch did not complete: RSS +{(last - start) / 1e6:.0f} MB")


def _worker(conn: Connection, total: Synchronized) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from bench.workloads import CONSUMER

    while (task := conn.recv()) is not None:
        conf = {"bootstrap.servers": task["bootstrap"], **CONSUMER,
                **(PREFETCH if task["payload"] else {})}
        c = Consumer(conf)
        try:
            c.assign([TopicPartition(task["topic"], p, 0) for p in task["partitions"]])
            if task["payload"]:
                _wait_prefetched(task["payload"])
            conn.send("ready")
            conn.recv()  # go
            records, got = task["records"], 0
            cpu0, t0 = time.process_time(), time.monotonic()
            last, deadline = t0, t0 + 300
            while total.value < records and time.monotonic() < deadline:
                n = sum(1 for m in c.consume(100_000, 0.05) if m.error() is None)
                if n:
                    last = time.monotonic()
                    got += n
                    with total.get_lock():
                        total.value += n
            cpu1 = time.process_time()
            conn.send({"start": t0, "end": last, "cpu": cpu1 - cpu0, "got": got})
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
            conn.send({"error": repr(e)})
        finally:
            c.close()


class ConsumerPool:
    """``processes`` consumer worker processes (module docstring)."""

    def __init__(self, processes: int) -> None:
        ctx = mp.get_context("spawn")
        self.processes = processes
        self._total = ctx.Value("q", 0)
        self._workers = []
        for _ in range(processes):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, self._total), daemon=True)
            proc.start()
            self._workers.append((proc, parent))

    def __enter__(self) -> ConsumerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for proc, conn in self._workers:
            try:
                conn.send(None)
            except OSError:
                pass
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        self._workers = []

    def consume(self, bootstrap: str, topic: str, partitions: int, records: int,
                prefetch: list[int] | None = None, size: int = 0) -> tuple[float, float]:
        """(seconds, client CPU seconds) to read the ``records`` records of ``topic``
        (module docstring; ``prefetch``: each partition's record count, ``size``: record
        value bytes, for the prefetch ceiling)."""
        n = min(self.processes, partitions)
        shares = [list(range(partitions))[i::n] for i in range(n)]
        used = self._workers[:n]
        self._total.value = 0
        for (_proc, conn), parts in zip(used, shares, strict=True):
            payload = sum(prefetch[p] for p in parts) * size if prefetch else 0
            conn.send({"bootstrap": bootstrap, "topic": topic, "partitions": parts,
                       "records": records, "payload": payload})
        for _proc, conn in used:
            if not conn.poll(180):
                raise RuntimeError("a consumer worker did not get ready")
            msg = conn.recv()
            if msg != "ready":
                raise RuntimeError(f"consumer worker: {msg}")
        for _proc, conn in used:
            conn.send("go")
        results = [conn.recv() for _proc, conn in used]
        for r in results:
            if "error" in r:
                raise RuntimeError(f"consumer worker: {r['error']}")
        if (got := sum(r["got"] for r in results)) != records:
            raise RuntimeError(f"consumed {got} of {records}")
        seconds = max(r["end"] for r in results) - min(r["start"] for r in results)
        return seconds, sum(r["cpu"] for r in results)
