"""``spool reassign execute|verify|cancel|list``: partition reassignments (kafka-reassign-partitions).

The plan is Kafka's reassignment JSON::

    {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2, 3, 1],
         "log_dirs": ["any", "any", "any"]}]}

``log_dirs`` is optional; any value but ``"any"`` is refused (Spool has no
AlterReplicaLogDirs). A plan that is not that (not JSON, version other than 1,
no or empty ``partitions``, an empty or duplicated replica list, a partition listed
twice, replicas and log_dirs of different lengths) is one ``spool:`` line and
exit 2, before anything is asked.

- ``execute --file plan.json [--additional]``: refuses (exit 1) while any reassignment
  is in progress unless ``--additional``, or when a replica names a broker the
  cluster does not list or a partition does not exist (Kafka's checks); prints the
  current assignment of the plan's partitions as a plan on stdout (keep it: it is
  the rollback plan), then sends AlterPartitionReassignments. ``--json``: one document
  instead, ``{"rollback": <the rollback plan>, "started": [{"topic", "partition",
  "replicas"}], "failed": [{"topic", "partition", "error"}]}`` (then exit 1 if any failed).
- ``verify --file plan.json``: per partition "Reassignment of partition t-0 is
  completed." / "... is still in progress." / "There is no active reassignment of
  partition t-0, but replica set is 1,2 rather than 1,2,3." (Kafka's lines, stdout).
  Exit 0 when every one is completed, 3 while some are in progress, 1 when one
  ended elsewhere than the plan says. ``--json``: ``[{"topic", "partition", "status"
  (completed, in_progress or elsewhere), "replicas" (now; null: no such partition),
  "target"}]`` instead of the lines, same exit status.
- ``cancel --file plan.json``: cancels those of the plan's partitions that are being
  reassigned (AlterPartitionReassignments with null replicas); says when none is.
  ``--json``: ``{"cancelled": [{"topic", "partition"}], "failed": [{"topic", "partition",
  "error"}]}`` instead of the lines (``cancelled`` empty: none was active).
- ``list [--json]``: every reassignment in progress: replicas, adding, removing.

Per-partition failures are listed on stdout (``t-0: NAME: message``), then one
``spool:`` line on stderr and exit 1. Requests go to the bootstrap broker over
``spool.cli.wire`` (confluent-kafka has no reassignment calls).
"""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Annotated, Any

import typer

from spool.cli import partitions, wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    fail,
    is_tty,
    print_json,
    print_table,
)
from spool.protocol._generated import AlterPartitionReassignmentsRequest
from spool.protocol._generated.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from spool.protocol.errors import Errors

IN_PROGRESS_EXIT = 3  # verify: some reassignments still run

app = typer.Typer(help="Reassign partitions to other brokers (Kafka's reassignment JSON).",
                  no_args_is_help=True)

PlanFile = Annotated[Path, typer.Option("--file", "-f", help="The reassignment plan (JSON).")]
Plan = dict[tuple[str, int], list[int]]


def _say(line: str) -> None:
    typer.echo(line, err=True)


