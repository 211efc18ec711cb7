"""Start-up time of a Spool broker holding many partitions, after SIGTERM and after kill -9.

``startup(tmp, partitions, runs)``: a fresh broker gets ``partitions / 100`` topics of 100
partitions each, and every partition one batch (``fill``: 10 records of 100 B per
partition, sent at once by one producer with linger.ms=100, about one batch each). Then,
``runs`` times: SIGTERM (a clean stop, timed too) and a start, timed; then one more batch
per partition, kill -9 and a start, timed. A start is timed from just before the
process is spawned (``Popen``) to

- ``listening``: the port accepts a TCP connection;
- ``metadata``: a Metadata request (v12, the bench's topics) answers every partition with
  no error and a leader;
- ``produce``: a Produce (v9, acks=1, one record to partition 0 of the first topic) is
  acknowledged with no error.

Each is polled from its own thread every ``POLL_S`` (the resolution) over one connection,
made again when it fails. Time for the fill, the clean stop and the broker's CPU seconds
at ``metadata`` are recorded too.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from bench.brokers import usage
from spool.protocol._generated import MetadataRequest, ProduceRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient

POLL_S = 0.02
TOPIC_PARTITIONS = 100
TIMEOUT_S = 600.0
# Room for 10,000 user partitions: the internal topics keep 1 partition each (their 50
# defaults would be reserved out of the limit); the descriptor limit still caps it.
OVERRIDES = {"max.broker.partitions": "20000", "offsets.topic.num.partitions": "1",
             "transaction.state.log.num.partitions": "1",
             "share.coordinator.state.topic.num.partitions": "1"}


def topics_for(partitions: int, tag: str) -> list[tuple[str, int]]:
    """(name, partition count): topics of ``TOPIC_PARTITIONS`` summing to ``partitions``."""
    out, left, i = [], partitions, 0
    while left > 0:
        n = min(TOPIC_PARTITIONS, left)
        out.append((f"scale-{tag}-{i:04d}", n))
        left, i = left - n, i + 1
    return out


def fill(bootstrap: str, topics: list[tuple[str, int]], records: int = 10) -> float:
    """Seconds to write ``records`` x 100 B to every partition (about one batch each)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "acks": "1",
                  "queue.buffering.max.messages": 2_000_000, "batch.size": 1 << 20})
    t0 = time.perf_counter()
    for name, n in topics:
        for part in range(n):
            for _ in range(records):
                p.produce(name, b"y" * 100, partition=part)
        p.poll(0)
    left = p.flush(300)
    if left:
        raise RuntimeError(f"fill: {left} records not delivered")
    return time.perf_counter() - t0


def _poll(port: int, ask, out: dict, key: str, t0: float, stop: threading.Event) -> None:
    """Until ``ask(client)`` is true: ``out[key]`` = seconds since ``t0``."""
    client: RawClient | None = None
    while not stop.is_set():
        try:
            if client is None:
                client = RawClient(f"127.0.0.1:{port}", timeout=60)
            if ask(client):
                out[key] = time.perf_counter() - t0
                break
        except (OSError, ConnectionError, AssertionError):
            if client is not None:
                client.close()
            client = None
        time.sleep(POLL_S)
    if client is not None:
        client.close()


def _listening(port: int, out: dict, t0: float, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            out["listening"] = time.perf_counter() - t0
            return
        time.sleep(POLL_S)


def timed_start(b: BrokerProcess, topics: list[tuple[str, int]]) -> dict[str, float]:
    """Start ``b`` (on its previous port) and time it (module docstring)."""
    expected = sum(n for _t, n in topics)
    md_req = MetadataRequest(topics=[MetadataRequestTopic(name=t) for t, _n in topics],
                             allow_auto_topic_creation=False)
    batch = BatchBuilder()
    batch.append(None, b"z" * 100, timestamp=1_700_000_000_000)
    pr_req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        TopicProduceData(name=topics[0][0], partition_data=[
            PartitionProduceData(index=0, records=batch.build())])])

    def metadata_ready(c: RawClient) -> bool:
        resp = c.request(3, 12, md_req)
        return sum(1 for t in resp.topics if t.error_code == 0 for p in t.partitions
                   if p.error_code == 0 and p.leader_id >= 0) == expected

    def produce_ready(c: RawClient) -> bool:
        resp = c.request(0, 9, pr_req)
        return resp.responses[0].partition_responses[0].error_code == 0

    out: dict[str, float] = {}
    stop = threading.Event()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=_listening, args=(b.port, out, t0, stop)),
               threading.Thread(target=_poll, args=(b.port, metadata_ready, out, "metadata",
                                                    t0, stop)),
               threading.Thread(target=_poll, args=(b.port, produce_ready, out, "produce",
                                                    t0, stop))]
    for t in threads:
        t.start()
    try:
        b.start(timeout=TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while not {"listening", "metadata", "produce"} <= out.keys():
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker not serving after {TIMEOUT_S} s: {out}")
            time.sleep(POLL_S)
        assert b.proc is not None
        out["cpu_at_ready"] = usage(b.proc.pid)[0]
    finally:
        stop.set()
        for t in threads:
            t.join(70)
    return out


def startup(tmp: Path, partitions: int, runs: int) -> dict:
    """Start-up figures of a broker with ``partitions`` partitions (module docstring)."""
    topics = topics_for(partitions, str(partitions))
    b = BrokerProcess(tmp / f"startup-{partitions}", OVERRIDES)
    res: dict = {"partitions": partitions, "topics": len(topics), "clean": [], "kill9": [],
                 "stop_s": []}
    try:
        b.start(timeout=TIMEOUT_S)
        t0 = time.perf_counter()
        from bench.workloads import create_topic

        for name, n in topics:
            create_topic(b.bootstrap, name, n)
        res["create_s"] = time.perf_counter() - t0
        res["fill_s"] = fill(b.bootstrap, topics)
        for run in range(runs):
            t0 = time.perf_counter()
            b.stop(TIMEOUT_S)
            res["stop_s"].append(time.perf_counter() - t0)
            res["clean"].append(timed_start(b, topics))
            fill(b.bootstrap, topics, 1)
            b.kill()
            res["kill9"].append(timed_start(b, topics))
            print(f"startup {partitions} partitions, run {run + 1}/{runs}: clean "
                  f"{res['clean'][-1]}, kill -9 {res['kill9'][-1]}", flush=True)
    finally:
        b.stop(60)
    return res
