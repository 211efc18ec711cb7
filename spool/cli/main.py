"""The ``spool`` command: the broker and the tools around it."""

from __future__ import annotations

import typer

from spool.cli import configs, consume, produce, topics

app = typer.Typer(
    name="spool",
    help="Spool: a commit log that speaks the Apache Kafka protocol.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def broker() -> None:
    """Start a broker (not built yet: see the broker issue)."""
    typer.echo("spool broker: the broker is not built yet.", err=True)
    raise typer.Exit(1)


@app.command()
def version() -> None:
    """Print Spool's version."""
    from importlib.metadata import version as _v

    typer.echo(_v("spool"))


app.add_typer(topics.app, name="topics")
app.add_typer(configs.app, name="configs")
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)


if __name__ == "__main__":
    app()
