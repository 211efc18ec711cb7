"""``spool connect``: a Kafka Connect worker (``spool.connect.service``).

``spool connect --config worker.properties [--override k=v ...] [--log-level LEVEL]
[--standalone [connector.properties|connector.json ...]]`` runs one worker with Kafka
Connect's worker keys (``spool.connect.worker_config``): distributed by default (it joins
``group.id`` with the other workers sharing it; configs, offsets and statuses in the
internal topics), standalone with ``--standalone`` (offsets in
``offset.storage.file.filename``; the connector files given are created at start, more
through the REST API). Once the herder has started it prints one line to stdout,
``spool connect listening on http://HOST:PORT`` (the advertised REST URL), then serves
Kafka Connect's REST API until Ctrl-C or SIGTERM (both a clean exit 0: a distributed
worker leaves its group, so its connectors and tasks move at once). While it starts, the
REST API answers 503; a SIGTERM then stops it at once (exit 0), even while it is still
waiting for a cluster that does not answer.

Exit 2: a worker config that is not valid (an unknown key, a bad value, a missing
required key: Kafka's message), connector files without ``--standalone``, a bad
``--log-level``. Exit 1: the REST listener cannot be bound, the herder cannot start (the
cluster not reachable within ``--start-timeout``), a connector file that cannot be read
or is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from spool.cli.common import CliError, cli_command

if TYPE_CHECKING:
    from spool.connect.service import ConnectService

STOP_TIMEOUT = 60.0  # seconds a stop (tasks, offsets, leaving the group) may take


@cli_command
def connect(
    connector_files: Annotated[list[str] | None, typer.Argument(
        metavar="CONNECTOR_FILE",
        help="With --standalone: connector configs (.properties or .json) to create at "
        "start.")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="The worker's .properties file (Kafka Connect's worker "
        "keys).")] = None,
    override: Annotated[list[str] | None, typer.Option(
        "--override", "-o", help="key=value, applied after the file (repeatable).")] = None,
    standalone: Annotated[bool, typer.Option(
        "--standalone", help="One worker on its own: offsets in "
        "offset.storage.file.filename, connectors from the files given and REST.")] = False,
    log_level: Annotated[str, typer.Option(
        "--log-level", metavar="LEVEL[,LOGGER=LEVEL...]",
        help="What to log on stderr.")] = "INFO",
    start_timeout: Annotated[float, typer.Option(
        "--start-timeout", min=0.1, metavar="SECONDS",
        help="Give up (exit 1) when the worker has not started in this long (the cluster "
        "not reachable).")] = 120.0,
) -> None:
    """Run a Kafka Connect worker (distributed, or --standalone) with its REST API."""
    from spool.connect.api import ConfigError
    from spool.connect.service import ConnectService, ConnectStartError
    from spool.connect.worker_config import WorkerConfig
    from spool.util import logs

    try:
        logs.configure(log_level)
    except ValueError as e:
        raise CliError(f"--log-level: {e}", 2) from None
    files = list(connector_files or [])
    if files and not standalone:
        raise CliError("connector files are taken with --standalone only (a distributed "
                       "worker gets connectors through its REST API)", 2)
    bad = [o for o in override or [] if "=" not in o]
    if bad:
        raise CliError(f"--override {bad[0]!r}: expected key=value", 2)
    if config is not None and not config.is_file():
        raise CliError(f"--config {config}: no such file", 2)
    try:
        worker = WorkerConfig.load(str(config) if config else None, override or [],
                                   standalone=standalone)
    except ConfigError as e:
        raise CliError(f"invalid worker configuration: {e}", 2) from None
    except OSError as e:
        raise CliError(f"--config {config}: {e.strerror or e}", 2) from None
    try:
        service = ConnectService(worker, standalone, files, start_timeout=start_timeout)
    except OSError as e:
        raise CliError(str(e)) from None
    except ConfigError as e:
        raise CliError(f"invalid worker configuration: {e}", 2) from None
    failed = ""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_serve(service))
    except ConnectStartError as e:
        failed = f"the worker did not start: {e}"
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # its executor's idle threads end; a stuck one is not waited for
    if failed:
        typer.echo(f"spool: {failed}", err=True)
        _exit_if_threads_linger(1)
        raise typer.Exit(1)
    _exit_if_threads_linger(0)


def _exit_if_threads_linger(code: int, grace: float = 5.0) -> None:
    """After a stop, threads still blocked in a client call (a cluster that never answered
    while the worker was starting) must not keep the process alive: once ``grace``
    seconds have passed, exit with ``code`` without waiting for them."""
    import logging
    import os
    import sys
    import threading
    import time

    deadline = time.monotonic() + grace
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if stuck:
        logging.getLogger("spool.connect").warning(
            "stopped; not waiting for %d blocked thread(s): %s", len(stuck), ", ".join(stuck))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


async def _serve(service: ConnectService) -> None:
    from spool.connect.service import listening_line

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
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await started
            return
        exc = started.exception()
        if exc is not None:
            from spool.connect.service import ConnectStartError

            if isinstance(exc, ConnectStartError):
                raise exc
            raise ConnectStartError(f"{type(exc).__name__}: {exc}") from exc
        typer.echo(listening_line(service.url))
        await stopping
    finally:
        try:
            await asyncio.wait_for(service.stop(), STOP_TIMEOUT)
        except TimeoutError:
            import logging

            logging.getLogger("spool.connect").warning(
                "the worker did not stop within %s s; exiting anyway", STOP_TIMEOUT)
