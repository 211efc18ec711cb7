"""Kafka Connect's REST API over a ``herder.Herder``: ``make_app(herder)``.

Routes, status codes and bodies are Kafka Connect's (ConnectorsResource,
ConnectorPluginsResource, RootResource, InternalConnectResource):

- ``GET /``: ``{"version", "commit", "kafka_cluster_id"}``.
- ``GET /connectors`` (names; ``?expand=status`` and/or ``?expand=info``: ``{name:
  {"status": ..., "info": ...}}``), ``POST /connectors`` (``{"name", "config",
  "initial_state"?: RUNNING|PAUSED|STOPPED}``: 201 with the ConnectorInfo and ``Location``;
  409 when it exists).
- ``GET|DELETE /connectors/{name}`` (204), ``GET|PUT|PATCH /connectors/{name}/config``
  (PUT: 201 created / 200 replaced; PATCH (KIP-477): 200; a ``name`` in the body must be
  the URL's, 400 otherwise), ``GET /connectors/{name}/status``, ``GET
  /connectors/{name}/tasks``, ``GET /connectors/{name}/tasks/{task}/status``,
  ``POST /connectors/{name}/restart[?includeTasks=&onlyFailed=]`` (204, or 202 with the
  status when tasks are included or only failed ones asked), ``POST
  /connectors/{name}/tasks/{task}/restart`` (204), ``PUT .../pause`` and ``.../resume``
  (202), ``PUT .../stop`` (204), ``GET|PATCH|DELETE .../offsets`` (KIP-875; PATCH and
  DELETE answer ``{"message"}``), ``GET .../topics`` and ``PUT .../topics/reset`` (202;
  KIP-558).
- ``GET /connector-plugins[?connectorsOnly=false]``, ``GET
  /connector-plugins/{plugin}/config``, ``PUT /connector-plugins/{plugin}/config/validate``
  (the ConfigInfos, 200 even when the config has errors; a ``connector.class`` other than
  ``plugin`` is 400; none is taken to be ``plugin``).
- ``POST /connectors/{name}/tasks`` (internal): a worker hands the leader its connector's
  task configs (a JSON list of string maps); ``Herder.put_task_configs``.

Errors are ``{"error_code": status, "message": ...}``: ``herder.ConnectRestError`` as it
says; ``api.ConfigError`` 400; a body that is not JSON (or not the JSON shape the route
takes) 400, one sent with a Content-Type other than JSON 415; an unknown path 404 and a
known path with another method 405 (Jersey's ``HTTP 404 Not Found`` wording); a herder
call running over ``request_timeout`` 500 ``Request timed out``; anything else 500 with
the exception's message (logged with its trace).

Forwarding: a herder call raising ``herder.NotLeaderError`` makes this worker send the
same request (method, path, query, body) to the leader's URL with ``forward=true`` on the
first hop and ``forward=false`` on the second, relaying the answer's status and body as
they are (Kafka's HerderRequestHandler). A request that already carries
``forward=false`` is not forwarded again: 409 ``Cannot complete request because of a
conflicting operation (e.g. worker rebalance)``; no known leader: 409 ``Cannot complete
request momentarily due to no known leader URL, likely because a rebalance was
underway.``; a leader that cannot be reached: 500 ``IO Error trying to forward REST
request: ...`` (Kafka's RestClient).

``RestClient(timeout)``: one aiohttp session for worker-to-worker requests
(``request(method, url, body) -> (status, JSON or text)``, never raising for an error
status), used for forwarding and by the herder to reach the leader.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp import web

from spool.connect import api
from spool.connect.herder import ConnectRestError, Herder, NotLeaderError, TaskId

log = logging.getLogger("spool.connect.rest")

HERDER = web.AppKey("herder", object)  # a Herder, or a callable answering the Herder
CLIENT = web.AppKey("rest_client", object)
TIMEOUT = web.AppKey("request_timeout", float)
JSON_TYPE = "application/json"
INITIAL_STATES = {"RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}
NO_LEADER = ("Cannot complete request momentarily due to no known leader URL, likely "
             "because a rebalance was underway.")
TWO_HOPS = ("Cannot complete request because of a conflicting operation (e.g. worker "
            "rebalance)")


class BadRequest(ConnectRestError):
    def __init__(self, message: str) -> None:
        super().__init__(400, message)


class Relayed(Exception):
    """The leader's answer to a forwarded request, to be sent as it is."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers  # Content-Type and Location, when the leader sent them


def error_body(status: int, message: str | None) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


def _json(value: Any, status: int = 200, headers: dict[str, str] | None = None
          ) -> web.Response:
    return web.json_response(value, status=status, headers=headers)


