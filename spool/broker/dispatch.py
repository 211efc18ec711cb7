"""From a request frame to a response frame: header, version checks, handler.

The rules, in order (Kafka's, see PROTOCOL.md):

1. Unknown API key, or one not served on the connection's listener plane
   (``spool.broker.registry``: broker or controller listeners): close the
   connection.
2. ApiVersions at a version we don't serve: a v0 body with
   UNSUPPORTED_VERSION and our full list (clients then retry at v0).
3. Any other API at a version outside its advertised range, or a request
   that does not decode: close the connection.
4. Otherwise decode, run the handler, encode: ``[size, header, *body]``.
   A handler returning None means "no response" (Produce with acks=0).
   Handlers answer Kafka's newest error codes; an older version's response
   gets the codes Kafka gives that version (``spool.protocol.error_versions``,
   applied here and nowhere else; a dict lookup when nothing needs mapping).

5. A broker of a cluster (``process.roles``) answers requests on its broker
   listeners, ApiVersions and DescribeQuorum aside (``spool cluster status`` asks
   it what the quorum is doing), only once the controller has unfenced it
   (``Broker.ready_for_clients``), as Kafka's broker enables request processing
   only then: until it has caught up, its image would tell clients of no broker
   and no topic. Controller listeners are served at once (the quorum needs them).

6. On a SASL listener (``SASL_PLAINTEXT``, ``SASL_SSL``) the connection's
   ``SaslAuthenticator`` sees every frame first: until the client has authenticated
   it answers SaslHandshake / SaslAuthenticate itself and lets only a first
   ApiVersions through; anything else closes the connection. Once authenticated,
   ``conn.principal`` is the client's and requests are served as above (an expired
   KIP-368 session closes the connection at its next request). PLAINTEXT listeners
   pay one dict lookup per frame for this.

7. Client quotas (``spool.broker.throttling``), once any is set: the handler runs under
   them; a client over its quota gets ``throttle_time_ms`` and its connection muted.

8. Request metrics (``spool.broker.metrics``): each request served by a handler gets a
   ``RequestTimer`` (``ctx.timer``) stamped when its frame was read, when the handler
   starts and ends; the error codes of its response are counted (Kafka's errorCounts),
   and the timer rides at the end of the response's chunks until the connection has sent
   it. Handlers add the time they wait in purgatory to ``ctx.timer.remote_s``.

Rules 1-3 and 6 are applied by ``prepare``, synchronously, as the connection
reads each frame: a frame that breaks them condemns the connection
(``CloseConnection`` with the reason, which the server logs once) before
any frame pipelined after it is looked at.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from spool.broker.metrics import ApiMetrics, RequestTimer, error_codes
from spool.broker.registry import BROKER_PLANE, CONTROLLER_PLANE, REGISTRIES, advertised
from spool.broker.sasl_authenticator import PROCEED, SaslAuthenticator
from spool.broker.sasl_listener import SaslListener, sasl_listeners
from spool.broker.server import CloseConnection, Connection
from spool.protocol._generated import ApiVersionsResponse
from spool.protocol._generated.api_versions_response import ApiVersion
from spool.protocol.error_versions import downgrade, needs_downgrade
from spool.protocol.errors import Errors
from spool.protocol.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    parse_request_header,
    peek_request_header,
    response_header,
)
from spool.protocol.primitives import ProtocolDecodeError

log = logging.getLogger("spool.dispatch")
FETCH_KEY = 1
_SIZE = struct.Struct(">i")
DESCRIBE_QUORUM_KEY = 55
ALWAYS_SERVED = frozenset({API_VERSIONS_KEY, DESCRIBE_QUORUM_KEY})  # rule 5


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Any
    conn: Connection
    header: RequestHeader
    timer: RequestTimer | None = None  # its request metrics (rule 8)

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def listener_name(self) -> str:
        """The listener the request came in on (``PLAINTEXT``, ``CONTROLLER``...)."""
        return self.conn.listener_name

    @property
    def principal(self):
        """The connection's ``KafkaPrincipal`` (``User:ANONYMOUS`` until TLS or SASL say)."""
        return self.conn.principal

    @property
    def plane(self) -> str:
        """``"controller"`` on a listener of ``controller.listener.names``, else ``"broker"``."""
        return CONTROLLER_PLANE if self.conn.controller_listener else BROKER_PLANE


def unsupported_api_versions(correlation_id: int, plane: str = BROKER_PLANE) -> list:
    body = ApiVersionsResponse(
        error_code=Errors.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                  for k, lo, hi in advertised(plane)],
    )
    out: list = [b"", response_header(correlation_id, False)]
    body.encode(0, out)
    out[0] = _SIZE.pack(sum(len(c) for c in out))
    return out


async def _ready(chunks: list) -> list:
    return chunks


