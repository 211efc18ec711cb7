"""Produce over many connections: N raw-socket producers in one asyncio process.

``produce_connections(bootstrap, topic, partitions, connections, seconds)`` opens
``connections`` TCP connections, then each sends the same pre-encoded ProduceRequest (v9,
acks=1, one RecordBatch of ``BATCH_RECORDS`` x ``size`` B, no producer id: the broker
assigns offsets, so the one frame can be sent again and again) to partition
``i % partitions``, keeping ``DEPTH`` requests in flight (the Java producer's
``max.in.flight.requests.per.connection``), for ``seconds``. Returned: records
acknowledged in that window per second, requests, the client's CPU seconds over the
window (so a reader can tell whether the client was the cap), the broker's CPU seconds
over the same window, and the error codes seen
(every ``CHECK_EVERY``-th response of each connection is decoded; any error stops the
run). Responses are counted by their frames; nothing is decoded on the hot path, so the
client costs a few microseconds per request.
"""

from __future__ import annotations

import asyncio
import struct
import time

from bench.brokers import usage
from spool.protocol._generated import ProduceRequest, ProduceResponse
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.headers import encode_request_header
from spool.records.builder import BatchBuilder

VERSION = 9
BATCH_RECORDS = 16
DEPTH = 5
CHECK_EVERY = 100
_SIZE = struct.Struct(">i")


def produce_frame(topic: str, partition: int, records: int, size: int) -> bytes:
    """One size-prefixed ProduceRequest frame: a batch of ``records`` x ``size`` B."""
    b = BatchBuilder()
    value = b"x" * size
    for i in range(records):
        b.append(None, value, timestamp=1_700_000_000_000 + i)
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[
            PartitionProduceData(index=partition, records=b.build())])])
    payload = encode_request_header(0, VERSION, 1, "scale", True) + req.to_bytes(VERSION)
    return _SIZE.pack(len(payload)) + payload


class _Producer(asyncio.Protocol):
    def __init__(self, frame: bytes, run: _Run) -> None:
        self.frame, self.run = frame, run
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.answers = 0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def start(self) -> None:
        assert self.transport is not None
        self.transport.write(self.frame * DEPTH)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, done = 0, 0
        while len(buf) - pos >= 4:
            (n,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < n:
                break
            self.answers += 1
            if self.answers % CHECK_EVERY == 1:
                self.run.check(bytes(buf[pos + 4: pos + 4 + n]))
            pos += 4 + n
            done += 1
        if pos:
            del buf[:pos]
        if done:
            self.run.acked(done)
            if self.run.sending and self.transport is not None:
                self.transport.write(self.frame * done)

    def connection_lost(self, exc) -> None:
        if self.run.sending:
            self.run.lost += 1


class _Run:
    def __init__(self, records_per_request: int) -> None:
        self.per = records_per_request
        self.sending = False
        self.counting = False
        self.requests = 0
        self.lost = 0
        self.errors: set[int] = set()

    def acked(self, n: int) -> None:
        if self.counting:
            self.requests += n

    def check(self, frame: bytes) -> None:
        # header v1 of a flexible response: correlation id + empty tagged fields
        resp = ProduceResponse.from_bytes(frame[5:], VERSION)
        for t in resp.responses:
            for p in t.partition_responses:
                if p.error_code:
                    self.errors.add(p.error_code)
                    self.sending = False


async def _main(host: str, port: int, frames: list[bytes], connections: int,
                seconds: float, pid: int) -> dict:
    loop = asyncio.get_running_loop()
    run = _Run(BATCH_RECORDS)
    conns: list[_Producer] = []
    for start in range(0, connections, 100):  # connect in waves: no accept-queue overflow
        made = await asyncio.gather(*(
            loop.create_connection(lambda i=i: _Producer(frames[i % len(frames)], run), host, port)
            for i in range(start, min(connections, start + 100))))
        conns += [p for _t, p in made]
    run.sending = True
    for c in conns:
        c.start()
    await asyncio.sleep(min(1.0, seconds / 4))  # warm up: every connection answered once
    b0, cpu0, t0 = usage(pid)[0], time.process_time(), time.perf_counter()
    run.counting = True
    await asyncio.sleep(seconds)
    run.counting = False
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    broker_cpu = usage(pid)[0] - b0
    run.sending = False
    await asyncio.sleep(0.2)
    for c in conns:
        if c.transport is not None:
            c.transport.close()
    await asyncio.sleep(0.05)
    return {"records_per_s": run.requests * BATCH_RECORDS / elapsed,
            "requests": run.requests, "seconds": elapsed, "client_cpu": cpu,
            "broker_cpu": broker_cpu, "errors": sorted(run.errors),
            "closed_by_broker": run.lost}


def produce_connections(bootstrap: str, pid: int, topic: str, partitions: int,
                        connections: int, seconds: float, size: int = 1024) -> dict:
    """Throughput of ``connections`` producers (module docstring); ``broker_cpu``: the CPU
    seconds of process ``pid`` over the counted window."""
    host, port = bootstrap.rsplit(":", 1)
    frames = [produce_frame(topic, p, BATCH_RECORDS, size) for p in range(partitions)]
    return asyncio.run(_main(host, int(port), frames, connections, seconds, pid))