class RestClient:
    """Worker-to-worker HTTP (module doc)."""

    def __init__(self, timeout: float = 90.0) -> None:
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def raw(self, method: str, url: str, data: bytes | None,
                  content_type: str | None = JSON_TYPE) -> tuple[int, bytes, dict[str, str]]:
        """The answer's status, body and Content-Type/Location headers."""
        headers = {"Accept": JSON_TYPE}
        if data is not None and content_type:
            headers["Content-Type"] = content_type
        async with self._get().request(method, url, data=data, headers=headers) as r:
            kept = {k: r.headers[k] for k in ("Content-Type", "Location") if k in r.headers}
            return r.status, await r.read(), kept

    async def request(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        status, raw, _ = await self.raw(method, url, data)
        text = raw.decode("utf-8", errors="replace")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# ---------------------------------------------------------------------------- helpers


async def _call(request: web.Request, fn: Callable[..., Awaitable[Any]], *args: Any,
                **kw: Any) -> Any:
    """A herder call: the request timeout, and forwarding on NotLeaderError."""
    try:
        return await asyncio.wait_for(fn(*args, **kw), request.app[TIMEOUT])
    except TimeoutError:
        raise ConnectRestError(500, "Request timed out") from None
    except NotLeaderError as e:
        await _forward(request, e.leader_url)
        raise AssertionError("unreachable") from None


async def _forward(request: web.Request, leader_url: str | None) -> None:
    forward = request.query.get("forward")
    if forward is not None and forward.lower() == "false":
        log.error("request '%s %s' failed: the target worker was not found within two hops",
                  request.method, request.path)
        raise ConnectRestError(409, TWO_HOPS)
    if not leader_url:
        raise ConnectRestError(409, NO_LEADER)
    query = [(k, v) for k, v in request.query.items() if k != "forward"]
    query.append(("forward", "true" if forward is None else "false"))
    url = leader_url.rstrip("/") + request.rel_url.raw_path + "?" + urlencode(query)
    data = await request.read() if request.body_exists else None
    client: RestClient = request.app[CLIENT]  # type: ignore[assignment]
    log.debug("forwarding %s %s to %s", request.method, request.path, url)
    try:
        status, body, headers = await client.raw(request.method, url, data or None,
                                               request.headers.get("Content-Type", JSON_TYPE))
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        raise ConnectRestError(500, "IO Error trying to forward REST request: "
                                    f"{e or type(e).__name__} ({leader_url})") from None
    raise Relayed(status, body, headers)


async def _body(request: web.Request) -> Any:
    ctype = request.headers.get("Content-Type")
    if ctype and request.content_type not in (JSON_TYPE, "text/json") \
            and not request.content_type.endswith("+json"):
        raise ConnectRestError(415, "HTTP 415 Unsupported Media Type")
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise BadRequest(f"Request body is not valid JSON: {e}") from None


def _str_map(value: Any, what: str, *, allow_null: bool = False) -> dict[str, Any]:
    """A JSON object of strings (numbers and booleans taken as their text, as Kafka's
    Jackson does); ``None`` values kept where ``allow_null`` (a config's null is an error
    on its key in validation, as Kafka's AbstractHerder says: "Null value can not be
    supplied as the configuration value."), else left out."""
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object of strings")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (int, float, str)):
            out[k] = str(v)
        elif v is None and allow_null:
            out[k] = None
        elif v is None:
            continue
        else:
            raise BadRequest(f"{what}: the value of '{k}' must be a string, not "
                             f"{type(v).__name__}")
    return out


def _bool_query(request: web.Request, key: str) -> bool:
    raw = request.query.get(key, "false").lower()
    if raw not in ("true", "false"):
        raise BadRequest(f"query parameter {key} must be true or false, not '{raw}'")
    return raw == "true"


def _task_id(request: web.Request) -> TaskId:
    name, raw = request.match_info["name"], request.match_info["task"]
    try:
        return TaskId(name, int(raw))
    except ValueError:
        raise ConnectRestError(404, "HTTP 404 Not Found") from None


def _check_name(name: str, config: dict[str, Any]) -> None:
    included = config.get("name")
    if included is not None:
        if included != name:
            raise BadRequest(f"Connector name configuration ({included}) doesn't match "
                             f"connector name in the URL ({name})")
    else:
        config["name"] = name


def _herder(request: web.Request) -> Herder:
    h = request.app[HERDER]
    return h if isinstance(h, Herder) else h()  # type: ignore[operator,return-value]


def _location(name: str) -> dict[str, str]:
    return {"Location": "/connectors/" + quote(name, safe="")}


# ---------------------------------------------------------------------------- routes


async def root(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).cluster_info))


