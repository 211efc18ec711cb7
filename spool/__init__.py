"""Spool: a Kafka-compatible broker in Python."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    if name == "__version__":  # the installed distribution's version, read when asked
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("spool")
        except PackageNotFoundError:
            return "unknown"
    raise AttributeError(f"module 'spool' has no attribute {name!r}")
