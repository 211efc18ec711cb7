"""Confluent's Schema Registry REST API (v1) over a ``model.Registry``: ``make_app``.

Routes (Confluent's paths and answers; ``{v}`` is 1..2^31-1, ``latest`` or -1)::

  GET    /                                        {}
  GET    /subjects                  ?deleted ?deletedOnly ?subjectPrefix ?offset ?limit
  GET    /subjects/{s}/versions     ?deleted ?deletedOnly ?offset ?limit   [versions]
  POST   /subjects/{s}/versions     (schema, schemaType, references[, id, version])
                                                  {"id": n}
  GET    /subjects/{s}/versions/{v} ?deleted      {subject, version, id, schema, ...}
  GET    /subjects/{s}/versions/{v}/schema        the schema's text itself
  GET    /subjects/{s}/versions/{v}/referencedby  [ids]
  DELETE /subjects/{s}/versions/{v} ?permanent    v
  POST   /subjects/{s}              ?deleted      lookup: {subject, version, id, schema}
  DELETE /subjects/{s}              ?permanent    [versions]
  GET    /schemas/ids/{id}                        {schema[, schemaType, references]}
  GET    /schemas/ids/{id}/schema                 the schema's text itself
  GET    /schemas/ids/{id}/versions ?deleted      [{"subject", "version"}]
  GET    /schemas/ids/{id}/subjects ?deleted      [subjects]
  GET    /schemas/types                           ["JSON", "PROTOBUF", "AVRO"]
  GET    /schemas    ?subjectPrefix ?deleted ?latestOnly ?offset ?limit
                                                  [{subject, version, id, schema, ...}]
  GET    /contexts                                ["."] (the default context only)
  POST   /compatibility/subjects/{s}/versions[/{v}] ?verbose
                                                  {"is_compatible"[, "messages"]}
  GET    /config[/{s}]              ?defaultToGlobal   {"compatibilityLevel": level}
  PUT    /config[/{s}]              {"compatibility": level} -> the same
  DELETE /config[/{s}]                            {"compatibilityLevel": the one removed}
  GET    /mode[/{s}]                ?defaultToGlobal   {"mode": mode}
  PUT    /mode[/{s}]                ?force   {"mode": mode} -> the same
  DELETE /mode[/{s}]                              {"mode": the one removed}

A schema answer carries ``schemaType`` only when it is not AVRO and ``references`` only
when there are some, as Confluent's do; ``messages`` only with ``verbose=true`` and
when there are some. Every route also answers with a trailing slash (Jersey's
matching). ``?format`` (PROTOBUF ``serialized``, AVRO ``resolved``) on the routes that
answer a schema, and ``?normalize=true`` on registration: ``api_format``. Media types, the body limit and the error bodies: ``api_http``. The
handlers hold no state: every answer is the registry's.
"""

from __future__ import annotations

from aiohttp import web

from spool.registry import model
from spool.registry.api_format import formatted, normalized
from spool.registry.api_http import (
    AUTHENTICATE,
    DEFAULT_MAX_REQUEST_BYTES,
    MAX_BYTES,
    PERMISSIONS,
    REGISTRY,
    SCHEMA_TYPES_ANSWER,
    BadBody,
    SchemaRequest,
    answer,
    authentication,
    authorization,
    body,
    confluent_errors,
    flag,
    page,
    raw,
    readable,
    schema_id_of,
    schema_json,
    version_of,
)
from spool.registry.auth import Authenticate
from spool.registry.permissions import Permissions


def _registry(request: web.Request) -> model.Registry:
    return request.app[REGISTRY]


def _subject(request: web.Request) -> str:
    return request.match_info["subject"]


def _version(request: web.Request) -> int | str:
    return version_of(request.match_info["version"])


async def _formatted(request: web.Request, v: model.SchemaVersion) -> model.SchemaVersion:
    """``v`` in the ``format`` the query asks for (``api_format``)."""
    return await formatted(_registry(request), v, request.query.get("format"))


async def root(request: web.Request) -> web.Response:
    return answer(request, {})


async def list_subjects(request: web.Request) -> web.Response:
    reg, prefix = _registry(request), request.query.get("subjectPrefix", "")
    if flag(request, "deletedOnly", "deleted_only"):
        live = set(await reg.subjects(False, prefix))
        subjects = [s for s in await reg.subjects(True, prefix) if s not in live]
    else:
        subjects = await reg.subjects(flag(request, "deleted"), prefix)
    subjects = [s for s in subjects if readable(request, s)]
    return answer(request, page(request, subjects))


