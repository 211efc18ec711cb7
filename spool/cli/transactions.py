"""``spool transactions``: Kafka's kafka-transactions tool.

- ``list [--state S]... [--duration-filter MS] [--json]``: transactional ids with their
  coordinator, producer id and state (ListTransactions, API 66, sent to every broker as
  Kafka's admin client does: each answers for the ids it coordinates); Kafka's
  ``--duration-filter`` keeps the transactions running longer than MS. ``--json``:
  ``[{"transactional_id", "coordinator", "producer_id", "state"}]``.
- ``describe TRANSACTIONAL_ID [--json]``: state, producer id and epoch, timeout, start
  time and age of the open transaction, and its partitions (DescribeTransactions, API 65,
  asked of the id's coordinator: FindCoordinator key type TRANSACTION). Unknown id: exit 1
  with TRANSACTIONAL_ID_NOT_FOUND.
- ``describe-producers --topic T --partition P [--broker-id N] [--json]``: the partition's
  active producers as its leader (or replica N) keeps them (DescribeProducers, API 61):
  producer id and epoch, latest coordinator epoch, last sequence, last timestamp and the
  start offset of its open transaction (``None``; JSON null). ``--json``: ``[{"producer_id",
  "producer_epoch", "coordinator_epoch", "last_sequence", "last_timestamp",
  "current_transaction_start_offset"}]``.
- ``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout
  MIN] [--json]``: open transactions whose last write is older than
  ``--max-transaction-timeout`` minutes (default 15) and that their coordinator does not
  know: no transactional id has the producer id (ListTransactions), the id is gone, or its
  transaction does not include the partition (DescribeTransactions), as Kafka's tool
  decides. Table: Topic, Partition, ProducerId, ProducerEpoch, CoordinatorEpoch,
  StartOffset, LastTimestamp, Duration(min); ``--json`` the same keys in snake case.
- ``abort --topic T --partition P (--start-offset N | --producer-id I --producer-epoch E
  --coordinator-epoch C) [--json]``: writes an ABORT marker for that producer to the
  partition (WriteTxnMarkers, API 27, to its leader), as Kafka's admin
  ``abortTransaction``; with ``--start-offset`` the producer is the one whose open
  transaction starts there (else exit 1). A negative coordinator epoch is sent as 0, as
  Kafka's tool does. Prints the aborted transaction (``--json``: ``{"topic", "partition",
  "producer_id", "producer_epoch", "coordinator_epoch"}``).

confluent-kafka has no admin call for these APIs, so this tool sends them with Spool's
own client (``spool.cli.wire``).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    print_json,
    print_table,
)
from spool.protocol._generated import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)
from spool.protocol._generated import describe_producers_request as dpr
from spool.protocol._generated import write_txn_markers_request as wtm
from spool.protocol.errors import Errors, error_name

app = typer.Typer(help="List, describe, find hanging and abort transactions.",
                  no_args_is_help=True)

TopicOpt = Annotated[str, typer.Option("--topic", help="The topic.")]
PartitionOpt = Annotated[int, typer.Option("--partition", min=0, help="The partition.")]


_PHRASES = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "does not exist",
    Errors.TRANSACTIONAL_ID_NOT_FOUND: "no such transactional id",
    Errors.NOT_LEADER_OR_FOLLOWER: "this broker is not its leader",
}


def _error(code: int, subject: str, message: str | None = None) -> CliError:
    """``subject: <message or phrase> (NAME)``: the broker's words, else ours, else the name."""
    name = error_name(code)
    text = (message or "").rstrip(".") or _PHRASES.get(code)
    return CliError(f"{subject}: {text} ({name})" if text else f"{subject}: {name}",
                    error_name=name)


async def _brokers(admin: wire.WireAdmin, topics: list[str] | None = None) -> tuple[dict, Any]:
    md = await admin.metadata(topics)
    return {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}, md


async def _on(address: str, timeout: float, request: Any, version: int) -> Any:
    node = await wire.connect(address, timeout)
    try:
        return await node.request(request, version)
    finally:
        await node.client.close()


