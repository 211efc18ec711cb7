"""A TCP proxy between a Kafka client and the broker that can lose a Produce response.

``CutProxy(listen_port)`` accepts clients on 127.0.0.1 and forwards each
connection to ``target`` (set once the broker is up). It follows the request
frames to learn which correlation ids are Produce (API 0) requests; for the
Produce responses numbered in ``cut_after`` (1-based, counted over all
connections) it drops the response and closes both sides, so the broker
has appended the batch but the client never hears about it and retries.
Start the broker with ``advertised.listeners`` pointing at the proxy so the
client keeps talking through it.
"""

from __future__ import annotations

import socket
import struct
import threading


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CutProxy:
    def __init__(self, listen_port: int, cut_after: set[int]) -> None:
        self.port = listen_port
        self.cut_after = set(cut_after)
        self.target: tuple[str, int] | None = None
        self.produce_responses = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._srv = socket.create_server(("127.0.0.1", listen_port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._srv.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            produce_ids: set[int] = set()
            threading.Thread(target=self._pump_requests, args=(client, upstream, produce_ids),
                             daemon=True).start()
            threading.Thread(target=self._pump_responses, args=(upstream, client, produce_ids),
                             daemon=True).start()

    @staticmethod
    def _frames(sock: socket.socket):
        buf = b""
        while True:
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                n = 4 + struct.unpack_from(">i", buf)[0]
                yield buf[:n]
                buf = buf[n:]
            try:
                chunk = sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk

    def _pump_requests(self, src, dst, produce_ids: set[int]) -> None:
        for frame in self._frames(src):
            api_key, _, cid = struct.unpack_from(">hhi", frame, 4)
            if api_key == 0:
                produce_ids.add(cid)
            try:
                dst.sendall(frame)
            except OSError:
                break
        _close(src, dst)

    def _pump_responses(self, src, dst, produce_ids: set[int]) -> None:
        for frame in self._frames(src):
            (cid,) = struct.unpack_from(">i", frame, 4)
            if cid in produce_ids:
                with self._lock:
                    self.produce_responses += 1
                    cut = self.produce_responses in self.cut_after
                    self.cuts += cut
                if cut:
                    break
            try:
                dst.sendall(frame)
            except OSError:
                break
        _close(src, dst)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
