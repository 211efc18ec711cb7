"""``spool registry``: a schema registry (``spool.registry``) for a cluster.

``spool registry [--bootstrap-server B] [--listen http://127.0.0.1:8081]
[--advertised-url URL] [--group-id schema-registry] [--timeout 30] [--log-level INFO]
[--command-config FILE]`` serves
Confluent's REST API over the cluster's ``_schemas`` topic (created when missing) until
Ctrl-C or SIGTERM (both a clean exit 0: it leaves the group, so another instance takes
over writing at once). Any number may run against one cluster with the same group id:
one writes, the others forward writes to it at their ``--advertised-url`` (default: the
bound ``--listen`` address). Once it has read the topic it prints one line to stdout,
``spool registry listening on http://HOST:PORT (registry)``. A listener it cannot bind
is one ``spool:`` line and exit 1 (2 for a malformed ``--listen``); a cluster it cannot
reach within ``--timeout`` is exit 1. It logs to stderr (``--log-level``): the topic
read, and when this instance becomes or stops being the writer.
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
    conf = client_config(bootstrap)
    conf.pop("error_cb", None)
    conf.pop("client.id", None)
    try:
        service = RegistryService(conf, listen, advertised_url=advertised_url,
                                  group_id=group_id, timeout=timeout)
    except OSError as e:
        raise CliError(str(e)) from None
    try:
        asyncio.run(_serve(service))
    except KeyboardInterrupt:
        pass


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