async def _list(admin: wire.WireAdmin, timeout: float, states: list[str],
                producer_ids: list[int], duration_ms: int = -1
                ) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator, producer id, state) from every broker."""
    brokers, _ = await _brokers(admin)
    out = []
    for node_id, address in sorted(brokers.items()):
        resp = await _on(address, timeout, ListTransactionsRequest(
            state_filters=states, producer_id_filters=producer_ids,
            duration_filter=duration_ms), 1)
        if resp.error_code:
            raise _error(resp.error_code, f"list transactions on broker {node_id}")
        out += [(t.transactional_id, node_id, t.producer_id, t.transaction_state)
                for t in resp.transaction_states]
    return sorted(out)


async def _describe(admin: wire.WireAdmin, timeout: float, tid: str) -> Any:
    """The DescribeTransactions state of ``tid``, from its coordinator."""
    deadline = time.monotonic() + timeout
    while True:
        resp = await admin.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]), 4)
        c = resp.coordinators[0]
        if c.error_code == 0:
            break
        if c.error_code not in (Errors.COORDINATOR_NOT_AVAILABLE,
                                Errors.COORDINATOR_LOAD_IN_PROGRESS) \
                or time.monotonic() > deadline:
            raise _error(c.error_code, tid, c.error_message)
        await asyncio.sleep(0.2)
    resp = await _on(f"{c.host}:{c.port}", timeout,
                     DescribeTransactionsRequest(transactional_ids=[tid]), 0)
    return c.node_id, resp.transaction_states[0]


@app.command("list")
@cli_command
def list_(
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="Only these states (Ongoing, PrepareCommit, CompleteAbort...).")] = None,
    duration_filter: Annotated[int, typer.Option(
        "--duration-filter", help="Only transactions running longer than this many ms "
        "(< 0: all).")] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 10.0,
    json_: JsonFlag = False,
) -> None:
    """List transactional ids, their coordinators, producer ids and states."""
    rows = wire.run(bootstrap, timeout, lambda a: _list(a, timeout, state or [], [],
                                                        duration_filter))
    if json_:
        print_json([{"transactional_id": t, "coordinator": c, "producer_id": p, "state": s}
                    for t, c, p, s in rows])
    else:
        print_table(["TransactionalId", "Coordinator", "ProducerId", "State"], rows)


@app.command()
@cli_command
def describe(
    transactional_id: Annotated[str, typer.Argument(help="The transactional.id.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 10.0,
    json_: JsonFlag = False,
) -> None:
    """State, producer id/epoch, timeout, age and partitions of one transactional id."""
    coordinator, t = wire.run(bootstrap, timeout,
                              lambda a: _describe(a, timeout, transactional_id))
    if t.error_code:
        raise _error(t.error_code, transactional_id)
    start = t.transaction_start_time_ms
    age_ms = int(time.time() * 1000) - start if start >= 0 else None
    partitions = [f"{d.topic}-{p}" for d in t.topics for p in d.partitions]
    info = {"transactional_id": t.transactional_id, "coordinator": coordinator,
            "state": t.transaction_state,
            "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
            "timeout_ms": t.transaction_timeout_ms,
            "start_time_ms": start if start >= 0 else None, "age_ms": age_ms,
            "partitions": partitions}
    if json_:
        print_json(info)
        return
    started = (datetime.fromtimestamp(start / 1000, UTC).isoformat(timespec="milliseconds")
               if start >= 0 else "-")
    print_table(["TransactionalId", "Coordinator", "State", "ProducerId", "Epoch", "TimeoutMs",
                 "Started", "AgeMs", "Partitions"],
                [[t.transactional_id, coordinator, t.transaction_state, t.producer_id,
                  t.producer_epoch, t.transaction_timeout_ms, started,
                  "-" if age_ms is None else age_ms, ",".join(partitions) or "-"]])


def _producer_doc(p: Any) -> dict:
    return {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
            "coordinator_epoch": p.coordinator_epoch, "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "current_transaction_start_offset": (p.current_txn_start_offset
                                                 if p.current_txn_start_offset >= 0 else None)}


async def _producers(admin: wire.WireAdmin, timeout: float, parts: list[tuple[str, int]],
                     broker_id: int | None) -> dict[tuple[str, int], list[dict]]:
    """The active producers of ``parts``, asked of each one's leader (or ``broker_id``)."""
    brokers, md = await _brokers(admin, sorted({t for t, _ in parts}))
    leaders = {(t.name, p.partition_index): p.leader_id for t in md.topics for p in t.partitions}
    for t in md.topics:
        if t.error_code:
            raise _error(t.error_code, f"topic '{t.name}'")
    by_node: dict[int, list[tuple[str, int]]] = {}
    for tp in parts:
        node = broker_id if broker_id is not None else leaders.get(tp, -1)
        if tp not in leaders:
            raise _error(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp[0]}-{tp[1]}")
        if node not in brokers:
            raise CliError(f"{tp[0]}-{tp[1]}: " + (
                f"broker {broker_id} is not in the cluster" if broker_id is not None
                else "no leader (LEADER_NOT_AVAILABLE)"), 1)
        by_node.setdefault(node, []).append(tp)
    out: dict[tuple[str, int], list[dict]] = {}
    for node, tps in sorted(by_node.items()):
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        resp = await _on(brokers[node], timeout, DescribeProducersRequest(topics=[
            dpr.TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()]), 0)
        for t in resp.topics:
            for p in t.partitions:
                where = f"{t.name}-{p.partition_index}"
                if p.error_code:
                    raise _error(p.error_code, f"{where} on broker {node}", p.error_message)
                out[(t.name, p.partition_index)] = [_producer_doc(s) for s in p.active_producers]
    return out


