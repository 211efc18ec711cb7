"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator.

Each connection of a SASL listener gets one ``SaslAuthenticator``; the dispatcher
shows it every frame first (``gate``), synchronously and in arrival order, so a
request pipelined behind the authentication is judged by its outcome. States::

    HANDSHAKE_OR_VERSIONS --ApiVersions--> HANDSHAKE --SaslHandshake--> AUTHENTICATE
    HANDSHAKE_OR_VERSIONS --SaslHandshake--> AUTHENTICATE
    AUTHENTICATE --SaslAuthenticate (or a v0 raw token)...--> COMPLETE
    COMPLETE --SaslHandshake, client sent SaslAuthenticate v1+ (KIP-368)--> AUTHENTICATE
    any --failure--> FAILED (the answer is sent, then the connection closes)

- Before COMPLETE only ApiVersions (once, first), SaslHandshake and SaslAuthenticate
  are read. Another request before the handshake closes the connection unanswered
  ("Unexpected Kafka request of type <API> during SASL handshake."); one after it (while
  the exchange is in progress) is answered with its API's error response carrying
  ILLEGAL_SASL_STATE ("... during SASL authentication."), then the connection closes, as
  Kafka's ``getErrorResponse``: the top-level ``error_code`` where the response has one,
  each topic asked for in Metadata; an API with neither closes unanswered.
- SaslHandshake v0 means the tokens that follow are raw: a size-prefixed frame with
  no request header, answered by a size-prefixed token (GSSAPI-era framing); v1
  means SaslAuthenticate requests.
