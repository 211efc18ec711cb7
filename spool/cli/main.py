"""The ``spool`` command: the broker and the tools around it."""

from __future__ import annotations

from spool.cli.lazy import LazyCommand, interrupt_guard, lazy_typer

with interrupt_guard():  # Ctrl-C while Python imports: one line, exit 130
    from typing import Annotated

    import typer

    from spool.cli.server_config import ConfigFile, Overrides, load_config

# Every command but broker and version, in `spool --help`'s order: name, "module:attribute"
# (a typer.Typer group or a command function), and the help line `spool --help` shows (the
# first paragraph of the command's own help; tests/unit/test_cli_start.py checks they agree).
# A module is imported only when its command runs: register new commands here, not with
# `from spool.cli import x` + `app.add_typer(...)`, or every `spool` run pays for x's imports.
COMMANDS = [
    LazyCommand("produce", "spool.cli.produce:produce",
                "Write stdin's lines to TOPIC, one record per line."),
    LazyCommand("consume", "spool.cli.consume:consume", "Print TOPIC's records to stdout."),
    LazyCommand("console", "spool.cli.console:console",
                "Serve the web console: brokers, topics, messages, groups, lag and throughput."),
    LazyCommand("dump-log", "spool.cli.dump_log:dump_log_command",
                "Print a segment file's batches (and records) or an index, offline "
                "(DumpLogSegments)."),
    LazyCommand("registry", "spool.cli.registry:registry",
                "Serve a schema registry (Confluent's REST API) over the cluster's _schemas "
                "topic."),
    LazyCommand("connect", "spool.cli.connect:connect",
                "Run a Kafka Connect worker (distributed, or --standalone) with its REST API."),
    LazyCommand("elect-leaders", "spool.cli.elect_leaders:elect_leaders",
                "Elect partition leaders (preferred or unclean)."),
    LazyCommand("api-versions", "spool.cli.api_versions:api_versions",
                "The API versions every broker serves, and the ones this tool would use."),
    LazyCommand("offsets", "spool.cli.offsets:offsets",
                "Print each partition's offset at a time (kafka-get-offsets)."),
    LazyCommand("topics", "spool.cli.topics:app",
                "Create, list, describe, alter and delete topics."),
    LazyCommand("schemas", "spool.cli.schemas:app",
                "Register, list, get, check and delete schemas in a schema registry."),
    LazyCommand("configs", "spool.cli.configs:app",
                "Describe and alter topic, broker and group configs."),
    LazyCommand("groups", "spool.cli.groups:app",
                "List, describe, reset and delete consumer groups."),
    LazyCommand("share-groups", "spool.cli.share_groups:app",
                "Share groups (KIP-932): reset or delete their start offsets."),
    LazyCommand("transactions", "spool.cli.transactions:app",
                "List, describe, find hanging and abort transactions."),
    LazyCommand("storage", "spool.cli.storage:app",
                "Format log dirs and make cluster ids (Kafka's kafka-storage)."),
    LazyCommand("cluster", "spool.cli.cluster:app",
                "A local KRaft cluster: up, down, status; describe any cluster."),
    LazyCommand("reassign", "spool.cli.reassign:app",
                "Reassign partitions to other brokers (Kafka's reassignment JSON)."),
    LazyCommand("features", "spool.cli.features:app",
                "Describe, upgrade or downgrade feature flags (kafka-features)."),
    LazyCommand("telemetry", "spool.cli.telemetry:app",
                "Client telemetry (KIP-714) the broker keeps."),
    LazyCommand("client-metrics", "spool.cli.client_metrics:app",
                "Client metrics (telemetry) subscriptions (kafka-client-metrics)."),
    LazyCommand("acls", "spool.cli.acls:app", "Add, list and remove ACLs (kafka-acls)."),
    LazyCommand("users", "spool.cli.users:app",
                "Users' credentials (kafka-configs --entity-type users)."),
    LazyCommand("quotas", "spool.cli.quotas:app",
                "Client quotas per user and client id (kafka-configs)."),
    LazyCommand("log-dirs", "spool.cli.log_dirs:app",
                "Log directories on each broker (kafka-log-dirs)."),
    LazyCommand("perf", "spool.cli.perf:app",
                "Performance tests: Kafka's producer and consumer perf tools."),
]

app = lazy_typer(
    COMMANDS,
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
def version(
    json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Print Spool's version.

    --json: {"version"}."""
    if json:
        import json as _json

        typer.echo(_json.dumps({"version": _spool_version()}))
        return
    typer.echo(_spool_version())


if __name__ == "__main__":
    app(prog_name="spool")  # `python -m spool.cli.main` names itself as the script does
