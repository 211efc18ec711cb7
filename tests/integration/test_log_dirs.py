"""The broker owns its log dirs: meta.properties, an exclusive .lock, nothing foreign
read or deleted, and the listeners bound before any data is touched."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker_proc import BrokerProcess


def run_broker_expecting_exit(data_dir: Path, port: int, **overrides: str):
    """``spool broker`` in the foreground; returns the finished process (it must exit)."""
    ov = {"log.dirs": str(data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{port}", **overrides}
    cmd = [sys.executable, "-m", "spool.cli.main", "broker", "--log-level", "INFO"]
    for k, v in ov.items():
        cmd += ["--override", f"{k}={v}"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:  # it served instead of refusing
        raise AssertionError(f"the broker did not exit: {e.stderr}") from None


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``root``: (mtime_ns, content)."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30_000})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                out.append(m.value())
    finally:
        c.close()
    return out


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)


def meta_properties(data_dir: Path) -> dict[str, str]:
    lines = (data_dir / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_a_new_dir_is_formatted_on_first_start(tmp_path):
    data = tmp_path / "data"  # does not exist yet
    b = BrokerProcess(data, {"node.id": "3", "cluster.id": "c-123"}).start()
    try:
        props = meta_properties(data)
        assert props["version"] == "1"
        assert props["cluster.id"] == "c-123" and props["node.id"] == "3"
        assert len(props["directory.id"]) == 22
        assert (data / ".lock").read_text().strip() == str(b.proc.pid)
    finally:
        assert b.stop() == 0
    b.start()  # the same config starts again on its own dir
    b.stop()
    assert meta_properties(data) == props


def test_a_non_empty_dir_without_meta_properties_is_refused(tmp_path):
    data = tmp_path / "data"
    (data / "backup-2024").mkdir(parents=True)
    (data / "backup-2024" / "important.txt").write_text("keep me")
    (data / "notes.txt").write_text("mine")
    done = run_broker_expecting_exit(data, 0)
    assert done.returncode != 0
    assert "is not empty" in done.stderr and "meta.properties" in done.stderr
    assert str(data) in done.stderr
    assert (data / "backup-2024" / "important.txt").read_text() == "keep me"
    assert (data / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in data.iterdir()) == [".lock", "backup-2024", "notes.txt"]


def test_a_dir_of_another_node_or_cluster_is_refused(tmp_path):
    data = tmp_path / "data"
    BrokerProcess(data, {"node.id": "1", "cluster.id": "one"}).start().stop()
    before = snapshot(data)
    for overrides, what in (({"node.id": "2", "cluster.id": "one"}, "node.id=1"),
                            ({"node.id": "1", "cluster.id": "two"}, "cluster.id=one")):
        done = run_broker_expecting_exit(data, 0, **overrides)
        assert done.returncode != 0
        assert what in done.stderr and "meta.properties" in done.stderr
    after = snapshot(data)
    assert {k: v for k, v in after.items() if k != ".lock"} == {
        k: v for k, v in before.items() if k != ".lock"}


def test_foreign_folders_are_left_alone(tmp_path, topic_name):
    data = tmp_path / "data"
    b = BrokerProcess(data).start()
    create_topic(b.bootstrap, topic_name)
    produce(b.bootstrap, topic_name, [b"a", b"b"])
    assert b.stop() == 0
    foreign = {
        "backup-2024/important.txt": "keep me",  # looks like partition 2024 of "backup"
        "notes-3/00000000000000000000.log": "not a log",
        "old-delete/x": "x",
        f"{topic_name}-7/x": "not a partition of the topic (it has 1)",
        "README": "hello",
    }
    for rel, text in foreign.items():
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_text(text)
    b.start()
    try:
        assert consume_all(b.bootstrap, topic_name, 2) == [b"a", b"b"]
        create_topic(b.bootstrap, "backup-new")
    finally:
        assert b.stop() == 0
    for rel, text in foreign.items():
        assert (data / rel).read_text() == text, rel
    assert "backup-2024" in b.log_tail(100_000)  # logged, not silently skipped


def test_a_dir_of_an_older_spool_is_adopted(tmp_path, topic_name):
    data = tmp_path / "data"
    b = BrokerProcess(data).start()
    create_topic(b.bootstrap, topic_name)
    produce(b.bootstrap, topic_name, [b"old"])
    assert b.stop() == 0
    (data / "meta.properties").unlink()  # what an older Spool left behind
    (data / ".lock").unlink()
    b.start()
    try:
        assert consume_all(b.bootstrap, topic_name, 1) == [b"old"]
    finally:
        assert b.stop() == 0
    assert meta_properties(data)["version"] == "1"
    assert "older Spool" in b.log_tail(100_000)


def test_a_second_broker_on_the_same_dirs_is_refused(tmp_path, topic_name):
    data = tmp_path / "data"
    first = BrokerProcess(data).start()
    try:
        create_topic(first.bootstrap, topic_name)
        values = [b"v%d" % i for i in range(10)]
        produce(first.bootstrap, topic_name, values)
        done = run_broker_expecting_exit(data, 0)  # another port, the same dir
        assert done.returncode != 0
        assert f"in use by process {first.proc.pid}" in done.stderr
        assert str(data) in done.stderr
        assert consume_all(first.bootstrap, topic_name, 10) == values
    finally:
        assert first.stop() == 0
    first.start()
    try:
        assert consume_all(first.bootstrap, topic_name, 10) == values
    finally:
        first.stop()


def test_a_second_broker_on_the_same_port_touches_no_file(tmp_path, topic_name):
    data = tmp_path / "data"
    quiet = {"log.flush.offset.checkpoint.interval.ms": "3600000",  # the first broker
             "log.flush.start.offset.checkpoint.interval.ms": "3600000",  # writes nothing now
             "replica.high.watermark.checkpoint.interval.ms": "3600000"}  # (on a slow machine)
    first = BrokerProcess(data, quiet).start()
    try:
        create_topic(first.bootstrap, topic_name)
        produce(first.bootstrap, topic_name, [b"x"] * 5)
        before = snapshot(data)
        assert "recovery-point-offset-checkpoint" in before
        done = run_broker_expecting_exit(data, first.port)
        assert done.returncode != 0
        assert (f"spool broker: cannot listen on 127.0.0.1:{first.port} (listener PLAINTEXT): "
                "Address already in use") in done.stderr.splitlines()
        assert snapshot(data) == before
    finally:
        assert first.stop() == 0


def run_format(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "spool.cli.main", "storage", "format", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_format_sets_the_cluster_id_the_broker_then_takes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = f"log.dirs={a},{b}"
    done = run_format("-o", dirs, "-o", "node.id=4", "--cluster-id", "blue")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [f"Formatting {a} with cluster.id blue node.id 4.",
                                           f"Formatting {b} with cluster.id blue node.id 4."]
    pa, pb = meta_properties(a), meta_properties(b)
    assert (pa["cluster.id"], pa["node.id"], pa["version"]) == ("blue", "4", "1")
    assert (pb["cluster.id"], pb["node.id"]) == ("blue", "4")
    assert pa["directory.id"] != pb["directory.id"]

    again = run_format("-o", dirs, "-o", "node.id=4", "--cluster-id", "blue")
    assert again.returncode == 1
    assert again.stderr == (f"spool storage format: Log directory {a} is already formatted. Use "
                            "--ignore-formatted to ignore this directory and format the others.\n")
    assert run_format("-o", dirs, "-o", "node.id=4", "-t", "blue", "-g").returncode == 0

    broker = BrokerProcess(tmp_path / "x", {"log.dirs": f"{a},{b}", "node.id": "4"}).start()
    try:  # no cluster.id configured: the dirs' own is the cluster's
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert md.cluster_id == "blue"
    finally:
        assert broker.stop() == 0
    refused = run_broker_expecting_exit(a, 0, **{"log.dirs": f"{a},{b}", "node.id": "4",
                                                 "cluster.id": "red"})
    assert refused.returncode != 0 and "cluster.id=blue" in refused.stderr
