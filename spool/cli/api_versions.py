"""``spool api-versions``: Kafka's kafka-broker-api-versions, for every broker of the cluster.

Every broker the bootstrap's Metadata lists is asked ApiVersions; the answer is
printed as Kafka's tool prints it (each API line starts with a tab)::

    127.0.0.1:9092 (id: 0 rack: null) -> (
      Produce(0): 0 to 13 [usable: 13],
      ...
      AlterConfigs(33): UNSUPPORTED
    )

one line per API: the broker's version range, and the version Spool's own client
would use (the highest both support; ``unusable: node too old`` or ``node too new``
when the ranges do not meet), ``UNSUPPORTED`` for an API of the broker listener
that Spool's codec knows and the broker does not serve, ``UNKNOWN(key)`` for a
key the codec does not know. Then the broker's finalized features, when it sent
any. ``--json``: ``[{"id", "host", "port", "rack", "apis": [{"api_key", "name",
"min_version", "max_version", "usable"}], "finalized_features": {name: level}}]``
(served APIs only; ``usable`` null when unusable). A broker that does not answer
fails the command (one line, exit 1).
"""

from __future__ import annotations

from typing import Any

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    print_json,
)
from spool.protocol._generated import API_BY_KEY, ApiVersionsRequest


async def _ask(admin: wire.WireAdmin, timeout: float) -> list[dict]:
    md = await admin.metadata([])
    out = []
    for b in sorted(md.brokers, key=lambda b: b.node_id):
        node = await wire.connect(f"{b.host}:{b.port}", timeout)
        try:
            resp = await node.client.request(ApiVersionsRequest(
                client_software_name="spool", client_software_version="cli"), 3)
        finally:
            await node.client.close()
        apis = []
        for k in sorted(resp.api_keys, key=lambda k: k.api_key):
            entry = API_BY_KEY.get(k.api_key)
            usable = None
            if entry is not None:
                lo, hi = entry.valid_versions
                if lo <= k.max_version and k.min_version <= hi:
                    usable = min(hi, k.max_version)
            apis.append({"api_key": k.api_key,
                         "name": entry.name if entry else f"UNKNOWN({k.api_key})",
                         "min_version": k.min_version, "max_version": k.max_version,
                         "usable": usable})
        out.append({"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "apis": apis, "finalized_features": {
                        f.name: f.max_version_level for f in resp.finalized_features or []}})
    return out


def _line(api: dict) -> str:
    entry = API_BY_KEY.get(api["api_key"])
    span = f"{api['min_version']} to {api['max_version']}"
    if entry is None:
        return f"{api['name']}: {span}"
    if api["usable"] is not None:
        note = f"usable: {api['usable']}"
    else:
        note = ("unusable: node too old" if api["max_version"] < entry.valid_versions[0]
                else "unusable: node too new")
    return f"{api['name']}({api['api_key']}): {span} [{note}]"


def _text(broker: dict) -> str:
    served = {a["api_key"] for a in broker["apis"]}
    lines = [_line(a) for a in broker["apis"]]
    lines += [f"{e.name}({k}): UNSUPPORTED" for k, e in sorted(API_BY_KEY.items())
              if k not in served and "broker" in e.listeners]
    head = (f"{broker['host']}:{broker['port']} (id: {broker['id']} "
            f"rack: {broker['rack'] or 'null'}) -> (")
    features = broker["finalized_features"]
    tail = (")" if not features else
            ")\nfinalized features: " + ", ".join(f"{n}={v}" for n, v in sorted(features.items())))
    return head + "\n\t" + ",\n\t".join(lines) + "\n" + tail


@cli_command
def api_versions(
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 10.0,
) -> None:
    """The API versions every broker serves, and the ones this tool would use."""
    brokers: list[dict[str, Any]] = wire.run(bootstrap, timeout, lambda a: _ask(a, timeout))
    if json:
        print_json(brokers)
        return
    typer.echo("\n".join(_text(b) for b in brokers))
