"""``spool cluster up|down|status``: a local KRaft cluster for development and tests.

- ``up --nodes 3 [--dir DIR] [--racks a,b,c] [--base-port 9092] [-o k=v]``
  writes one configuration per node (combined broker+controller, node ids
  1..N; ``spool.cli.local_cluster`` has the layout and ports), formats every
  dir with one cluster id, starts the nodes in the background, waits until
  every node lists all N brokers, and prints the bootstrap string (the only
  line on stdout: ``export B=$(spool cluster up)``). Run again on the same
  DIR it starts the nodes that are not running, with their data. ``--json``: one
  document instead, ``{"bootstrap", "cluster_id", "dir", "created", "nodes":
  [{"node_id", "pid", "started", "log"}]}``.
- ``down [--dir DIR]`` stops them: SIGTERM, SIGKILL after ``--timeout``. ``--json``:
  ``{"dir", "nodes": [{"node_id", "pid" (null: was not running), "how" (stopped, killed
  or "not running")}]}`` on stdout instead of a line per node on stderr.
- ``status [-b HOST:PORT]`` prints the quorum and the brokers
  (``spool.cli.cluster_status``).
- ``describe [-b HOST:PORT] [--json]``: the cluster as any broker sees it, quorum or not
  (a single node too): cluster id, controller, and per broker its address, rack, whether
  it is fenced and how many partition leaders and replicas it holds (DescribeCluster v2
  with fenced brokers, and Metadata of every topic, internal ones included). ``--json``:
  ``{"cluster_id", "controller_id", "brokers": [{"id", "host", "port", "rack", "fenced",
  "leaders", "replicas"}]}``.

Progress goes to stderr; failures are one ``spool: ...`` line and exit 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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

app = typer.Typer(help="A local KRaft cluster: up, down, status; describe any cluster.",
                  no_args_is_help=True)

Dir = Annotated[Path, typer.Option("--dir", "-d", help="Where the cluster lives.")]
DEFAULT_DIR = Path("spool-cluster")


def _say(line: str) -> None:
    typer.echo(line, err=True)


@app.command()
@cli_command
def up(
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=1, max=99,
                                       help="How many nodes (each broker and controller).")] = 3,
    dir: Dir = DEFAULT_DIR,
    racks: Annotated[str | None, typer.Option(
        "--racks", help="broker.rack of the nodes, round-robin: a,b,c.")] = None,
    base_port: Annotated[int, typer.Option(
        "--base-port", help="Node i's PLAINTEXT port is this + i - 1; its CONTROLLER port "
                            "100 above.")] = 9092,
    host: Annotated[str, typer.Option("--host", help="The address every node binds.")
                    ] = "127.0.0.1",
    override: Annotated[list[str] | None, typer.Option(
        "--override", "-o", help="key=value for every node's configuration (repeatable).")
    ] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=1, help="Seconds to wait for the cluster to form.")] = 60.0,
    add_scram: Annotated[list[str] | None, typer.Option(
        "--add-scram", help="A SCRAM credential for a new cluster, as `spool storage format` "
                            "takes it: 'SCRAM-SHA-256=\\[name=alice,password=alice-secret]'.")
    ] = None,
    json: JsonFlag = False,
) -> None:
    """Start a local cluster and print its bootstrap string.

    --json: {"bootstrap", "cluster_id", "dir", "created", "nodes": [{"node_id", "pid",
    "started", "log"}]} (started: launched by this run)."""
    from spool.cli.local_cluster import ClusterError, LocalCluster
    from spool.security.scram_args import AddScramError, parse_add_scram

    cluster = LocalCluster(dir)
    created = not cluster.exists
    try:
        if cluster.exists:
            if len(cluster.nodes) != nodes:
                raise CliError(f"{dir} holds a {len(cluster.nodes)}-node cluster; use "
                               f"--nodes {len(cluster.nodes)}, or another --dir")
            _say(f"{dir}: cluster {cluster.cluster_id} ({nodes} nodes)")
            if add_scram:
                _say("--add-scram ignored: the cluster exists (spool users scram set changes "
                     "its credentials)")
        else:
            if dir.exists() and any(dir.iterdir()):
                raise CliError(f"{dir} is not empty and holds no cluster; choose another --dir")
            rack_list = [r.strip() for r in (racks or "").split(",") if r.strip()]
            try:
                credentials = [parse_add_scram(a) for a in add_scram or ()]
            except AddScramError as e:
                raise CliError(str(e)) from None
            cluster = LocalCluster.create(dir, nodes, rack_list, base_port, host, override or [],
                                          bootstrap_records=credentials)
            _say(f"{dir}: formatted {nodes} nodes for cluster {cluster.cluster_id}")
        started = set()
        for node, pid in cluster.start():
            started.add(node.node_id)
            _say(f"node {node.node_id}: started (pid {pid}, log {node.log})")
        cluster.wait_ready(timeout)
    except ClusterError as e:
        raise CliError(str(e)) from None
    _say("ready")
    if json:
        print_json({"bootstrap": cluster.bootstrap(), "cluster_id": cluster.cluster_id,
                    "dir": str(dir.resolve()), "created": created,
                    "nodes": [{"node_id": n.node_id, "pid": n.pid(),
                               "started": n.node_id in started, "log": str(n.log.resolve())}
                              for n in cluster.nodes]})
        return
    typer.echo(cluster.bootstrap())


@app.command()
@cli_command
def down(
    dir: Dir = DEFAULT_DIR,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL.")] = 30.0,
    json: JsonFlag = False,
) -> None:
    """Stop the cluster's nodes (SIGTERM, then SIGKILL after --timeout).

    --json: {"dir", "nodes": [{"node_id", "pid", "how"}]}."""
    from spool.cli.local_cluster import LocalCluster

    cluster = LocalCluster(dir)
    if not cluster.nodes:
        raise CliError(f"{dir} holds no cluster")
    stopped = cluster.stop(timeout)
    if json:
        print_json({"dir": str(dir.resolve()),
                    "nodes": [{"node_id": node.node_id, "pid": pid, "how": how}
                              for node, pid, how in stopped]})
        return
    for node, pid, how in stopped:
        _say(f"node {node.node_id}: {how}" + (f" (pid {pid})" if pid else ""))


@app.command()
@cli_command
def describe(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    json: JsonFlag = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1,
                                           help="Seconds to wait for a broker.")] = 10.0,
) -> None:
    """The cluster id, the controller and the brokers (rack, fenced, partitions held)."""
    from spool.cli import wire
    from spool.protocol._generated import DescribeClusterRequest

    async def body(admin: wire.WireAdmin) -> tuple:
        cluster = await admin.request(DescribeClusterRequest(include_fenced_brokers=True), 2)
        return cluster, await admin.metadata(None), admin.version(60, 2)

    cluster, md, version = wire.run(bootstrap, timeout, body)
    if cluster.error_code:
        raise wire.refused(cluster.error_code, cluster.error_message, "DescribeCluster")
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    for t in md.topics:
        for p in t.partitions:
            leaders[p.leader_id] = leaders.get(p.leader_id, 0) + 1
            for r in p.replica_nodes:
                replicas[r] = replicas.get(r, 0) + 1
    doc = {"cluster_id": cluster.cluster_id, "controller_id": cluster.controller_id,
           "brokers": [{"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                        "fenced": b.is_fenced if version >= 2 else None,
                        "leaders": leaders.get(b.broker_id, 0),
                        "replicas": replicas.get(b.broker_id, 0)}
                       for b in sorted(cluster.brokers, key=lambda b: b.broker_id)]}
    if json:
        print_json(doc)
        return
    print(f"ClusterId: {doc['cluster_id']}  Controller: {doc['controller_id']}")
    print_table(["BrokerId", "Address", "Rack", "Fenced", "Leaders", "Replicas"],
                [[b["id"], f"{b['host']}:{b['port']}", b["rack"] or "-",
                  "?" if b["fenced"] is None else "yes" if b["fenced"] else "no",
                  b["leaders"], b["replicas"]] for b in doc["brokers"]])


@app.command()
@cli_command
def status(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    json: JsonFlag = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1,
                                           help="Seconds to wait for a node.")] = 10.0,
) -> None:
    """The quorum (leader, epoch, each voter's lag) and the brokers (rack, fenced)."""
    from spool.cli.cluster_status import StatusError, fetch_status

    try:
        st = fetch_status(bootstrap, timeout)
    except StatusError as e:
        raise CliError(str(e)) from None
    if json:
        print_json(st.to_json())
        return
    print(f"ClusterId: {st.cluster_id or '?'}  Controller: {st.controller_id}  "
          f"(asked {st.asked})")
    print_table(
        ["NodeId", "LogEndOffset", "Lag", "LastFetch", "LastCaughtUp", "Status"],
        [[r.node_id, r.log_end_offset, r.lag, _ago(r.last_fetch_ms_ago),
          _ago(r.last_caught_up_ms_ago), r.status] for r in st.replicas],
        title=f"Quorum: leader {st.leader_id}, epoch {st.leader_epoch}, high watermark "
              f"{st.high_watermark}")
    if st.brokers is None:
        print("Brokers: not listed by a controller listener; ask a broker listener")
        return
    print_table(
        ["BrokerId", "Address", "Rack", "Fenced"],
        [[b.node_id, f"{b.host}:{b.port}", b.rack or "-",
          "?" if b.fenced is None else "yes" if b.fenced else "no"] for b in st.brokers],
        title="Brokers:")


def _ago(ms: int | None) -> str:
    return "-" if ms is None else f"{ms} ms ago"
