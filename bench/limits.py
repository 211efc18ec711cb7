"""Physical limits measured in the same run: disk writes, file-to-socket, raw fetch.

* ``sequential_write(dir, nbytes)``: MB/s of a plain 1 MiB-chunk ``os.write``
  of ``nbytes`` to a new file on the same disk (page cache, then fsync).
* ``file_to_socket(path)``: MB/s moving a file over a loopback TCP
  connection to a reader draining into a buffer, with ``sendfile`` and with
  read+send; the faster is the machine's file-to-loopback-socket limit.
* ``raw_fetch(bootstrap, topic, partition)``: MB/s of record bytes pulled
  with large FetchRequests (v11, 64 MiB) from a broker by a minimal socket
  client on our own codec: no client library in the way.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import threading
import time
from pathlib import Path

from spool.protocol._generated import FetchRequest, FetchResponse
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol.headers import encode_request_header
from spool.records.batch import iter_batches

MiB = 1 << 20
FETCH_BYTES = 64 * MiB
FETCH_VERSION = 11  # the newest non-flexible version


def sequential_write(directory: Path, nbytes: int) -> dict[str, float]:
    path = directory / "sequential-write.bin"
    chunk = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        left = nbytes
        while left > 0:
            left -= os.write(fd, chunk[: min(MiB, left)])
        t1 = time.perf_counter()
        os.fsync(fd)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        path.unlink()
    return {"page cache MB/s": nbytes / (t1 - t0) / 1e6, "fsynced MB/s": nbytes / (t2 - t0) / 1e6}


def _drain(sock: socket.socket, total: int, out: list[float]) -> None:
    buf = bytearray(4 * MiB)
    got = 0
    while got < total:
        n = sock.recv_into(buf)
        if n == 0:
            break
        got += n
    out.append(time.perf_counter())


def _pair() -> tuple[socket.socket, socket.socket]:
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    a = socket.create_connection(ls.getsockname())
    b, _ = ls.accept()
    ls.close()
    return a, b


def file_to_socket(path: Path) -> dict[str, float]:
    size = path.stat().st_size
    out: dict[str, float] = {}
    for mode in ("sendfile", "read+send"):
        src, dst = _pair()
        done: list[float] = []
        t = threading.Thread(target=_drain, args=(dst, size, done))
        t.start()
        t0 = time.perf_counter()
        with open(path, "rb") as f:
            if mode == "sendfile":
                off = 0
                while off < size:
                    off += os.sendfile(src.fileno(), f.fileno(), off, size - off)
            else:
                while chunk := f.read(MiB):
                    src.sendall(chunk)
        t.join()
        src.close()
        dst.close()
        out[mode] = size / (done[0] - t0) / 1e6
    out["limit"] = max(out["sendfile"], out["read+send"])
    return out


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> memoryview:
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("broker closed the connection")
        got += k
    return view


def raw_fetch(bootstrap: str, topic: str, partition: int, end_offset: int,
              context: ssl.SSLContext | None = None) -> dict[str, float]:
    """Pull every record from offset 0 to ``end_offset`` with big fetches; MB/s of records
    (over TLS with ``context``; the handshake is not timed)."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    if context is not None:
        sock = context.wrap_socket(sock, server_hostname=host)
    buf = bytearray(FETCH_BYTES + MiB)
    offset, total, cid, requests = 0, 0, 0, 0
    t0 = time.perf_counter()
    while offset < end_offset:
        cid += 1
        req = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=FETCH_BYTES,
                           isolation_level=0, topics=[FetchTopic(topic=topic, partitions=[
                               FetchPartition(partition=partition, fetch_offset=offset,
                                              partition_max_bytes=FETCH_BYTES)])])
        payload = encode_request_header(1, FETCH_VERSION, cid, "raw-fetch", False) + req.to_bytes(FETCH_VERSION)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4, buf))
        frame = _recv_exact(sock, size, buf)
        resp = FetchResponse.from_bytes(frame[4:], FETCH_VERSION)
        records = resp.responses[0].partitions[0].records
        if not records:
            break
        last = None
        for _pos, h in iter_batches(records):
            last = h
        offset = last.next_offset
        total += len(records)
        requests += 1
    elapsed = time.perf_counter() - t0
    sock.close()
    return {"MB/s": total / elapsed / 1e6, "bytes": total, "requests": requests}
