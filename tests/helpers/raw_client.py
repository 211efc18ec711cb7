"""A minimal Kafka client over a plain socket, built on our own codec: for bad-input tests."""

from __future__ import annotations

import socket
import struct

from spool.protocol._generated import API_BY_KEY
from spool.protocol.headers import encode_request_header


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, request, client_id: str | None = "raw") -> int:
        entry = API_BY_KEY[api_key]
        self.correlation_id += 1
        body = request.to_bytes(version)
        header = encode_request_header(
            api_key, version, self.correlation_id, client_id, entry.request.is_flexible(version)
        )
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.correlation_id

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def recv(self, api_key: int, version: int, header_version: int | None = None):
        entry = API_BY_KEY[api_key]
        frame = self.recv_frame()
        flexible = entry.response.is_flexible(version) if header_version is None else header_version
        pos = 4
        if flexible and api_key != 18:
            pos += 1  # empty tagged fields
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        return correlation_id, entry.response.from_bytes(frame[pos:], version)

    def request(self, api_key: int, version: int, request):
        cid = self.send(api_key, version, request)
        got, resp = self.recv(api_key, version)
        assert got == cid
        return resp

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def request_once(bootstrap: str, api_key: int, version: int, request):
    """One request on a fresh connection to `bootstrap` (closed after): its decoded response."""
    c = RawClient(bootstrap)
    try:
        return c.request(api_key, version, request)
    finally:
        c.close()
