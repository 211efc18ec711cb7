"""The fault proxy itself: bytes flow when open, stall and resume intact across a blackhole,
are reset when refused, and FaultNet cuts exactly the links a partition names."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.helpers.fault_proxy import FaultNet, LinkProxy, Mode


class EchoServer:
    """Echoes every byte back on each connection; counts accepted connections."""

    def __init__(self) -> None:
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def close(self) -> None:
        self.srv.close()


@pytest.fixture
def echo():
    e = EchoServer()
    yield e
    e.close()


def dial(port: int, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def test_open_link_forwards_both_ways(echo):
    link = LinkProxy(("127.0.0.1", echo.port))
    try:
        with dial(link.port) as s:
            payload = bytes(range(256)) * 1000
            s.sendall(payload)
            assert recv_exactly(s, len(payload)) == payload
        # the proxy counts a chunk after it has passed it on: the client may read the last
        # chunk before the count moves, so wait for the count (bounded), then assert it
        deadline = time.monotonic() + 5
        while link.bytes_forwarded < 2 * len(payload) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert link.bytes_forwarded == 2 * len(payload)
    finally:
        link.close()


def test_blackhole_stalls_then_heal_resumes_the_stream_intact(echo):
    link = LinkProxy(("127.0.0.1", echo.port))
    try:
        s = dial(link.port, timeout=0.5)
        s.sendall(b"before")
        assert recv_exactly(s, 6) == b"before"
        link.cut(Mode.BLACKHOLE)
        s.sendall(b"during-the-cut")
        with pytest.raises(TimeoutError):
            s.recv(100)
        s2 = dial(link.port, timeout=0.5)  # a new connection is accepted, then stalls
        s2.sendall(b"new")
        with pytest.raises(TimeoutError):
            s2.recv(100)
        link.heal()
        s.settimeout(5)
        s2.settimeout(5)
        assert recv_exactly(s, 14) == b"during-the-cut"
        assert recv_exactly(s2, 3) == b"new"
        s.close()
        s2.close()
    finally:
        link.close()


def test_refuse_resets_open_connections_and_new_ones_until_healed(echo):
    link = LinkProxy(("127.0.0.1", echo.port))
    try:
        s = dial(link.port)
        s.sendall(b"x")
        assert recv_exactly(s, 1) == b"x"
        link.cut(Mode.REFUSE)
        with pytest.raises((ConnectionError, OSError)):
            s.sendall(b"y")
            if not s.recv(1):
                raise ConnectionError("closed")
        s.close()
        # a new connection is reset: at the connect itself (the proxy accepts and resets
        # before the client's connect returns, seen under load) or at the first read
        with pytest.raises((ConnectionError, OSError)) as refused:
            s2 = dial(link.port)
            try:
                if not s2.recv(1):
                    raise ConnectionError("closed")
            finally:
                s2.close()
        assert not isinstance(refused.value, TimeoutError), "stalled, not refused"
        link.heal()
        with dial(link.port) as s3:
            s3.sendall(b"z")
            assert recv_exactly(s3, 1) == b"z"
    finally:
        link.close()


def test_a_dead_target_is_a_refused_connection():
    with socket.create_server(("127.0.0.1", 0)) as tmp:
        port = tmp.getsockname()[1]
    link = LinkProxy(("127.0.0.1", port))
    try:
        with pytest.raises((ConnectionError, OSError)) as refused:  # at connect or first read
            s = dial(link.port)
            try:
                if not s.recv(1):
                    raise ConnectionError("closed")
            finally:
                s.close()
        assert not isinstance(refused.value, TimeoutError), "stalled, not refused"
    finally:
        link.close()


def test_faultnet_partition_cuts_only_links_across_groups(echo):
    e2, e3 = EchoServer(), EchoServer()
    net = FaultNet({1: ("127.0.0.1", echo.port), 2: ("127.0.0.1", e2.port),
                    3: ("127.0.0.1", e3.port)})
    try:
        assert net.address(1, 1) == f"127.0.0.1:{echo.port}"
        assert len({net.address(s, d) for s in (1, 2, 3) for d in (1, 2, 3) if s != d}) == 6
        net.partition([1], [2, 3])
        assert net.cut_links() == [(1, 2), (1, 3), (2, 1), (3, 1)]
        for src, dst in [(2, 3), (3, 2)]:
            host, port = net.address(src, dst).split(":")
            with dial(int(port)) as s:
                s.sendall(b"ok")
                assert recv_exactly(s, 2) == b"ok"
        host, port = net.address(2, 1).split(":")
        with dial(int(port), timeout=0.3) as s:
            s.sendall(b"lost")
            with pytest.raises(TimeoutError):
                s.recv(10)
        net.heal()
        assert net.cut_links() == []
        net.isolate(3, Mode.REFUSE)
        assert net.cut_links() == [(1, 3), (2, 3), (3, 1), (3, 2)]
        net.heal()
        with dial(int(port)) as s:
            s.sendall(b"back")
            assert recv_exactly(s, 4) == b"back"
    finally:
        net.close()
        e2.close()
        e3.close()
