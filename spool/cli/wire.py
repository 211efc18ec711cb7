"""Admin requests over Spool's own client, for what confluent-kafka does not expose.

confluent-kafka has no call for offline replicas, DescribeLogDirs, partition
reassignments (AlterPartitionReassignments / ListPartitionReassignments); the
commands that need them speak the wire API with ``spool.net.client.NodeClient``:

- ``await connect(address, timeout)``: a ``WireAdmin`` on one more node (the caller
  closes its ``client``), for commands that talk to several brokers.
- ``run(bootstrap, timeout, body)`` runs ``await body(admin)`` with a ``WireAdmin``
  connected to the first node of ``bootstrap`` (``host:port,...``) that answers
  ApiVersions, and closes it; any failure to reach one is a ``CliError``
  ("cannot reach a broker at ...", exit 1).
- ``await admin.request(message, ours)``: ``message`` at the highest version both
  this codec's ``ours`` and the broker support; a broker that does not serve the API
  at all is a ``CliError`` naming it (UNSUPPORTED_VERSION). No retries: admin
  commands answer what the broker said.
- ``admin.metadata(topics)``: Metadata v1-12 (``None``: every topic; no auto-creation).
- ``node_client_options()``: the ``NodeClient`` keyword arguments that carry the
  running command's ``--command-config`` (``security=``, its ``ClientSecurity``);
  empty for PLAINTEXT.

Errors inside answers stay data: callers turn error codes into lines with
``error_text``, or into the command's failure with ``refused(code, message)``:
``CliError("<broker's message> (NAME)")``, exit 1.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from spool.cli.common import CliError, command_config
from spool.net.client import AuthenticationError, ClientError, NodeClient
from spool.protocol._generated import API_BY_KEY, ApiVersionsRequest, MetadataRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import error_name

T = TypeVar("T")


def error_text(code: int, message: str | None = None) -> str:
    """``NAME: message`` (or just ``NAME``) for a Kafka error code."""
    return error_name(code) + (f": {message}" if message else "")


def refused(code: int, message: str | None = None, subject: str | None = None) -> CliError:
    """The broker's refusal as the command's failure: ``[subject: ]message (NAME)``."""
    name = error_name(code)
    text = (message or name).rstrip(".")
    return CliError(f"{subject}: {text} ({name})" if subject else f"{text} ({name})", 1, name)


class WireAdmin:
    """One connection to one broker, versions negotiated once (module docstring)."""

    def __init__(self, client: NodeClient, address: str, served: dict[int, tuple[int, int]]):
        self.client = client
        self.address = address
        self.served = served
        self.node_id: int | None = None  # when known (a coordinator FindCoordinator named)

    def version(self, api_key: int, ours: int) -> int:
        name = API_BY_KEY[api_key].name
        if api_key not in self.served:
            raise CliError(f"the broker at {self.address} does not serve {name} "
                           f"(UNSUPPORTED_VERSION)", 1, "UNSUPPORTED_VERSION")
        lo, hi = self.served[api_key]
        if lo > ours:
            raise CliError(f"the broker at {self.address} serves {name} only from v{lo}, "
                           f"this tool speaks up to v{ours} (UNSUPPORTED_VERSION)", 1,
                           "UNSUPPORTED_VERSION")
        return min(hi, ours)

    async def request(self, message: Any, ours: int) -> Any:
        version = self.version(message.API_KEY, ours)
        try:
            return await self.client.request(message, version)
        except ClientError as e:
            raise CliError(f"no answer from the broker at {self.address}: {e}") from None

    async def metadata(self, topics: list[str] | None) -> Any:
        req = MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False)
        return await self.request(req, 12)


def node_client_options() -> dict[str, Any]:
    """``security=ClientSecurity(...)`` from the command config (module docstring)."""
    cc = command_config()
    if cc is None or cc.security_protocol == "PLAINTEXT":
        return {}
    return {"security": cc.security}


async def _connect(bootstrap: str, timeout: float) -> WireAdmin:
    errors = []
    options = node_client_options()
    for item in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, _, port = item.rpartition(":")
        if not port.isdigit() or not host:
            raise CliError(f"bad bootstrap server {item!r}: expected host:port", 2)
        client = NodeClient(host.strip("[]"), int(port), client_id="spool-cli",
                            request_timeout_ms=int(timeout * 1000),
                            connect_timeout_ms=int(min(timeout, 10) * 1000), **options)
        try:
            versions = await client.request(ApiVersionsRequest(
                client_software_name="spool", client_software_version="cli"), 3)
        except AuthenticationError as e:
            await client.close()
            # after "NodeClient(h:p): authentication failed (SASL_SSL/PLAIN as alice): "
            reason = re.sub(r"^.*?: authentication failed \([^)]*\): ", "", str(e))
            name = "SASL_AUTHENTICATION_FAILED" if "SASL_AUTHENTICATION_FAILED" in reason \
                else "_SSL" if "TLS" in reason else "_AUTHENTICATION"
            reason = reason.removeprefix("SASL_AUTHENTICATION_FAILED: ")
            raise CliError(f"authentication failed at {item}: {reason} ({name})", 1,
                           name) from None
        except (ClientError, OSError) as e:  # librdkafka's words, as the other commands say it
            errors.append(re.sub(r"^NodeClient\([^)]*\): cannot connect: ",
                                 f"Connect to {item} failed: ", str(e)))
            await client.close()
            continue
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        return WireAdmin(client, item, served)
    raise CliError(f"cannot reach a broker at {bootstrap}: " + "; ".join(errors)
                   + " (_TRANSPORT)", 1, "_TRANSPORT")


async def connect(address: str, timeout: float) -> WireAdmin:
    """A ``WireAdmin`` on the node at ``address`` (``host:port``, or a bootstrap list: the
    first that answers); the caller closes ``.client``."""
    return await _connect(address, timeout)


def run(bootstrap: str, timeout: float, body: Callable[[WireAdmin], Awaitable[T]]) -> T:
    """``await body(admin)`` on a connected ``WireAdmin``; closed afterwards."""

    async def main() -> T:
        admin = await _connect(bootstrap, timeout)
        try:
            return await body(admin)
        finally:
            await admin.client.close()

    return asyncio.run(main())
