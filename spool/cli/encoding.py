"""How the CLI writes bytes (keys, values, header values) as text: ``--encoding``.

Contract: :class:`Encoding` is the option's type; :func:`encoder(encoding)` returns
``bytes | None -> str | None`` (None stays None): ``text`` is UTF-8 with undecodable
bytes backslash-escaped (``\\xff``: readable, not reversible), ``base64`` the standard
alphabet, padded, ``hex`` lower case: exact bytes for binary data.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from enum import StrEnum


class Encoding(StrEnum):
    text = "text"
    base64 = "base64"
    hex = "hex"


def text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "backslashreplace")


def encoder(encoding: Encoding) -> Callable[[bytes | None], str | None]:
    """bytes -> the string ``encoding`` asks for (None stays None)."""
    if encoding is Encoding.base64:
        return lambda b: None if b is None else base64.b64encode(b).decode()
    if encoding is Encoding.hex:
        return lambda b: None if b is None else b.hex()
    return text
