"""A scripted SASL peer over our codec, in process: what spool.net.client's tests talk to.

``ScriptedSaslPeer(lifetime_ms)`` answers ApiVersions (SaslHandshake v0-1, SaslAuthenticate
v0-2), SaslHandshake (PLAIN only) and SaslAuthenticate (one user, alice / alice-secret;
``session_lifetime_ms`` = ``lifetime_ms`` on success), closes the connection on anything
else, and records ``seen`` (connection number, api key) per request and, over TLS with a
client certificate, each client's certificate subject. ``await start(tls=None)`` gives the
port; ``close()``.
"""

from __future__ import annotations

import asyncio
import ssl

from spool.protocol._generated import API_BY_KEY, ApiVersionsResponse
from spool.protocol._generated.api_versions_response import ApiVersion
from spool.protocol._generated.sasl_authenticate_response import SaslAuthenticateResponse
from spool.protocol._generated.sasl_handshake_response import SaslHandshakeResponse
from spool.protocol.errors import Errors
from spool.protocol.headers import parse_request_header, response_header


class ScriptedSaslPeer:
    """A SASL_PLAINTEXT peer with one PLAIN user: records (connection, api key) per request;
    answers ApiVersions, SaslHandshake and SaslAuthenticate, closes on anything else."""

    def __init__(self, lifetime_ms: int = 0) -> None:
        self.lifetime_ms = lifetime_ms
        self.seen: list[tuple[int, int]] = []
        self.connections = 0
        self.client_subjects: list[dict] = []

    async def start(self, tls: ssl.SSLContext | None = None) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=tls)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        peer_cert = writer.get_extra_info("peercert")
        if peer_cert:
            self.client_subjects.append(dict(x[0] for x in peer_cert["subject"]))
        conn = self.connections
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                frame = await reader.readexactly(size)
                key, version = int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big")
                req_cls = API_BY_KEY[key].request
                header, pos = parse_request_header(frame, req_cls.is_flexible(version))
                req, _ = req_cls.decode(memoryview(frame), pos, version)
                self.seen.append((conn, key))
                if key == 18:
                    resp = ApiVersionsResponse(api_keys=[
                        ApiVersion(api_key=18, min_version=0, max_version=4),
                        ApiVersion(api_key=17, min_version=0, max_version=1),
                        ApiVersion(api_key=36, min_version=0, max_version=2)])
                elif key == 17:
                    ok = req.mechanism == "PLAIN"
                    resp = SaslHandshakeResponse(
                        error_code=0 if ok else Errors.UNSUPPORTED_SASL_MECHANISM,
                        mechanisms=["PLAIN"])
                elif key == 36:
                    authenticated = bytes(req.auth_bytes) == b"\0alice\0alice-secret"
                    resp = SaslAuthenticateResponse(
                        error_code=0 if authenticated else Errors.SASL_AUTHENTICATION_FAILED,
                        error_message=None if authenticated else
                        "Authentication failed: Invalid username or password",
                        session_lifetime_ms=self.lifetime_ms if authenticated else 0)
                else:  # (the tests send nothing else)
                    raise ConnectionError(f"api key {key}")
                flexible = API_BY_KEY[key].response.is_flexible(version)
                out = response_header(header.correlation_id, flexible, key) + resp.to_bytes(version)
                writer.write(len(out).to_bytes(4, "big") + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def close(self) -> None:
        self.server.close()
