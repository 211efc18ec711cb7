"""The HTTP side of the registry's API: media types, errors, request parsing.

Media types: POST and PUT bodies must be ``application/vnd.schemaregistry.v1+json``,
``application/vnd.schemaregistry+json``, ``application/json`` or
``application/octet-stream`` (no Content-Type is octet-stream), else 415; answers are
the best of the first three that ``Accept`` allows (none: the v1 type), else 406.

Errors (``confluent_errors``, the middleware) are ``{"error_code", "message"}``: a
``RegistryError``'s status and code; an unknown route 404/404, a wrong method 405/405; a
body that is not JSON, or JSON of the wrong shape (not an object, a field of the wrong
type), 400/400 as Confluent 7's rest-utils map Jackson's parse and mapping errors
(confluentinc/schema-registry#2729), and an empty body 422/422 (its bean validation of
a null request, #2230); a body over the app's ``MAX_BYTES`` 413/413, refused from its
Content-Length before it is read (or as soon as a chunked one passes the limit); a bad
version 422/42202; a schema id, offset or limit that is not an integer 404/404 (Jersey's
answer to an unparseable path or query parameter); anything else 500/500, the exception
logged. ``Accept`` is checked first, the body's type and size next, then the route.

Query booleans are true when ``true`` in any case (Jersey's ``Boolean.valueOf``), so
``deleted=True`` from confluent-kafka-python counts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from spool.registry import model
from spool.registry.auth import FORWARDED_AUTHORIZATION, REALM, Authenticate, Unauthorized
from spool.registry.permissions import Permissions

log = logging.getLogger(__name__)

SCHEMA_V1 = "application/vnd.schemaregistry.v1+json"
SCHEMA_ANY = "application/vnd.schemaregistry+json"
JSON = "application/json"
REQUEST_TYPES = frozenset({SCHEMA_V1, SCHEMA_ANY, JSON, "application/octet-stream"})
# What answers may be, with the server's preference (Confluent's @Produces qs values).
ANSWER_TYPES = ((SCHEMA_V1, 1.0), (SCHEMA_ANY, 0.9), (JSON, 0.5))
# A body's limit: below Kafka's default message.max.bytes (1048588) with room for the
# record's key, the other fields of its value and the batch header, so an accepted
# schema fits in a _schemas record.
DEFAULT_MAX_REQUEST_BYTES = 1_000_000
SCHEMA_TYPES_ANSWER = ["JSON", "PROTOBUF", "AVRO"]  # Confluent's order
MAX_VERSION = 2**31 - 1

REGISTRY = web.AppKey("registry", model.Registry)
MAX_BYTES = web.AppKey("max_request_bytes", int)
AUTHENTICATE = web.AppKey("authenticate", Authenticate | None)  # type: ignore[arg-type]
PERMISSIONS = web.AppKey("permissions", Permissions | None)  # type: ignore[arg-type]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error(status: int, code: int, message: str, content_type: str = SCHEMA_V1) -> web.Response:
    return web.Response(status=status, content_type=content_type,
                        text=json.dumps({"error_code": code, "message": message}))


def answer(request: web.Request, value: Any) -> web.Response:
    return web.Response(text=json.dumps(value), content_type=request["answer_type"])


def raw(request: web.Request, text: str) -> web.Response:
    return web.Response(text=text, content_type=request["answer_type"])


class BadBody(Exception):
    """A request body Confluent would refuse before the registry sees it."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def negotiate(accept: str) -> str | None:
    """The answer type ``accept`` (an Accept header) allows, best first; None: none."""
    best: tuple[float, float, str] | None = None
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        media, q = pieces[0].lower(), 1.0
        for p in pieces[1:]:
            if p.startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        if q <= 0 or not media:
            continue
        for candidate, qs in ANSWER_TYPES:
            kind = candidate.split("/")[0]
            if media in (candidate, "*/*", "*", f"{kind}/*"):
                score = (q, qs, candidate)
                if best is None or score[:2] > best[:2]:
                    best = score
    return best[2] if best else None


@web.middleware
async def confluent_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Media types, the size limit, and every error as Confluent's JSON body."""
    answer_type = negotiate(request.headers.get("Accept", "") or "*/*")
    if answer_type is None:
        return error(406, 406, "HTTP 406 Not Acceptable")
    request["answer_type"] = answer_type
    try:
        if request.method in ("POST", "PUT"):
            if _media_type(request.headers.get("Content-Type", "application/octet-stream")) \
                    not in REQUEST_TYPES:
                return error(415, 415, "HTTP 415 Unsupported Media Type", answer_type)
            limit = request.app[MAX_BYTES]
            if request.content_length is not None and request.content_length > limit:
                return _too_large(request.content_length, limit, answer_type)
        return await handler(request)
    except model.RegistryError as e:
        return error(e.status, e.error_code, e.message, answer_type)
    except model.InvalidSchema as e:
        e2 = model.invalid_schema(str(e))
        return error(e2.status, e2.error_code, e2.message, answer_type)
    except BadBody as e:
        return error(e.status, e.status, str(e), answer_type)
    except web.HTTPRequestEntityTooLarge:  # a chunked body that passed the limit
        return _too_large(None, request.app[MAX_BYTES], answer_type)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return error(e.status, e.status, f"HTTP {e.status} {e.reason}", answer_type)
    except Exception:  # a bug or a backend failure: an answer, never a dropped connection
        log.exception("%s %s failed", request.method, request.path)
        return error(500, 500, "Internal Server Error", answer_type)