async def list_connectors(request: web.Request) -> web.Response:
    h = _herder(request)
    names = await _call(request, h.connectors)
    expand = request.query.getall("expand", [])
    if not expand:
        return _json(sorted(names))
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(names):
        item: dict[str, Any] = {}
        try:
            for what in expand:
                if what == "status":
                    item["status"] = await _call(request, h.connector_status, name)
                elif what == "info":
                    item["info"] = await _call(request, h.connector_info, name)
                else:
                    log.info("ignoring unknown expansion type %s", what)
        except ConnectRestError as e:
            if e.status == 404:  # deleted meanwhile
                continue
            raise
        out[name] = item
    return _json(out)


async def create_connector(request: web.Request) -> web.Response:
    body = await _body(request)
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object with 'name' and 'config'")
    raw_name = body.get("name")
    if raw_name is not None and not isinstance(raw_name, str):
        raise BadRequest("Connector name must be a string")
    name = (raw_name or "").strip()
    if "/" in name:
        raise BadRequest("connector name should not contain '/'")
    if body.get("config") is None:
        raise BadRequest("Connector config must be provided (the request's 'config')")
    config = _str_map(body["config"], "config", allow_null=True)  # refused by validation
    _check_name(name, config)
    state = body.get("initial_state")
    if state is None:
        target = "STARTED"
    elif isinstance(state, str) and state.upper() in INITIAL_STATES:
        target = INITIAL_STATES[state.upper()]
    else:
        raise BadRequest(f"Invalid initial state {state!r}: must be one of RUNNING, PAUSED, "
                         "STOPPED")
    _, info = await _call(request, _herder(request).put_connector_config, name, config,
                          allow_replace=False, initial_state=target)
    return _json(info, 201, _location(name))


async def get_connector(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).connector_info,
                             request.match_info["name"]))


async def delete_connector(request: web.Request) -> web.Response:
    await _call(request, _herder(request).delete_connector, request.match_info["name"])
    return web.Response(status=204)


async def get_config(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).connector_config,
                             request.match_info["name"]))


async def put_config(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    body = await _body(request)
    if body is None:
        raise BadRequest("Connector config must be provided (a JSON object)")
    config = _str_map(body, "Connector config", allow_null=True)  # refused by validation
    _check_name(name, config)
    created, info = await _call(request, _herder(request).put_connector_config, name,
                                config, allow_replace=True)
    if created:
        return _json(info, 201, _location(name))
    return _json(info)


async def patch_config(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    body = await _body(request)
    if body is None:
        raise BadRequest("Connector config patch must be provided (a JSON object)")
    patch = _str_map(body, "Connector config patch", allow_null=True)
    if patch.get("name") not in (None, name):
        raise BadRequest(f"Connector name configuration ({patch['name']}) doesn't match "
                         f"connector name in the URL ({name})")
    return _json(await _call(request, _herder(request).patch_connector_config, name, patch))


async def get_status(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).connector_status,
                             request.match_info["name"]))


async def get_topics(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).connector_topics,
                             request.match_info["name"]))


async def reset_topics(request: web.Request) -> web.Response:
    await _call(request, _herder(request).reset_connector_topics, request.match_info["name"])
    return web.Response(status=202)


async def get_tasks(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).task_configs,
                             request.match_info["name"]))


async def put_tasks(request: web.Request) -> web.Response:
    """Internal: the task configs of a connector, from the worker running it."""
    name = request.match_info["name"]
    body = await _body(request)
    if not isinstance(body, list):
        raise BadRequest("Task configs must be a JSON list of objects")
    configs = [_str_map(c, "Task config") for c in body]
    await _call(request, _herder(request).put_task_configs, name, configs)
    return web.Response(status=204)


async def task_status(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).task_status, _task_id(request)))


async def restart_connector(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    include_tasks = _bool_query(request, "includeTasks")
    only_failed = _bool_query(request, "onlyFailed")
    answer = await _call(request, _herder(request).restart_connector, name,
                         include_tasks=include_tasks, only_failed=only_failed)
    if answer is None:
        return web.Response(status=204)
    return _json(answer, 202)


async def restart_task(request: web.Request) -> web.Response:
    await _call(request, _herder(request).restart_task, _task_id(request))
    return web.Response(status=204)


async def pause(request: web.Request) -> web.Response:
    await _call(request, _herder(request).pause_connector, request.match_info["name"])
    return web.Response(status=202)


async def resume(request: web.Request) -> web.Response:
    await _call(request, _herder(request).resume_connector, request.match_info["name"])
    return web.Response(status=202)


async def stop(request: web.Request) -> web.Response:
    await _call(request, _herder(request).stop_connector, request.match_info["name"])
    return web.Response(status=204)


async def get_offsets(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).connector_offsets,
                             request.match_info["name"]))


