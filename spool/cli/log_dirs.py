"""``spool log-dirs describe``: each broker's log dirs and partition sizes (kafka-log-dirs).

Contract (Kafka's LogDirsCommand ``--describe``; DescribeLogDirs over ``spool.cli.wire``,
which confluent-kafka does not expose):

- Asks every broker of the cluster (from Metadata), or those of ``--broker-list
  0,1``; a listed broker that is not in the cluster is an error naming the
  cluster's brokers, before anything is asked. ``--topic-list a,b`` keeps those
  topics' partitions only (the log dirs are still listed).
- Output, one line per partition replica (a log dir without partitions is one line
  with empty partition columns): ``Broker  LogDir  Topic  Partition  Size
  OffsetLag  Future`` (Size in bytes, OffsetLag the replica's distance from the log
  end, Future whether it is a replica moving between dirs), sorted by broker, log
  dir, topic, partition; a log dir that failed shows its error in the Topic column.
- ``--json``: Kafka's document, ``{"version": 1, "brokers": [{"broker", "logDirs":
  [{"logDir", "error" (null, or Kafka's exception name), "partitions": [{"partition":
  "topic-0", "size", "offsetLag", "isFuture"}]}]}]}``, as kafka-log-dirs prints it
  (without its two progress lines).
- A broker that cannot be reached is the command's failure (one line, exit 1).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    fail,
    parse_names,
    print_json,
    print_table,
)
from spool.protocol._generated import DescribeLogDirsRequest
from spool.protocol._generated.describe_log_dirs_request import DescribableLogDirTopic
from spool.protocol.errors import error_name

app = typer.Typer(help="Log directories on each broker (kafka-log-dirs).",
                  no_args_is_help=True)

# Kafka's exception class for an error code, as kafka-log-dirs prints it in "error"
_EXCEPTIONS = {
    "KAFKA_STORAGE_ERROR": "org.apache.kafka.common.errors.KafkaStorageException",
    "LOG_DIR_NOT_FOUND": "org.apache.kafka.common.errors.LogDirNotFoundException",
}


@app.command()
@cli_command
def describe(
    broker_list: Annotated[
        str | None, typer.Option("--broker-list", help="Brokers to ask, e.g. 0,1,2 (default: all).")
    ] = None,
    topic_list: Annotated[
        str | None, typer.Option("--topic-list", help="Only these topics' partitions, e.g. a,b.")
    ] = None,
    json_: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List each broker's log dirs and the size of every partition in them."""
    wanted: list[int] = []
    for name in parse_names([broker_list] if broker_list else []):
        if not name.lstrip("-").isdigit():
            fail(f"bad --broker-list '{broker_list}': expected broker ids, e.g. 0,1,2", 2)
        wanted.append(int(name))
    topics = set(parse_names([topic_list] if topic_list else []))
    found = wire.run(bootstrap, timeout, lambda admin: _ask(admin, wanted, topics, timeout))
    doc = {"version": 1, "brokers": [{"broker": b, "logDirs": dirs} for b, dirs in found]}
    if json_:
        print_json(doc)
        return
    rows: list[list[Any]] = []
    for b, dirs in found:
        for d in dirs:
            if d["error"] is not None:
                rows.append([b, d["logDir"], d["error"], "", "", "", ""])
                continue
            if not d["partitions"]:
                rows.append([b, d["logDir"], "", "", "", "", ""])
            for p in d["partitions"]:
                topic, _, index = p["partition"].rpartition("-")
                rows.append([b, d["logDir"], topic, index, p["size"], p["offsetLag"],
                             str(p["isFuture"]).lower()])
    print_table(["Broker", "LogDir", "Topic", "Partition", "Size", "OffsetLag", "Future"], rows)


async def _ask(admin: wire.WireAdmin, wanted: list[int], topics: set[str],
               timeout: float) -> list[tuple[int, list[dict[str, Any]]]]:
    md = await admin.metadata(None)
    nodes = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    missing = sorted(set(wanted) - set(nodes))
    if missing:
        fail(f"the given brokers do not exist from --broker-list: "
             f"{','.join(map(str, missing))}; the cluster's brokers: "
             f"{','.join(map(str, sorted(nodes)))}")
    ids = sorted(set(wanted)) if wanted else sorted(nodes)
    request_topics = None
    if topics:
        parts = {t.name: [p.partition_index for p in t.partitions] for t in md.topics}
        request_topics = [DescribableLogDirTopic(topic=t, partitions=sorted(parts.get(t, [])))
                          for t in sorted(topics)]
    return list(await asyncio.gather(*(
        _one(admin, b, nodes[b], request_topics, timeout) for b in ids)))


async def _one(admin: wire.WireAdmin, broker: int, address: str,
               topics: list[DescribableLogDirTopic] | None,
               timeout: float) -> tuple[int, list[dict[str, Any]]]:
    node = await wire.connect(address, timeout)
    try:
        resp = await node.request(DescribeLogDirsRequest(topics=topics), 4)
    finally:
        await node.client.close()
    if resp.error_code:
        raise wire.refused(resp.error_code, subject=f"broker {broker}")
    dirs = []
    for r in sorted(resp.results, key=lambda r: r.log_dir):
        name = error_name(r.error_code) if r.error_code else None
        parts = [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                  "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                 for t in sorted(r.topics, key=lambda t: t.name)
                 for p in sorted(t.partitions, key=lambda p: p.partition_index)]
        dirs.append({"logDir": r.log_dir,
                     "error": _EXCEPTIONS.get(name, name) if name else None,
                     "partitions": parts})
    return broker, dirs
