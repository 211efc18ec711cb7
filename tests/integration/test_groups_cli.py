"""``spool groups`` as real processes against a real broker: list, describe (lag),
reset-offsets (dry run, --execute, every target), delete."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(120)
SPOOL = [sys.executable, "-m", "spool.cli.main"]


def spool(broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([*SPOOL, *args, "-b", broker.bootstrap], capture_output=True, text=True,
                       timeout=60)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def committed(broker, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def test_groups_list_describe_reset_delete(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    t0 = int(time.time() * 1000)
    for i in range(20):  # ten per partition, timestamps one second apart
        p.produce(topic_name, value=b"%d" % i, partition=i % 2, timestamp=t0 + 1000 * (i // 2))
    p.flush(10)
    group = f"g-{topic_name}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "cli-test",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic_name])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        got += len([m for m in c.consume(100, 0.5) if m.error() is None])
    c.commit(offsets=[TopicPartition(topic_name, 0, 4), TopicPartition(topic_name, 1, 9)],
             asynchronous=False)
    try:
        assert group in spool(broker, "groups", "list").stdout.split()
        listed = json.loads(spool(broker, "groups", "list", "--json", "--state", "Stable").stdout)
        assert {"group": group, "type": "classic", "protocol": "consumer",
                "state": "Stable"} in listed
        assert group in {g["group"] for g in json.loads(
            spool(broker, "groups", "list", "--json", "--type", "classic").stdout)}
        assert group not in {g["group"] for g in json.loads(
            spool(broker, "groups", "list", "--json", "--type", "share").stdout)}
        doc = json.loads(spool(broker, "groups", "describe", group, "--json").stdout)
        assert (doc["state"], doc["assignor"]) == ("Stable", "range")
        assert [m["client_id"] for m in doc["members"]] == ["cli-test"]
        lag = {(o["partition"], o["committed"], o["log_end_offset"], o["lag"]) for o in doc["offsets"]}
        assert lag == {(0, 4, 10, 6), (1, 9, 10, 1)}
        text = spool(broker, "groups", "describe", group).stdout
        assert "Stable" in text and "cli-test" in text
        busy = spool(broker, "groups", "reset-offsets", group, "--topic", topic_name,
                     "--to-earliest", "--execute", ok=False)
        assert busy.returncode == 1 and "inactive" in busy.stderr
        busy = spool(broker, "groups", "delete", group, ok=False)
        assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stderr
    finally:
        c.close()

    def reset(*how: str, execute: bool = True) -> list:
        args = ["groups", "reset-offsets", group, "--topic", topic_name, *how, "--json"]
        return json.loads(spool(broker, *args, *(["--execute"] if execute else [])).stdout)

    plan = reset("--to-earliest", execute=False)
    assert [(r["partition"], r["offset"]) for r in plan] == [(0, 0), (1, 0)]
    assert committed(broker, group, topic_name) == {0: 4, 1: 9}  # a dry run changes nothing
    reset("--to-earliest")
    assert committed(broker, group, topic_name) == {0: 0, 1: 0}
    reset("--shift-by", "3")
    assert committed(broker, group, topic_name) == {0: 3, 1: 3}
    reset("--shift-by", "-100")  # clamped to the log start
    assert committed(broker, group, topic_name) == {0: 0, 1: 0}
    reset("--to-offset", "7")
    assert committed(broker, group, topic_name) == {0: 7, 1: 7}
    reset("--to-datetime", str(t0 + 5000))
    assert committed(broker, group, topic_name) == {0: 5, 1: 5}
    reset("--to-latest")
    assert committed(broker, group, topic_name) == {0: 10, 1: 10}
    bad = spool(broker, "groups", "reset-offsets", group, "--topic", topic_name, ok=False)
    assert bad.returncode == 2

    spool(broker, "groups", "delete", group)
    assert group not in spool(broker, "groups", "list").stdout.split()
    gone = spool(broker, "groups", "delete", group, ok=False)
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr
