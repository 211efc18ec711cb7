"""The console's HTTP server: ``Console(client_config, listen)``.

Lifecycle: the constructor binds the listener (so "Address already in use" surfaces
at once, naming the address) and makes the cluster reader; ``start()`` serves on a
daemon thread (one more thread per request: ``ThreadingHTTPServer``) and starts the
sampler; ``stop()`` stops both and closes the clients. ``url`` is the bound address.

Every request answers a page, whatever happens (``pages`` for the routes, ``web`` for
what they share):

- unknown path 404, known path with another method 405;
- ``NotFound`` 404, ``BadInput`` 400, ``Unavailable`` (no broker answered) 503,
  any other Kafka error 502 naming it, anything else 500 (logged with its traceback,
  the page names only the exception) - never a dropped connection;
- a read-only console refuses the create and delete routes (403);
- a POST whose ``Origin`` header names another site is refused (403): a page
  elsewhere cannot make a visitor's browser delete topics; form bodies above 64 KiB
  are refused (413).
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from confluent_kafka import KafkaError, KafkaException

from spool.console import pages, web
from spool.console.cluster import ClusterReader
from spool.console.log_dirs import LogDirs
from spool.console.model import BadInput, NotFound, Unavailable
from spool.console.sampler import Sampler
from spool.util.listen import ListenError, parse_http_listener

log = logging.getLogger("spool.console")

MAX_BODY = 64 * 1024


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Console:
    """The console for one cluster (module doc)."""

    def __init__(self, client_config: dict[str, Any], listen: str = "http://127.0.0.1:8080",
                 *, sample_interval: float = 5.0, timeout: float = 5.0,
                 read_only: bool = False) -> None:
        host, port = parse_http_listener(listen)
        log_dirs = LogDirs.of(client_config, timeout)
        self.reader = ClusterReader(client_config, timeout, log_dirs)
        self.sampler = Sampler(self.reader, sample_interval)
        self.context = web.Context(self.reader, self.sampler, int(sample_interval * 1000),
                                   read_only)
        handler = type("Handler", (_Handler,), {"context": self.context})
        server = _Server6 if ":" in host else ThreadingHTTPServer
        try:
            self.httpd = server((host, port), handler)
        except OSError as e:
            raise ListenError(e.errno, f"console: cannot listen on {host}:{port}: "
                                       f"{e.strerror}") from None
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        name="spool-console-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}"

    def start(self) -> Console:
        self._thread.start()
        self.sampler.start()
        # DEBUG: `spool console` and the broker each print the address once, on stdout
        log.debug("console listening on %s (cluster %s)", self.url, self.reader.bootstrap)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()
        self.sampler.stop()
        self.reader.close()


class _Handler(BaseHTTPRequestHandler):
    context: web.Context
    server_version = "SpoolConsole"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s %s", self.address_string(), format % args)

    def _serve(self, method: str) -> None:
        self._body_read = False
        try:
            page = self._page(method)
        except Exception:  # the page itself failed to build: still an answer
            log.exception("console: %s %s failed", method, self.path)
            page = web.error_page(None, 500, "Internal error", "The console failed.")
        if method == "POST" and not self._body_read:
            self.close_connection = True  # its unread body must not be taken for a request
        self._send(page)

    def _page(self, method: str) -> web.Page:
        ctx = self.context
        url = urlsplit(self.path)
        handler, raw, other = pages.route(method, url.path.rstrip("/") or "/")
        if handler is None:
            if other:
                return web.error_page(ctx, 405, "Method not allowed",
                                        f"{method} is not allowed on {url.path}")
            return web.error_page(ctx, 404, "Not found", f"There is no page {url.path}")
        if ctx.read_only and handler.__name__ in pages.MUTATING:
            return web.error_page(ctx, 403, "Read-only console",
                                    "This console is read-only: topics are not created or "
                                    "deleted from it.")
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        if method == "POST":
            refused = self._post_refusal()
            if refused is not None:
                return refused
            length = int(self.headers.get("Content-Length") or 0)
            query.update(parse_qsl(self.rfile.read(length).decode("utf-8", "replace"),
                                   keep_blank_values=True))
            self._body_read = True
        request = web.Request(method, {k: unquote(v) for k, v in raw.items()}, query)
        try:
            return handler(ctx, request)
        except NotFound as e:
            return web.error_page(ctx, 404, "Not found", f"{str(e)[0].upper()}{str(e)[1:]}.")
        except BadInput as e:
            return web.error_page(ctx, 400, "Bad request", str(e))
        except Unavailable as e:
            return web.error_page(ctx, 503, "Cluster unavailable", f"{e}.")
        except KafkaException as e:
            err = e.args[0] if e.args else None
            text = (f"{err.str()} ({err.name()})" if isinstance(err, KafkaError)
                    else str(e))
            return web.error_page(ctx, 502, "The cluster refused", text)
        except Exception as e:
            log.exception("console: %s %s failed", method, self.path)
            return web.error_page(ctx, 500, "Internal error",
                                    f"The console failed: {type(e).__name__}: {e}")

    def _post_refusal(self) -> web.Page | None:
        origin = self.headers.get("Origin")
        host = self.headers.get("Host", "")
        if origin and origin not in (f"http://{host}", f"https://{host}"):
            return web.error_page(self.context, 403, "Forbidden",
                                    f"a form from {origin} may not change this cluster")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = MAX_BODY + 1
        if length > MAX_BODY:
            return web.error_page(self.context, 413, "Too large",
                                    f"form bodies are limited to {MAX_BODY} bytes")
        return None

    def _send(self, page: web.Page) -> None:
        data = page.body.encode("utf-8")
        try:
            self.send_response(page.status)
            self.send_header("Content-Type", page.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for k, v in page.headers.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
