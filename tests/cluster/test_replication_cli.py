"""The replication commands of ``spool`` against a real 3-node cluster (issue 14):
``topics describe`` shows leader, replicas, ISR and offline replicas as kafka-topics does;
``topics under-replicated`` lists what lost an in-sync replica (exit 3) and nothing on a
healthy cluster (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spool.protocol._generated import CreateTopicsRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(240)

SPOOL = [sys.executable, "-m", "spool.cli.main"]
FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "3000"}


def spool(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SPOOL, *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60)


def create(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    c = RawClient(bootstrap)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
            configs=[])]))
    finally:
        c.close()
    assert [t.error_code for t in resp.topics] == [0]


def described(bootstrap: str, name: str) -> dict | str:
    proc = spool(bootstrap, "topics", "describe", name, "--json")
    if proc.returncode != 0:
        return proc.stderr
    [doc] = json.loads(proc.stdout)
    return doc


def test_describe_and_under_replicated_follow_a_broker_loss(cluster_factory):
    cluster = cluster_factory(overrides=FAST).start()
    controller = cluster.wait_formed().leader_id
    asked = cluster.nodes[controller]
    victim = next(n for n in cluster.brokers if n.node_id != controller)
    create(asked.bootstrap, "urp", 3, 3)

    def full() -> dict | str:
        doc = described(asked.bootstrap, "urp")
        if isinstance(doc, str) or not all(
                sorted(p["isr"]) == [1, 2, 3] and p["leader"] > 0 for p in doc["partitions"]):
            return f"not yet: {doc}"
        return doc

    doc = cluster.wait_until("every partition of urp has a leader and a full ISR", full)
    assert doc["replication_factor"] == 3
    assert all(sorted(p["replicas"]) == [1, 2, 3] and p["offline"] == []
               for p in doc["partitions"])
    healthy = spool(asked.bootstrap, "topics", "under-replicated", "--json")
    assert (healthy.returncode, json.loads(healthy.stdout)) == (0, [])

    victim.kill()

    def shrunk() -> dict | str:
        doc = described(asked.bootstrap, "urp")
        if isinstance(doc, str) or not all(victim.node_id not in p["isr"]
                                           for p in doc["partitions"]):
            return f"not yet: {doc}"
        return doc

    doc = cluster.wait_until(f"node {victim.node_id} is out of every ISR", shrunk)
    survivors = sorted({1, 2, 3} - {victim.node_id})
    for p in doc["partitions"]:
        assert sorted(p["isr"]) == survivors
        assert p["offline"] == [victim.node_id]
        assert p["leader"] in survivors
    plain = spool(asked.bootstrap, "topics", "describe", "urp").stdout.splitlines()
    assert plain[1:] == [
        f"\tTopic: urp\tPartition: {p['partition']}\tLeader: {p['leader']}"
        f"\tReplicas: {','.join(map(str, p['replicas']))}\tIsr: {','.join(map(str, p['isr']))}"
        f"\tOffline: {victim.node_id}" for p in doc["partitions"]]

    under = spool(asked.bootstrap, "topics", "under-replicated", "--json")
    assert under.returncode == 3, under.stderr
    rows = json.loads(under.stdout)
    assert [(r["topic"], r["partition"]) for r in rows if r["topic"] == "urp"] == [
        ("urp", 0), ("urp", 1), ("urp", 2)]
    assert under.stderr.strip().endswith("under-replicated partitions")
