"""``spool perf produce|consume``, run as real processes against a real broker.

Covers: the records the producer perf test reports as sent are the records the broker
holds and the records the consumer perf test reads (exact counts and bytes, in
``--json`` and in Kafka's text formats); latency and rate figures present and ordered
(never their values: timings belong in docs/BENCHMARKS.md); a transactional run read
back with read_committed; a consumer that runs out of records stops at ``--timeout``
with Kafka's warning; consumed bytes count keys too; records the broker refuses counted
as failed (exit 1, five lines and a count); bad input as one line and a non-zero exit,
without creating the topic.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from spool.cli.main import app

pytestmark = pytest.mark.timeout(120)

SPOOL = [sys.executable, "-m", "spool.cli.main"]

PRODUCE_LINE = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$")
CONSUME_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                  "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
CONSUME_ROW = re.compile(rf"^{TIME}, {TIME}, ([\d.]+), [\d.]+, (\d+), [\d.]+, \d+, -?\d+, "
                         r"-?[\d.]+, -?[\d.]+$")


def perf(broker: Any, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*SPOOL, "perf", *args, "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=90, check=False)
    if check and proc.returncode != 0:
        pytest.fail(f"perf {args} exited {proc.returncode}: {proc.stderr}")
    return proc


def end_offsets(broker: Any, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "perf-test-probe",
                  "log_level": 0})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                for p in range(partitions)]
    finally:
        c.close()


def test_json_counts_match_the_broker_and_the_consumer(broker: Any, topic_name: str) -> None:
    out = perf(broker, "produce", topic_name, "--num-records", "5000", "--record-size", "100",
               "--partitions", "3", "--acks", "all", "--compression", "lz4", "--json")
    sent = json.loads(out.stdout)
    assert sent["topic"] == topic_name
    assert (sent["num_records"], sent["records"], sent["failed"]) == (5000, 5000, 0)
    assert sent["bytes"] == 500_000
    assert sent["elapsed_ms"] > 0 and sent["records_per_sec"] > 0 and sent["mb_per_sec"] > 0
    lat = [sent[f"latency_{k}_ms"] for k in ("p50", "p95", "p99", "p999", "max")]
    assert 0 <= lat[0] <= lat[1] <= lat[2] <= lat[3] <= lat[4]
    assert 0 < sent["latency_avg_ms"] <= sent["latency_max_ms"]
    assert f"created topic '{topic_name}' with 3 partitions" in out.stderr

    offsets = end_offsets(broker, topic_name, 3)
    assert sum(offsets) == 5000

    # one more than there is: it stops after --timeout ms without a record, with Kafka's warning
    out = perf(broker, "consume", topic_name, "--messages", "5001", "--group", f"g-{topic_name}",
               "--timeout", "1000", "--json")
    assert "WARNING: Exiting before consuming the expected number of messages: timeout " \
           "(1000 ms) exceeded" in out.stderr
    got = json.loads(out.stdout)
    assert (got["topic"], got["group"], got["messages"]) == (topic_name, f"g-{topic_name}", 5001)
    assert got["data_consumed_records"] == 5000
    assert got["data_consumed_bytes"] == 500_000
    assert got["data_consumed_mb"] == pytest.approx(500_000 / 2**20)
    assert got["end_time_ms"] >= got["start_time_ms"]
    assert got["rebalance_time_ms"] >= 0 and got["records_per_sec"] > 0
    assert got["fetch_time_ms"] + got["rebalance_time_ms"] <= (
        got["end_time_ms"] - got["start_time_ms"] + 1)


def test_kafka_text_formats(broker: Any, topic_name: str) -> None:
    # Kafka's own spelling: --topic, and --producer-props taking several k=v words
    out = perf(broker, "produce", "--topic", topic_name, "--partitions", "1",
               "--num-records", "1000", "--payload-monotonic", "--throughput", "20000",
               "--producer-props", "acks=1", "linger.ms=2")
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and PRODUCE_LINE.match(lines[0]), out.stdout
    assert PRODUCE_LINE.match(lines[0]).group(1) == "1000"
    assert end_offsets(broker, topic_name, 1) == [1000]

    value_bytes = sum(len(str(i)) for i in range(1000))  # the payloads are "0".."999"
    out = perf(broker, "consume", topic_name, "--messages", "1000", "-X", "fetch.wait.max.ms=50")
    header, row = out.stdout.splitlines()
    assert header == CONSUME_HEADER
    m = CONSUME_ROW.match(row)
    assert m, row
    assert (float(m.group(1)), int(m.group(2))) == (round(value_bytes / 2**20, 4), 1000)
    assert "WARNING" not in out.stderr


def test_transactional_run_is_read_committed(broker: Any, topic_name: str,
                                             tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha|beta|gamma|")
    out = perf(broker, "produce", topic_name, "--partitions", "2", "--num-records", "3000",
               "--payload-file", str(payloads), "--payload-delimiter", "|",
               "--transactional-id", f"tx-{topic_name}", "--transaction-duration-ms", "50",
               "--json")
    sent = json.loads(out.stdout)
    assert (sent["records"], sent["failed"]) == (3000, 0)
    assert "Number of messages read: 3" in out.stderr
    # each transaction adds a commit marker to every partition it wrote to
    assert sum(end_offsets(broker, topic_name, 2)) > 3000

    config = tmp_path / "consumer.properties"
    config.write_text("isolation.level=read_committed\n"
                      "key.deserializer=org.apache.kafka.common.serialization."
                      "ByteArrayDeserializer\n")
    got = json.loads(perf(broker, "consume", topic_name, "--messages", "3000",
                          "--consumer.config", str(config), "--json").stdout)
    assert got["data_consumed_records"] == 3000
    assert 3000 * 4 <= got["data_consumed_bytes"] <= 3000 * 5  # alpha, beta or gamma


@pytest.mark.parametrize(("args", "message", "code"), [
    (["produce", "{t}", "--num-records", "-5", "--record-size", "10"],
     "spool: --num-records should be greater than zero", 2),
    (["produce", "{t}", "--num-records", "5", "--record-size", "10", "--payload-file", "{f}"],
     "spool: exactly one of --record-size, --payload-file or --payload-monotonic is required "
     "(got --record-size and --payload-file)", 2),
    (["produce", "{t}", "--num-records", "5", "--record-size", "10"],
     "spool: topic '{t}' does not exist (UNKNOWN_TOPIC_OR_PARTITION); --partitions N creates "
     "it", 1),
    (["produce", "{t}", "--num-records", "5", "--record-size", "10", "--partitions", "1",
      "--producer-props", "no.such.property=1"],
     'spool: --producer-props: No such configuration property: "no.such.property"', 2),
    (["consume", "{t}", "--messages", "5"],
     "spool: topic '{t}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)", 1),
    (["consume", "{t}", "--messages", "0"], "spool: --messages should be greater than zero", 2),
    (["produce", "bad/name", "--num-records", "5", "--payload-monotonic", "--partitions", "1"],
     "spool: Topic name is invalid: 'bad/name' contains one or more characters other than "
     "ASCII alphanumerics, '.', '_' and '-' (INVALID_TOPIC_EXCEPTION)", 2),
], ids=["negative-num-records", "size-and-file", "unknown-topic", "bad-property",
        "consume-unknown-topic", "zero-messages", "bad-name"])
def test_bad_input_is_one_line(broker: Any, topic_name: str, tmp_path: Path, args: list[str],
                               message: str, code: int) -> None:
    payloads = tmp_path / "p.txt"
    payloads.write_text("x\n")
    subst = {"t": topic_name, "f": str(payloads)}
    # in-process: the options' checks need no new interpreter (CI time)
    proc = CliRunner().invoke(app, ["perf", *(a.format(**subst) for a in args),
                                    "--bootstrap-server", broker.bootstrap])
    assert proc.exit_code == code
    assert proc.stderr.splitlines() == [message.format(**subst)]
    assert proc.stdout == ""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "perf-test-probe",
                  "log_level": 0})
    try:
        assert topic_name not in c.list_topics(timeout=10).topics  # nothing was created
    finally:
        c.close()


def test_consumed_bytes_count_keys_and_values(broker: Any, topic_name: str) -> None:
    # Kafka's ConsumerPerformance counts a record's key bytes too (the producer perf test
    # sends none, so only records produced with keys show it)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    records = [(f"key-{i}".encode(), f"value-{i:03d}".encode()) for i in range(10)]
    for key, value in records:
        p.produce(topic_name, key=key, value=value)
    p.produce(topic_name, value=b"no key")  # a null key adds nothing
    assert p.flush(30) == 0
    out = perf(broker, "consume", topic_name, "--messages", "11", "--json")
    got = json.loads(out.stdout)
    assert got["data_consumed_records"] == 11
    assert got["data_consumed_bytes"] == sum(len(k) + len(v) for k, v in records) + 6


def test_records_the_broker_refuses_are_failed(broker: Any, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"max.message.bytes": "300"})])[
        topic_name].result(30)
    # in-process (CI time): 30 records of 1000 bytes, each over the topic's limit
    proc = CliRunner().invoke(app, ["perf", "produce", topic_name, "--num-records", "30",
                                    "--record-size", "1000", "--json",
                                    "--bootstrap-server", broker.bootstrap])
    assert proc.exit_code == 1
    sent = json.loads(proc.stdout)
    assert (sent["num_records"], sent["records"], sent["failed"], sent["bytes"]) == (30, 0, 30, 0)
    lines = proc.stderr.splitlines()
    assert lines[:5] == [f"spool: record not delivered: '{topic_name}': Message size too large "
                         "(MESSAGE_TOO_LARGE)"] * 5
    assert lines[5:] == ["spool: (further failures not shown)",
                         "spool: 30 of 30 records not delivered"]
    assert end_offsets(broker, topic_name, 1) == [0]
