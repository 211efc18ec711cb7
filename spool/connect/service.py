"""The ``spool connect`` process: a herder and Kafka Connect's REST API on one loop.

``ConnectService(worker_config, standalone, connector_files)`` binds the REST listener
at once (``rest_listen``; ``util.listen.ListenError`` naming it when it cannot be bound).
Port 0 picks a free port, and the worker then advertises that port (its ``worker_id``
and ``rest_url`` are the bound ones unless ``rest.advertised.*`` says otherwise).
``await start()`` serves HTTP (answering 503 until the herder has started, except the
internal ``POST /connectors/{name}/tasks``), builds the plugins, then the herder
(``herder_standalone.StandaloneHerder`` or ``herder_distributed.DistributedHerder``,
which own the worker, the offset store and the internal topics), starts it (``ConnectStartError`` when that takes over ``start_timeout``, 120 s: the
cluster not reachable), and in
standalone mode creates (or replaces) each connector of ``connector_files``
(``.properties`` or ``.json``: a flat object of strings, or ``{"name", "config"}`` as
``POST /connectors`` takes); a file that cannot be read or a config the herder refuses
raises ``ConnectStartError`` naming it. ``await stop()`` stops serving (requests in
flight get 5 s), then the herder (a distributed worker leaves its group, so its work
moves at once). ``url`` is the advertised REST URL; ``listening_line(url)`` is the line
``spool connect`` prints on stdout once started: ``spool connect listening on
http://HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path
from typing import Any

from aiohttp import web

from spool.connect.herder import ConnectRestError, Herder
from spool.connect.rest import RestClient, error_body, make_app
from spool.connect.worker_config import WorkerConfig
from spool.util.listen import bind_listener

log = logging.getLogger("spool.connect")


class ConnectStartError(Exception):
    """The worker could not start: its one line says why."""


def listening_line(url: str) -> str:
    return f"spool connect listening on {url}"


def bind(host: str, port: int) -> socket.socket:
    return bind_listener(host, port, "connect")


def read_connector_file(path: str) -> dict[str, str]:
    """A connector's config from a ``.properties`` or ``.json`` file (module doc)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConnectStartError(f"{path}: {e.strerror or e}") from None
    if p.suffix.lower() == ".json":
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ConnectStartError(f"{path}: not JSON: {e}") from None
        if isinstance(value, dict) and isinstance(value.get("config"), dict):
            config = dict(value["config"])
            if "name" in value and "name" not in config:
                config["name"] = value["name"]
            value = config
        if not isinstance(value, dict) or not all(
                isinstance(v, (str, int, float, bool)) for v in value.values()):
            raise ConnectStartError(f"{path}: a connector config is a JSON object of strings "
                                    "(or {\"name\", \"config\"})")
        return {k: (("true" if v else "false") if isinstance(v, bool) else str(v))
                for k, v in value.items()}
    from spool.util.properties import parse_properties

    try:
        return dict(parse_properties(text))
    except ValueError as e:
        raise ConnectStartError(f"{path}: {e}") from None


class ConnectService:
    """One worker (module doc)."""

    def __init__(self, worker_config: WorkerConfig, standalone: bool,
                 connector_files: list[str] | tuple[str, ...] = (), *,
                 request_timeout: float = 90.0, start_timeout: float = 120.0) -> None:
        host, port = worker_config.rest_listen
        self._sock = bind(host, port)
        bound = self._sock.getsockname()[1]
        if port == 0:  # advertise the port picked
            shown = f"[{host}]" if ":" in host else host
            worker_config = WorkerConfig.from_props(
                {**worker_config.raw, "listeners": f"http://{shown}:{bound}"},
                standalone=standalone)
        self.config = worker_config
        self.standalone = standalone
        self.connector_files = list(connector_files)
        self.url = worker_config.rest_url
        self.client = RestClient(request_timeout)
        self.start_timeout = start_timeout
        self.herder: Herder | None = None
        self._ready = False
        self._app = make_app(lambda: self.herder, request_timeout=request_timeout,
                             client=self.client)
        self._app.middlewares.insert(0, self._gate)
        self._runner: web.AppRunner | None = None

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        internal = request.method == "POST" and request.path.endswith("/tasks")
        if not self._ready and not (internal and self.herder is not None):
            return error_body(503, "Request cannot be completed because the worker is "
                                   "starting up")
        return await handler(request)

    def _make_herder(self) -> Herder:
        from spool.connect.plugins import Plugins

        plugins = Plugins.discover()
        if self.standalone:
            from spool.connect.herder_standalone import StandaloneHerder

            return StandaloneHerder(self.config, plugins)
        import inspect

        from spool.connect.herder_distributed import DistributedHerder

        extra: dict[str, Any] = {}
        if "rest_client" in inspect.signature(DistributedHerder).parameters:
            extra["rest_client"] = self.client  # to reach the leader with task configs
        return DistributedHerder(self.config, plugins, **extra)

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app, access_log=None, handle_signals=False,
                                     shutdown_timeout=5.0)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()
        configs = [(f, read_connector_file(f)) for f in self.connector_files]
        self.herder = await asyncio.to_thread(self._make_herder)
        try:
            await asyncio.wait_for(self.herder.start(), self.start_timeout)
        except TimeoutError:
            servers = self.config.get("bootstrap.servers")
            if isinstance(servers, list):
                servers = ",".join(servers)
            raise ConnectStartError(
                f"not started within {self.start_timeout:g} s: is the cluster at "
                f"{servers} reachable?") from None
        for path, config in configs:
            name = config.get("name", "")
            try:
                await self.herder.put_connector_config(name, config, allow_replace=True)
            except ConnectRestError as e:
                lines = [ln for ln in e.message.splitlines() if ln.strip()]
                raise ConnectStartError(f"{path}: connector {name!r}: "
                                        + " ".join(lines)) from None
        self._ready = True
        log.info("worker %s started (%s)", self.config.worker_id,
                 "standalone" if self.standalone else f"group {self.config.get('group.id')}")

    async def stop(self) -> None:
        self._ready = False
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        else:
            self._sock.close()
        if self.herder is not None:
            herder, self.herder = self.herder, None
            await herder.stop()
        await self.client.close()

