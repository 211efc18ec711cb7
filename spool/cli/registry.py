"""``spool registry``: a schema registry (``spool.registry``) for a cluster.

``spool registry [--bootstrap-server B] [--listen http://127.0.0.1:8081]
[--advertised-url URL] [--group-id schema-registry] [--timeout 30] [--log-level INFO]
[--command-config FILE] [--authentication basic [--permissions FILE]]`` serves
Confluent's REST API over the cluster's ``_schemas`` topic (created when missing) until
Ctrl-C or SIGTERM (both a clean exit 0: it leaves the group, so another instance takes
over writing at once). Any number may run against one cluster with the same group id:
one writes, the others forward writes to it at their ``--advertised-url`` (default: the
bound ``--listen`` address). Once it has read the topic it prints one line to stdout,
``spool registry listening on http://HOST:PORT (registry)``. A listener it cannot bind
is one ``spool:`` line and exit 1 (2 for a malformed ``--listen``); a cluster it cannot
reach within ``--timeout`` is exit 1. It logs to stderr (``--log-level``): the topic
read, and when this instance becomes or stops being the writer. ``--authentication
basic`` asks every request for HTTP basic credentials of one of the cluster's SASL users
(checked with the command config's SASL mechanism: ``spool.registry.auth``);
``--permissions FILE`` then allows each user READ or WRITE on subjects by name or prefix
(``spool.registry.permissions``; anything else 403). A FILE that does not parse is one
``spool:`` line and exit 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    CliError,
    CommandConfigOpt,
    cli_command,
    client_config,
)

if TYPE_CHECKING:
    from spool.registry.auth import BasicAuth
    from spool.registry.permissions import Permissions
    from spool.registry.service import RegistryService


@cli_command
def registry(
    bootstrap: Annotated[str, typer.Option(
        "--bootstrap-server", "--bootstrap", "-b", envvar="SPOOL_BOOTSTRAP",
        help="host:port of a broker (comma-separated list allowed).")] = DEFAULT_BOOTSTRAP,
    listen: Annotated[str, typer.Option(
        "--listen", help="Where to serve: http://host:port (port 0 picks a free one).")
    ] = "http://127.0.0.1:8081",
    advertised_url: Annotated[str | None, typer.Option(
        "--advertised-url", help="The URL other instances forward writes to "
        "(default: the bound --listen address).")] = None,
    group_id: Annotated[str, typer.Option(
        "--group-id", help="The consumer group the instances elect the writer in; also "
        "the writer's transactional id.")] = "schema-registry",
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="Seconds to wait for the cluster at start.")] = 30.0,
    log_level: Annotated[str, typer.Option(
        "--log-level", metavar="LEVEL[,LOGGER=LEVEL...]",
        help="What to log on stderr (INFO: the topic read, who writes).")] = "INFO",
    command_config: CommandConfigOpt = None,
    authentication: Annotated[str, typer.Option(
        "--authentication", metavar="none|basic",
        help="basic: HTTP basic credentials of the cluster's SASL users, checked with the "
        "--command-config's SASL mechanism.")] = "none",
    permissions_file: Annotated[str | None, typer.Option(
        "--permissions", metavar="FILE",
        help="With --authentication basic: lines 'User:NAME READ|WRITE|ALL SUBJECT' "
        "(SUBJECT a name, a prefix ending in *, or *); anything else is refused.")] = None,
) -> None:
    """Serve a schema registry (Confluent's REST API) over the cluster's _schemas topic."""
    from spool.registry.service import RegistryService
    from spool.util import logs
    from spool.util.listen import parse_http_listener

    try:
        parse_http_listener(listen)
    except ValueError as e:
        raise CliError(f"--listen: {e}", 2) from None
    try:
        logs.configure(log_level)
    except ValueError as e:
        raise CliError(f"--log-level: {e}", 2) from None
    authenticate = _authentication(authentication, bootstrap)
    permissions = _permissions(permissions_file, authenticate is not None)
    conf = client_config(bootstrap)
    conf.pop("error_cb", None)
    conf.pop("client.id", None)
    try:
        service = RegistryService(conf, listen, advertised_url=advertised_url,
                                  group_id=group_id, timeout=timeout,
                                  authenticate=authenticate, permissions=permissions)
    except OSError as e:
        raise CliError(str(e)) from None
    try:
        asyncio.run(_serve(service))
    except KeyboardInterrupt:
        pass


def _authentication(kind: str, bootstrap: str) -> BasicAuth | None:
    from spool.cli.common import command_config
    from spool.registry.auth import BasicAuth
    from spool.security.client_config import ClientSecurity

    if kind.lower() == "none":
        return None
    if kind.lower() != "basic":
        raise CliError(f"--authentication: {kind!r} is not none or basic", 2)
    cc = command_config()
    try:
        return BasicAuth(bootstrap, cc.security if cc is not None else ClientSecurity())
    except ValueError as e:
        raise CliError(f"--authentication basic: {e}", 2) from None


def _permissions(path: str | None, authenticated: bool) -> Permissions | None:
    from spool.registry.permissions import Permissions

    if path is None:
        return None
    if not authenticated:
        raise CliError("--permissions needs --authentication basic", 2)
    try:
        return Permissions.load(path)
    except (OSError, ValueError) as e:
        raise CliError(f"--permissions: {e}", 2) from None


async def _serve(service: RegistryService) -> None:
    from spool.registry.service import listening_line

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        started = asyncio.ensure_future(service.start())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({started, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():  # Ctrl-C or SIGTERM while starting: a clean stop
            started.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await started
            return
        if started.exception() is not None:  # the cluster not reachable in --timeout
            raise CliError(f"the registry did not start: {started.exception()}")
        typer.echo(listening_line(service.url))
        await stopping
    finally:
        await service.stop()
