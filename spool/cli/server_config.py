"""Loading a node's ``server.properties`` for the commands that need one.

``spool broker``, ``spool storage format`` and ``spool cluster up`` take the
same ``--config FILE`` and ``--override key=value`` options and load them
with ``load_config``, which prints the ``ConfigError`` as one line
(``spool <command>: <message>``) and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from spool.broker.config import BrokerConfig

ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="A server.properties file with Kafka's broker keys."),
]
Overrides = Annotated[
    list[str] | None,
    typer.Option("--override", "-o", help="key=value, applied after the file (repeatable)."),
]


def load_config(config: Path | None, override: list[str] | None, command: str) -> BrokerConfig:
    """The ``BrokerConfig`` of ``--config`` and ``--override``; exits 2 if it is invalid."""
    from spool.broker.config import BrokerConfig, ConfigError

    try:
        return BrokerConfig.load(config, override or [])
    except ConfigError as e:
        typer.echo(f"spool {command}: {e}", err=True)
        raise typer.Exit(2) from e
