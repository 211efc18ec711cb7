"""The broker's log, as an operator greps it: one line per significant event, in JSON
with ``--log-format json`` (every line parses), start-up naming the data dir once.

One broker process for the module (JSON logs, levels by its log.level key alone: INFO, and
DEBUG for one logger); the kill -9 restart runs last.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker_proc import BrokerProcess

OVERRIDES = {
    "log.retention.check.interval.ms": "100",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "metrics.listeners": "http://127.0.0.1:0",
    # the levels by the broker key alone (no --log-level): one logger at DEBUG
    "log.level": "INFO,spool.broker.http=DEBUG",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("logs") / "data"
    b = BrokerProcess(data, OVERRIDES, log_level=None, log_format="json").start()
    yield b
    b.stop()


def log_lines(b: BrokerProcess) -> list[dict]:
    """Every line of the broker's stderr, each one JSON object."""
    out = []
    for line in b.log_path.read_text().splitlines():
        obj = json.loads(line)
        assert set(obj) == {"ts", "level", "logger", "message", "fields"}, line
        out.append(obj)
    return out


def wait_for(b: BrokerProcess, pattern: str, timeout: float = 30.0) -> dict:
    """The first log line whose message matches ``pattern`` (fullmatch), once logged."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        for line in log_lines(b):
            if rx.fullmatch(line["message"]):
                return line
        assert time.monotonic() < deadline, f"no log line matches {pattern!r}"
        time.sleep(0.05)


def admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def create(b: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    a = admin(b)
    for f in a.create_topics([NewTopic(name, partitions, 1, config=configs)]).values():
        f.result(30)


def test_start_up_says_the_absolute_data_dir_once_and_no_listener_twice(broker):
    lines = log_lines(broker)
    loaded = [x for x in lines if x["message"].startswith("loaded 0 partitions from ")]
    assert len(loaded) == 1
    data = os.path.abspath(broker.data_dir)
    assert re.fullmatch(rf"loaded 0 partitions from {re.escape(data)} in \d+ ms",
                        loaded[0]["message"])
    assert loaded[0]["fields"]["log_dirs"] == [data]
    started = wait_for(broker, r"broker 0 started in cluster \S+")
    assert started["fields"]["listeners"] == {"PLAINTEXT": f"127.0.0.1:{broker.port}"}
    metrics = broker.http_urls["metrics"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", metrics)
    assert started["fields"]["http_endpoints"] == {"metrics": [metrics]}
    assert not [x for x in lines if "listening" in x["message"]]  # stdout says it, once
    # log.level: INFO, and DEBUG for spool.broker.http only
    assert {x["level"] for x in lines if x["logger"] == "spool.broker.http"} == {"DEBUG"}
    assert re.fullmatch(r"metrics endpoint bound to 127\.0\.0\.1:\d+",
                        next(x["message"] for x in lines if x["logger"] == "spool.broker.http"))
    assert not [x for x in lines if x["level"] == "DEBUG" and x["logger"] != "spool.broker.http"]
    assert broker.stdout_lines == [f"spool broker 0 listening on 127.0.0.1:{broker.port} "
                                   "(PLAINTEXT)",
                                   f"spool broker 0 listening on {metrics} (metrics)"]


def test_topic_created_segments_rolled_and_deleted_by_retention_topic_deleted(broker):
    topic = f"logs-{uuid.uuid4().hex[:8]}"
    create(broker, topic, 2, **{"segment.bytes": "1048576", "retention.bytes": "1048576"})
    line = wait_for(broker, rf"created topic {topic} with 2 partitions \(topic id \S+\)")
    assert line["logger"] == "spool.storage.engine"
    assert line["fields"]["topic"] == topic and line["fields"]["partitions"] == 2

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for _ in range(30):  # one 100 kB batch each: 10 to a 1 MiB segment
        p.produce(topic, value=os.urandom(100_000), partition=0)
        p.flush(30)
    rolled = wait_for(broker, rf"{topic}-0: rolled a new segment at offset 20 \(the previous "
                              r"one, at 10, holds \d+ bytes\)")
    assert rolled["fields"]["base_offset"] == 20
    wait_for(broker, rf"{topic}-0: rolled a new segment at offset 10 .*")
    deleted = wait_for(broker, rf"{topic}-0: deleting 1 segment\(s\), offsets \[0, 10\), "
                               r"\d+ bytes: retention.bytes=1048576")
    assert deleted["fields"]["base_offsets"] == [0]

    a = admin(broker)
    for f in a.delete_topics([topic]).values():
        f.result(30)
    wait_for(broker, rf"deleted topic {topic} \(topic id \S+\)")


def consume_until_assigned(conf: dict, topic: str) -> None:
    c = Consumer({**conf, "auto.offset.reset": "earliest"})
    assigned: list = []
    c.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    deadline = time.monotonic() + 30
    while not assigned and time.monotonic() < deadline:
        c.poll(0.1)
    c.close()
    assert assigned


def test_group_rebalances_log_generation_and_members(broker):
    topic = f"logs-g-{uuid.uuid4().hex[:8]}"
    create(broker, topic, 2)
    classic, modern = f"classic-{topic}", f"consumer-{topic}"
    consume_until_assigned({"bootstrap.servers": broker.bootstrap, "group.id": classic}, topic)
    line = wait_for(broker, rf"group {classic} rebalanced: generation 1 with 1 members "
                            r"\(protocol \w+\)")
    assert line["fields"]["generation"] == 1 and line["fields"]["members"] == 1
    consume_until_assigned({"bootstrap.servers": broker.bootstrap, "group.id": modern,
                            "group.protocol": "consumer"}, topic)
    line = wait_for(broker, rf"group {modern} rebalanced: epoch \d+ with 1 members")
    assert line["fields"]["member_ids"] and line["fields"]["members"] == 1
    share = f"share-{topic}"
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": share,
                       "log_level": 3})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        rx = re.compile(rf"share group {share} rebalanced: epoch \d+ with 1 members")
        while not any(rx.fullmatch(x["message"]) for x in log_lines(broker)):
            assert time.monotonic() < deadline, "no share group line"
            c.poll(0.2)  # heartbeats ride on the polls
    finally:
        c.close()


def test_a_transaction_aborted_by_its_timeout_is_logged(broker):
    topic, txn = f"logs-t-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}"
    create(broker, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn,
                  "transaction.timeout.ms": 1000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"never committed")
    p.flush(30)
    line = wait_for(broker, rf"aborting the transaction of {txn} \(producer id \d+, epoch \d+\): "
                            r"open longer than its timeout of 1000 ms")
    assert line["fields"]["reason"] == "timeout"


def test_a_restart_after_kill_9_logs_each_partition_recovery(broker):
    topic = f"logs-r-{uuid.uuid4().hex[:8]}"
    create(broker, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(topic, value=b"%d" % i)
    p.flush(30)
    broker.restart()  # kill -9, then start on the same port and data
    line = wait_for(broker, rf"loaded {topic}-0 in \d+ ms: offsets \[0, 5\), 1 segment\(s\); "
                            r"recovered 1 segment\(s\): \d+ bytes rescanned, 0 bytes truncated")
    assert line["fields"]["recovered_segments"] == 1
    data = re.escape(os.path.abspath(broker.data_dir))
    wait_for(broker, rf"loaded \d+ partitions from {data} in \d+ ms; \d+ recovered after an "
                     r"unclean shutdown \(\d+ segment\(s\), \d+ bytes rescanned\)")
