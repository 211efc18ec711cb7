"""spool.net.client's SASL, as Kafka's client does it.

A scripted peer (in process, over our codec: tests/helpers/scripted_peer.py) shows the
exchange itself: ApiVersions, SaslHandshake v1, SaslAuthenticate before any request of the
caller; a refusal is an AuthenticationError carrying the broker's message, logged, connection
closed; KIP-368 re-authentication on the same connection before the session lifetime ends.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from spool.net.client import AuthenticationError, NodeClient
from spool.protocol._generated import ApiVersionsRequest
from spool.security.client_config import ClientSecurity
from tests.helpers.scripted_peer import ScriptedSaslPeer

pytestmark = pytest.mark.timeout(60)

PLAIN_ALICE = ClientSecurity.from_properties({
    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                        'username="alice" password="alice-secret";'})


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
            again = NodeClient("127.0.0.1", client.port, security=wrong)  # (same client id)
            with pytest.raises(AuthenticationError):
                await again.request(versions(), 3)
            await again.close()
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
    assert [k for c, k in seen if c == 2] == [18, 17, 36]  # a new connection, auth again
    # logged once with the client id (the repeats within a minute are not, whichever
    # NodeClient of that client id meets them)
    assert [r.getMessage() for r in caplog.records] == [f"{message} (client spool)"]


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
