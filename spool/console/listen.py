"""The console's listener address: ``http://host:port`` (``console.listeners``, ``--listen``).

``parse_listener(text)`` answers ``(host, port)`` or raises ``ValueError`` saying what is
wrong. One listener only (a Kafka-style list with one entry); only ``http``; port 0
picks a free one; an IPv6 host goes in brackets (``http://[::1]:8080``); an empty host
means every interface. Imports nothing but the standard library (the broker's config
checks the key with it).
"""

from __future__ import annotations

from urllib.parse import urlsplit


def parse_listener(text: str) -> tuple[str, int]:
    text = text.strip()
    if "," in text:
        raise ValueError(f"one console listener only, not '{text}'")
    url = urlsplit(text)
    if url.scheme != "http":
        raise ValueError(f"'{text}' is not http://host:port (only http is served)")
    if url.path not in ("", "/") or url.query:
        raise ValueError(f"'{text}' has a path; the console serves at /")
    try:
        port = url.port
    except ValueError:
        raise ValueError(f"'{text}' has no valid port") from None
    if port is None:
        raise ValueError(f"'{text}' names no port (http://host:port; 0 picks a free one)")
    host = url.hostname or ""
    return (host if host else "0.0.0.0"), port
