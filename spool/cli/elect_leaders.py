"""``spool elect-leaders``: preferred or unclean leader election (kafka-leader-election).

``spool elect-leaders --type preferred|unclean (--topic T [--partition P ...] | --all)``
sends ElectLeaders (v0-2) to the bootstrap broker (brokers forward it to the
active controller). ``--topic T`` alone means every partition of T; ``--all`` every
partition of the cluster (a null partition list: the controller then leaves out the
partitions that need no election, as Kafka does).

Output, Kafka's lines on stdout (``--json``: an array of ``{"topic", "partition",
"result", "message"}`` with result ``elected``, ``not_needed`` or the error name):

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2

A partition that could not get its leader is a line ``t-3: NAME: message``, then one
``spool:`` line on stderr and exit 1 (ELECTION_NOT_NEEDED is no failure). Bad
options (no scope, both scopes, --partition without --topic, an unknown --type) are
exit 2; a topic that does not exist is exit 1.
"""

from __future__ import annotations

from typing import Annotated

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
    no_such_topic,
    print_json,
)
from spool.protocol._generated import ElectLeadersRequest
from spool.protocol._generated.elect_leaders_request import TopicPartitions
from spool.protocol.errors import Errors, error_name

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def _type(value: str) -> str:
    if value.lower() not in ELECTION_TYPES:
        raise typer.BadParameter(f"{value!r} is not preferred or unclean")
    return value.lower()


@cli_command
def elect_leaders(
    election_type: Annotated[str, typer.Option(
        "--type", "--election-type", callback=_type, metavar="preferred|unclean",
        help="preferred: the first replica leads again (if in sync); unclean: a leaderless "
             "partition takes any live replica, losing what it lacks.")],
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="The topic.")] = None,
    partition: Annotated[list[int] | None, typer.Option(
        "--partition", "-p", min=0, help="A partition of --topic (repeatable; default: all).")
    ] = None,
    all_partitions: Annotated[bool, typer.Option(
        "--all", "--all-topic-partitions", help="Every partition of every topic.")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Elect partition leaders (preferred or unclean)."""
    if all_partitions == (topic is not None):
        fail("give either --topic (with --partition) or --all", 2)
    if partition and topic is None:
        fail("--partition needs --topic", 2)
    label = election_type.upper()

    async def body(admin: wire.WireAdmin):
        scope = None
        if topic is not None:
            parts = sorted(set(partition or []))
            if not parts:
                md = await admin.metadata([topic])
                t = md.topics[0]
                if t.error_code in (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                    Errors.INVALID_TOPIC_EXCEPTION) or not t.partitions:
                    raise no_such_topic(topic)
                parts = sorted(p.partition_index for p in t.partitions)
            scope = [TopicPartitions(topic=topic, partitions=parts)]
        req = ElectLeadersRequest(election_type=ELECTION_TYPES[election_type],
                                  topic_partitions=scope, timeout_ms=int(timeout * 1000))
        version = admin.version(43, 2)
        if version == 0 and election_type != "preferred":
            fail(f"the broker at {admin.address} only does preferred elections (ElectLeaders v0)")
        return await admin.request(req, 2)

    resp = wire.run(bootstrap, timeout, body)
    if resp.error_code:
        fail(f"ElectLeaders: {wire.error_text(resp.error_code)}")
    results = sorted(((r.topic, p.partition_id), p.error_code, p.error_message)
                     for r in resp.replica_election_results for p in r.partition_result)
    elected = [tp for tp, code, _ in results if code == 0]
    not_needed = [tp for tp, code, _ in results if code == Errors.ELECTION_NOT_NEEDED]
    failed = [(tp, code, msg) for tp, code, msg in results
              if code not in (0, Errors.ELECTION_NOT_NEEDED)]
    unknown_topic = [tp for tp, code, _ in failed if code == Errors.UNKNOWN_TOPIC_OR_PARTITION]
    if json:
        print_json([{"topic": t, "partition": p,
                     "result": "elected" if code == 0 else "not_needed"
                     if code == Errors.ELECTION_NOT_NEEDED else error_name(code),
                     "message": msg} for (t, p), code, msg in results])
    else:
        names = ", ".join  # Kafka's separator
        if elected:
            print(f"Successfully completed leader election ({label}) for partitions "
                  + names(f"{t}-{p}" for t, p in elected))
        if not_needed:
            print("Valid replica already elected for partitions "
                  + names(f"{t}-{p}" for t, p in not_needed))
        for (t, p), code, msg in failed:
            print(f"{t}-{p}: {wire.error_text(code, msg)}")
    if not results and not json:
        typer.echo(f"No partition needed a {election_type} election", err=True)
    if failed:
        kinds = sorted({error_name(code) for _, code, _ in failed})
        what = "topic partition does not exist" if len(unknown_topic) == len(failed) else \
            f"{len(failed)} replica(s) could not be elected"
        fail(f"{what} ({', '.join(kinds)})")
