"""An asyncio Kafka request client over Spool's codec: node-to-node and CLI traffic.

``NodeClient(host, port)`` is one connection to one Kafka node (a Spool
broker, a controller listener, or any Kafka broker). ``await
client.request(message, version)`` sends a generated request message at the
version the caller chooses (no ApiVersions negotiation: the caller knows its
peer, or asks ApiVersions itself) and returns the decoded response message.

Contract:

- Connecting is lazy: the first request connects (``connect_timeout_ms``).
  After a failed connect or a dropped connection the next request connects
  again, no sooner than ``reconnect_backoff_ms`` after the failure (it waits
  out the rest of the backoff, then tries).
- Pipelining: requests are written as they are made; each gets the next
  correlation id; responses come back in request order (Kafka's rule) and
  each must carry the correlation id of the oldest request waiting, else the
  stream is corrupt and the connection is closed.
- Timeouts: a request not answered within its timeout (``request_timeout_ms``
  unless given) raises ``RequestTimeoutError``, and, as Kafka's NetworkClient
  does, the connection is closed: every other request in flight on it fails
  with ``DisconnectedError``, and the next request reconnects.
- ``expect_response=False`` (Produce with acks=0) returns None once written.
- A response is decoded before it is returned; a response that does not
  decode closes the connection (``DisconnectedError`` for everyone waiting).
  ApiVersions answered with UNSUPPORTED_VERSION (a v0 body, Kafka's rule) is
  decoded as v0 so its error code and version list reach the caller.
- ``close()`` fails whatever is in flight with ``DisconnectedError`` and closes
  the socket; the client may be used again (it reconnects).
- Concurrency: one event loop; any number of tasks may call ``request`` at
  once. Nothing blocks the loop.

Security (``security=``, a ``spool.security.client_config.ClientSecurity``):

- TLS (SSL, SASL_SSL): the connection is wrapped in TLS with the properties' SSLContext
  (server certificate verified against the truststore; its name checked against ``host``
  unless ``ssl.endpoint.identification.algorithm`` is empty); a failed handshake is a
  failed connect (``AuthenticationError``). The store files are read for each connection, so
  certificates renewed in place are used from the next connection on.
- SASL (SASL_PLAINTEXT, SASL_SSL), as Kafka's SaslClientAuthenticator: once connected, and
  before any request of the caller is written, ApiVersions (for the SASL versions the peer
  has), SaslHandshake v1 with ``sasl.mechanism``, then SaslAuthenticate (v2 where the peer
  has it, else v1/v0) carrying the mechanism's tokens until it completes. A refusal
  (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED, a server message the mechanism
  rejects) raises ``AuthenticationError`` with the broker's message, closes the connection,
  is logged (ERROR; the same refusal of the same client id by the same peer at most once a
  minute, whichever NodeClient meets it) and the next connect waits at least 1 s.
- Re-authentication (KIP-368): when SaslAuthenticate v1+ gives a ``session_lifetime_ms``,
  the client authenticates again on the same connection at a random point between 85% and
  95% of it (Kafka's window): the first request made after that point waits while
  SaslHandshake and SaslAuthenticate run (requests already in flight are answered as
  usual); requests made meanwhile wait for it too.

``NodeClients(addresses)`` keeps one ``NodeClient`` per node id (a quorum's
voters, a cluster's brokers) and forwards ``request(node_id, ...)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import ssl
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from spool.net.frames import FrameReader, open_frame_connection
from spool.protocol._generated import API_BY_KEY
from spool.protocol._generated.api_versions_request import ApiVersionsRequest
from spool.protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from spool.protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from spool.protocol.errors import error_name
from spool.protocol.headers import API_VERSIONS_KEY, encode_request_header, skip_tagged_fields
from spool.protocol.primitives import ProtocolDecodeError
from spool.security.client_config import ClientConfigError, ClientSecurity
from spool.security.sasl import client_for

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION = 35
_SASL_HANDSHAKE_KEY = SaslHandshakeRequest.API_KEY
_SASL_AUTHENTICATE_KEY = SaslAuthenticateRequest.API_KEY
_AUTH_FAILURE_BACKOFF_S = 1.0
_LOG_REPEAT_S = 60.0
# the last refusal logged per (client id, peer), across NodeClient instances (a replica
# fetcher makes a new one after a failure): (message, monotonic time)
_LOGGED: dict[tuple[str | None, str, int], tuple[str, float]] = {}
PLAINTEXT = ClientSecurity()


class ClientError(Exception):
    """A request got no response; the message says which request and why."""


class DisconnectedError(ClientError, ConnectionError):
    """The connection failed or closed before the response arrived."""


class RequestTimeoutError(ClientError, TimeoutError):
    """No response within the request's timeout (the connection was closed)."""


