"""``spool transactions``: the Kafka transactions tool's list and describe.

- ``list [--state S]... [--json]``: transactional ids with producer id and
  state (ListTransactions, API 66). ``--json``:
  ``[{"transactional_id", "producer_id", "state"}]``.
- ``describe TRANSACTIONAL_ID [--json]``: state, producer id and epoch,
  timeout, start time and age of the open transaction, and its partitions
  (DescribeTransactions, API 65). Unknown id: exit 1 with
  TRANSACTIONAL_ID_NOT_FOUND.

confluent-kafka has no admin call for these APIs, so this tool sends them
with Spool's own client (``spool.cli.wire``) to the bootstrap broker (the
transaction coordinator of every id on a single node).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    print_json,
    print_table,
)
from spool.protocol._generated import (
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from spool.protocol.errors import error_name

app = typer.Typer(help="List and describe transactions.", no_args_is_help=True)


def _call(bootstrap: str, request: Any, version: int, timeout: float = 10.0) -> Any:
    async def body(admin: wire.WireAdmin) -> Any:
        return await admin.request(request, version)

    return wire.run(bootstrap, timeout, body)


def _error(code: int, subject: str) -> CliError:
    name = error_name(code)
    return CliError(f"{subject}: {name}", error_name=name)


@app.command("list")
@cli_command
def list_(
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="Only these states (Ongoing, PrepareCommit, CompleteAbort...).")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    json_: JsonFlag = False,
) -> None:
    """List transactional ids, their producer ids and states."""
    resp = _call(bootstrap, ListTransactionsRequest(state_filters=state or [],
                                                    producer_id_filters=[]), 0)
    if resp.error_code:
        raise _error(resp.error_code, "list transactions")
    rows = sorted((t.transactional_id, t.producer_id, t.transaction_state)
                  for t in resp.transaction_states)
    if json_:
        print_json([{"transactional_id": t, "producer_id": p, "state": s} for t, p, s in rows])
    else:
        print_table(["TransactionalId", "ProducerId", "State"], rows)


@app.command()
@cli_command
def describe(
    transactional_id: Annotated[str, typer.Argument(help="The transactional.id.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    json_: JsonFlag = False,
) -> None:
    """State, producer id/epoch, timeout, age and partitions of one transactional id."""
    resp = _call(bootstrap, DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
    t = resp.transaction_states[0]
    if t.error_code:
        raise _error(t.error_code, transactional_id)
    start = t.transaction_start_time_ms
    age_ms = int(time.time() * 1000) - start if start >= 0 else None
    partitions = [f"{d.topic}-{p}" for d in t.topics for p in d.partitions]
    info = {"transactional_id": t.transactional_id, "state": t.transaction_state,
            "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
            "timeout_ms": t.transaction_timeout_ms,
            "start_time_ms": start if start >= 0 else None, "age_ms": age_ms,
            "partitions": partitions}
    if json_:
        print_json(info)
        return
    started = (datetime.fromtimestamp(start / 1000, UTC).isoformat(timespec="milliseconds")
               if start >= 0 else "-")
    print_table(["TransactionalId", "State", "ProducerId", "Epoch", "TimeoutMs", "Started", "AgeMs",
                 "Partitions"],
                [[t.transactional_id, t.transaction_state, t.producer_id, t.producer_epoch,
                  t.transaction_timeout_ms, started, "-" if age_ms is None else age_ms,
                  ",".join(partitions) or "-"]])
