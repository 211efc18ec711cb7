"""``spool storage``: Kafka's ``kafka-storage`` tool.

- ``spool storage random-uuid`` prints a new cluster id (a Kafka Uuid, 22
  base64url characters).
- ``spool storage format --cluster-id ID --config FILE [--override k=v]``
  writes ``meta.properties`` (cluster.id, node.id, version=1, directory.id)
  into every ``log.dirs`` entry and ``metadata.log.dir``. A node with
  ``process.roles`` starts only on dirs formatted so; the single node formats
  an empty dir itself on first start and needs no format step. Exits 1 when
  a dir is in use, not empty, or already formatted (``--ignore-formatted``
  skips dirs formatted for this node and cluster), 2 on a bad configuration.
  ``--add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'`` (repeatable;
  also ``salt=``, ``iterations=``, ``saltedpassword=`` as kafka-storage takes them)
  puts SCRAM credentials in the metadata the cluster or single node starts from;
  a malformed one exits 1 with Kafka's message, formatting nothing.
"""

from __future__ import annotations

from typing import Annotated

import typer

from spool.cli.server_config import ConfigFile, Overrides, load_config
from spool.util.ids import random_uuid as _random_uuid

app = typer.Typer(help="Format log dirs and make cluster ids (Kafka's kafka-storage).",
                  no_args_is_help=True)


@app.command("random-uuid")
def random_uuid(
    json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Print a new random cluster id.

    --json: {"uuid"}."""
    if json:
        import json as _json

        typer.echo(_json.dumps({"uuid": _random_uuid()}))
        return
    typer.echo(_random_uuid())


@app.command("format")
def format_dirs(
    config: ConfigFile = None,
    override: Overrides = None,
    cluster_id: Annotated[
        str | None,
        typer.Option("--cluster-id", "-t",
                     help="The cluster id (spool storage random-uuid makes one; default: the "
                          "configured cluster.id)."),
    ] = None,
    ignore_formatted: Annotated[
        bool,
        typer.Option("--ignore-formatted", "-g",
                     help="Skip dirs already formatted (for this node and cluster)."),
    ] = False,
    add_scram: Annotated[
        list[str] | None,
        typer.Option("--add-scram", "-S",
                     help="A SCRAM credential for the new cluster, as kafka-storage takes it: "
                          "'SCRAM-SHA-256=\\[name=alice,password=alice-secret]' (also salt=, "
                          "iterations=, saltedpassword=)."),
    ] = None,
) -> None:
    """Write meta.properties into every log dir and the metadata log dir."""
    from spool.broker.main import LogDirError, format_storage
    from spool.security.scram_args import AddScramError, parse_add_scram

    cfg = load_config(config, override, "storage format")
    for line in cfg.unknown_warnings():
        typer.echo(f"spool storage format: {line}", err=True)
    try:
        credentials = [parse_add_scram(a) for a in add_scram or ()]
    except AddScramError as e:
        typer.echo(f"spool storage format: {e}", err=True)
        raise typer.Exit(1) from e
    try:
        written = format_storage(cfg, cluster_id, ignore_formatted=ignore_formatted,
                                 bootstrap_records=credentials)
    except (LogDirError, OSError) as e:
        typer.echo(f"spool storage format: {e}", err=True)
        raise typer.Exit(1) from e
    if not written:
        typer.echo("All of the log directories are already formatted.")
    for d in written:
        typer.echo(f"Formatting {d} with cluster.id {cluster_id or cfg.get('cluster.id')} "
                   f"node.id {cfg.node_id}.")
