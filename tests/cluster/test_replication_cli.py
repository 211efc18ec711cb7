"""The replication commands of ``spool`` against a real 3-node cluster (issue 14):
``topics describe`` shows leader, replicas, ISR and offline replicas as kafka-topics does;
``topics under-replicated`` lists what lost an in-sync replica (exit 3) and nothing on a
healthy cluster (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from spool.protocol._generated import CreateTopicsRequest, DescribeLogDirsRequest
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
)
from spool.protocol._generated.describe_log_dirs_request import DescribableLogDirTopic
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

    # back, the broker catches up and rejoins every ISR: nothing is under-replicated
    victim.start()

    def healed() -> bool | str:
        proc = spool(asked.bootstrap, "topics", "under-replicated", "--json")
        return proc.returncode == 0 and json.loads(proc.stdout) == [] or (
            f"exit {proc.returncode}: {proc.stdout}")

    cluster.wait_until(f"node {victim.node_id} back in every ISR", healed, timeout=60)


def plan(path, *moves: tuple[str, int, list[int]]):
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for t, p, r in moves]}))
    return str(path)


def test_elect_leaders_and_reassign_through_the_cli(cluster_factory, tmp_path):
    cluster = cluster_factory(overrides={**FAST, "auto.leader.rebalance.enable": "false"}).start()
    cluster.wait_formed()
    b = cluster.nodes[2].bootstrap
    c = RawClient(b)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
            name="mv", num_partitions=-1, replication_factor=-1, configs=[], assignments=[
                CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])]))
    finally:
        c.close()
    assert [t.error_code for t in resp.topics] == [0]

    def partition0(leader: int, replicas: list[int], isr: list[int] | None = None):
        def check() -> dict | str:
            doc = described(b, "mv")
            if isinstance(doc, str):
                return doc
            p = doc["partitions"][0]
            ok = p["leader"] == leader and p["replicas"] == replicas and (
                isr is None or sorted(p["isr"]) == isr)
            return p if ok else f"not yet: {p}"
        return check

    cluster.wait_until("mv-0 led by 1 with a full ISR", partition0(1, [1, 2], [1, 2]))
    again = spool(b, "elect-leaders", "--type", "preferred", "--topic", "mv", "--partition", "0")
    assert (again.returncode, again.stdout) == (
        0, "Valid replica already elected for partitions mv-0\n")

    # a reorder completes at once; the rollback plan is what was there
    reorder = plan(tmp_path / "reorder.json", ("mv", 0, [2, 1]))
    ex = spool(b, "reassign", "execute", "--file", reorder)
    assert ex.returncode == 0, ex.stderr
    assert json.loads(ex.stdout) == {"version": 1, "partitions": [
        {"topic": "mv", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"] * 2}]}
    assert "Successfully started partition reassignment for mv-0" in ex.stderr
    cluster.wait_until("the reorder", partition0(1, [2, 1]))
    done = spool(b, "reassign", "verify", "--file", reorder)
    assert (done.returncode, done.stdout) == (0, "Reassignment of partition mv-0 is completed.\n")
    elected = spool(b, "elect-leaders", "--type", "preferred", "--all", "--json")
    assert elected.returncode == 0, elected.stderr
    assert {(r["topic"], r["partition"], r["result"]) for r in json.loads(elected.stdout)
            if r["topic"] == "mv"} == {("mv", 0, "elected")}
    cluster.wait_until("2 leads mv-0", partition0(2, [2, 1]))

    # refused before anything is sent: a broker the cluster does not list
    unknown = spool(b, "reassign", "execute", "--file",
                    plan(tmp_path / "bad.json", ("mv", 0, [2, 9])))
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr.startswith("spool: unknown broker id 9")

    # a move to a broker that is down (started elsewhere: the CLI refuses a broker that is
    # not live, as Kafka's tool) stays in progress until cancelled
    cluster.nodes[3].kill()
    cluster.wait_until("3 fenced", lambda: 3 not in cluster.metadata(2).brokers or "not yet")
    move = plan(tmp_path / "move.json", ("mv", 0, [3, 2]))
    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        assert admin.alter_partition_reassignments({KTopicPartition("mv", 0): [3, 2]}) == {
            KTopicPartition("mv", 0): None}
    finally:
        admin.close()
    cluster.wait_until("the move started", partition0(2, [3, 2, 1]))
    listed = spool(b, "reassign", "list", "--json")
    assert json.loads(listed.stdout) == [{
        "topic": "mv", "partition": 0, "replicas": [3, 2, 1], "adding": [3], "removing": [1]}]
    shown = described(b, "mv")["partitions"][0]
    assert (shown["adding"], shown["removing"], shown["offline"]) == ([3], [1], [3])
    assert "\tAdding Replicas: 3\tRemoving Replicas: 1\tOffline: 3" in spool(
        b, "topics", "describe", "mv").stdout
    busy = spool(b, "reassign", "execute", "--file", reorder)
    assert busy.returncode == 1 and "existing partition reassignment" in busy.stderr
    running = spool(b, "reassign", "verify", "--file", move)
    assert (running.returncode, running.stdout) == (
        3, "Reassignment of partition mv-0 is still in progress.\n")
    cancelled = spool(b, "reassign", "cancel", "--file", move)
    assert (cancelled.returncode, cancelled.stderr) == (
        0, "Successfully cancelled partition reassignment for: mv-0\n")
    cluster.wait_until("the move cancelled", partition0(2, [2, 1]))
    elsewhere = spool(b, "reassign", "verify", "--file", move)
    assert elsewhere.returncode == 1
    assert elsewhere.stdout == ("There is no active reassignment of partition mv-0, but replica "
                                "set is 2,1 rather than 3,2.\n")
    assert spool(b, "reassign", "cancel", "--file", move).stderr == (
        "None of the specified partition reassignments are active.\n")
    missing = spool(b, "elect-leaders", "--type", "preferred", "--topic", "nope")
    assert (missing.returncode, missing.stderr) == (
        1, "spool: topic 'nope' does not exist (UNKNOWN_TOPIC_OR_PARTITION)\n")


def test_a_reassignment_moves_the_data_and_verify_says_when(cluster_factory, tmp_path):
    cluster = cluster_factory(overrides={**FAST, "auto.leader.rebalance.enable": "false"}).start()
    cluster.wait_formed()
    b = cluster.nodes[1].bootstrap
    c = RawClient(b)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
            name="mv2", num_partitions=-1, replication_factor=-1, configs=[], assignments=[
                CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])]))
    finally:
        c.close()
    assert [t.error_code for t in resp.topics] == [0]
    cluster.wait_until("mv2-0 with a full ISR", lambda: (
        True if not isinstance(d := described(b, "mv2"), str)
        and sorted(d["partitions"][0]["isr"]) == [1, 2] else "not yet"))
    p = Producer({"bootstrap.servers": b, "acks": "all"})
    for _ in range(500):
        p.produce("mv2", value=b"m" * 500, partition=0)
    assert p.flush(30) == 0
    del p

    move = plan(tmp_path / "move.json", ("mv2", 0, [2, 3]))
    ex = spool(b, "reassign", "execute", "--file", move)
    assert ex.returncode == 0, ex.stderr

    def verified() -> str | bool:
        proc = spool(b, "reassign", "verify", "--file", move)
        if proc.returncode == 3:
            return "still in progress"
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc.stdout == "Reassignment of partition mv2-0 is completed.\n"

    cluster.wait_until("the move completed", verified, timeout=60)
    doc = described(b, "mv2")["partitions"][0]
    assert (doc["replicas"], sorted(doc["isr"]), doc["adding"], doc["removing"]) == (
        [2, 3], [2, 3], [], [])
    assert json.loads(spool(b, "reassign", "list", "--json").stdout) == []
    # the new replica holds what the old ones held
    sizes = {}
    for n in (2, 3):
        resp = RawClient(cluster.nodes[n].bootstrap)
        try:
            logdirs = resp.request(35, 4, DescribeLogDirsRequest(topics=[
                DescribableLogDirTopic(topic="mv2", partitions=[0])]))
        finally:
            resp.close()
        sizes[n] = [p.partition_size for r in logdirs.results for t in r.topics
                    for p in t.partitions]
    assert sizes[2] == sizes[3] and sizes[2][0] > 500 * 500