def _tp(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def parse_plan(text: str, source: str = "the plan") -> Plan:
    """Kafka's reassignment JSON -> {(topic, partition): replicas}; CliError (exit 2) if bad."""
    def bad(why: str) -> CliError:
        return CliError(f"{source}: {why}", 2)

    try:
        doc = jsonlib.loads(text)
    except ValueError as e:
        raise bad(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise bad("expected a JSON object with \"version\" and \"partitions\"")
    version = doc.get("version", 1)
    if version != 1:
        raise bad(f"not supported version field value {version!r} (expected 1)")
    entries = doc.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise bad("partition reassignment list cannot be empty (\"partitions\")")
    plan: Plan = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise bad(f"partitions[{i}] is not an object")
        topic, part, replicas = e.get("topic"), e.get("partition"), e.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise bad(f"partitions[{i}]: \"topic\" must be a non-empty string")
        if not isinstance(part, int) or isinstance(part, bool) or part < 0:
            raise bad(f"partitions[{i}]: \"partition\" must be a partition index")
        tp = (topic, part)
        if not isinstance(replicas, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in replicas):
            raise bad(f"{_tp(tp)}: \"replicas\" must be a list of broker ids")
        if not replicas:
            raise bad(f"{_tp(tp)}: partition replica list cannot be empty")
        if len(set(replicas)) != len(replicas):
            raise bad(f"{_tp(tp)}: duplicate replica in {replicas}")
        dirs = e.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise bad(f"{_tp(tp)}: size of replicas list {replicas} is different from "
                          f"size of log dirs list {dirs}")
            if any(d != "any" for d in dirs):
                raise bad(f"{_tp(tp)}: log_dirs other than \"any\" are not supported "
                          f"(Spool has no AlterReplicaLogDirs)")
        if tp in plan:
            raise bad(f"partition reassignment contains duplicate topic partitions: {_tp(tp)}")
        plan[tp] = replicas
    return plan


def read_plan(path: Path) -> Plan:
    try:
        text = path.read_text()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}", 2) from None
    return parse_plan(text, str(path))


def plan_json(assignment: Plan) -> dict[str, Any]:
    return {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}


def _by_topic(tps) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        out.setdefault(t, []).append(p)
    return out


def _failed_json(failures: list[tuple[tuple[str, int], int, str | None]]) -> list[dict]:
    return [{"topic": t, "partition": p, "error": wire.error_text(code, message)}
            for (t, p), code, message in failures]


def _report_failures(failures: list[tuple[tuple[str, int], int, str | None]], what: str,
                     listed: bool = True) -> None:
    """Each failure on stdout (unless ``listed`` elsewhere: --json), then the error."""
    if not failures:
        return
    for tp, code, message in failures if listed else []:
        print(f"{_tp(tp)}: {wire.error_text(code, message)}")
    n = len(failures)
    names = sorted({wire.error_text(code) for _, code, _ in failures})
    fail(f"{n} partition{'s' if n != 1 else ''} could not {what} ({', '.join(names)})")


async def _alter(admin: wire.WireAdmin, targets: dict[tuple[str, int], list[int] | None],
                 timeout: float) -> list[tuple[tuple[str, int], int, str | None]]:
    req = AlterPartitionReassignmentsRequest(
        timeout_ms=int(timeout * 1000), allow_replication_factor_change=True,
        topics=[ReassignableTopic(name=t, partitions=[
            ReassignablePartition(partition_index=p, replicas=targets[(t, p)]) for p in ps])
            for t, ps in _by_topic(targets).items()])
    resp = await admin.request(req, 1)
    if resp.error_code:
        raise CliError(f"AlterPartitionReassignments: "
                       f"{wire.error_text(resp.error_code, resp.error_message)}")
    return [((t.name, p.partition_index), p.error_code, p.error_message)
            for t in resp.responses for p in t.partitions if p.error_code]


async def _ongoing(admin: wire.WireAdmin, topics: dict[str, list[int]] | None) -> dict:
    if 46 not in admin.served:
        admin.version(46, 0)  # raises: the broker does not serve it
    found = await partitions.ongoing_reassignments(admin, topics)
    if found is None:
        raise CliError("ListPartitionReassignments failed")
    return found


@app.command()
@cli_command
def execute(
    file: PlanFile,
    additional: Annotated[bool, typer.Option(
        "--additional", help="Start even while other reassignments are in progress.")] = False,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Start the reassignments of a plan; prints the rollback plan on stdout.

    --json: {"rollback", "started": [{"topic", "partition", "replicas"}], "failed"}."""
    plan = read_plan(file)

    async def body(admin: wire.WireAdmin) -> None:
        if not additional and await _ongoing(admin, None):
            fail("cannot execute because there is an existing partition reassignment; "
                 "use --additional to start this one in addition to it")
        md = await admin.metadata(sorted({t for t, _ in plan}))
        brokers = {b.node_id for b in md.brokers}
        unknown = sorted({r for rs in plan.values() for r in rs} - brokers)
        if unknown:
            fail(f"unknown broker id {','.join(map(str, unknown))} (the cluster lists "
                 f"{','.join(map(str, sorted(brokers)))})")
        current: Plan = {}
        for t in md.topics:
            for p in t.partitions:
                if (t.name, p.partition_index) in plan:
                    current[(t.name, p.partition_index)] = list(p.replica_nodes)
        missing = sorted(set(plan) - set(current))
        if missing:
            fail(f"topic partition{'s' if len(missing) > 1 else ''} "
                 f"{','.join(map(_tp, missing))} not found (UNKNOWN_TOPIC_OR_PARTITION)")
        if json:
            failures = await _alter(admin, dict(plan), timeout)
            bad = {f[0] for f in failures}
            print_json({"rollback": plan_json(current),
                        "started": [{"topic": t, "partition": p, "replicas": plan[(t, p)]}
                                    for t, p in sorted(plan) if (t, p) not in bad],
                        "failed": _failed_json(failures)})
            _report_failures(failures, "be reassigned", listed=False)
            return
        _say("Current partition replica assignment (save it: it is the rollback plan):")
        print_json(plan_json(current))
        _report_failures(await _alter(admin, dict(plan), timeout), "be reassigned")
        n = len(plan)
        _say(f"Successfully started partition reassignment{'s' if n != 1 else ''} for "
             + ",".join(map(_tp, sorted(plan))))

    wire.run(bootstrap, timeout, body)


@app.command()
@cli_command
def verify(
    file: PlanFile,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Say, per partition of a plan, whether its reassignment completed.

    Exit status: 0 all completed, 3 some still in progress, 1 some ended elsewhere."""
    plan = read_plan(file)

    async def body(admin: wire.WireAdmin) -> tuple[dict, dict]:
        ongoing = await _ongoing(admin, _by_topic(plan))
        md = await admin.metadata(sorted({t for t, _ in plan}))
        current = {(t.name, p.partition_index): list(p.replica_nodes)
                   for t in md.topics for p in t.partitions}
        return ongoing, current

    ongoing, current = wire.run(bootstrap, timeout, body)
    running = elsewhere = 0
    docs = []
    for tp in sorted(plan):
        if tp in ongoing:
            running += 1
            status = "in_progress"
            line = f"Reassignment of partition {_tp(tp)} is still in progress."
        elif current.get(tp) == plan[tp]:
            status = "completed"
            line = f"Reassignment of partition {_tp(tp)} is completed."
        else:
            elsewhere += 1
            status = "elsewhere"
            now = ",".join(map(str, current.get(tp, []))) or "(no such partition)"
            line = (f"There is no active reassignment of partition {_tp(tp)}, but replica set "
                    f"is {now} rather than {','.join(map(str, plan[tp]))}.")
        docs.append({"topic": tp[0], "partition": tp[1], "status": status,
                     "replicas": current.get(tp), "target": plan[tp]})
        if not json:
            print(line)
    if json:
        print_json(docs)
    if elsewhere:
        fail(f"{elsewhere} partition{'s' if elsewhere != 1 else ''} of the plan "
             f"{'are' if elsewhere != 1 else 'is'} not where it says")
    if running:
        _say(f"{running} reassignment{'s' if running != 1 else ''} still in progress")
        raise typer.Exit(IN_PROGRESS_EXIT)


@app.command()
@cli_command
def cancel(
    file: PlanFile,
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Cancel the reassignments of a plan's partitions that are in progress.

    --json: {"cancelled": [{"topic", "partition"}], "failed": [{"topic", "partition",
    "error"}]}."""
    plan = read_plan(file)

    async def body(admin: wire.WireAdmin) -> None:
        active = sorted(set(plan) & set(await _ongoing(admin, _by_topic(plan))))
        if not active:
            if json:
                print_json({"cancelled": [], "failed": []})
                return
            _say("None of the specified partition reassignments are active.")
            return
        failures = await _alter(admin, dict.fromkeys(active), timeout)
        failed = [f for f in failures if f[1] != Errors.NO_REASSIGNMENT_IN_PROGRESS]
        done = [tp for tp in active if tp not in {f[0] for f in failures}]
        if json:
            print_json({"cancelled": [{"topic": t, "partition": p} for t, p in done],
                        "failed": _failed_json(failed)})
            _report_failures(failed, "be cancelled", listed=False)
            return
        _report_failures(failed, "be cancelled")
        _say(f"Successfully cancelled partition reassignment{'s' if len(done) != 1 else ''} "
             f"for: {','.join(map(_tp, done))}" if done
             else "None of the specified partition reassignments are active.")

    wire.run(bootstrap, timeout, body)


@app.command("list")
@cli_command
def list_(
    json: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """List the reassignments in progress."""
    ongoing = wire.run(bootstrap, timeout, lambda admin: _ongoing(admin, None))
    rows = [{"topic": t, "partition": p, "replicas": list(r.replicas),
             "adding": list(r.adding_replicas), "removing": list(r.removing_replicas)}
            for (t, p), r in sorted(ongoing.items())]
    if json:
        print_json(rows)
        return
    if not rows:
        _say("No partition reassignments in progress.")
        return
    ids = ",".join
    if is_tty():
        print_table(["Topic", "Partition", "Replicas", "Adding", "Removing"],
                    [[r["topic"], r["partition"], ids(map(str, r["replicas"])),
                      ids(map(str, r["adding"])), ids(map(str, r["removing"]))] for r in rows])
    else:
        for r in rows:
            print(f"{r['topic']}-{r['partition']}: replicas {ids(map(str, r['replicas']))}; "
                  f"adding {ids(map(str, r['adding']))}; "
                  f"removing {ids(map(str, r['removing']))}")
