"""The connection layer under abuse: condemned connections, idle and hung-up clients, limits.

Every test drives a broker process of its own over raw sockets and checks
what an operator would: /proc/<pid>/fd, VmRSS in /proc/<pid>/status,
/proc/<pid>/limits, and the broker's log.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import struct
import time
from collections.abc import Callable

import pytest

from spool.protocol._generated import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.headers import encode_request_header
from spool.records.builder import BatchBuilder
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient

TRACEBACKS = ("Traceback", "never retrieved", "CloseConnection")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def socket_count(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return n


def quiet_fds(b: BrokerProcess) -> int:
    """The broker's descriptor count once no client connection is open any more."""
    pid = b.proc.pid
    wait_until(lambda: socket_count(pid) <= b.idle_sockets, 15, "no client connection open")
    return fd_count(pid)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def frame(api_key: int, version: int, request, correlation_id: int = 1) -> bytes:
    from spool.protocol._generated import API_BY_KEY

    flexible = API_BY_KEY[api_key].request.is_flexible(version)
    payload = encode_request_header(api_key, version, correlation_id, "raw", flexible)
    payload += request.to_bytes(version)
    return struct.pack(">i", len(payload)) + payload


def api_versions_ok(bootstrap: str, timeout: float = 10.0) -> bool:
    c = RawClient(bootstrap, timeout=timeout)
    try:
        return c.request(18, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).error_code == 0
    finally:
        c.close()


def topic_exists(bootstrap: str, name: str) -> bool:
    c = RawClient(bootstrap)
    try:
        resp = c.request(3, 12, MetadataRequest(
            topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
        return resp.topics[0].error_code == 0
    finally:
        c.close()


def create_topic(bootstrap: str, name: str) -> None:
    c = RawClient(bootstrap)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(topics=[
            CreatableTopic(name=name, num_partitions=1, replication_factor=1)]))
        assert resp.topics[0].error_code == 0
    finally:
        c.close()


def produce(bootstrap: str, topic: str, value: bytes, batches: int = 1) -> None:
    c = RawClient(bootstrap)
    try:
        for _ in range(batches):
            b = BatchBuilder()
            b.append(b"k", value, timestamp=1_700_000_000_000)
            resp = c.request(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                TopicProduceData(name=topic, partition_data=[
                    PartitionProduceData(index=0, records=b.build())])]))
            assert resp.responses[0].partition_responses[0].error_code == 0
    finally:
        c.close()


def fetch_request(topic: str, max_wait_ms: int, min_bytes: int = 1,
                  max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchTopic(topic=topic, partitions=[FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=max_bytes)])])


def no_tracebacks(b: BrokerProcess) -> None:
    text = b.log_path.read_text(errors="replace")
    for bad in TRACEBACKS:
        assert bad not in text, text[-3000:]


@pytest.fixture
def make_broker(tmp_path):
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, **kw) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"data{len(started)}", overrides, **kw)
        started.append(b)
        b.start()
        b.idle_sockets = socket_count(b.proc.pid)  # listeners: no client has connected yet
        return b

    yield make
    for b in started:
        b.stop()


def open_idle(bootstrap: str, n: int) -> list[socket.socket]:
    host, port = bootstrap.rsplit(":", 1)
    return [socket.create_connection((host, int(port))) for _ in range(n)]


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


# ---- condemned connections


def test_a_request_pipelined_after_a_malformed_one_never_runs(make_broker):
    b = make_broker()
    name = "must-not-exist"
    bad = struct.pack(">hhih", 3, 12, 1, -1) + b"\xff\xff\xff"  # Metadata v12, body cut short
    create = frame(19, 7, CreateTopicsRequest(topics=[
        CreatableTopic(name=name, num_partitions=1, replication_factor=1)]), correlation_id=2)
    c = RawClient(b.bootstrap)
    c.send_raw(struct.pack(">i", len(bad)) + bad + create)
    assert c.is_closed_by_peer()
    c.close()
    assert not topic_exists(b.bootstrap, name)
    no_tracebacks(b)


