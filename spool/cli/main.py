"""The ``spool`` command: the broker and the tools around it."""

from __future__ import annotations

from typing import Annotated

import typer

from spool.cli import (
    acls,
    api_versions,
    client_metrics,
    cluster,
    configs,
    console,
    consume,
    dump_log,
    elect_leaders,
    features,
    groups,
    log_dirs,
    offsets,
    perf,
    produce,
    quotas,
    reassign,
    share_groups,
    storage,
    telemetry,
    topics,
    transactions,
    users,
)
from spool.cli.server_config import ConfigFile, Overrides, load_config

app = typer.Typer(
    name="spool",
    help="Spool: a commit log that speaks the Apache Kafka protocol.",
    no_args_is_help=True,
    add_completion=False,
)


def _log_level(value: str | None) -> str | None:
    from spool.util.logs import parse_levels

    if value is not None:
        try:
            parse_levels(value)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    return value


def _spool_version() -> str:
    from importlib.metadata import version as _v

    return _v("spool")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_spool_version())
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print Spool's version and exit.",
                     callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """Spool: a commit log that speaks the Apache Kafka protocol."""


def _log_format(value: str) -> str:
    if value not in ("text", "json"):
        raise typer.BadParameter(f"{value!r} is not one of text, json")
    return value


@app.command()
def broker(
    config: ConfigFile = None,
    override: Overrides = None,
    log_level: Annotated[
        str | None,
        typer.Option("--log-level", callback=_log_level, metavar="LEVEL[,LOGGER=LEVEL...]",
                     help="How much to log: DEBUG, INFO, WARNING or ERROR, then optional "
                     "logger=LEVEL pairs (INFO,spool.storage=DEBUG). Default: the log.level "
                     "key, else INFO."),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option("--log-format", callback=_log_format, metavar="text|json",
                     help="text lines, or one JSON object per line (ts, level, logger, "
                     "message, fields)."),
    ] = "text",
    strict_config: Annotated[
        bool,
        typer.Option("--strict-config", help="Refuse to start on an unknown configuration key "
                     "(default: warn and ignore it, as Kafka does)."),
    ] = False,
) -> None:
    """Start a broker (defaults: 127.0.0.1:9092, data in ./data; `make run` uses
    config/server.properties).

    Exits 2 on a configuration it cannot honour (a bad value, a listener that is
    not PLAINTEXT, an unknown key under --strict-config), 1 if it cannot run
    (a port in use, a log dir another broker holds).
    """
    import logging

    from spool.broker.main import LogDirError, configure_logging, run

    configure_logging(log_level or "INFO", log_format)
    cfg = load_config(config, override, "broker")
    if strict_config and cfg.unknown:
        for key, hint in cfg.unknown_hints():
            typer.echo(f"spool broker: unknown configuration key '{key}' (--strict-config)"
                       + (f"; did you mean {hint}?" if hint else ""), err=True)
        raise typer.Exit(2)
    level = log_level or cfg.get("log.level") or "INFO"
    configure_logging(level, log_format)
    for line in cfg.unknown_warnings():
        logging.getLogger("spool.broker.config").warning("%s", line)
    try:
        run(cfg, level, log_format=log_format)
    except (LogDirError, OSError) as e:
        typer.echo(f"spool broker: {e}", err=True)
        raise typer.Exit(1) from e


@app.command()
def version() -> None:
    """Print Spool's version."""
    typer.echo(_spool_version())


app.add_typer(topics.app, name="topics")
app.add_typer(configs.app, name="configs")
app.add_typer(groups.app, name="groups")
app.add_typer(share_groups.app, name="share-groups")
app.add_typer(transactions.app, name="transactions")
app.add_typer(storage.app, name="storage")
app.add_typer(cluster.app, name="cluster")
app.add_typer(reassign.app, name="reassign")
app.add_typer(features.app, name="features")
app.add_typer(telemetry.app, name="telemetry")
app.add_typer(client_metrics.app, name="client-metrics")
app.add_typer(acls.app, name="acls")
app.add_typer(users.app, name="users")
app.add_typer(quotas.app, name="quotas")
app.add_typer(log_dirs.app, name="log-dirs")
app.add_typer(perf.app, name="perf")
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.command("console")(console.console)
app.command("dump-log")(dump_log.dump_log_command)
app.command("elect-leaders")(elect_leaders.elect_leaders)
app.command("api-versions")(api_versions.api_versions)
app.command("offsets")(offsets.offsets)


if __name__ == "__main__":
    app()
