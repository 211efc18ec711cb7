"""DescribeLogDirs (35) against a real single-node broker with two log dirs.

What ``kafka-log-dirs.sh --describe`` and kafka-python's ``describe_log_dirs`` show: every
dir of ``log.dirs`` by absolute path, the partitions it holds with the bytes of their
segment files, offset lag 0 on a leader, no future logs, and the volume's total and
usable bytes (v4+); topics asked for by name narrow the answer, null asks for all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient

from spool.protocol._generated import CreateTopicsRequest, DescribeLogDirsRequest
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.describe_log_dirs_request import DescribableLogDirTopic
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)


def segment_bytes(partition_dir: Path) -> int:
    """What a user measures on disk: the partition's segment (.log) files."""
    return sum(f.stat().st_size for f in partition_dir.glob("*.log"))


def held(root: Path) -> dict[tuple[str, int], Path]:
    out = {}
    for d in root.iterdir():
        name, _, p = d.name.rpartition("-")
        if d.is_dir() and p.isdigit() and name.startswith("ld-"):
            out[(name, int(p))] = d
    return out


@pytest.fixture
def two_dirs_broker(tmp_path):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    b = BrokerProcess(tmp_path / "data", {"log.dirs": f"{d1},{d2}"})
    b.start()
    yield b, [d1, d2]
    b.stop()


def test_every_dir_lists_its_partitions_sizes_and_volume(two_dirs_broker):
    broker, dirs = two_dirs_broker
    c = RawClient(broker.bootstrap)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
            CreatableTopic(name=n, num_partitions=k, replication_factor=1, assignments=[],
                           configs=[]) for n, k in (("ld-a", 3), ("ld-b", 1))]))
        assert [t.error_code for t in resp.topics] == [0, 0]
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(200):
            p.produce("ld-a", value=b"x" * 100 + str(i).encode(), partition=i % 2)
        p.produce("ld-b", value=b"y" * 5000, partition=0)
        assert p.flush(30) == 0
        del p

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            [answer] = admin.describe_log_dirs({"ld-a": [0, 1, 2], "ld-b": [0]})
        finally:
            admin.close()
        by_dir = {r["log_dir"]: r for r in answer["log_dirs"]}
        assert sorted(by_dir) == sorted(os.path.abspath(d) for d in dirs)
        seen = {}
        for d in dirs:
            r = by_dir[os.path.abspath(d)]
            st = os.statvfs(d)
            assert r["error_code"] == 0
            assert r["total_bytes"] == st.f_blocks * st.f_frsize
            assert 0 < r["usable_bytes"] <= r["total_bytes"]
            on_disk = {tp: segment_bytes(path) for tp, path in held(d).items()}
            listed = {(t["name"], p["partition_index"]): p
                      for t in r["topics"] for p in t["partitions"]}
            assert {tp: p["partition_size"] for tp, p in listed.items()} == on_disk
            assert all(p["offset_lag"] == 0 and p["is_future_key"] is False
                       for p in listed.values())
            seen.update(on_disk)
        # every partition is in exactly one dir, the produced ones hold their records
        assert sorted(seen) == [("ld-a", 0), ("ld-a", 1), ("ld-a", 2), ("ld-b", 0)]
        assert seen[("ld-a", 0)] > 100 * 100 and seen[("ld-a", 1)] > 100 * 100
        assert seen[("ld-a", 2)] == 0 and seen[("ld-b", 0)] > 5000

        # narrowed: only what is asked for (an unknown partition is left out, no error);
        # null: everything held; v1 has no volume figures
        narrow = c.request(35, 4, DescribeLogDirsRequest(topics=[
            DescribableLogDirTopic(topic="ld-a", partitions=[2, 7]),
            DescribableLogDirTopic(topic="nope", partitions=[0])]))
        assert len(narrow.results) == 2
        assert [(t.name, [p.partition_index for p in t.partitions])
                for r in narrow.results for t in r.topics] == [("ld-a", [2])]
        everything = c.request(35, 1, DescribeLogDirsRequest(topics=None))
        assert sorted((t.name, p.partition_index) for r in everything.results
                      for t in r.topics for p in t.partitions) == sorted(seen)
        assert {(r.total_bytes, r.usable_bytes) for r in everything.results} == {(-1, -1)}
    finally:
        c.close()
