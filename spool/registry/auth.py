"""HTTP basic authentication against the cluster's own SASL users: ``BasicAuth``.

``spool registry --authentication basic`` (``BasicAuth(bootstrap, security)``): every
request must carry ``Authorization: Basic base64(user:password)``, and the pair is good
when the broker accepts it, i.e. when a connection to the registry's bootstrap broker
(the first that can be reached, in the order given) authenticates as that user with the registry's own ``security.protocol`` and
``sasl.mechanism`` (its ``--command-config``: SASL_PLAINTEXT or SASL_SSL, and
SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN). So the registry's users are the cluster's:
``spool acls``/``kafka-configs --alter --add-config SCRAM-SHA-256=[...]`` manage both,
and nothing about them is stored here.

A success is remembered for ``cache_s`` seconds (default 60) under an HMAC of the pair
with a key drawn at start: the password is never kept, in clear or as a plain hash; a
changed or removed user is refused at the latest ``cache_s`` later. Concurrent requests
with the same pair wait for one check (measured: the first request of a pair ~24 ms, a
remembered one as fast as without authentication, ~0.4 ms). Failures are neither
remembered nor slowed down here: a refusal costs a broker round trip (~3 ms), and
guessing is paced only by what the broker does to failed authentications.

Answers: no or malformed ``Authorization``, or credentials the broker refuses: 401 with
``WWW-Authenticate: Basic realm="spool-registry"`` and Confluent's body
``{"error_code": 401, "message": "Unauthorized"}``; a cluster that cannot be reached to
check: 500/50001 (the store's error), nothing cached.

``FORWARDED_AUTHORIZATION`` is the request's ``Authorization`` header while it is
handled: a write forwarded to the primary carries it, so the primary checks the same
user (``forward.Forwarder``).

Without ``--permissions`` an authenticated user may do anything; with it, what each user
may do to which subjects is ``permissions``'.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import hmac
import logging
import os
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from spool.protocol._generated.api_versions_request import ApiVersionsRequest
from spool.registry import model
from spool.security.client_config import ClientSecurity

log = logging.getLogger(__name__)

REALM = "spool-registry"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
FORWARDED_AUTHORIZATION: ContextVar[str | None] = ContextVar(
    "registry_forwarded_authorization", default=None)

Authenticate = Callable[[str | None], Awaitable[str]]


class Unauthorized(Exception):
    """The request's credentials are missing or refused (401)."""


def credentials(header: str | None) -> tuple[str, str]:
    """(user, password) of a ``Basic`` Authorization header; ``Unauthorized`` otherwise."""
    if not header:
        raise Unauthorized("no credentials")
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise Unauthorized(f"the {scheme} scheme is not accepted")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthorized("malformed Basic credentials") from None
    user, colon, password = decoded.partition(":")
    if not colon or not user:
        raise Unauthorized("malformed Basic credentials")
    return user, password


class BasicAuth:
    """Basic credentials checked against the cluster's SASL users (module doc)."""

    def __init__(self, bootstrap: str, security: ClientSecurity, *, cache_s: float = 60.0,
                 timeout_s: float = 10.0) -> None:
        if not security.sasl or security.sasl_mechanism not in MECHANISMS:
            raise ValueError(
                "basic authentication checks users against the cluster's SASL users: the "
                "registry's --command-config must set security.protocol SASL_PLAINTEXT or "
                f"SASL_SSL and sasl.mechanism one of {', '.join(MECHANISMS)} (it has "
                f"{security.describe()})")
        self._addresses: list[tuple[str, int]] = []
        for address in filter(None, (a.strip() for a in bootstrap.split(","))):
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"not a host:port: {address!r}")
            self._addresses.append((host.strip("[]"), int(port)))
        if not self._addresses:
            raise ValueError("no bootstrap address")
        self._security = security
        self._cache_s = cache_s
        self._timeout_s = timeout_s
        self._key = os.urandom(32)
        self._good: dict[bytes, float] = {}  # HMAC of the pair -> monotonic expiry
        self._checking: dict[bytes, asyncio.Future[None]] = {}
        self.checks = 0  # the broker round trips made (a test's measure of the cache)

    async def __call__(self, header: str | None) -> str:
        """The authenticated user; ``Unauthorized`` or a ``RegistryError`` (50001)."""
        user, password = credentials(header)
        digest = hmac.new(self._key, f"{user}\0{password}".encode(), hashlib.sha256).digest()
        now = time.monotonic()
        if self._good.get(digest, 0.0) > now:
            return user
        pending = self._checking.get(digest)
        if pending is None:
            pending = asyncio.ensure_future(self._check(user, password))
            self._checking[digest] = pending
            pending.add_done_callback(lambda _: self._checking.pop(digest, None))
        await asyncio.shield(pending)
        self._good[digest] = time.monotonic() + self._cache_s
        if len(self._good) > 10_000:
            self._good = {k: t for k, t in self._good.items() if t > now}
        return user

    async def _check(self, user: str, password: str) -> None:
        from spool.net.client import AuthenticationError, ClientError, NodeClient

        self.checks += 1
        timeout_ms = int(self._timeout_s * 1000)
        security = dataclasses.replace(self._security, username=user, password=password)
        failures = []
        for host, port in self._addresses:
            client = NodeClient(host, port, client_id="spool-registry-auth",
                                request_timeout_ms=timeout_ms,
                                connect_timeout_ms=timeout_ms, security=security)
            try:
                await client.request(ApiVersionsRequest(), 0)
                return
            except AuthenticationError as e:
                log.info("registry: basic authentication of %r refused: %s", user, e)
                raise Unauthorized(f"{user}: refused") from None
            except (ClientError, OSError) as e:
                failures.append(str(e))  # that broker is away: the next one
            finally:
                await client.close()
        raise model.store_error("cannot check credentials with the cluster: "
                                + "; ".join(failures))
