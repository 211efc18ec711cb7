"""``spool cluster up|down|status`` through the real CLI and real node processes.

``LocalCluster.create`` writes one valid Kafka-style configuration per node
(combined roles, voters 1..N on the CONTROLLER ports, racks round-robin) and
formats every node with one cluster id; started, the nodes elect a leader and
``spool cluster status`` prints it with every voter's log end offset and lag;
``spool cluster down`` stops every process and forgets the pids; ``up``
refuses a foreign directory and a taken port with one line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spool.broker.config import BrokerConfig
from spool.cli.local_cluster import CONTROLLER_PORT_OFFSET, LocalCluster
from tests.helpers.ports import free_base_port

pytestmark = pytest.mark.timeout(180)

SPOOL = [sys.executable, "-m", "spool.cli.main"]


def spool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*SPOOL, *args], capture_output=True, text=True, timeout=timeout)


def meta_properties(d: Path) -> dict[str, str]:
    lines = (d / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_create_writes_one_valid_config_per_node_and_formats_them_alike(tmp_path):
    base = free_base_port(3)
    cluster = LocalCluster.create(tmp_path / "c", 3, ["r1", "r2"], base, "127.0.0.1",
                                  ["num.partitions=4"])
    cid = cluster.cluster_id
    assert [n.node_id for n in cluster.nodes] == [1, 2, 3]
    for node in cluster.nodes:
        cfg = BrokerConfig.load(node.config)
        assert not cfg.unknown
        cc = cfg.cluster
        assert (cc.node_id, cc.is_broker, cc.is_controller) == (node.node_id, True, True)
        assert cc.voters == {i: ("127.0.0.1", base + CONTROLLER_PORT_OFFSET + i - 1)
                             for i in (1, 2, 3)}
        assert [(lst.name, lst.port) for lst in cc.listeners] == [
            ("PLAINTEXT", base + node.node_id - 1),
            ("CONTROLLER", base + CONTROLLER_PORT_OFFSET + node.node_id - 1)]
        assert cc.rack == ["r1", "r2", "r1"][node.node_id - 1]
        assert cfg.get("num.partitions") == "4"
        meta = meta_properties(node.dir / "data")
        assert (meta["cluster.id"], meta["node.id"], meta["version"]) == (
            cid, str(node.node_id), "1")
    assert cluster.bootstrap() == ",".join(f"127.0.0.1:{base + i}" for i in range(3))


def test_started_nodes_elect_a_leader_that_status_shows_then_down_stops_them(tmp_path):
    base = free_base_port(3)
    root = tmp_path / "c"
    cluster = LocalCluster.create(root, 3, [], base, "127.0.0.1", [])
    pids = [pid for _, pid in cluster.start()]
    try:
        deadline = time.monotonic() + 60
        while True:
            st = spool("cluster", "status", "-b", f"127.0.0.1:{base}", "--json", "--timeout", "5")
            if st.returncode == 0:
                break
            assert time.monotonic() < deadline, f"no status: {st.stderr} {cluster.nodes[0].tail()}"
            time.sleep(0.5)
        doc = json.loads(st.stdout)
        assert doc["cluster_id"] == cluster.cluster_id
        assert doc["leader_id"] in (1, 2, 3) and doc["leader_epoch"] >= 1
        assert sorted(r["node_id"] for r in doc["replicas"]) == [1, 2, 3]
        statuses = {r["node_id"]: r["status"] for r in doc["replicas"]}
        assert statuses[doc["leader_id"]] == "Leader"
        assert sorted(statuses.values()) == ["Follower", "Follower", "Leader"]
        leader_leo = next(r["log_end_offset"] for r in doc["replicas"]
                          if r["node_id"] == doc["leader_id"])
        for r in doc["replicas"]:
            assert r["lag"] == leader_leo - r["log_end_offset"] >= 0

        controllers = ",".join(f"127.0.0.1:{base + CONTROLLER_PORT_OFFSET + i}" for i in range(3))
        ctl = spool("cluster", "status", "-b", controllers, "--json")
        assert ctl.returncode == 0, ctl.stderr
        ctl_doc = json.loads(ctl.stdout)  # the leader's controller listener answers
        leader_port = base + CONTROLLER_PORT_OFFSET + ctl_doc["leader_id"] - 1
        assert (ctl_doc["asked"], ctl_doc["brokers"]) == (f"127.0.0.1:{leader_port}", None)

        text = spool("cluster", "status", "-b", f"127.0.0.1:{base}")
        assert text.returncode == 0, text.stderr
        assert (f"Quorum: leader {doc['leader_id']}, epoch " in text.stdout
                and "NodeId  LogEndOffset  Lag" in text.stdout)
    finally:
        down = spool("cluster", "down", "--dir", str(root), "--timeout", "30")
    assert down.returncode == 0, down.stderr
    assert down.stderr.splitlines() == [
        f"node {i}: stopped (pid {pid})" for i, pid in zip((1, 2, 3), pids, strict=True)]
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
    assert not any((n.dir / "pid").exists() for n in cluster.nodes)
    again = spool("cluster", "down", "--dir", str(root))
    assert again.returncode == 0
    assert again.stderr.splitlines() == [f"node {i}: not running" for i in (1, 2, 3)]
    again = spool("cluster", "down", "--dir", str(root), "--json")
    assert (again.returncode, json.loads(again.stdout)) == (0, {
        "dir": str(root.resolve()),
        "nodes": [{"node_id": i, "pid": None, "how": "not running"} for i in (1, 2, 3)]})


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_up_refuses_a_directory_that_holds_something_else(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    done = spool("cluster", "up", "--dir", str(tmp_path), "--base-port", "1")
    assert done.returncode == 1
    assert done.stderr == (f"spool: {tmp_path} is not empty and holds no cluster; choose "
                           "another --dir\n")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_up_refuses_a_port_that_is_taken(tmp_path):
    base = free_base_port(2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 1))
        s.listen()
        done = spool("cluster", "up", "--nodes", "2", "--dir", str(tmp_path / "c"),
                     "--base-port", str(base))
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"spool: 127.0.0.1:{base + 1} (node 2's PLAINTEXT listener) is not free: ")
    assert done.stderr.endswith("; choose another --base-port\n")
    assert not (tmp_path / "c").exists()


def test_status_without_a_node_says_so(tmp_path):
    base = free_base_port(1)
    done = spool("cluster", "status", "-b", f"127.0.0.1:{base}", "--timeout", "2")
    assert done.returncode == 1
    assert done.stderr.startswith(f"spool: no node answered: NodeClient(127.0.0.1:{base}): "
                                  "cannot connect")


def test_status_on_a_single_node_names_what_it_lacks(broker):
    done = spool("cluster", "status", "-b", broker.bootstrap)
    assert done.returncode == 1
    assert "DescribeQuorum" in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr.endswith("; without a quorum (a single node), spool cluster describe "
                                "shows the brokers\n")


@pytest.fixture(autouse=True)
def _no_stray_nodes(tmp_path):
    """Whatever a test leaves running is stopped."""
    yield
    for pid_file in tmp_path.glob("**/pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test_up_forms_a_cluster_clients_see_and_status_shows_a_dead_broker_fenced(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(3)
    root = tmp_path / "c"
    up_args = ["cluster", "up", "--nodes", "3", "--dir", str(root), "--racks", "a,b,c",
               "--base-port", str(base), "-o", "broker.session.timeout.ms=3000",
               "-o", "broker.heartbeat.interval.ms=500"]
    try:
        done = spool(*up_args)
        assert done.returncode == 0, done.stderr
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert done.stdout == bootstrap + "\n"

        admin = AdminClient({"bootstrap.servers": bootstrap})
        md = admin.list_topics(timeout=10)
        assert sorted((b.id, b.port) for b in md.brokers.values()) == [
            (1, base), (2, base + 1), (3, base + 2)]
        assert md.controller_id in (1, 2, 3)
        admin.create_topics([NewTopic("spread", 3, 1)])["spread"].result(30)

        node3 = LocalCluster(root).nodes[2]
        os.kill(node3.pid(), signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            st = spool("cluster", "status", "-b", f"127.0.0.1:{base}", "--json")
            brokers = json.loads(st.stdout)["brokers"] if st.returncode == 0 else []
            fenced = {b["node_id"]: b["fenced"] for b in brokers}
            if fenced == {1: False, 2: False, 3: True}:
                break
            assert time.monotonic() < deadline, f"never fenced: {st.stdout} {st.stderr}"
            time.sleep(0.5)
        racks = {b["node_id"]: b["rack"] for b in brokers}
        assert racks == {1: "a", 2: "b", 3: "c"}

        again = spool(*up_args, "--json")  # starts the dead node on its data
        assert again.returncode == 0, again.stderr
        assert "node 3: started" in again.stderr and "node 1: started" not in again.stderr
        nodes = LocalCluster(root).nodes
        assert json.loads(again.stdout) == {
            "bootstrap": bootstrap, "cluster_id": LocalCluster(root).cluster_id,
            "dir": str(root.resolve()), "created": False,
            "nodes": [{"node_id": n.node_id, "pid": n.pid(), "started": n.node_id == 3,
                       "log": str(n.log.resolve())} for n in nodes]}
    finally:
        down = spool("cluster", "down", "--dir", str(root), "--json")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout) == {
        "dir": str(root.resolve()),
        "nodes": [{"node_id": n["node_id"], "pid": n["pid"], "how": "stopped"}
                  for n in json.loads(again.stdout)["nodes"]]}


def test_create_with_add_scram_gives_every_node_the_same_bootstrap_credentials(tmp_path):
    from typer.testing import CliRunner

    from spool.cli.main import app as cli
    from spool.cluster.bootstrap import read_bootstrap
    from spool.security.scram_args import parse_add_scram

    creds = [parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")]
    cluster = LocalCluster.create(tmp_path / "c", 3, [], free_base_port(3), "127.0.0.1", [],
                                  bootstrap_records=creds)
    for node in cluster.nodes:  # salted once: whichever controller leads first, same keys
        assert read_bootstrap(node.dir / "data") == creds
    bad = CliRunner().invoke(cli, ["cluster", "up", "--dir", str(tmp_path / "d"),
                                   "--add-scram", "SCRAM-SHA-256=[name=x]"])
    assert bad.exit_code != 0
    assert "You must supply one of 'password' or 'saltedpassword' to add-scram" in bad.output
    assert not (tmp_path / "d").exists()