def test_closed_connections_log_one_line_each_and_no_traceback(make_broker):
    b = make_broker(log_level="INFO")
    bad = struct.pack(">hhih", 3, 12, 1, -1) + b"\xff\xff\xff"
    junk = (struct.pack(">i", len(bad)) + bad) * 20  # twenty bad frames in one write
    for _ in range(50):
        c = RawClient(b.bootstrap)
        c.send_raw(junk)
        assert c.is_closed_by_peer()
        c.close()
    assert api_versions_ok(b.bootstrap)
    b.stop()
    text = b.log_path.read_text(errors="replace")
    for bad_word in TRACEBACKS:
        assert bad_word not in text, text[-3000:]
    closing = [line for line in text.splitlines() if "closing" in line]
    assert 1 <= len(closing) <= 50, closing[:60]


# ---- memory and descriptors of idle connections


def test_idle_connections_cost_little_memory_and_give_it_back(make_broker):
    b = make_broker()
    pid = b.proc.pid
    assert api_versions_ok(b.bootstrap)
    fds0, rss0 = quiet_fds(b), rss_mib(pid)
    socks = open_idle(b.bootstrap, 2000)
    try:
        wait_until(lambda: fd_count(pid) >= fds0 + 2000, 30, "2,000 connections accepted")
        assert api_versions_ok(b.bootstrap)  # a normal client is served meanwhile
        held = rss_mib(pid) - rss0
        assert held < 100, f"2,000 idle connections hold {held:.0f} MiB"
    finally:
        close_all(socks)
    wait_until(lambda: fd_count(pid) <= fds0, 30, "the connections' descriptors released")
    assert api_versions_ok(b.bootstrap)
    left = rss_mib(pid) - rss0
    assert left < 100, f"{left:.0f} MiB still held after the connections closed"
    no_tracebacks(b)


