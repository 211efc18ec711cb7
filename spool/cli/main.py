"""The ``spool`` command: the broker and the tools around it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spool.cli import configs, consume, dump_log, groups, produce, topics, transactions

app = typer.Typer(
    name="spool",
    help="Spool: a commit log that speaks the Apache Kafka protocol.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def broker(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="A server.properties file with Kafka's broker keys."),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", "-o", help="key=value, applied after the file (repeatable)."),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")
    ] = "INFO",
) -> None:
    """Start a broker (defaults: 127.0.0.1:9092, data in ./data)."""
    from spool.broker.config import BrokerConfig, ConfigError
    from spool.broker.main import LogDirError, run

    try:
        cfg = BrokerConfig.load(config, override or [])
    except ConfigError as e:
        typer.echo(f"spool broker: {e}", err=True)
        raise typer.Exit(2) from e
    try:
        run(cfg, log_level)
    except LogDirError as e:
        typer.echo(f"spool broker: {e}", err=True)
        raise typer.Exit(1) from e
    except OSError as e:
        typer.echo(f"spool broker: {e}", err=True)
        raise typer.Exit(1) from e


@app.command()
def version() -> None:
    """Print Spool's version."""
    from importlib.metadata import version as _v

    typer.echo(_v("spool"))


app.add_typer(topics.app, name="topics")
app.add_typer(configs.app, name="configs")
app.add_typer(groups.app, name="groups")
app.add_typer(transactions.app, name="transactions")
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.command("dump-log")(dump_log.dump_log_command)


if __name__ == "__main__":
    app()
