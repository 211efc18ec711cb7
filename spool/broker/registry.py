"""The handler registry: which APIs the broker serves, at which versions.

A handler is declared with ``@handles(api_key, min_version, max_version)``;
ApiVersions is derived from this registry and nothing else. ``serve_from``
lets an API be advertised from a lower version than it is served (Produce
is advertised from 0 for old librdkafka, but v0-2 requests are answered
with UNSUPPORTED_VERSION by the handler itself, as Kafka 4 does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from spool.protocol._generated import API_BY_KEY


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    fn: Callable[..., Awaitable[Any]]
    request_cls: Any
    response_cls: Any

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, HandlerSpec] = {}


def handles(api_key: int, min_version: int, max_version: int) -> Callable:
    """Register ``fn(ctx, request) -> response | None`` for ``api_key`` at these versions."""
    entry = API_BY_KEY[api_key]

    def deco(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        lo, hi = entry.request.VALID_VERSIONS
        if min_version < lo or max_version > hi:
            raise ValueError(
                f"{entry.name}: versions {min_version}-{max_version} outside codec {lo}-{hi}"
            )
        REGISTRY[api_key] = HandlerSpec(
            api_key, entry.name, min_version, max_version, fn, entry.request, entry.response
        )
        return fn

    return deco


def advertised() -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) for every registered API, by key."""
    return [(s.api_key, s.min_version, s.max_version) for _, s in sorted(REGISTRY.items())]
