"""Request and response headers (sans-I/O).

Request header versions::

    v0: api_key int16, api_version int16, correlation_id int32
    v1: v0 + client_id NULLABLE_STRING (int16 length, -1 = null)
    v2: v1 + tagged fields (client_id stays a legacy int16-length string)

Response header versions::

    v0: correlation_id int32
    v1: v0 + tagged fields

A request uses header v2 when its (api_key, api_version) is flexible, else
v1; the response uses v1 when flexible, else v0 — except ApiVersions, whose
response header is always v0 (clients parse it before they know versions).
``parse_request_header`` raises ``ProtocolDecodeError`` on a malformed header.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from spool.protocol.primitives import ProtocolDecodeError, read_uvarint

API_VERSIONS_KEY = 18

_REQ_FIXED = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_EMPTY_TAGS = b"\x00"


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_request_header(frame: memoryview | bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without reading further."""
    if len(frame) < 8:
        raise ProtocolDecodeError("request header is truncated")
    return _REQ_FIXED.unpack_from(frame, 0)


def parse_request_header(frame: memoryview | bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode a request header v1 (or v2 when ``flexible``); return it and the body position."""
    api_key, api_version, correlation_id = peek_request_header(frame)
    pos = 8
    if len(frame) < pos + 2:
        raise ProtocolDecodeError("request header client_id is truncated")
    (n,) = _INT16.unpack_from(frame, pos)
    pos += 2
    client_id: str | None
    if n == -1:
        client_id = None
    elif n < 0 or pos + n > len(frame):
        raise ProtocolDecodeError(f"bad client_id length {n}")
    else:
        try:
            client_id = bytes(frame[pos : pos + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError("client_id is not UTF-8") from e
        pos += n
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def skip_tagged_fields(buf: memoryview | bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolDecodeError("tagged field runs past the end of the header")
    return pos


def response_header(correlation_id: int, flexible: bool, api_key: int = -1) -> bytes:
    """Encode a response header: v1 when flexible, v0 otherwise (always v0 for ApiVersions)."""
    if flexible and api_key != API_VERSIONS_KEY:
        return _INT32.pack(correlation_id) + _EMPTY_TAGS
    return _INT32.pack(correlation_id)


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool
) -> bytes:
    """Encode a request header (v2 when flexible, else v1); for clients and tests."""
    out = _REQ_FIXED.pack(api_key, api_version, correlation_id)
    if client_id is None:
        out += _INT16.pack(-1)
    else:
        raw = client_id.encode("utf-8")
        out += _INT16.pack(len(raw)) + raw
    if flexible:
        out += _EMPTY_TAGS
    return out
