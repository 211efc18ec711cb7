"""The handler registry: which APIs the broker serves, at which versions.

A handler is declared with ``@handles(api_key, min_version, max_version)``;
ApiVersions is derived from this registry and nothing else. ``serve_from``
lets an API be advertised from a lower version than it is served (Produce
is advertised from 0 for old librdkafka, but v0-2 requests are answered
with UNSUPPORTED_VERSION by the handler itself, as Kafka 4 does).

Two planes, as Kafka's ``ApiMessageType.listeners``: a handler serves the
``broker`` listeners (the default; every listener of a single node), the
``controller`` listeners (those named in ``controller.listener.names``), or
both (``listeners=("broker", "controller")``). One API may have a different
handler on each (Fetch: partitions on a broker listener, the metadata log on
a controller listener). A connection only reaches its plane's handlers, and
ApiVersions on it lists only those; a request for an API of the other plane
closes the connection (Kafka: "... which is not enabled").
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


BROKER_PLANE = "broker"
CONTROLLER_PLANE = "controller"
REGISTRIES: dict[str, dict[int, HandlerSpec]] = {BROKER_PLANE: {}, CONTROLLER_PLANE: {}}
REGISTRY = REGISTRIES[BROKER_PLANE]  # the broker listeners' handlers


def handles(api_key: int, min_version: int, max_version: int, *,
            listeners: tuple[str, ...] = (BROKER_PLANE,)) -> Callable:
    """Register ``fn(ctx, request) -> response | None`` for ``api_key`` at these versions,
    on the ``listeners`` planes (``"broker"``, ``"controller"``)."""
    entry = API_BY_KEY[api_key]
    for plane in listeners:
        if plane not in REGISTRIES:
            raise ValueError(f"{entry.name}: unknown listener plane {plane!r}")

    def deco(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        lo, hi = entry.request.VALID_VERSIONS
        if min_version < lo or max_version > hi:
            raise ValueError(
                f"{entry.name}: versions {min_version}-{max_version} outside codec {lo}-{hi}"
            )
        spec = HandlerSpec(
            api_key, entry.name, min_version, max_version, fn, entry.request, entry.response
        )
        for plane in listeners:
            REGISTRIES[plane][api_key] = spec
        return fn

    return deco


def advertised(plane: str = BROKER_PLANE) -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) for every API of ``plane``, by key."""
    return [(s.api_key, s.min_version, s.max_version)
            for _, s in sorted(REGISTRIES[plane].items())]