async def alter_offsets(request: web.Request) -> web.Response:
    body = await _body(request)
    offsets = body.get("offsets") if isinstance(body, dict) else None
    if not offsets:
        raise BadRequest("Partitions / offsets need to be provided for an alter offsets "
                         "request")
    if not isinstance(offsets, list) or not all(
            isinstance(o, dict) and isinstance(o.get("partition"), dict)
            and (o.get("offset") is None or isinstance(o.get("offset"), dict))
            for o in offsets):
        raise BadRequest("offsets must be a list of {\"partition\": {...}, \"offset\": "
                         "{...} or null}")
    message = await _call(request, _herder(request).alter_connector_offsets,
                          request.match_info["name"], offsets)
    return _json({"message": message})


async def reset_offsets(request: web.Request) -> web.Response:
    message = await _call(request, _herder(request).reset_connector_offsets,
                          request.match_info["name"])
    return _json({"message": message})


async def list_plugins(request: web.Request) -> web.Response:
    only = request.query.get("connectorsOnly", "true").lower() != "false"
    return _json(await _call(request, _herder(request).plugins, only))


async def plugin_config(request: web.Request) -> web.Response:
    return _json(await _call(request, _herder(request).plugin_config,
                             request.match_info["plugin"]))


def _normalized(plugin: str) -> str:
    return plugin[: -len("Connector")] if plugin.endswith("Connector") \
        and len(plugin) > len("Connector") else plugin


async def validate(request: web.Request) -> web.Response:
    plugin = request.match_info["plugin"]
    body = await _body(request)
    if body is None:
        raise BadRequest("Connector config must be provided (a JSON object)")
    config = _str_map(body, "Connector config", allow_null=True)  # an error on the key
    included = config.get("connector.class")
    if included is not None and not _normalized(included).endswith(_normalized(plugin)):
        raise BadRequest(f"Included connector type {included} does not match request type "
                         f"{plugin}")
    if config.get("connector.class") is None:
        config["connector.class"] = plugin
    return _json(await _call(request, _herder(request).validate, plugin, config))


# ---------------------------------------------------------------------------- the app


@web.middleware
async def connect_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    try:
        return await handler(request)
    except Relayed as r:
        return web.Response(status=r.status, body=r.body, headers=r.headers)
    except ConnectRestError as e:
        return error_body(e.status, e.message)
    except api.ConfigError as e:
        return error_body(400, str(e))
    except web.HTTPException as e:
        if e.status >= 400:
            return error_body(e.status, f"HTTP {e.status} {e.reason}")
        raise
    except Exception as e:
        log.exception("uncaught exception in REST call %s %s", request.method, request.path)
        return error_body(500, str(e) or type(e).__name__)


def make_app(herder: Herder | Callable[[], Herder], *, request_timeout: float = 90.0,
             client: RestClient | None = None) -> web.Application:
    app = web.Application(middlewares=[connect_errors])
    app[HERDER] = herder
    app[TIMEOUT] = request_timeout
    own_client = client is None
    app[CLIENT] = client or RestClient(request_timeout)

    async def close_client(app: web.Application) -> None:
        if own_client:
            await app[CLIENT].close()  # type: ignore[attr-defined]

    app.on_cleanup.append(close_client)
    r = app.router
    r.add_get("/", root)
    r.add_get("/connectors", list_connectors)
    r.add_post("/connectors", create_connector)
    r.add_get("/connectors/{name}", get_connector)
    r.add_delete("/connectors/{name}", delete_connector)
    r.add_get("/connectors/{name}/config", get_config)
    r.add_put("/connectors/{name}/config", put_config)
    r.add_patch("/connectors/{name}/config", patch_config)
    r.add_get("/connectors/{name}/status", get_status)
    r.add_get("/connectors/{name}/topics", get_topics)
    r.add_put("/connectors/{name}/topics/reset", reset_topics)
    r.add_get("/connectors/{name}/tasks", get_tasks)
    r.add_post("/connectors/{name}/tasks", put_tasks)
    r.add_get("/connectors/{name}/tasks/{task}/status", task_status)
    r.add_post("/connectors/{name}/tasks/{task}/restart", restart_task)
    r.add_post("/connectors/{name}/restart", restart_connector)
    r.add_put("/connectors/{name}/pause", pause)
    r.add_put("/connectors/{name}/resume", resume)
    r.add_put("/connectors/{name}/stop", stop)
    r.add_get("/connectors/{name}/offsets", get_offsets)
    r.add_patch("/connectors/{name}/offsets", alter_offsets)
    r.add_delete("/connectors/{name}/offsets", reset_offsets)
    r.add_get("/connector-plugins", list_plugins)
    r.add_get("/connector-plugins/{plugin}/config", plugin_config)
    r.add_put("/connector-plugins/{plugin}/config/validate", validate)
    return app


