"""From a request frame to a response frame: header, version checks, handler.

The rules, in order (Kafka's, see PROTOCOL.md):

1. Unknown API key: close the connection.
2. ApiVersions at a version we don't serve: a v0 body with
   UNSUPPORTED_VERSION and our full list (clients then retry at v0).
3. Any other API at a version outside its advertised range, or a request
   that does not decode: close the connection.
4. Otherwise decode, run the handler, encode: ``[size, header, *body]``.
   A handler returning None means "no response" (Produce with acks=0).
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any

from spool.broker.registry import REGISTRY, advertised
from spool.broker.server import CloseConnection, Connection
from spool.protocol._generated import ApiVersionsResponse
from spool.protocol._generated.api_versions_response import ApiVersion
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
_SIZE = struct.Struct(">i")


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Any
    conn: Connection
    header: RequestHeader

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""


def unsupported_api_versions(correlation_id: int) -> list:
    body = ApiVersionsResponse(
        error_code=Errors.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in advertised()],
    )
    out: list = [b"", response_header(correlation_id, False)]
    body.encode(0, out)
    out[0] = _SIZE.pack(sum(len(c) for c in out))
    return out


class Dispatcher:
    """Turns frames into handler calls for one broker."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def dispatch(self, conn: Connection, frame: bytearray) -> list | None:
        try:
            api_key, version, correlation_id = peek_request_header(frame)
        except ProtocolDecodeError as e:
            log.info("closing %s: %s", conn.peer, e)
            raise CloseConnection from e
        spec = REGISTRY.get(api_key)
        if spec is None:
            log.info("closing %s: unknown api key %d", conn.peer, api_key)
            raise CloseConnection
        if not spec.supports(version):
            if api_key == API_VERSIONS_KEY:
                return unsupported_api_versions(correlation_id)
            log.info("closing %s: %s v%d is not supported", conn.peer, spec.name, version)
            raise CloseConnection
        flexible = spec.request_cls.is_flexible(version)
        try:
            header, pos = parse_request_header(frame, flexible)
            request, _ = spec.request_cls.decode(memoryview(frame), pos, version)
        except ProtocolDecodeError as e:
            log.info("closing %s: malformed %s v%d: %s", conn.peer, spec.name, version, e)
            raise CloseConnection from e
        response = await spec.fn(RequestContext(self.broker, conn, header), request)
        if response is None:
            return None
        out: list = [b"", response_header(correlation_id, flexible, api_key)]
        response.encode(version, out)
        out[0] = _SIZE.pack(sum(len(c) for c in out))
        return out
