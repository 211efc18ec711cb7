"""spool.net.client's security: SASL and TLS as Kafka's client does them.

A scripted peer (in process, over our codec) shows the exchange itself: ApiVersions,
SaslHandshake v1, SaslAuthenticate before any request of the caller; a refusal is an
AuthenticationError carrying the broker's message, logged, connection closed; KIP-368
re-authentication on the same connection before the session lifetime ends.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from spool.net.client import AuthenticationError, NodeClient
from spool.protocol._generated import API_BY_KEY, ApiVersionsRequest, ApiVersionsResponse
from spool.protocol._generated.api_versions_response import ApiVersion
from spool.protocol._generated.sasl_authenticate_response import SaslAuthenticateResponse
from spool.protocol._generated.sasl_handshake_response import SaslHandshakeResponse
from spool.protocol.errors import Errors
from spool.protocol.headers import parse_request_header, response_header
from spool.security.client_config import ClientSecurity

pytestmark = pytest.mark.timeout(60)

PLAIN_ALICE = ClientSecurity.from_properties({
    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                        'username="alice" password="alice-secret";'})


class ScriptedSaslPeer:
    """A SASL_PLAINTEXT peer with one PLAIN user: records (connection, api key) per request;
    answers ApiVersions, SaslHandshake and SaslAuthenticate, closes on anything else."""

    def __init__(self, lifetime_ms: int = 0) -> None:
        self.lifetime_ms = lifetime_ms
        self.seen: list[tuple[int, int]] = []
        self.connections = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
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


def versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


def test_plain_authenticates_before_the_first_request():
    async def go():
        peer = ScriptedSaslPeer()
        client = NodeClient("127.0.0.1", await peer.start(), security=PLAIN_ALICE)
        try:
            resp = await client.request(versions(), 3)
            return resp.error_code, client.connected, peer.seen
        finally:
            await client.close()
            peer.close()

    error, connected, seen = asyncio.run(go())
    assert (error, connected) == (0, True)
    assert seen == [(1, 18), (1, 17), (1, 36), (1, 18)]


def test_a_wrong_password_is_an_authentication_error_with_the_brokers_message(caplog):
    wrong = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="nope";'})

    async def go():
        peer = ScriptedSaslPeer()
        client = NodeClient("127.0.0.1", await peer.start(), security=wrong)
        try:
            with pytest.raises(AuthenticationError) as first:
                await client.request(versions(), 3)
            with pytest.raises(AuthenticationError):
                await client.request(versions(), 3)
            return str(first.value), client.connected, peer.seen
        finally:
            await client.close()
            peer.close()

    with caplog.at_level(logging.ERROR, "spool.net.client"):
        message, connected, seen = asyncio.run(go())
    assert "SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid username or password" in (
        message)
    assert "SASL_PLAINTEXT/PLAIN as alice" in message and "nope" not in message
    assert not connected
    assert [k for c, k in seen if c == 1] == [18, 17, 36]  # nothing after the refusal
    assert [k for c, k in seen if c == 2] == [17, 36]  # a new connection, auth again
    assert [r.getMessage() for r in caplog.records] == [message]  # the repeat not logged


def test_a_mechanism_the_broker_does_not_enable_names_the_enabled_ones():
    scram = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="alice-secret";'})

    async def go():
        peer = ScriptedSaslPeer()
        client = NodeClient("127.0.0.1", await peer.start(), security=scram)
        try:
            with pytest.raises(AuthenticationError) as e:
                await client.request(versions(), 3)
            return str(e.value)
        finally:
            await client.close()
            peer.close()

    assert "UNSUPPORTED_SASL_MECHANISM (the broker enables PLAIN)" in asyncio.run(go())


def test_reauthentication_before_the_session_ends_on_the_same_connection():
    """KIP-368: with a 200 ms session the client re-authenticates (85-95% of it) before the
    request it makes after that point; requests made meanwhile wait for it."""
    async def go():
        peer = ScriptedSaslPeer(lifetime_ms=200)
        client = NodeClient("127.0.0.1", await peer.start(), security=PLAIN_ALICE)
        try:
            await client.request(versions(), 3)
            await asyncio.sleep(0.25)  # past the session's re-authentication point
            answers = await asyncio.gather(*(client.request(versions(), 3) for _ in range(3)))
            return [a.error_code for a in answers], peer.seen, peer.connections
        finally:
            await client.close()
            peer.close()

    errors, seen, connections = asyncio.run(go())
    assert errors == [0, 0, 0] and connections == 1
    assert [k for _, k in seen] == [18, 17, 36, 18, 17, 36, 18, 18, 18]
