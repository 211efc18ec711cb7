"""``spool console``: the web console (``spool.console``) for a cluster.

``spool console [--bootstrap-server B] [--listen http://127.0.0.1:8080]
[--sample-interval 5] [--timeout 5] [--read-only] [--command-config FILE]`` serves
the console until Ctrl-C or SIGTERM (both a clean exit 0). Once listening it prints
one line to stdout, ``spool console listening on http://HOST:PORT (cluster B)``. It
starts even when no broker answers yet: its pages then say so (503) until one does.
A listener it cannot bind or parse is one ``spool:`` line and exit 1 (2 for a
malformed ``--listen``).
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    cli_command,
    client_config,
)


@cli_command
def console(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    listen: Annotated[str, typer.Option(
        "--listen", help="Where to serve: http://host:port (port 0 picks a free one).")
    ] = "http://127.0.0.1:8080",
    sample_interval: Annotated[float, typer.Option(
        "--sample-interval", min=0.2,
        help="Seconds between samples of end offsets and lag (the charts).")] = 5.0,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="Seconds a page waits for the cluster before saying "
        "it does not answer (503).")] = 5.0,
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="No topic creation or deletion from the pages.")] = False,
    command_config: CommandConfigOpt = None,
) -> None:
    """Serve the web console: brokers, topics, messages, groups, lag and throughput."""
    from spool.console.server import Console
    from spool.util.listen import parse_http_listener

    try:
        parse_http_listener(listen)
    except ValueError as e:
        raise CliError(f"--listen: {e}", 2) from None
    conf = client_config(bootstrap)
    conf.pop("error_cb", None)  # the console reports an absent cluster on its pages
    conf["client.id"] = "spool-console"
    try:
        app = Console(conf, listen, sample_interval=sample_interval, timeout=timeout,
                      read_only=read_only)
    except OSError as e:
        raise CliError(str(e)) from None
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    app.start()
    typer.echo(f"spool console listening on {app.url} (cluster {bootstrap})")
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        app.stop()
