"""Spool: a Kafka-compatible broker in Python."""

from __future__ import annotations

from functools import cache


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("spool")
    except PackageNotFoundError:
        return "unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":  # the installed distribution's version, read once when asked
        return _version()
    raise AttributeError(f"module 'spool' has no attribute {name!r}")
