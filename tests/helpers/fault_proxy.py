"""Fault-injecting TCP links between cluster nodes: cut, partition, heal.

``LinkProxy(target)`` listens on an ephemeral 127.0.0.1 port (bound here, so
no other process can take it) and forwards every connection to ``target``
(host, port), byte for byte, in two threads per connection. Its ``mode``:

* ``OPEN``: bytes flow.
* ``BLACKHOLE``: nothing is forwarded in either direction and nothing is
  closed; bytes wait in the kernel's buffers (at most one chunk per
  direction in the proxy). A new connection is accepted and then stalls.
  This is a network partition as TCP sees one: requests time out, no
  error arrives. ``heal()`` resumes every stalled stream intact (as TCP
  would once its retransmissions got through), unless an end gave up and
  closed meanwhile.
* ``REFUSE``: every open connection is reset (RST on both sides) and every
  new one is reset on accept: the peer learns at once that the link is
  down, as with a refused connection.

``FaultNet(targets)`` holds one ``LinkProxy`` per directed pair of nodes
(``src -> dst`` carries the connections ``src`` opens to ``dst``'s
``targets[dst]`` address): ``address(src, dst)`` is what ``src`` must be
configured to dial; ``cut(src, dst)``, ``isolate(node)`` (every link to
and from it), ``partition(group, ...)`` (every link between different
groups) and ``heal()`` change modes; ``retarget(node, addr)`` follows a node
that moved. Links from a node to itself are not proxied. ``close()`` stops
every proxy and closes every connection.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import socket
import struct
import threading
from collections.abc import Iterable


class Mode(enum.Enum):
    OPEN = "open"
    BLACKHOLE = "blackhole"
    REFUSE = "refuse"


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with an RST (SO_LINGER 0) rather than a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class _Conn:
    """One proxied connection: client <-> upstream, two pump threads."""

    def __init__(self, link: LinkProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.link = link
        self.client = client
        self.upstream = upstream
        self.closed = False

    def start(self) -> None:
        for src, dst in ((self.client, self.upstream), (self.upstream, self.client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True,
                             name=f"proxy-{self.link.name}").start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                chunk = src.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            if not self.link._wait_open():
                break
            try:
                dst.sendall(chunk)
            except OSError:
                break
            with self.link._cond:
                self.link.bytes_forwarded += len(chunk)
        self.close(reset=self.link.mode is Mode.REFUSE)

    def close(self, reset: bool = False) -> None:
        with self.link._cond:
            if self.closed:
                return
            self.closed = True
            self.link._conns.discard(self)
        for s in (self.client, self.upstream):
            if reset:
                _reset(s)
            else:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


class LinkProxy:
    """One directed link to ``target``; see the module doc for its modes."""

    def __init__(self, target: tuple[str, int], name: str = "") -> None:
        self.target = target
        self.name = name or f"->{target[1]}"
        self.mode = Mode.OPEN
        self.bytes_forwarded = 0
        self.connections_accepted = 0
        self._cond = threading.Condition()
        self._conns: set[_Conn] = set()
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._srv.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"proxy-accept-{self.name}").start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        with self._cond:
            return len(self._conns)

    def set_mode(self, mode: Mode) -> None:
        with self._cond:
            self.mode = mode
            self._cond.notify_all()
            conns = list(self._conns) if mode is Mode.REFUSE else []
        for c in conns:
            c.close(reset=True)

    def cut(self, mode: Mode = Mode.BLACKHOLE) -> None:
        self.set_mode(mode)

    def heal(self) -> None:
        self.set_mode(Mode.OPEN)

    def close(self) -> None:
        self._closed = True
        with self._cond:
            self._cond.notify_all()
            conns = list(self._conns)
        with contextlib.suppress(OSError):  # wakes the accept thread (close alone does not)
            self._srv.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._srv.close()
        for c in conns:
            c.close()

    def _wait_open(self) -> bool:
        """Block while the link is blackholed; False once it refuses or is closed."""
        with self._cond:
            while self.mode is Mode.BLACKHOLE and not self._closed:
                self._cond.wait()
            return self.mode is Mode.OPEN and not self._closed

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            with self._cond:
                self.connections_accepted += 1
                refuse = self.mode is Mode.REFUSE
            if refuse:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)  # the target is down: the dialer sees a refused connection
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(self, client, upstream)
            with self._cond:
                if self._closed:
                    conn.closed = True
                self._conns.add(conn)
            if conn.closed:
                client.close()
                upstream.close()
                return
            conn.start()


class FaultNet:
    """A proxy for every directed pair of ``targets``' nodes (see the module doc)."""

    def __init__(self, targets: dict[int, tuple[str, int]]) -> None:
        self.targets = dict(targets)
        self.links: dict[tuple[int, int], LinkProxy] = {}
        for src, dst in itertools.permutations(sorted(self.targets), 2):
            self.links[src, dst] = LinkProxy(self.targets[dst], name=f"{src}->{dst}")

    def address(self, src: int, dst: int) -> str:
        if src == dst:
            host, port = self.targets[dst]
            return f"{host}:{port}"
        return self.links[src, dst].address

    def retarget(self, node: int, target: tuple[str, int]) -> None:
        self.targets[node] = target
        for (_, dst), link in self.links.items():
            if dst == node:
                link.target = target

    def cut(self, src: int, dst: int, mode: Mode = Mode.BLACKHOLE, both_ways: bool = True) -> None:
        self.links[src, dst].cut(mode)
        if both_ways:
            self.links[dst, src].cut(mode)

    def isolate(self, node: int, mode: Mode = Mode.BLACKHOLE) -> None:
        for (src, dst), link in self.links.items():
            if node in (src, dst):
                link.cut(mode)

    def partition(self, *groups: Iterable[int], mode: Mode = Mode.BLACKHOLE) -> None:
        """Cut every link between nodes of different groups; nodes in no group stay linked
        to everyone."""
        side = {n: i for i, g in enumerate(groups) for n in g}
        for (src, dst), link in self.links.items():
            if src in side and dst in side and side[src] != side[dst]:
                link.cut(mode)

    def heal(self) -> None:
        for link in self.links.values():
            link.heal()

    def cut_links(self) -> list[tuple[int, int]]:
        return sorted(k for k, link in self.links.items() if link.mode is not Mode.OPEN)

    def close(self) -> None:
        for link in self.links.values():
            link.close()
