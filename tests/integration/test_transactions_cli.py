"""``spool transactions list|describe`` as real processes against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(120)
SPOOL = [sys.executable, "-m", "spool.cli.main", "transactions"]


def spool(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SPOOL, *args, "-b", broker.bootstrap], capture_output=True, text=True,
                          timeout=60)


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
