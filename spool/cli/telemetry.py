"""``spool telemetry show``: the client metrics a broker keeps (KIP-714 pushes).

    spool telemetry show --admin-endpoint HOST:PORT [--client-instance-id ID] [--json]

Reads the broker's admin endpoint (``spool.admin.http.listener``, GET /telemetry).
Plain output: one line per pushed data point, oldest push first::

    2026-11-26T16:05:01Z  rdkafka  c5314d1c-...  org.apache.kafka.producer.request.latency.avg  0.5

``--json`` prints the pushes as the endpoint gives them. An endpoint that does not
answer is exit 1 with one ``spool:`` line.
"""

from __future__ import annotations

import json as jsonlib
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Annotated

import typer

from spool.cli.common import JsonFlag, cli_command, fail, print_json

app = typer.Typer(help="Client telemetry (KIP-714) the broker keeps.", no_args_is_help=True)


@app.command()
@cli_command
def show(
    admin_endpoint: Annotated[str, typer.Option(
        "--admin-endpoint", envvar="SPOOL_ADMIN_ENDPOINT",
        help="host:port of the broker's spool.admin.http.listener.")],
    client_instance_id: Annotated[str | None, typer.Option(
        "--client-instance-id", help="Only this client instance's pushes.")] = None,
    json: JsonFlag = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1)] = 10.0,
) -> None:
    """Show the metrics clients pushed."""
    url = f"http://{admin_endpoint}/telemetry"
    if client_instance_id:
        url += f"?client_instance_id={client_instance_id}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            pushes = jsonlib.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        fail(f"cannot read {url}: {e}", 1)
    if json:
        print_json(pushes)
        return
    for p in pushes:
        when = datetime.fromtimestamp(p["received_ms"] / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for m in p["metrics"]:
            print(f"{when}  {p['client_id']}  {p['client_instance_id']}  {m['name']}  "
                  f"{m['value']}")