class Dispatcher:
    """Turns frames into handler calls for one broker."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        config = getattr(broker, "config", None)
        self.sasl: dict[str, SaslListener] = (
            sasl_listeners(config, self._scram_credential) if config is not None else {})
        for lst in self.sasl.values():
            if lst.unsecured_oauthbearer:
                log.warning("listener %s accepts unsecured OAUTHBEARER tokens (anyone may name "
                            "any principal: development only; set listener.name.%s.oauthbearer."
                            "sasl.server.callback.handler.class to validate JWTs)",
                            lst.name, lst.name.lower())
        # the server reads no larger frame on a SASL listener until authentication completes
        self.frame_limits = {name: lst.max_receive_size for name, lst in self.sasl.items()}
        metrics = broker.metrics
        self._apis: dict[int, tuple[ApiMetrics, ...]] = {}  # api key -> where it counts
        fetch = metrics.api("Fetch")  # (last: errors count in the API's own name)
        self._consumer_fetch = (metrics.api("FetchConsumer"), fetch)
        self._follower_fetch = (metrics.api("FetchFollower"), fetch)

    def reload_sasl(self, dynamic) -> None:
        """The SASL listeners' settings changed (dynamic configs): new connections get the
        new ones; connections already authenticating or authenticated keep theirs."""
        self.sasl = sasl_listeners(self.broker.config, self._scram_credential, dynamic)
        self.frame_limits = {name: lst.max_receive_size for name, lst in self.sasl.items()}

    def _scram_credential(self, user: str, mechanism):
        """A user's SCRAM credential from the broker's security image (None: unknown)."""
        image = getattr(self.broker, "security_image", None)
        return image.scram.get((user, mechanism)) if image is not None else None

    def _authenticator(self, conn: Connection) -> SaslAuthenticator:
        plane = CONTROLLER_PLANE if conn.controller_listener else BROKER_PLANE
        registry = REGISTRIES[plane]

        def version_ok(api_key: int, version: int) -> bool:
            spec = registry.get(api_key)
            return spec is not None and spec.supports(version)

        conn.sasl = SaslAuthenticator(self.sasl[conn.listener_name], conn, version_ok)
        return conn.sasl

    def prepare(self, conn: Connection, frame: bytearray) -> Awaitable[list | None]:
        """Check and decode ``frame`` now (rules 1-3, 6); the awaitable runs the handler
        (rule 4).

        Called by the connection's reader in arrival order, before it looks at
        the next frame: ``CloseConnection`` here means no later frame runs.
        """
        start = perf_counter()
        auth = conn.sasl
        if auth is None and conn.listener_name in self.sasl:
            auth = self._authenticator(conn)
        if auth is not None:
            answer = auth.gate(frame)  # rule 6
            if answer is not PROCEED:
                return _ready(answer)
        try:
            api_key, version, correlation_id = peek_request_header(frame)
        except ProtocolDecodeError as e:
            raise CloseConnection(f"bad request header: {e}") from e
        plane = CONTROLLER_PLANE if conn.controller_listener else BROKER_PLANE
        spec = REGISTRIES[plane].get(api_key)
        if spec is None:
            raise CloseConnection(f"api key {api_key} is not served on listener "
                                  f"{conn.listener_name} ({plane})")
        if not spec.supports(version):
            if api_key == API_VERSIONS_KEY:
                return _ready(unsupported_api_versions(correlation_id, plane))
            raise CloseConnection(f"{spec.name} v{version} is not supported")
        flexible = spec.request_cls.is_flexible(version)
        try:
            header, pos = parse_request_header(frame, flexible)
            request, _ = spec.request_cls.decode(memoryview(frame), pos, version)
        except ProtocolDecodeError as e:
            raise CloseConnection(f"malformed {spec.name} v{version}: {e}") from e
        metrics = self.broker.metrics
        apis = self._apis.get(api_key)
        if apis is None:
            apis = self._apis[api_key] = (metrics.api(spec.name),)
        if api_key == FETCH_KEY:  # Kafka counts a Fetch twice: as Fetch and as one of these
            follower = (request.replica_state.replica_id if version >= 15
                        else request.replica_id) >= 0
            apis = self._follower_fetch if follower else self._consumer_fetch
        timer = RequestTimer(apis, version, len(frame) - pos, start, metrics.pending)
        ctx = RequestContext(self.broker, conn, header, timer)
        metrics.request_queue_size += 1
        return self._handle(spec, ctx, request, correlation_id, flexible, len(frame))

    async def _handle(self, spec, ctx: RequestContext, request, correlation_id: int,
                      flexible: bool, size: int = 0) -> list | None:
        timer = ctx.timer
        timer.dequeued = perf_counter()
        self.broker.metrics.request_queue_size -= 1
        ready = self.broker.ready_for_clients
        if (ready is not None and not ready.is_set() and not ctx.conn.controller_listener
                and spec.api_key not in ALWAYS_SERVED):
            await ready.wait()  # a cluster broker serves clients once unfenced (rule 5)
        quotas = self.broker.client_quotas  # None unless a client quota is set (rule 7)
        if quotas is None or ctx.conn.controller_listener:
            response = await spec.fn(ctx, request)
        else:
            response = await quotas.run(spec, ctx, request, size)
        if response is None:
            timer.done = now = perf_counter()
            timer.sent(now, now)  # (acks=0: nothing to send)
            return None
        if needs_downgrade(spec.api_key, ctx.api_version):
            downgrade(spec.api_key, ctx.api_version, response)
        timer.apis[-1].count_errors(error_codes(spec.api_key, response))
        timer.throttle_ms = getattr(response, "throttle_time_ms", 0) or 0
        out: list = [b"", response_header(correlation_id, flexible, spec.api_key)]
        response.encode(ctx.api_version, out)
        out[0] = _SIZE.pack(sum(len(c) for c in out))
        out.append(timer)  # (zero bytes: the connection calls timer.sent once sent)
        timer.done = perf_counter()
        return out
