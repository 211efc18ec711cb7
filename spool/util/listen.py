"""An HTTP endpoint's listener address: ``http://host:port``, Kafka's listener form.

``parse_http_listener(text)`` answers ``(host, port)`` or raises ``ValueError`` saying
what is wrong: one listener (no comma), only ``http``, no path or query, a port (0
picks a free one); an IPv6 host goes in brackets (``http://[::1]:8080``); an empty host
means every interface (``0.0.0.0``), as in Kafka's ``listeners``.
``parse_http_listeners(value)``: a comma-separated list of them. ``ListenError``: an
address that cannot be bound (Kafka's listeners, the HTTP endpoints, the console); its
``str()`` is the one line naming it ("cannot listen on 127.0.0.1:9092 (listener
PLAINTEXT): Address already in use").

``bind_listener(host, port, what)``: a non-blocking listening socket (SO_REUSEADDR,
backlog 128), or ``ListenError`` ("<what>: cannot listen on host:port: <reason>"); the
registry's and Connect's HTTP servers hand it to aiohttp.

The one parser of ``metrics.listeners``, ``console.listeners`` and ``spool console
--listen``. Imports nothing but the standard library.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


class ListenError(OSError):
    """A listener's address cannot be bound; ``str(e)`` is ``strerror``: the line naming it."""

    def __str__(self) -> str:
        return str(self.strerror)


def parse_http_listener(text: str) -> tuple[str, int]:
    text = text.strip()
    if "," in text:
        raise ValueError(f"one listener only, not '{text}'")
    url = urlsplit(text)
    if url.scheme != "http":
        raise ValueError(f"'{text}' is not http://host:port (only http is served)")
    if url.path not in ("", "/") or url.query:
        raise ValueError(f"'{text}' has a path; the endpoint serves at /")
    try:
        port = url.port
    except ValueError:
        raise ValueError(f"'{text}' has no valid port") from None
    if port is None:
        raise ValueError(f"'{text}' names no port (http://host:port; 0 picks a free one)")
    return url.hostname or "0.0.0.0", port


def parse_http_listeners(value: str | list[str]) -> list[tuple[str, int]]:
    """A comma-separated list (or its items) of ``http://host:port``."""
    items = value.split(",") if isinstance(value, str) else value
    return [parse_http_listener(item) for item in items if item.strip()]


def bind_listener(host: str, port: int, what: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ListenError(e.errno, f"{what}: cannot listen on {host}:{port}: "
                                   f"{e.strerror}") from None
    sock.setblocking(False)
    return sock
