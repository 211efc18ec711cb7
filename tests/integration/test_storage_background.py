"""The broker runs the storage background work: flush.ms, rolled-segment fsyncs,
periodic checkpoints, and removal of deleted partitions while it serves."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.storage.checkpoint import read_checkpoint
from tests.helpers.broker_proc import BrokerProcess

HOUR_MS = 3_600_000


def wait_for(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, config=config or {})])[topic].result(10)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, int | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for value, ts in records:
        p.produce(topic, value=value, timestamp=ts or 0)
        p.flush(10)  # one batch each, in order
    assert p.flush(10) == 0


def checkpoint(data: Path, name: str, topic: str) -> int:
    return read_checkpoint(data / name).get((topic, 0), 0)


def test_flush_ms_moves_the_recovery_point_on_disk(tmp_path, topic_name):
    data = tmp_path / "data"
    b = BrokerProcess(data, {"log.flush.offset.checkpoint.interval.ms": "200"}).start()
    try:
        create_topic(b.bootstrap, topic_name, {"flush.ms": "100"})
        produce(b.bootstrap, topic_name, [(b"r%d" % i, None) for i in range(5)])
        wait_for(lambda: checkpoint(data, "recovery-point-offset-checkpoint", topic_name) == 5,
                 "the recovery point checkpoint to reach the log end (5)")
    finally:
        b.kill()  # kill -9: the checkpoint written while serving is what stays
    assert checkpoint(data, "recovery-point-offset-checkpoint", topic_name) == 5
    assert not (data / ".kafka_cleanshutdown").exists()


def test_rolled_segments_are_flushed_and_checkpoints_written_periodically(tmp_path, topic_name):
    """No flush.ms: the rolled segment alone is fsynced (recovery point = the new
    segment's base); retention moves the log start; both files say so while the
    broker runs."""
    data = tmp_path / "data"
    b = BrokerProcess(data, {
        "log.flush.offset.checkpoint.interval.ms": "200",
        "log.flush.start.offset.checkpoint.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
    }).start()
    rolled, retained = f"{topic_name}-roll", f"{topic_name}-ret"
    try:
        create_topic(b.bootstrap, rolled, {"segment.ms": str(HOUR_MS)})
        create_topic(b.bootstrap, retained, {"segment.ms": str(HOUR_MS),
                                             "retention.ms": str(HOUR_MS)})
        now = int(time.time() * 1000)
        # record time spans 2 h > segment.ms: the second batch rolls the segment; on
        # the second topic the first segment (newest record 2 h old) is past retention
        for topic in (rolled, retained):
            produce(b.bootstrap, topic, [(b"old", now - 2 * HOUR_MS), (b"new", now)])
        wait_for(lambda: checkpoint(data, "recovery-point-offset-checkpoint", rolled) == 1,
                 "the recovery point checkpoint to reach the rolled segment's end (1)")
        wait_for(lambda: checkpoint(data, "log-start-offset-checkpoint", retained) == 1,
                 "the log start checkpoint to show retention (1)")
        assert (data / f"{rolled}-0" / "00000000000000000000.log").exists()
    finally:
        b.kill()
    assert checkpoint(data, "recovery-point-offset-checkpoint", rolled) == 1
    assert checkpoint(data, "recovery-point-offset-checkpoint", retained) == 1


def test_a_deleted_topic_is_removed_from_disk_while_the_broker_runs(tmp_path, topic_name):
    data = tmp_path / "data"
    b = BrokerProcess(data, {"log.segment.delete.delay.ms": "1000"}).start()
    try:
        create_topic(b.bootstrap, topic_name)
        produce(b.bootstrap, topic_name, [(b"x", None)])
        assert (data / f"{topic_name}-0").is_dir()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(10)
        wait_for(lambda: not [n.name for n in data.iterdir() if n.name.startswith(topic_name)],
                 "the deleted partition's folder to go")
        assert b.proc.poll() is None  # removed by the running broker, not at shutdown
    finally:
        assert b.stop() == 0
