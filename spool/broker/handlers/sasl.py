"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2 outside an authentication.

On a SASL listener the connection's ``SaslAuthenticator`` (``spool.broker.
sasl_authenticator``) answers both while it authenticates, and SaslHandshake again to
re-authenticate (KIP-368); these handlers only see what is left, as Kafka's KafkaApis:
a handshake on a listener without SASL, or from a client that cannot re-authenticate,
and a SaslAuthenticate after authentication: ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from spool.broker.registry import BROKER_PLANE, CONTROLLER_PLANE, handles
from spool.protocol._generated import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from spool.protocol.errors import Errors

PLANES = (BROKER_PLANE, CONTROLLER_PLANE)


@handles(17, 0, 1, listeners=PLANES)
async def sasl_handshake(ctx, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(36, 0, 2, listeners=PLANES)
async def sasl_authenticate(ctx, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=Errors.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime_ms=0)