async def list_versions(request: web.Request) -> web.Response:
    reg, subject = _registry(request), _subject(request)
    if flag(request, "deletedOnly", "deleted_only"):
        live = set(await reg.versions(subject, False))
        versions = [v for v in await reg.versions(subject, True) if v not in live]
    else:
        versions = await reg.versions(subject, flag(request, "deleted"))
    return answer(request, page(request, versions))


async def register(request: web.Request) -> web.Response:
    subject = _subject(request)
    if not subject.strip() or any(ord(c) < 0x20 for c in subject):
        raise model.RegistryError(422, 42208, "The specified subject is not valid.")
    req = SchemaRequest(await body(request))
    schema = req.schema
    if flag(request, "normalize"):
        schema = await normalized(_registry(request), schema, req.schema_type,
                                  req.references)
    schema_id = await _registry(request).register(
        subject, schema, req.schema_type, req.references, req.schema_id, req.version)
    return answer(request, {"id": schema_id})


async def get_version(request: web.Request) -> web.Response:
    v = await _registry(request).version(_subject(request), _version(request),
                                         flag(request, "deleted"))
    return answer(request, schema_json(await _formatted(request, v)))


async def get_version_schema(request: web.Request) -> web.Response:
    v = await _registry(request).version(_subject(request), _version(request),
                                         flag(request, "deleted"))
    return raw(request, (await _formatted(request, v)).schema)


async def referenced_by(request: web.Request) -> web.Response:
    ids = await _registry(request).referenced_by(_subject(request), _version(request))
    return answer(request, page(request, ids))


async def delete_version(request: web.Request) -> web.Response:
    v = await _registry(request).delete_version(_subject(request), _version(request),
                                                flag(request, "permanent"))
    return answer(request, v)


async def lookup(request: web.Request) -> web.Response:
    req = SchemaRequest(await body(request))
    v = await _registry(request).lookup(_subject(request), req.schema, req.schema_type,
                                        req.references, flag(request, "deleted"))
    return answer(request, schema_json(await _formatted(request, v)))


async def delete_subject(request: web.Request) -> web.Response:
    versions = await _registry(request).delete_subject(_subject(request),
                                                       flag(request, "permanent"))
    return answer(request, versions)


async def _by_id(request: web.Request) -> model.SchemaVersion:
    """The schema of the path's id; 403 when the user may read no subject using it."""
    reg, schema_id = _registry(request), schema_id_of(request.match_info["id"])
    v = await reg.by_id(schema_id)
    if request.app[PERMISSIONS] is not None and not any(
            readable(request, s) for s, _ in await reg.subject_versions_of_id(schema_id,
                                                                              True)):
        raise model.RegistryError(403, 40301, "User is denied operation Read on "
                                  f"Schema: {schema_id}")
    return v


async def schema_by_id(request: web.Request) -> web.Response:
    v = await _by_id(request)
    return answer(request, schema_json(await _formatted(request, v), with_subject=False))


async def schema_text_by_id(request: web.Request) -> web.Response:
    v = await _by_id(request)
    return raw(request, (await _formatted(request, v)).schema)


async def id_versions(request: web.Request) -> web.Response:
    pairs = await _registry(request).subject_versions_of_id(
        schema_id_of(request.match_info["id"]), flag(request, "deleted"))
    return answer(request, page(request, [{"subject": s, "version": v} for s, v in pairs
                                          if readable(request, s)]))


async def id_subjects(request: web.Request) -> web.Response:
    pairs = await _registry(request).subject_versions_of_id(
        schema_id_of(request.match_info["id"]), flag(request, "deleted"))
    return answer(request, page(request, list(dict.fromkeys(
        s for s, _ in pairs if readable(request, s)))))


async def schema_types(request: web.Request) -> web.Response:
    return answer(request, SCHEMA_TYPES_ANSWER)


async def list_schemas(request: web.Request) -> web.Response:
    """Every version of every subject (by subject, then version), as Confluent lists them."""
    reg, deleted = _registry(request), flag(request, "deleted")
    out = []
    for subject in await reg.subjects(deleted, request.query.get("subjectPrefix", "")):
        if not readable(request, subject):
            continue
        try:
            versions = await reg.versions(subject, deleted)
            if flag(request, "latestOnly"):
                versions = versions[-1:]
            out += [schema_json(await _formatted(request, await reg.version(subject, v,
                                                                            deleted)))
                    for v in versions]
        except model.RegistryError as e:  # deleted meanwhile
            if e.status != 404:
                raise
    return answer(request, page(request, out))


