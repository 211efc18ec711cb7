"""``spool transactions`` against real brokers, in-process (``tests.helpers.cli``): list and
describe; describe-producers, find-hanging and abort on a transaction left hanging by a raw
transactional batch."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from spool.protocol._generated import InitProducerIdRequest, ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.cli import spool_cli
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)


def spool(broker, *args: str) -> subprocess.CompletedProcess:
    """``spool transactions ARGS`` in-process (``tests.helpers.cli``)."""
    return spool_cli("transactions", *args, "-b", broker.bootstrap)


def test_list_and_describe(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2)])[topic_name].result(10)
    open_id, done_id = f"open-{topic_name}", f"done-{topic_name}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": open_id})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic_name, b"x", partition=1)
    p.flush(10)
    done = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": done_id})
    done.init_transactions(15)
    done.begin_transaction()
    done.produce(topic_name, b"y", partition=0)
    done.commit_transaction(15)

    listed = {t["transactional_id"]: t for t in json.loads(spool(broker, "list", "--json").stdout)}
    assert listed[open_id]["state"] == "Ongoing"
    assert listed[done_id]["state"] == "CompleteCommit"
    ongoing = json.loads(spool(broker, "list", "--state", "Ongoing", "--json").stdout)
    assert open_id in {t["transactional_id"] for t in ongoing}
    assert done_id not in {t["transactional_id"] for t in ongoing}

    info = json.loads(spool(broker, "describe", open_id, "--json").stdout)
    assert info["state"] == "Ongoing" and info["producer_epoch"] == 0
    assert info["partitions"] == [f"{topic_name}-1"] and info["age_ms"] >= 0
    text = spool(broker, "describe", open_id).stdout
    assert "Ongoing" in text and f"{topic_name}-1" in text

    missing = spool(broker, "describe", f"nope-{topic_name}")
    assert missing.returncode == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr and len(missing.stderr.splitlines()) == 1
    p.abort_transaction(15)


@pytest.fixture(scope="module")
def loose_broker(tmp_path_factory):
    """A broker that appends transactional batches without asking the coordinator (KIP-890
    verification off), so a test can leave a transaction hanging as an old client could."""
    b = BrokerProcess(tmp_path_factory.mktemp("loose") / "data",
                      {"transaction.partition.verification.enable": "false"})
    b.start()
    yield b
    b.stop()


def test_describe_producers_find_hanging_and_abort(loose_broker, topic_name):
    b = loose_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic_name, 2)])[topic_name].result(10)
    [node] = admin.list_topics(timeout=10).brokers
    hour_ago = int(time.time() * 1000) - 3600_000 - 30_000
    with RawClient(b) as rc:  # a transactional batch the coordinator never heard of
        pid = rc.request(22, 4, InitProducerIdRequest(transactional_id=None,
                                                      transaction_timeout_ms=60000)).producer_id
        batch = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0,
                             is_transactional=True)
        for i in range(3):
            batch.append(b"k", b"v%d" % i, timestamp=hour_ago)
        resp = rc.request(0, 9, ProduceRequest(
            transactional_id=f"ghost-{topic_name}", acks=-1, timeout_ms=5000,
            topic_data=[TopicProduceData(name=topic_name, partition_data=[
                PartitionProduceData(index=0, records=bytes(batch.build()))])]))
        assert resp.responses[0].partition_responses[0].error_code == 0
        # another, ten minutes old, on partition 1: under find-hanging's 15 minutes
        recent = int(time.time() * 1000) - 600_000 - 30_000
        pid2 = rc.request(22, 4, InitProducerIdRequest(transactional_id=None,
                                                       transaction_timeout_ms=60000)).producer_id
        batch = BatchBuilder(producer_id=pid2, producer_epoch=0, base_sequence=0,
                             is_transactional=True)
        batch.append(b"k", b"young", timestamp=recent)
        resp = rc.request(0, 9, ProduceRequest(
            transactional_id=f"young-{topic_name}", acks=-1, timeout_ms=5000,
            topic_data=[TopicProduceData(name=topic_name, partition_data=[
                PartitionProduceData(index=1, records=bytes(batch.build()))])]))
        assert resp.responses[0].partition_responses[0].error_code == 0
    known = Producer({"bootstrap.servers": b, "transactional.id": f"known-{topic_name}"})
    known.init_transactions(15)
    known.begin_transaction()
    known.produce(topic_name, b"x", partition=1)
    known.flush(10)

    def run(*args: str) -> subprocess.CompletedProcess:
        return spool_cli("transactions", *args, "-b", b)

    def lso() -> int:
        tp = TopicPartition(topic_name, 0)
        got = admin.list_offsets({tp: OffsetSpec.latest()},
                                 isolation_level=IsolationLevel.READ_COMMITTED)
        return got[tp].result(10).offset

    ghost = {"producer_id": pid, "producer_epoch": 0, "coordinator_epoch": -1,
             "last_sequence": 2, "last_timestamp": hour_ago,
             "current_transaction_start_offset": 0}
    assert json.loads(run("describe-producers", "--topic", topic_name, "--partition", "0",
                          "--json").stdout) == [ghost]
    hanging = {"topic": topic_name, "partition": 0, "producer_id": pid, "producer_epoch": 0,
               "coordinator_epoch": -1, "start_offset": 0, "last_timestamp": hour_ago,
               "duration_min": 60}
    assert json.loads(run("find-hanging", "--topic", topic_name, "--json").stdout) == [hanging]
    # the known producer's open transaction is its coordinator's, however old; the young
    # ghost hangs for a --max-transaction-timeout under its ten minutes
    young = {"topic": topic_name, "partition": 1, "producer_id": pid2, "producer_epoch": 0,
             "coordinator_epoch": -1, "start_offset": 0, "last_timestamp": recent,
             "duration_min": 10}
    assert json.loads(run("find-hanging", "--broker-id", str(node), "--max-transaction-timeout",
                          "0", "--json").stdout) == [hanging, young]
    assert json.loads(run("find-hanging", "--topic", topic_name, "--max-transaction-timeout",
                          "11", "--json").stdout) == [hanging]
    assert run("find-hanging", "--topic", topic_name).stdout.splitlines()[1].split() == [
        topic_name, "0", str(pid), "0", "-1", "0", str(hour_ago), "60"]
    assert lso() == 0  # read_committed consumers are stuck behind it

    wrong = run("abort", "--topic", topic_name, "--partition", "0", "--start-offset", "1")
    assert (wrong.returncode, wrong.stderr) == (
        1, f"spool: no open transaction starts at offset 1 of {topic_name}-0\n")
    done = run("abort", "--topic", topic_name, "--partition", "0", "--start-offset", "0")
    assert (done.returncode, done.stderr) == (
        0, f"aborted the transaction of producer {pid} (epoch 0) on {topic_name}-0\n")
    assert lso() == 4  # three records and the ABORT marker
    # aborted, not committed: a read_committed consumer skips the three records
    rc_consumer = Consumer({"bootstrap.servers": b, "group.id": f"rc-{topic_name}",
                            "isolation.level": "read_committed",
                            "enable.partition.eof": True})
    rc_consumer.assign([TopicPartition(topic_name, 0, 0)])
    seen, deadline = [], time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = rc_consumer.poll(1)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            seen.append(m.value())
        else:
            pytest.fail(f"no end of partition 0 in 30 s (read {seen})")
    finally:
        rc_consumer.close()
    assert seen == []
    assert json.loads(run("find-hanging", "--topic", topic_name, "--json").stdout) == []
    [after] = json.loads(run("describe-producers", "--topic", topic_name, "--partition", "0",
                             "--json").stdout)
    assert after["current_transaction_start_offset"] is None
    absent = run("describe-producers", "--topic", topic_name, "--partition", "2")
    assert (absent.returncode, absent.stderr) == (
        1, f"spool: partition {topic_name}-2: does not exist (UNKNOWN_TOPIC_OR_PARTITION)\n")
    usage = run("find-hanging")
    assert (usage.returncode, usage.stderr) == (
        2, "spool: find-hanging needs --topic or --broker-id to limit the search\n")
    known_id = f"known-{topic_name}"
    running = {t["transactional_id"] for t in json.loads(run(
        "list", "--duration-filter", "0", "--json").stdout)}
    assert known_id in running and f"ghost-{topic_name}" not in running
    assert known_id not in {t["transactional_id"] for t in json.loads(run(
        "list", "--duration-filter", "3600000", "--json").stdout)}
    known.abort_transaction(15)
    assert run("abort", "--topic", topic_name, "--partition", "1",
               "--start-offset", "0").returncode == 0