class AuthenticationError(ClientError):
    """TLS or SASL authentication with the peer failed (the connection was closed); the
    message carries the peer's reason (Kafka's SaslAuthenticationException,
    SslAuthenticationException)."""


def _sasl_client(sec: ClientSecurity) -> Any:
    """A new sans-I/O client exchange of ``sec.sasl_mechanism`` (spool.security.sasl's:
    ``initial_response()``, ``evaluate(challenge) -> bytes | None``, ``complete``)."""
    try:
        return client_for(sec.sasl_mechanism, sec.username, sec.password,
                          dict(sec.jaas_options))
    except ValueError as e:
        raise AuthenticationError(f"SASL: {e}") from None


@dataclass
class _InFlight:
    correlation_id: int
    api_key: int
    version: int
    future: asyncio.Future


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


class NodeClient:
    """One connection to ``host:port`` (module docstring for the contract)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "spool",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        reconnect_backoff_ms: int = 50,
        max_response_bytes: int = 100 * 1024 * 1024,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.max_response_bytes = max_response_bytes
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._connecting: asyncio.Future | None = None
        self._in_flight: deque[_InFlight] = deque()
        self._next_id = 0
        self._failed_at = 0.0  # monotonic time of the last connect failure or drop
        self._backoff_s = reconnect_backoff_ms / 1000
        self.security = security or PLAINTEXT
        self._ssl: ssl.SSLContext | None = None  # built for each connection (stores re-read)
        self._ready = False  # connected and (with SASL) authenticated
        self._reauth_at: float | None = None  # monotonic; KIP-368
        self._reauth: asyncio.Future | None = None
        self._sasl_versions: tuple[int, int] | None = None  # (handshake, authenticate)
        self.connects = 0  # connections opened so far (TCP, and TLS where asked)
        self._closed_by: Exception | None = None  # why the last connection ended
        self._answered = False

    def __repr__(self) -> str:
        return f"NodeClient({self.host}:{self.port})"

    @property
    def _log_key(self) -> tuple[str | None, str, int]:
        return (self.client_id, self.host, self.port)

    @property
    def connected(self) -> bool:
        """Connected, and authenticated where the security protocol asks for it."""
        return self._ready

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # ---- requests

    async def request(self, message: Any, version: int, *, timeout_ms: int | None = None,
                      expect_response: bool = True) -> Any:
        """Send ``message`` (a generated request) at ``version``; its decoded response.

        Raises ``RequestTimeoutError``, ``DisconnectedError``, or ``ValueError`` for a
        version the codec does not have (a caller bug)."""
        entry = API_BY_KEY[message.API_KEY]
        lo, hi = entry.request.VALID_VERSIONS
        if not lo <= version <= hi:
            raise ValueError(f"{entry.name} v{version}: the codec has v{lo}-v{hi}")
        timeout_s = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = time.monotonic() + timeout_s
        try:
            await asyncio.wait_for(self._ensure_connected(), timeout_s)
            if self._reauth is not None or (
                    self._reauth_at is not None and time.monotonic() >= self._reauth_at):
                await asyncio.wait_for(self._ensure_reauthenticated(),
                                       max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise RequestTimeoutError(f"{self}: not connected within {timeout_s * 1000:.0f} ms "
                                      f"to send {entry.name}") from None
        return await self._send(message, version, deadline, timeout_s, expect_response)

    async def _send(self, message: Any, version: int, deadline: float, timeout_s: float,
                    expect_response: bool = True) -> Any:
        """Write ``message`` on the current connection now; its response (the contract)."""
        entry = API_BY_KEY[message.API_KEY]
        writer = self._writer
        if writer is None:
            if isinstance(self._closed_by, AuthenticationError):
                raise self._closed_by
            raise DisconnectedError(f"{self}: connection closed before {entry.name} was sent"
                                    + (f" ({self._closed_by})" if self._closed_by else ""))
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        cid = self._next_id
        header = encode_request_header(message.API_KEY, version, cid, self.client_id,
                                       entry.request.is_flexible(version))
        chunks: list = [b"", header]
        message.encode(version, chunks)
        chunks[0] = _SIZE.pack(sum(len(c) for c in chunks))
        future = asyncio.get_running_loop().create_future()
        if expect_response:
            self._in_flight.append(_InFlight(cid, message.API_KEY, version, future))
        writer.writelines(chunks)
        try:
            await asyncio.wait_for(writer.drain(), max(0.0, deadline - time.monotonic()))
        except (OSError, ConnectionError) as e:
            self._drop(DisconnectedError(f"{self}: {entry.name} not sent: {e}"))
        except TimeoutError:
            self._drop(DisconnectedError(f"{self}: {entry.name} not sent within {timeout_s}s"))
        if not expect_response:
            if self._writer is not writer:
                raise DisconnectedError(f"{self}: {entry.name} not sent")
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(future),
                                          max(0.0, deadline - time.monotonic()))
        except asyncio.CancelledError:
            future.cancel()  # its response, when it comes, is read and dropped
            raise
        except TimeoutError:
            if future.done():
                return future.result()
            err = RequestTimeoutError(
                f"{self}: no response to {entry.name} v{version} (correlation id {cid}) "
                f"within {timeout_s * 1000:.0f} ms")
            self._drop(DisconnectedError(f"{self}: closed after {entry.name} timed out"),
                       first=(future, err))
            raise err from None

    # ---- connection

    async def connect(self) -> None:
        """Connect now (``request`` does it lazily); DisconnectedError on failure."""
        await self._ensure_connected()

    async def _ensure_connected(self) -> None:
        if self._ready:
            return
        if self._connecting is None or self._connecting.done():  # (done: a waiter was cancelled)
            self._connecting = asyncio.ensure_future(self._open())
            # its error is every waiter's; with all of them cancelled nobody would read it
            self._connecting.add_done_callback(_retrieve)
        connecting = self._connecting
        try:
            await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _open(self) -> None:
        wait = self._failed_at + self._backoff_s - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._backoff_s = self.reconnect_backoff_ms / 1000
        sec = self.security
        if sec.tls:  # the stores are read again: a certificate renewed in place is taken
            try:
                self._ssl = sec.ssl_context()
            except ClientConfigError as e:
                self._failed_at = time.monotonic()
                raise self._auth_failed(f"TLS configuration: {e}") from None
        tls = {} if self._ssl is None else {
            "ssl": self._ssl, "server_hostname": self.host,
            "ssl_handshake_timeout": self.connect_timeout_ms / 1000}
        try:
            opening = (open_frame_connection(self.host, self.port, self.max_response_bytes)
                       if self._ssl is None else
                       asyncio.open_connection(self.host, self.port, **tls))
            reader, writer = await asyncio.wait_for(opening, self.connect_timeout_ms / 1000)
        except ssl.SSLError as e:
            detail = getattr(e, "verify_message", None)
            raise self._auth_failed(f"TLS handshake failed: {e.reason or e}"
                                    + (f" ({detail})" if detail else "")) from None
        except (OSError, TimeoutError) as e:
            self._failed_at = time.monotonic()
            # (asyncio's strerror is "Connect call failed (...)": the errno says what failed)
            reason = "timed out" if isinstance(e, TimeoutError) else (
                os.strerror(e.errno) if e.errno else (e.strerror or str(e)))
            raise DisconnectedError(f"{self}: cannot connect: {reason}") from None
        self._writer = writer
        self._answered = False  # (no response on this connection yet)
        self.connects += 1
        self._reader_task = asyncio.ensure_future(self._read_loop(reader, writer))
        if sec.sasl:
            self._sasl_versions = None  # asked on every connection (the peer may have changed)
            try:
                await self._authenticate(reauthenticating=False)
            except BaseException:
                if self._writer is writer:
                    self._drop(DisconnectedError(f"{self}: authentication did not complete"))
                raise
        self._ready = True
        _LOGGED.pop(self._log_key, None)  # (a later refusal is news again)

    def _auth_failed(self, reason: str) -> AuthenticationError:
        """The error for a failed TLS/SASL authentication; logged (repeats once a minute) and
        the next connect backs off (Kafka's SaslAuthenticationException: not retried at once)."""
        self._failed_at = time.monotonic()
        self._backoff_s = max(self._backoff_s, _AUTH_FAILURE_BACKOFF_S)
        msg = (f"{self}: authentication failed ({self.security.describe()}): {reason}")
        now = time.monotonic()
        last = _LOGGED.get(self._log_key)
        if last is None or last[0] != msg or now - last[1] >= _LOG_REPEAT_S:
            log.error("%s (client %s)", msg, self.client_id)
            if len(_LOGGED) > 1000:
                _LOGGED.clear()
            _LOGGED[self._log_key] = (msg, now)
        return AuthenticationError(msg)

    async def _authenticate(self, *, reauthenticating: bool) -> None:
        """Kafka's client SASL exchange on the current connection (module docstring)."""
        sec = self.security
        timeout_s = self.request_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        if self._sasl_versions is None:
            resp = await self._send(ApiVersionsRequest(client_software_name="spool",
                                                       client_software_version="1"),
                                    3, deadline, timeout_s)
            if resp.error_code == _UNSUPPORTED_VERSION:
                resp = await self._send(ApiVersionsRequest(), 0, deadline, timeout_s)
            have = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            hs, au = have.get(_SASL_HANDSHAKE_KEY), have.get(_SASL_AUTHENTICATE_KEY)
            if hs is None or hs[1] < 1 or au is None:
                raise self._auth_failed("the peer has no SaslHandshake v1 / SaslAuthenticate "
                                        "(is this listener SASL?)")
            self._sasl_versions = (1, min(au[1], SaslAuthenticateRequest.VALID_VERSIONS[1]))
        hs_version, au_version = self._sasl_versions
        resp = await self._send(SaslHandshakeRequest(mechanism=sec.sasl_mechanism), hs_version,
                                deadline, timeout_s)
        if resp.error_code:
            enabled = ", ".join(resp.mechanisms or [])
            raise self._auth_failed(
                f"SaslHandshake: {error_name(resp.error_code)}"
                + (f" (the broker enables {enabled})" if resp.error_code == 33 else ""))
        mechanism = _sasl_client(sec)
        token: bytes | None = mechanism.initial_response()
        lifetime_ms = 0
        while token is not None:
            resp = await self._send(SaslAuthenticateRequest(auth_bytes=token), au_version,
                                    deadline, timeout_s)
            if resp.error_code:
                detail = getattr(mechanism, "error", None)  # (OAUTHBEARER's JSON reason)
                raise self._auth_failed(f"{error_name(resp.error_code)}: "
                                        f"{resp.error_message or ''}".rstrip(": ")
                                        + (f" ({detail})" if detail else ""))
            lifetime_ms = resp.session_lifetime_ms if au_version >= 1 else 0
            try:
                token = mechanism.evaluate(bytes(resp.auth_bytes))
            except Exception as e:  # the mechanism refuses the server's message
                raise self._auth_failed(f"{sec.sasl_mechanism}: {e}") from None
        if not mechanism.complete:
            raise self._auth_failed(f"{sec.sasl_mechanism}: the exchange ended incomplete")
        self._reauth_at = None if lifetime_ms <= 0 else (
            time.monotonic() + lifetime_ms / 1000 * (0.85 + 0.1 * random.random()))
        if reauthenticating:
            log.debug("%s: re-authenticated (%s), session lifetime %d ms", self,
                      sec.describe(), lifetime_ms)

    async def _ensure_reauthenticated(self) -> None:
        """KIP-368: one re-authentication at a time; every request made meanwhile waits."""
        if self._reauth is None or self._reauth.done():
            self._reauth = asyncio.ensure_future(self._reauthenticate())
            self._reauth.add_done_callback(_retrieve)
        reauth = self._reauth
        try:
            await asyncio.shield(reauth)
        finally:
            if reauth.done() and self._reauth is reauth:
                self._reauth = None

    async def _reauthenticate(self) -> None:
        writer = self._writer
        try:
            await self._authenticate(reauthenticating=True)
        except BaseException:
            if self._writer is writer:  # a failed re-authentication ends the connection
                self._drop(DisconnectedError(f"{self}: re-authentication failed"))
            raise

    async def _read_loop(self, reader: asyncio.StreamReader | FrameReader,
                         writer: asyncio.StreamWriter) -> None:
        try:
            while isinstance(reader, FrameReader):  # plain TCP (spool.net.frames)
                self._complete(await reader.read_frame())
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if not 4 <= size <= self.max_response_bytes:
                    raise ProtocolDecodeError(f"response frame of {size} bytes")
                frame = await reader.readexactly(size)
                self._complete(frame)
        except asyncio.CancelledError:
            raise
        except ssl.SSLError as e:  # a TLS alert: the peer refused us (a client certificate...)
            if writer is self._writer:
                self._drop(self._auth_failed(f"TLS: the peer ended the session: "
                                             f"{e.reason or e}"), writer=writer)
        except (OSError, asyncio.IncompleteReadError, ConnectionError) as e:
            sec = self.security
            if (self._ssl is not None and not self._answered and writer is self._writer
                    and not (sec.keystore_location or sec.keystore_certificate_chain)):
                # a TLS peer that hangs up before answering anything while we have no client
                # certificate: asyncio turns its alert (certificate required) into an EOF;
                # Kafka calls it an SslAuthenticationException. (With a certificate, or an
                # answer seen, it is an ordinary drop: a peer killed meanwhile looks the same.)
                self._drop(self._auth_failed(
                    "TLS: the peer closed the connection before answering (does it require a "
                    "client certificate? ssl.keystore.* is not set)"), writer=writer)
                return
            reason = "closed by the peer" if isinstance(e, asyncio.IncompleteReadError) else str(e)
            self._drop(DisconnectedError(f"{self}: connection {reason}"), writer=writer)
        except ProtocolDecodeError as e:
            self._drop(DisconnectedError(f"{self}: bad response: {e}"), writer=writer)

    def _complete(self, frame: bytes | bytearray) -> None:
        (cid,) = struct.unpack_from(">i", frame, 0)
        if not self._in_flight or self._in_flight[0].correlation_id != cid:
            expected = self._in_flight[0].correlation_id if self._in_flight else None
            raise ProtocolDecodeError(f"correlation id {cid}, expected {expected}")
        req = self._in_flight.popleft()
        self._answered = True
        if req.future.done():  # its caller was cancelled: the response is dropped
            return
        entry = API_BY_KEY[req.api_key]
        version = req.version
        pos = 4
        if entry.response.is_flexible(version) and req.api_key != API_VERSIONS_KEY:
            pos = skip_tagged_fields(frame, pos)
        if req.api_key == API_VERSIONS_KEY and len(frame) >= pos + 2 and (
                struct.unpack_from(">h", frame, pos)[0] == _UNSUPPORTED_VERSION):
            version = 0  # Kafka answers an unknown ApiVersions version with a v0 body
        response, _ = entry.response.decode(memoryview(frame).toreadonly(), pos, version)
        req.future.set_result(response)

    def _drop(self, error: Exception, *, writer: asyncio.StreamWriter | None = None,
              first: tuple[asyncio.Future, Exception] | None = None) -> None:
        """Close the connection (if ``writer`` is given, only if it is still the current
        one) and fail everything in flight (``first`` with its own error)."""
        if writer is not None and writer is not self._writer:
            return
        current, self._writer = self._writer, None
        task, self._reader_task = self._reader_task, None
        self._closed_by = error
        self._ready = False
        self._reauth_at = None
        self._failed_at = time.monotonic()
        if current is not None:
            current.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending, self._in_flight = self._in_flight, deque()
        if first is not None and not first[0].done():
            first[0].set_exception(first[1])
            first[0].exception()  # (retrieved: its caller raises it)
        for req in pending:
            if not req.future.done():
                req.future.set_exception(error)

    async def close(self) -> None:
        """Fail requests in flight with DisconnectedError and close the socket."""
        writer, task = self._writer, self._reader_task
        self._drop(DisconnectedError(f"{self}: closed by the client"))
        self._failed_at = 0.0  # a deliberate close is no failure: reconnect at once
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if writer is not None:
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()


class NodeClients:
    """One ``NodeClient`` per node id; ``update`` changes addresses (closing moved ones)."""

    def __init__(self, addresses: dict[int, tuple[str, int]] | None = None, **options: Any) -> None:
        self.options = options  # NodeClient keyword arguments
        self.addresses: dict[int, tuple[str, int]] = {}
        self._clients: dict[int, NodeClient] = {}
        self._closing: set[asyncio.Task] = set()
        self.update(addresses or {})

    def update(self, addresses: dict[int, tuple[str, int]]) -> None:
        for node_id in list(self._clients):
            if addresses.get(node_id) != self.addresses.get(node_id):
                self._close_later(self._clients.pop(node_id))
        self.addresses = dict(addresses)

    def client(self, node_id: int) -> NodeClient:
        """The connection to ``node_id``; KeyError for a node with no address."""
        c = self._clients.get(node_id)
        if c is None:
            host, port = self.addresses[node_id]
            c = self._clients[node_id] = NodeClient(host, port, **self.options)
        return c

    async def request(self, node_id: int, message: Any, version: int, **kwargs: Any) -> Any:
        return await self.client(node_id).request(message, version, **kwargs)

    def _close_later(self, c: NodeClient) -> None:
        t = asyncio.ensure_future(c.close())
        self._closing.add(t)
        t.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.close() for c in clients), *self._closing,
                             return_exceptions=True)