async def contexts(request: web.Request) -> web.Response:
    return answer(request, ["."])


async def check(request: web.Request) -> web.Response:
    version = request.match_info.get("version")
    req = SchemaRequest(await body(request))
    result = await _registry(request).check(
        _subject(request), None if version is None else version_of(version),
        req.schema, req.schema_type, req.references)
    out: dict[str, object] = {"is_compatible": result.is_compatible}
    if flag(request, "verbose") and result.messages:
        out["messages"] = list(result.messages)
    return answer(request, out)


def _config_subject(request: web.Request) -> str | None:
    return request.match_info.get("subject")


async def get_config(request: web.Request) -> web.Response:
    level = await _registry(request).get_config(_config_subject(request),
                                                flag(request, "defaultToGlobal"))
    return answer(request, {"compatibilityLevel": level})


async def put_config(request: web.Request) -> web.Response:
    value = await body(request)
    level = value.get("compatibility", value.get("compatibilityLevel"))
    if not isinstance(level, str) or level.upper() not in model.COMPATIBILITY_LEVELS:
        raise model.invalid_compatibility_level(level)
    done = await _registry(request).set_config(_config_subject(request), level.upper())
    return answer(request, {"compatibility": done})


async def delete_config(request: web.Request) -> web.Response:
    level = await _registry(request).delete_config(_config_subject(request))
    return answer(request, {"compatibilityLevel": level})


async def get_mode(request: web.Request) -> web.Response:
    mode = await _registry(request).get_mode(_config_subject(request),
                                             flag(request, "defaultToGlobal"))
    return answer(request, {"mode": mode})


async def put_mode(request: web.Request) -> web.Response:
    mode = (await body(request)).get("mode")
    if not isinstance(mode, str) or mode.upper() not in model.MODES:
        raise model.invalid_mode(mode)
    done = await _registry(request).set_mode(_config_subject(request), mode.upper(),
                                             flag(request, "force"))
    return answer(request, {"mode": done})


async def delete_mode(request: web.Request) -> web.Response:
    mode = await _registry(request).delete_mode(_config_subject(request))
    return answer(request, {"mode": mode})


S = "/subjects/{subject}"
V = S + "/versions/{version}"
ROUTES = [
    ("GET", "/", root),
    ("GET", "/subjects", list_subjects),
    ("GET", S + "/versions", list_versions),
    ("POST", S + "/versions", register),
    ("GET", V, get_version),
    ("GET", V + "/schema", get_version_schema),
    ("GET", V + "/referencedby", referenced_by),
    ("DELETE", V, delete_version),
    ("POST", S, lookup),
    ("DELETE", S, delete_subject),
    ("GET", "/schemas/ids/{id}", schema_by_id),
    ("GET", "/schemas/ids/{id}/schema", schema_text_by_id),
    ("GET", "/schemas/ids/{id}/versions", id_versions),
    ("GET", "/schemas/ids/{id}/subjects", id_subjects),
    ("GET", "/schemas/types", schema_types),
    ("GET", "/schemas", list_schemas),
    ("GET", "/contexts", contexts),
    ("POST", "/compatibility" + S + "/versions", check),
    ("POST", "/compatibility" + V, check),
    *[(m, p, h) for p in ("/config", "/config/{subject}")
      for m, h in (("GET", get_config), ("PUT", put_config), ("DELETE", delete_config))],
    *[(m, p, h) for p in ("/mode", "/mode/{subject}")
      for m, h in (("GET", get_mode), ("PUT", put_mode), ("DELETE", delete_mode))],
]


def make_app(registry: model.Registry, *,
             max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
             authenticate: Authenticate | None = None,
             permissions: Permissions | None = None) -> web.Application:
    """The aiohttp application serving ``registry``; a body over ``max_request_bytes``
    (``schema.registry.max.request.bytes``) is refused with 413 before it is parsed;
    with ``authenticate`` (``auth.BasicAuth``) every request is authenticated first, and
    with ``permissions`` (which needs ``authenticate``) allowed or refused (403)."""
    if permissions is not None and authenticate is None:
        raise ValueError("permissions need authentication")
    app = web.Application(middlewares=[confluent_errors, authentication, authorization],
                          client_max_size=max_request_bytes)
    app[REGISTRY] = registry
    app[MAX_BYTES] = max_request_bytes
    app[AUTHENTICATE] = authenticate
    app[PERMISSIONS] = permissions
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
        if path != "/":
            app.router.add_route(method, path + "/", handler)
    return app


__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "ROUTES", "BadBody", "make_app"]
