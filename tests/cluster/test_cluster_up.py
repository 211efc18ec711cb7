"""``spool cluster up --nodes 3 --racks a,b,c``: the development cluster of issue 13 as a user
runs it. Its one line of stdout is a bootstrap string confluent-kafka works with (3 brokers on
racks a, b, c, the quorum's leader as controller, a topic created and read back); ``spool
cluster status`` shows the quorum (leader, epoch, each voter's lag) and the brokers with their
racks, unfenced; ``spool cluster down`` stops every node.
"""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.cli.local_cluster import CONTROLLER_PORT_OFFSET
from tests.cluster.clients import confluent_view

SPOOL = [sys.executable, "-m", "spool.cli.main"]


def spool(*args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run([*SPOOL, *args], capture_output=True, text=True, timeout=timeout)


def free_base_port(nodes: int) -> int:
    """A base port with every node's PLAINTEXT and CONTROLLER port free (checked by binding),
    below Linux's ephemeral range (32768-60999), so no outgoing connection takes one meanwhile."""
    for _ in range(200):
        base = random.randrange(10000, 32000)
        ports = [base + i for i in range(nodes)] + [
            base + CONTROLLER_PORT_OFFSET + i for i in range(nodes)]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


@pytest.mark.timeout(300)
def test_cluster_up_prints_a_bootstrap_clients_use_and_status_shows_quorum_and_racks(tmp_path):
    root = tmp_path / "dev"
    base = free_base_port(3)
    up = spool("cluster", "up", "--nodes", "3", "--racks", "a,b,c", "--dir", str(root),
               "--base-port", str(base))
    try:
        logs = "\n".join(p.read_text()[-3000:] for p in sorted(root.glob("node*/broker.log")))
        assert up.returncode == 0, f"{up.stdout}\n{up.stderr}\n{logs}"
        bootstrap = up.stdout.strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}", bootstrap), up.stdout

        racks, controller = confluent_view(bootstrap)
        assert racks == {1: "a", 2: "b", 3: "c"}
        st = spool("cluster", "status", "-b", bootstrap, "--json", "--timeout", "10")
        assert st.returncode == 0, st.stderr
        doc = json.loads(st.stdout)
        assert doc["leader_id"] == controller and doc["leader_epoch"] >= 1
        assert doc["controller_id"] == controller
        voters = {r["node_id"]: r for r in doc["replicas"] if r["status"] != "Observer"}
        assert sorted(voters) == [1, 2, 3]
        assert voters[controller]["status"] == "Leader"
        assert all(r["lag"] >= 0 for r in voters.values())
        assert [(b["node_id"], b["rack"], b["fenced"]) for b in doc["brokers"]] == [
            (1, "a", False), (2, "b", False), (3, "c", False)]
        text = spool("cluster", "status", "-b", bootstrap)
        assert text.returncode == 0, text.stderr
        assert f"leader {controller}, epoch {doc['leader_epoch']}" in text.stdout, text.stdout
        for rack in "abc":
            assert re.search(rf"\b{rack}\b", text.stdout), text.stdout

        # The bootstrap string is enough for a real application: create, produce, consume.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("dev", 3, 1)])["dev"].result(timeout=30)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            p.produce("dev", key=str(i), value=f"v{i}")
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dev-g",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["dev"])
        got: set[str] = set()
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.add(m.value().decode())
        c.close()
        assert got == {f"v{i}" for i in range(30)}
    finally:
        down = spool("cluster", "down", "--dir", str(root), "--timeout", "30")
    assert down.returncode == 0, down.stderr
    assert spool("cluster", "down", "--dir", str(root)).stderr.splitlines() == [
        f"node {i}: not running" for i in (1, 2, 3)]