- A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, close.
- A failed exchange: SaslAuthenticate with SASL_AUTHENTICATION_FAILED and Kafka's
  message (the mechanism's own when it is meant for the client, else "Authentication
  failed during authentication due to invalid credentials with SASL mechanism <M>"),
  then the connection closes ``connection.failed.authentication.delay.ms`` later
  (frames read meanwhile are not served); a raw (v0) token that fails closes
  unanswered, as Kafka does.
- A frame over ``sasl.server.max.receive.size`` before COMPLETE fails the
  authentication: the server's frame decoder refuses its size prefix before reading it
  (``Server.frame_limits``; raised to ``socket.request.max.bytes`` on success), and a
  re-authentication frame over it is refused here ("Failing SASL authentication due
  to invalid receive size").
- On success ``conn.principal`` becomes ``User:<authorization id>``. SaslAuthenticate
  v1+ tells the session lifetime: ``connections.max.reauth.ms`` of the mechanism,
  shortened to the credential's expiry (OAUTHBEARER's ``exp``); 0 when sessions do
  not end. After that instant the next request other than a SaslHandshake closes the
  connection; re-authentication must keep the mechanism and the principal. A
  re-authentication handshake naming another enabled mechanism is answered NONE (Kafka's
  REAUTH_BAD_MECHANISM state), and the next frame fails the re-authentication unanswered
  ("SASL mechanism '<new>' requested by client is not supported for re-authentication of
  mechanism '<old>'"); a mechanism not enabled at all is UNSUPPORTED_SASL_MECHANISM.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable

from spool.broker.sasl_listener import SaslListener
from spool.broker.server import CloseConnection, Connection
from spool.protocol._generated import (
    API_BY_KEY,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from spool.protocol._generated import metadata_response as mr
from spool.protocol.errors import Errors
from spool.protocol.headers import (
    API_VERSIONS_KEY,
    parse_request_header,
    peek_request_header,
    response_header,
)
from spool.protocol.primitives import ProtocolDecodeError
from spool.security.principal import KafkaPrincipal, user
from spool.security.sasl import SaslAuthenticationError, SaslError, SaslServer

log = logging.getLogger("spool.sasl")

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
_SIZE = struct.Struct(">i")

HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
HANDSHAKE = "HANDSHAKE_REQUEST"
AUTHENTICATE = "AUTHENTICATE"
COMPLETE = "COMPLETE"
FAILED = "FAILED"
REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"

PROCEED = object()
"""``gate``'s answer for a frame the dispatcher serves as usual."""


def _api_name(api_key: int) -> str:
    entry = API_BY_KEY.get(api_key)
    return _upper_snake(entry.name) if entry is not None else str(api_key)


def _upper_snake(name: str) -> str:  # SaslHandshake -> SASL_HANDSHAKE, as Kafka's ApiKeys
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.upper())
    return "".join(out)


def _illegal_state_response(api_key: int, version: int, request):
    """Kafka's ``getErrorResponse(ILLEGAL_SASL_STATE)`` for ``request``, or None when its
    response has no place for the error."""
    code = Errors.ILLEGAL_SASL_STATE
    if api_key == MetadataRequest.API_KEY:
        return MetadataResponse(throttle_time_ms=0, brokers=[], topics=[
            mr.MetadataResponseTopic(error_code=code, name=t.name or "",
                                     topic_id=t.topic_id, is_internal=False, partitions=[])
            for t in request.topics or ()])
    response = API_BY_KEY[api_key].response()
    if "error_code" not in type(response).__slots__:
        return None
    response.error_code = code
    return response


def _encode(body, correlation_id: int, version: int, flexible: bool, api_key: int) -> list:
    out: list = [b"", response_header(correlation_id, flexible, api_key)]
    body.encode(version, out)
    out[0] = _SIZE.pack(sum(len(c) for c in out))
    return out


class SaslAuthenticator:
    """The authentication state of one connection (module doc)."""

    def __init__(self, listener: SaslListener, conn: Connection,
                 version_ok: Callable[[int, int], bool],
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self.listener = listener
        self.conn = conn
        self.version_ok = version_ok  # (api_key, version) -> served at that version
        self.clock_ns = clock_ns
        self.wall_ms = wall_ms
        self.state = HANDSHAKE_OR_VERSIONS
        self.raw = False  # SaslHandshake v0: raw tokens follow
        self.mechanism: str | None = None
        self.server: SaslServer | None = None
        self.client_supports_reauth = False
        self.session_expiry_ns: int | None = None
        self.principal: KafkaPrincipal | None = None
        self.reauthenticating = False
        self.bad_mechanism = ""

    @property
    def authenticated(self) -> bool:
        return self.state == COMPLETE

    def _text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    def _fail(self, reason: str) -> None:
        """Condemn the connection: the answers so far go out, then it closes, after
        ``connection.failed.authentication.delay.ms`` (Kafka's KIP-306: a client that
        reads its answer and the hang-up together may drop the answer)."""
        self.state = FAILED
        delay_ms = self.listener.failed_delay_ms
        if delay_ms <= 0:
            self.conn._condemn(reason)  # noqa: SLF001 (server and dispatcher: one component)
            return
        asyncio.get_running_loop().call_later(delay_ms / 1000, self.conn.close, reason)

    # ---- the gate

    def gate(self, frame: bytearray):
        """``PROCEED``, or the response chunks to this frame; CloseConnection to close."""
        if self.state == COMPLETE:
            return self._authenticated(frame)
        if self.state == FAILED:
            raise CloseConnection("request after failed SASL authentication")
        if len(frame) > self.listener.max_receive_size:
            self.state = FAILED
            raise CloseConnection("Failing SASL authentication due to invalid receive size "
                                  f"({len(frame)} > sasl.server.max.receive.size="
                                  f"{self.listener.max_receive_size})")
        if self.state == AUTHENTICATE and self.raw:
            return self._raw_token(bytes(frame))
        try:
            api_key, version, correlation_id = peek_request_header(frame)
        except ProtocolDecodeError as e:
            self.state = FAILED
            raise CloseConnection(f"bad request header during SASL {self._text()}: {e}") from e
        if self.state == REAUTH_BAD_MECHANISM:
            self.state = FAILED
            raise CloseConnection(self.bad_mechanism)
        if self.state == AUTHENTICATE:
            if api_key != SASL_AUTHENTICATE_KEY:
                return self._illegal_state(frame, api_key, version, correlation_id)
            return self._authenticate(frame, version, correlation_id)
        if api_key == API_VERSIONS_KEY and self.state == HANDSHAKE_OR_VERSIONS:
            if self.version_ok(api_key, version):  # else answered v0 and asked again
                self.state = HANDSHAKE
            return PROCEED
        if api_key == SASL_HANDSHAKE_KEY:
            return self._handshake(frame, version, correlation_id)
        self.state = FAILED
        raise CloseConnection(f"Unexpected Kafka request of type {_api_name(api_key)} during "
                              f"SASL handshake.")

    def _authenticated(self, frame: bytearray):
        try:
            api_key = peek_request_header(frame)[0]
        except ProtocolDecodeError:
            return PROCEED  # the dispatcher closes it
        if api_key == SASL_HANDSHAKE_KEY and self.client_supports_reauth:
            self.reauthenticating = True
            self.state = HANDSHAKE
            return self.gate(frame)
        if self.session_expiry_ns is not None and self.clock_ns() > self.session_expiry_ns:
            raise CloseConnection(f"SASL session of {self.principal} expired "
                                  f"(connections.max.reauth.ms or credential lifetime)")
        return PROCEED

    # ---- requests

    def _decode(self, frame: bytearray, version: int, request_cls):
        if not self.version_ok(request_cls.API_KEY, version):
            self.state = FAILED
            raise CloseConnection(f"{request_cls.NAME} v{version} is not supported")
        flexible = request_cls.is_flexible(version)
        try:
            header, pos = parse_request_header(frame, flexible)
            request, _ = request_cls.decode(memoryview(frame), pos, version)
        except ProtocolDecodeError as e:
            self.state = FAILED
            raise CloseConnection(f"malformed {request_cls.NAME} v{version}: {e}") from e
        return request, flexible

    def _illegal_state(self, frame: bytearray, api_key: int, version: int,
                       correlation_id: int) -> list:
        reason = (f"Unexpected Kafka request of type {_api_name(api_key)} during SASL "
                  f"{self._text()}.")
        entry = API_BY_KEY.get(api_key)
        if entry is None or not self.version_ok(api_key, version):
            self.state = FAILED
            raise CloseConnection(reason)
        request, flexible = self._decode(frame, version, entry.request)
        body = _illegal_state_response(api_key, version, request)
        if body is None:
            self.state = FAILED
            raise CloseConnection(reason)
        self._fail(reason)
        return _encode(body, correlation_id, version, flexible, api_key)

    def _handshake(self, frame: bytearray, version: int, correlation_id: int) -> list:
        request, flexible = self._decode(frame, version, SaslHandshakeRequest)
        mechanism = request.mechanism
        enabled = list(self.listener.mechanisms)
        if mechanism not in enabled:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            body = SaslHandshakeResponse(error_code=Errors.UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=enabled)
        elif self.reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake and fails at the next frame (REAUTH_BAD_MECHANISM)
            self.bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                  f"supported for re-authentication of mechanism "
                                  f"'{self.mechanism}'")
            self.state = REAUTH_BAD_MECHANISM
            body = SaslHandshakeResponse(error_code=Errors.NONE, mechanisms=enabled)
        else:
            self.mechanism = mechanism
            self.server = self.listener.server(mechanism)
            self.raw = version == 0
            self.state = AUTHENTICATE
            body = SaslHandshakeResponse(error_code=Errors.NONE, mechanisms=enabled)
        return _encode(body, correlation_id, version, flexible, SASL_HANDSHAKE_KEY)

    def _authenticate(self, frame: bytearray, version: int, correlation_id: int) -> list:
        request, flexible = self._decode(frame, version, SaslAuthenticateRequest)
        self.client_supports_reauth = self.client_supports_reauth or version > 0
        try:
            reply = self._evaluate(bytes(request.auth_bytes))
        except SaslError as e:
            message = self._client_message(e)
            why = getattr(self.server, "reason", None)  # (OAUTHBEARER: why the token was refused)
            self._fail(f"Failed {self._text()} ({message}{': ' + why if why else ''})")
            body = SaslAuthenticateResponse(error_code=Errors.SASL_AUTHENTICATION_FAILED,
                                            error_message=message, auth_bytes=b"")
            return _encode(body, correlation_id, version, flexible, SASL_AUTHENTICATE_KEY)
        lifetime = self._complete() if self.state == COMPLETE else 0
        body = SaslAuthenticateResponse(error_code=Errors.NONE, error_message=None,
                                        auth_bytes=reply, session_lifetime_ms=lifetime)
        return _encode(body, correlation_id, version, flexible, SASL_AUTHENTICATE_KEY)

    def _raw_token(self, token: bytes) -> list:
        try:
            reply = self._evaluate(token)
        except SaslError as e:
            self.state = FAILED
            raise CloseConnection(f"Failed {self._text()} ({self._client_message(e)})") from e
        if self.state == COMPLETE:
            self._complete()
        return [_SIZE.pack(len(reply)), reply]

    def _client_message(self, e: SaslError) -> str:
        if isinstance(e, SaslAuthenticationError):
            return str(e)
        log.debug("SASL %s failed: %s", self._text(), e)
        return (f"Authentication failed during {self._text()} due to invalid credentials "
                f"with SASL mechanism {self.mechanism}")

    def _evaluate(self, token: bytes) -> bytes:
        assert self.server is not None
        reply = self.server.evaluate(token)
        if self.server.complete:
            principal = user(self.server.authorization_id or "")
            if self.reauthenticating and principal != self.principal:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from "
                    f"{self.principal.principal_type}.{self.principal.name}: "  # type: ignore[union-attr]
                    f"{principal.principal_type}.{principal.name}")
            self.principal = principal
            self.state = COMPLETE
        return reply

    def _complete(self) -> int:
        """Authenticated: the principal is the connection's; the session lifetime in ms."""
        assert self.server is not None and self.principal is not None
        self.conn.principal = self.principal
        self.reauthenticating = False
        decoder = getattr(self.conn, "decoder", None)
        if decoder is not None:  # requests may now be as large as socket.request.max.bytes
            decoder.max_size = self.conn.server.max_request_size
        reauth_ms = self.listener.reauth_ms.get(self.mechanism or "", 0)
        expiry_ms = self.server.credential_expiry_ms
        lifetime: int | None = None
        if expiry_ms is not None:
            lifetime = max(0, expiry_ms - self.wall_ms())
            if reauth_ms > 0:
                lifetime = min(lifetime, reauth_ms)
        elif reauth_ms > 0:
            lifetime = reauth_ms
        self.server = None
        if lifetime is None:
            self.session_expiry_ns = None
            return 0
        self.session_expiry_ns = self.clock_ns() + lifetime * 1_000_000
        return lifetime
