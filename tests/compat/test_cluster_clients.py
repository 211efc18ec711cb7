"""Three clients look at a ``spool cluster up`` cluster: 3 brokers, their racks, the controller.

confluent-kafka (DescribeCluster), kafka-python (DescribeCluster v2, with
``is_fenced``) and kcat (``-L -J``: Metadata) each see brokers 1, 2, 3 at the
ports ``up`` printed, with racks a, b, c where the protocol carries them, and
name as controller the quorum leader that ``spool cluster status`` reports.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from tests.helpers.ports import free_base_port

pytestmark = pytest.mark.timeout(180)

KCAT = shutil.which("kcat")
SPOOL = [sys.executable, "-m", "spool.cli.main"]


def spool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SPOOL, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def up_cluster(tmp_path):
    base = free_base_port(3)
    root = tmp_path / "c"
    try:
        done = spool("cluster", "up", "--nodes", "3", "--dir", str(root), "--racks", "a,b,c",
                     "--base-port", str(base))
        assert done.returncode == 0, done.stderr
        yield base, done.stdout.strip()
    finally:
        spool("cluster", "down", "--dir", str(root))


def leader(bootstrap: str) -> int:
    st = spool("cluster", "status", "-b", bootstrap, "--json")
    assert st.returncode == 0, st.stderr
    return json.loads(st.stdout)["leader_id"]


def seen_by_clients(bootstrap: str) -> dict[str, tuple]:
    """{client: (controller id, ((id, port, rack), ...))}; rack None where not carried."""
    confluent = AdminClient({"bootstrap.servers": bootstrap})
    d = confluent.describe_cluster(request_timeout=10).result(15)
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        k = kp.describe_cluster()
    finally:
        kp.close()
    assert KCAT is not None, "kcat is not installed: apt-get install kcat (.ci/run does)"
    out = subprocess.run([KCAT, "-b", bootstrap, "-L", "-J"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    kc = json.loads(out)
    return {
        "confluent-kafka": (d.controller.id, tuple(sorted(
            (n.id, n.port, n.rack) for n in d.nodes))),
        "kafka-python": (k["controller_id"], tuple(sorted(
            (b["broker_id"], b["port"], b["rack"]) for b in k["brokers"] if not b["is_fenced"]))),
        "kcat": (kc["controllerid"], tuple(sorted(
            (b["id"], int(b["name"].rpartition(":")[2]), None) for b in kc["brokers"]))),
    }


def test_three_clients_see_three_brokers_their_racks_and_the_quorum_leader(up_cluster):
    base, bootstrap = up_cluster
    assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))
    racked = ((1, base, "a"), (2, base + 1, "b"), (3, base + 2, "c"))
    unracked = tuple((i, p, None) for i, p, _ in racked)
    deadline = time.monotonic() + 30
    while True:  # (a leader change between the two looks is retried)
        want = leader(bootstrap)
        seen = seen_by_clients(bootstrap)
        expected = {"confluent-kafka": (want, racked), "kafka-python": (want, racked),
                    "kcat": (want, unracked)}
        if seen == expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert seen == expected
