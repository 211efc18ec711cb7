"""What the broker can do, asked with one ApiVersions request (v0, on our own codec).

``supports_transactions(bootstrap)`` is true when the broker advertises every
API a transactional producer needs: InitProducerId (22), AddPartitionsToTxn
(24) and EndTxn (26) (the sink commits no consumer offsets, so it needs
neither AddOffsetsToTxn nor TxnOffsetCommit). The
exactly-once sink refuses to start without them, naming the option that
selects the at-least-once sink instead.
"""

from __future__ import annotations

import socket
import struct

from spool.protocol._generated import ApiVersionsRequest, ApiVersionsResponse
from spool.protocol.headers import encode_request_header

TRANSACTION_APIS = {22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn"}


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def api_keys(bootstrap: str, timeout: float = 10.0) -> set[int]:
    """The API keys the first reachable bootstrap broker advertises."""
    last: Exception | None = None
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
                payload = encode_request_header(18, 0, 1, "spool-spark", False)
                payload += ApiVersionsRequest().to_bytes(0)
                sock.sendall(struct.pack(">i", len(payload)) + payload)
                (size,) = struct.unpack(">i", _recv_exact(sock, 4))
                frame = _recv_exact(sock, size)
                resp = ApiVersionsResponse.from_bytes(frame[4:], 0)
                return {k.api_key for k in resp.api_keys}
        except (OSError, ValueError) as exc:
            last = exc
    raise ConnectionError(f"no broker reachable at {bootstrap}: {last}")


def missing_transaction_apis(bootstrap: str) -> list[str]:
    have = api_keys(bootstrap)
    return [name for key, name in TRANSACTION_APIS.items() if key not in have]


def supports_transactions(bootstrap: str) -> bool:
    return not missing_transaction_apis(bootstrap)