@web.middleware
async def authentication(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With the app's ``AUTHENTICATE``: 401 unless the request's credentials are good
    (``auth``); the header is kept for a write forwarded to the primary."""
    authenticate = request.app[AUTHENTICATE]
    if authenticate is None:
        return await handler(request)
    header = request.headers.get("Authorization")
    try:
        request["user"] = await authenticate(header)
    except Unauthorized:
        response = error(401, 401, "Unauthorized", request["answer_type"])
        response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}"'
        return response
    token = FORWARDED_AUTHORIZATION.set(header)
    try:
        return await handler(request)
    finally:
        FORWARDED_AUTHORIZATION.reset(token)


def _required(request: web.Request) -> tuple[str, str | None] | None:
    """The (operation, subject) a request needs (``permissions``), None: none beyond
    authentication (lists and ids are filtered by their handlers; unknown routes 404)."""
    resource = request.match_info.route.resource
    if resource is None:
        return None
    template = resource.canonical.rstrip("/") or "/"
    subject = request.match_info.get("subject")
    if template.startswith("/compatibility/"):
        return "READ", subject
    if subject is not None:
        reads = request.method == "GET" or (
            request.method == "POST" and template == "/subjects/{subject}")
        return ("READ" if reads else "WRITE"), subject
    if template in ("/config", "/mode") and request.method != "GET":
        return "WRITE", None
    return None


@web.middleware
async def authorization(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With the app's ``PERMISSIONS``: 403/40301 unless the user may do what the route
    does to its subject (``permissions``)."""
    permissions = request.app[PERMISSIONS]
    if permissions is not None:
        needed = _required(request)
        if needed is not None:
            permissions.check(request["user"], *needed)
    return await handler(request)


def readable(request: web.Request, subject: str) -> bool:
    """The request's user may READ ``subject`` (always, without permissions)."""
    permissions = request.app[PERMISSIONS]
    return permissions is None or permissions.allows(request["user"], "READ", subject)


def _too_large(size: int | None, limit: int, answer_type: str) -> web.Response:
    of = "" if size is None else f" of {size} bytes"
    return error(413, 413, f"Request body{of} exceeds the limit of {limit} bytes",
                 answer_type)


# Request parsing, shared by the handlers.

def flag(request: web.Request, *names: str) -> bool:
    """A query boolean (any of ``names``): true when ``true`` in any case."""
    return any(request.query.get(n, "").lower() == "true" for n in names)


def page(request: web.Request, items: list[Any]) -> list[Any]:
    """``offset`` and ``limit`` (-1 or absent: all) applied to ``items``."""
    try:
        offset = max(0, int(request.query.get("offset", "0")))
        limit = int(request.query.get("limit", "-1"))
    except ValueError:
        raise web.HTTPNotFound() from None
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def version_of(text: str) -> int | str:
    """A path's version: an int in [1, 2^31-1] or ``latest`` (also spelt -1), else 42202."""
    if text == "latest":
        return "latest"
    try:
        v = int(text)
    except ValueError:
        raise model.invalid_version(text) from None
    if v == -1:
        return "latest"
    if not 1 <= v <= MAX_VERSION:
        raise model.invalid_version(text)
    return v


def schema_id_of(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise web.HTTPNotFound() from None


async def body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (400 when not JSON or not an object, 422 when empty)."""
    data = await request.read()
    if not data.strip():
        raise BadBody(422, "The request body must not be empty")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BadBody(400, f"Invalid UTF-8 in the request body: {e}") from None
    except json.JSONDecodeError as e:
        raise BadBody(400, f"Unexpected character in the request body: {e}") from None
    if not isinstance(value, dict):
        raise BadBody(400, f"The request body must be a JSON object, not "
                      f"{type(value).__name__}")
    return value


class SchemaRequest:
    """A register, lookup or compatibility body: ``schema``, ``schemaType``,
    ``references`` (and, for register in IMPORT mode, ``id`` and ``version``)."""

    def __init__(self, value: dict[str, Any]):
        schema = value.get("schema")
        if schema is None:
            raise model.invalid_schema("Empty schema")
        if not isinstance(schema, str):
            raise BadBody(400, "Field 'schema' must be a string")
        self.schema: str = schema
        schema_type = value.get("schemaType")
        schema_type = "AVRO" if schema_type is None else schema_type
        if not isinstance(schema_type, str):
            raise BadBody(400, "Field 'schemaType' must be a string")
        if schema_type.upper() not in model.SCHEMA_TYPES:
            raise model.invalid_schema(f"Invalid schema type {schema_type}")
        self.schema_type: str = schema_type.upper()
        self.references = _references(value.get("references"))
        self.schema_id = _optional_int(value, "id")
        self.version = _optional_int(value, "version")


def _optional_int(value: dict[str, Any], name: str) -> int | None:
    v = value.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadBody(400, f"Field '{name}' must be an integer")
    return v


def _references(value: Any) -> list[model.Reference]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadBody(400, "Field 'references' must be a list")
    out = []
    for r in value:
        if not isinstance(r, dict):
            raise BadBody(400, "Each reference must be an object with name, subject and "
                          "version")
        name, subject, version = r.get("name"), r.get("subject"), r.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) \
                or isinstance(version, bool) or not isinstance(version, int):
            raise BadBody(400, "Each reference must be an object with name (a string), "
                          "subject (a string) and version (an integer)")
        out.append(model.Reference(name=name, subject=subject, version=version))
    return out


def schema_json(v: model.SchemaVersion, *, with_subject: bool = True) -> dict[str, Any]:
    """A schema as Confluent answers it: subject, version, id (``with_subject``), schema,
    schemaType unless AVRO, references when any."""
    out: dict[str, Any] = (
        {"subject": v.subject, "version": v.version, "id": v.id} if with_subject else {})
    if v.schema_type != "AVRO":
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                             for r in v.references]
    out["schema"] = v.schema
    return out