@app.command("describe-producers")
@cli_command
def describe_producers(
    topic: TopicOpt,
    partition: PartitionOpt,
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", help="Ask this replica instead of the leader.")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 10.0,
    json_: JsonFlag = False,
) -> None:
    """The active producers of a partition: ids, epochs, sequences, open transactions."""
    got = wire.run(bootstrap, timeout, lambda a: _producers(
        a, timeout, [(topic, partition)], broker_id))[(topic, partition)]
    if json_:
        print_json(got)
        return
    print_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                 "LastTimestamp", "CurrentTransactionStartOffset"],
                [[p["producer_id"], p["producer_epoch"], p["coordinator_epoch"],
                  p["last_sequence"], p["last_timestamp"],
                  "None" if p["current_transaction_start_offset"] is None
                  else p["current_transaction_start_offset"]] for p in got])


async def _find_hanging(admin: wire.WireAdmin, timeout: float, topic: str | None,
                        partition: int | None, broker_id: int | None,
                        max_timeout_ms: int) -> list[dict]:
    brokers, md = await _brokers(admin, None if topic is None else [topic])
    if broker_id is not None and broker_id not in brokers:
        raise CliError(f"broker {broker_id} is not in the cluster "
                       f"(brokers: {sorted(brokers)})", 1)
    if topic is not None and partition is not None:
        parts = [(topic, partition)]
    else:
        parts = sorted((t.name, p.partition_index) for t in md.topics if not t.error_code
                       for p in t.partitions
                       if broker_id is None or broker_id in p.replica_nodes)
        for t in md.topics:
            if t.error_code:
                raise _error(t.error_code, f"topic '{t.name}'")
    producers = await _producers(admin, timeout, parts, broker_id) if parts else {}
    now = int(time.time() * 1000)
    open_txns = [(tp, p) for tp, ps in sorted(producers.items()) for p in ps
                 if p["current_transaction_start_offset"] is not None
                 and now - p["last_timestamp"] > max_timeout_ms]
    if not open_txns:
        return []
    listed = await _list(admin, timeout, [], sorted({p["producer_id"] for _, p in open_txns}))
    ids = {pid: tid for tid, _, pid, _ in listed}
    known: dict[str, set[tuple[str, int]] | None] = {}
    for tid in sorted(set(ids.values())):
        _, t = await _describe(admin, timeout, tid)
        known[tid] = (None if t.error_code
                      else {(d.topic, p) for d in t.topics for p in d.partitions})
    hanging = []
    for tp, p in open_txns:
        tid = ids.get(p["producer_id"])
        parts_of = known.get(tid) if tid is not None else None
        if parts_of is None or tp not in parts_of:
            hanging.append({"topic": tp[0], "partition": tp[1], "producer_id": p["producer_id"],
                            "producer_epoch": p["producer_epoch"],
                            "coordinator_epoch": p["coordinator_epoch"],
                            "start_offset": p["current_transaction_start_offset"],
                            "last_timestamp": p["last_timestamp"],
                            "duration_min": (now - p["last_timestamp"]) // 60_000})
    return hanging


@app.command("find-hanging")
@cli_command
def find_hanging(
    topic: Annotated[str | None, typer.Option("--topic", help="Search this topic.")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", min=0, help="Only this partition (with --topic).")] = None,
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", help="Search the partitions with a replica on this broker.")] = None,
    max_transaction_timeout: Annotated[int, typer.Option(
        "--max-transaction-timeout", min=0, help="Minutes: only transactions whose last "
        "write is older than this.")] = 15,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 10.0,
    json_: JsonFlag = False,
) -> None:
    """Open transactions that their coordinator will never close (Kafka's rules)."""
    if topic is None and broker_id is None:
        raise CliError("find-hanging needs --topic or --broker-id to limit the search", 2)
    if partition is not None and topic is None:
        raise CliError("--partition needs --topic", 2)
    rows = wire.run(bootstrap, timeout, lambda a: _find_hanging(
        a, timeout, topic, partition, broker_id, max_transaction_timeout * 60_000))
    if json_:
        print_json(rows)
        return
    print_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                 "StartOffset", "LastTimestamp", "Duration(min)"],
                [list(r.values()) for r in rows])


async def _abort(admin: wire.WireAdmin, timeout: float, topic: str, partition: int,
                 start_offset: int | None, spec: dict) -> dict:
    tp = (topic, partition)
    if start_offset is not None:
        producers = (await _producers(admin, timeout, [tp], None))[tp]
        found = [p for p in producers if p["current_transaction_start_offset"] == start_offset]
        if not found:
            raise CliError(f"no open transaction starts at offset {start_offset} of "
                           f"{topic}-{partition}", 1)
        p = found[0]
        spec = {"producer_id": p["producer_id"], "producer_epoch": p["producer_epoch"],
                "coordinator_epoch": p["coordinator_epoch"]}
    spec["coordinator_epoch"] = max(spec["coordinator_epoch"], 0)
    brokers, md = await _brokers(admin, [topic])
    leader = next((p.leader_id for t in md.topics for p in t.partitions
                   if p.partition_index == partition), None)
    if leader not in brokers:
        raise _error(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{partition}")
    resp = await _on(brokers[leader], timeout, WriteTxnMarkersRequest(markers=[
        wtm.WritableTxnMarker(producer_id=spec["producer_id"],
                              producer_epoch=spec["producer_epoch"], transaction_result=False,
                              coordinator_epoch=spec["coordinator_epoch"],
                              topics=[wtm.WritableTxnMarkerTopic(
                                  name=topic, partition_indexes=[partition])])]), 1)
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                if p.error_code:
                    raise _error(p.error_code, f"abort of producer {spec['producer_id']} on "
                                 f"{topic}-{partition}")
    return {"topic": topic, "partition": partition, **spec}


@app.command()
@cli_command
def abort(
    topic: TopicOpt,
    partition: PartitionOpt,
    start_offset: Annotated[int | None, typer.Option(
        "--start-offset", help="The first offset of the open transaction to abort.")] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 10.0,
    json_: JsonFlag = False,
) -> None:
    """Abort a hanging transaction on one partition (writes its ABORT marker)."""
    spec: dict = {}
    if start_offset is None:
        if producer_id is None:
            raise CliError("name the transaction with --start-offset, or with --producer-id, "
                           "--producer-epoch and --coordinator-epoch", 2)
        if producer_epoch is None or coordinator_epoch is None:
            raise CliError("--producer-id needs --producer-epoch and --coordinator-epoch", 2)
        spec = {"producer_id": producer_id, "producer_epoch": producer_epoch,
                "coordinator_epoch": coordinator_epoch}
    elif producer_id is not None:
        raise CliError("give --start-offset or --producer-id, not both", 2)
    done = wire.run(bootstrap, timeout, lambda a: _abort(a, timeout, topic, partition,
                                                          start_offset, spec))
    if json_:
        print_json(done)
    typer.echo(f"aborted the transaction of producer {done['producer_id']} (epoch "
               f"{done['producer_epoch']}) on {topic}-{partition}", err=True)