def test_ten_thousand_idle_connections_while_a_client_works(make_broker):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 10_500:
        pytest.skip(f"needs a hard open files limit above 10,500 (is {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    b = make_broker()
    pid = b.proc.pid
    create_topic(b.bootstrap, "busy")
    rss0 = rss_mib(pid)
    socks: list[socket.socket] = []
    try:
        socks = open_idle(b.bootstrap, 10_000)
        produce(b.bootstrap, "busy", b"v" * 100, batches=10)
        c = RawClient(b.bootstrap)
        c.send(1, 12, fetch_request("busy", max_wait_ms=100))
        _, resp = c.recv(1, 12)
        c.close()
        assert resp.responses[0].partitions[0].high_watermark == 10
        assert rss_mib(pid) - rss0 < 400
    finally:
        close_all(socks)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert api_versions_ok(b.bootstrap)
    no_tracebacks(b)


# ---- work of a connection that went away


def test_a_parked_fetch_ends_when_its_client_hangs_up(make_broker):
    # a parked fetch holds its request's bytes until it ends: with this bound, fetches
    # still parked after their clients left would keep every later request unread
    b = make_broker({"queued.max.request.bytes": "4096"})
    pid = b.proc.pid
    create_topic(b.bootstrap, "quiet")
    assert api_versions_ok(b.bootstrap)
    fds0 = quiet_fds(b)
    clients = [RawClient(b.bootstrap) for _ in range(200)]
    for c in clients:
        c.send(1, 12, fetch_request("quiet", max_wait_ms=600_000))
    wait_until(lambda: fd_count(pid) >= fds0 + 200, 30, "200 connections accepted")
    wait_until(lambda: not _accepts(b.bootstrap), 15,
               "the parked fetches to fill queued.max.request.bytes")
    for c in clients:
        c.close()
    # max_wait_ms is ten minutes: the descriptors must go with the clients, not with the wait
    wait_until(lambda: fd_count(pid) <= fds0, 15, "the hung-up fetchers' descriptors released")
    # and so must the parked fetches themselves (their request bytes with them)
    wait_until(lambda: _accepts(b.bootstrap), 15, "the hung-up fetchers' parked fetches ended")
    no_tracebacks(b)


def test_fetches_never_read_pin_bounded_descriptors_released_on_close(make_broker):
    b = make_broker()
    pid = b.proc.pid
    create_topic(b.bootstrap, "big")
    produce(b.bootstrap, "big", os.urandom(512 * 1024), batches=4)
    assert api_versions_ok(b.bootstrap)
    fds0 = quiet_fds(b)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = b.bootstrap.rsplit(":", 1)
    sock.connect((host, int(port)))
    one = frame(1, 12, fetch_request("big", max_wait_ms=0, max_bytes=2 << 20))
    sock.setblocking(False)
    data = one * 1000
    sent = 0
    deadline = time.monotonic() + 10
    while sent < len(data) and time.monotonic() < deadline:  # as much as the broker reads
        try:
            sent += sock.send(data[sent:])
        except BlockingIOError:
            time.sleep(0.01)
    # the broker answers what it read; the answers it cannot send pin descriptors
    wait_until(lambda: fd_count(pid) - fds0 > 100, 15, "unsent answers pinning descriptors")
    peak = 0
    for _ in range(40):  # sample while the broker goes on reading what it may
        peak = max(peak, fd_count(pid) - fds0)
        time.sleep(0.05)
    # the broker stops reading the client before its unsent answers pin a descriptor each
    assert peak < 300, f"{peak} descriptors held for one client that does not read"
    sock.close()
    wait_until(lambda: fd_count(pid) <= fds0, 15, "the unread responses' descriptors released")
    assert api_versions_ok(b.bootstrap)
    no_tracebacks(b)


# ---- limits


def test_max_connections_per_ip_refuses_at_accept(make_broker):
    b = make_broker({"max.connections.per.ip": "5"})
    clients = [RawClient(b.bootstrap) for _ in range(5)]
    for c in clients:
        assert c.request(18, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).error_code == 0
    extra = RawClient(b.bootstrap)
    assert extra.is_closed_by_peer()
    extra.close()
    clients.pop().close()
    wait_until(lambda: fd_count(b.proc.pid) > 0 and _accepts(b.bootstrap), 10,
               "a slot freed by a closed connection")
    for c in clients:
        c.close()
    no_tracebacks(b)


def _accepts(bootstrap: str) -> bool:
    try:
        return api_versions_ok(bootstrap, timeout=2)
    except (ConnectionError, OSError):
        return False


def test_the_open_files_limit_is_raised_to_the_hard_limit(make_broker):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard <= 1024:
        pytest.skip("hard open files limit too low to see it raised")
    b = make_broker(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
    with open(f"/proc/{b.proc.pid}/limits") as f:
        line = next(x for x in f if x.startswith("Max open files"))
    assert line.split()[3:5] == [str(hard), str(hard)]


def test_out_of_descriptors_the_broker_backs_off_and_accepts_again(make_broker):
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    b = make_broker(preexec_fn=low_limit)
    pid = b.proc.pid
    socks = open_idle(b.bootstrap, 400)  # more than the broker can accept: EMFILE
    try:
        wait_until(lambda: fd_count(pid) >= 250, 30, "the broker out of descriptors")
        assert "accept failed" in b.log_path.read_text(errors="replace")
    finally:
        close_all(socks)
    # every connection gone, the broker accepts and serves again
    wait_until(lambda: _accepts(b.bootstrap), 30, "a connection accepted after EMFILE")
    clients = [RawClient(b.bootstrap) for _ in range(50)]  # and many more after that
    for c in clients:
        assert c.request(3, 12, MetadataRequest(topics=[])).topics == []
        c.close()
    assert b.proc.poll() is None


def test_produces_sent_just_before_hanging_up_are_all_appended(make_broker):
    b = make_broker()
    create_topic(b.bootstrap, "last-words")
    frames = b""
    for i in range(200):
        bb = BatchBuilder()
        bb.append(b"k", b"v%d" % i, timestamp=1_700_000_000_000)
        frames += frame(0, 9, ProduceRequest(acks=0, timeout_ms=5000, topic_data=[
            TopicProduceData(name="last-words", partition_data=[
                PartitionProduceData(index=0, records=bb.build())])]), correlation_id=i)
    c = RawClient(b.bootstrap)
    c.send_raw(frames)
    c.close()  # as a producer with acks=0 does once it has sent

    def high_watermark() -> int:
        c = RawClient(b.bootstrap)
        try:
            c.send(1, 12, fetch_request("last-words", max_wait_ms=0))
            return c.recv(1, 12)[1].responses[0].partitions[0].high_watermark
        finally:
            c.close()

    wait_until(lambda: high_watermark() == 200, 15, "the 200 records appended")
    no_tracebacks(b)


def test_max_connections_pauses_accepting_until_one_closes(make_broker):
    b = make_broker({"max.connections": "3"})
    clients = [RawClient(b.bootstrap) for _ in range(3)]
    for c in clients:
        assert c.request(18, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).error_code == 0
    waiting = RawClient(b.bootstrap, timeout=1.0)  # connects: the kernel's backlog holds it
    cid = waiting.send(18, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    with pytest.raises(TimeoutError):
        waiting.recv_frame()  # not accepted while three are open
    assert socket_count(b.proc.pid) == b.idle_sockets + 3
    clients.pop().close()
    waiting.sock.settimeout(10)
    got, resp = waiting.recv(18, 3)
    assert (got, resp.error_code) == (cid, 0)
    for c in [*clients, waiting]:
        c.close()
    no_tracebacks(b)


def test_queued_max_request_bytes_bounds_what_all_connections_hold(make_broker):
    b = make_broker({"queued.max.request.bytes": str(256 << 10)})
    pid = b.proc.pid
    create_topic(b.bootstrap, "bounded")
    produce(b.bootstrap, "bounded", os.urandom(900 << 10))  # a request above the bound goes
    assert api_versions_ok(b.bootstrap)
    rss0 = rss_mib(pid)
    host, port = b.bootstrap.rsplit(":", 1)
    # 16 clients each send half of a 32 MiB request, then nothing more
    part = struct.pack(">i", 32 << 20) + bytes(16 << 20)
    slow = []
    for _ in range(16):
        s = socket.create_connection((host, int(port)))
        s.setblocking(False)
        slow.append([s, 0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(sent < len(part) for _, sent in slow):
        before = sum(sent for _, sent in slow)
        for entry in slow:
            with contextlib.suppress(BlockingIOError):
                entry[1] += entry[0].send(part[entry[1]:entry[1] + (1 << 20)])
        if sum(sent for _, sent in slow) == before:
            time.sleep(0.01)  # the broker reads none of them for now
    grown = rss_mib(pid) - rss0
    assert grown < 100, f"{grown:.0f} MiB of half-read requests held with a 256 KiB bound"
    for s, _ in slow:
        s.close()
    wait_until(lambda: _accepts(b.bootstrap), 15, "a request served once the slow clients left")
    no_tracebacks(b)


def test_hang_up_seen_while_the_broker_has_stopped_reading_the_client(make_broker):
    b = make_broker()
    pid = b.proc.pid
    create_topic(b.bootstrap, "quiet2")
    assert api_versions_ok(b.bootstrap)
    fds0 = quiet_fds(b)
    c = RawClient(b.bootstrap)
    # more parked fetches than one connection may have running: the broker stops reading it
    c.send_raw(frame(1, 12, fetch_request("quiet2", max_wait_ms=600_000)) * 400)
    wait_until(lambda: fd_count(pid) > fds0, 15, "the connection accepted")
    c.close()
    wait_until(lambda: fd_count(pid) <= fds0, 15, "the hung-up client's descriptor released")
    assert api_versions_ok(b.bootstrap)
    no_tracebacks(b)


def test_hang_up_seen_while_requests_wait_unread_in_the_socket(make_broker):
    """The client sends more parked fetches once the broker stopped reading it, then hangs
    up: those bytes wait unread in the socket ahead of the EOF, which a read would only see
    after them, so the broker asks TCP whether the peer closed (CI saw the 400-fetch case
    above end like this under load: part of the 400 came after the broker stopped reading)."""
    b = make_broker()
    pid = b.proc.pid
    create_topic(b.bootstrap, "quiet3")
    fds0 = quiet_fds(b)
    c = RawClient(b.bootstrap)
    one = frame(1, 12, fetch_request("quiet3", max_wait_ms=600_000))
    c.send_raw(one * 300)  # more than one connection may have running: reading stops
    wait_until(lambda: fd_count(pid) > fds0, 15, "the connection accepted")
    time.sleep(1.0)  # the broker dispatched what it may and stopped reading
    c.send_raw(one * 100)  # these wait in the broker's socket buffer, unread
    c.close()
    wait_until(lambda: fd_count(pid) <= fds0, 15, "the hung-up client's descriptor released")
    assert api_versions_ok(b.bootstrap)
    no_tracebacks(b)
