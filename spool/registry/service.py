"""The registry as a running service: ``KafkaRegistry`` and ``api.make_app`` on one loop.

``RegistryService(client_config, listen, advertised_url=None, group_id=...)``:
the constructor binds ``listen`` (``http://host:port``, port 0 picks a free one), so an
address that cannot be bound raises ``ListenError`` naming it at once; ``url`` is the
bound address and ``advertised_url`` (default ``url``) what the other instances forward
writes to. ``await start()`` serves HTTP (calls wait while ``_schemas`` is read), then
starts the backend (``KafkaRegistry.start``: the topic, catching up, the election);
``await stop()`` stops serving (requests in flight get 5 s), then the backend (leaving
the group hands writing to another instance at once).

``RegistryThread(...)`` runs a service on a thread of its own with its own event loop:
the broker's ``schema.registry.listeners``. ``start()`` binds (``ListenError`` at once),
``stop()`` stops it and joins. A backend that fails to start (the cluster not ready) is
started again every second until it starts or the thread is stopped. ``on_ready(url)``
is called once the backend has started.

Either way the line ``spool registry listening on http://HOST:PORT (registry)`` is
printed once on stdout when the service is ready (tests and scripts read it for the port).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

from spool.registry.api import make_app
from spool.registry.api_http import DEFAULT_MAX_REQUEST_BYTES
from spool.registry.auth import Authenticate
from spool.registry.backend import DEFAULT_GROUP_ID, KafkaRegistry
from spool.registry.permissions import Permissions
from spool.util.listen import bind_listener, parse_http_listener

log = logging.getLogger("spool.registry")


def listening_line(url: str) -> str:
    return f"spool registry listening on {url} (registry)"


def _bind(listen: str) -> socket.socket:
    return bind_listener(*parse_http_listener(listen), "registry")


class RegistryService:
    """The HTTP API over a ``KafkaRegistry`` (module doc)."""

    def __init__(self, config: dict[str, Any], listen: str = "http://127.0.0.1:8081", *,
                 advertised_url: str | None = None, group_id: str = DEFAULT_GROUP_ID,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 timeout: float = 30.0, authenticate: Authenticate | None = None,
                 permissions: Permissions | None = None) -> None:
        self._sock = _bind(listen)
        host, port = self._sock.getsockname()[:2]
        shown = "127.0.0.1" if host == "0.0.0.0" else ("::1" if host == "::" else host)
        self.url = f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"
        self.advertised_url = advertised_url or self.url
        if advertised_url is None and host in ("0.0.0.0", "::"):
            log.warning("the registry listens on every interface but advertises %s: other "
                        "instances on other hosts cannot forward writes there (set the "
                        "advertised URL)", self.url)
        self.registry = KafkaRegistry(config, self.advertised_url, group_id=group_id,
                                      timeout=timeout)
        self._app = make_app(self.registry, max_request_bytes=max_request_bytes,
                             authenticate=authenticate, permissions=permissions)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Serve, then start the backend; called again after a failure, only the latter."""
        if self._runner is None:
            self._runner = web.AppRunner(self._app, access_log=None, handle_signals=False,
                                         shutdown_timeout=5.0)
            await self._runner.setup()
            await web.SockSite(self._runner, self._sock).start()
        await self.registry.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        else:
            self._sock.close()
        await self.registry.stop()


class RegistryThread:
    """A ``RegistryService`` on a thread and event loop of its own (module doc)."""

    def __init__(self, config: dict[str, Any], listen: str, *,
                 on_ready: Callable[[str], None] | None = None, **options: Any) -> None:
        self._config = config
        self._listen = listen
        self._options = options
        self._on_ready = on_ready
        self.service: RegistryService | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="spool-registry", daemon=True)

    def start(self) -> RegistryThread:
        # binds now, on the caller's thread: a bad address fails the caller (its asyncio
        # objects bind to the loop that first uses them: the thread's)
        self.service = RegistryService(self._config, self._listen, **self._options)
        self._loop = asyncio.new_event_loop()
        self._stopping = asyncio.Event()
        self._thread.start()
        return self

    def stop(self, timeout: float = 20.0) -> None:
        if self._loop is None or not self._thread.is_alive():
            return
        assert self._stopping is not None
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout)

    def _run(self) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        assert self.service is not None and self._stopping is not None
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            while not stopping.done():
                started = asyncio.ensure_future(self.service.start())
                await asyncio.wait({started, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not started.done():
                    started.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await started
                elif started.exception() is None:
                    print(listening_line(self.service.url), flush=True)
                    if self._on_ready is not None:
                        self._on_ready(self.service.url)
                    break
                else:  # the cluster not ready yet (no leader for _schemas): again
                    log.warning("the schema registry did not start (%s); trying again",
                                started.exception())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(stopping), 1.0)
            await stopping
        finally:
            await self.service.stop()

