"""``spool groups`` on a KIP-848 consumer group (confluent-kafka ``group.protocol=consumer``),
as real processes: list --type, and describe showing each member's epoch, current and target
assignment, and the committed offsets."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cli import spool_cli

pytestmark = pytest.mark.timeout(120)


def spool(broker, *args: str) -> subprocess.CompletedProcess:
    done = spool_cli(*args, "-b", broker.bootstrap)  # in-process (tests.helpers.cli)
    assert done.returncode == 0, done.stderr
    return done


def test_consumer_group_list_and_describe(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        p.produce(topic_name, value=b"%d" % i, partition=i % 4)
    p.flush(10)
    group = f"kip848-{topic_name}"
    consumers = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                           "group.protocol": "consumer", "client.id": f"c{i}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
                 for i in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        doc: dict = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in consumers:
                for m in c.consume(10, 0.2):
                    if m.error() is None:
                        c.commit(message=m, asynchronous=False)
            doc = json.loads(spool(broker, "groups", "describe", group, "--json").stdout)
            owned = [a for m in doc["members"] for a in m["assignment"]]
            if (doc["state"] == "Stable" and len(doc["members"]) == 2 and len(owned) == 4
                    and all(m["assignment"] == m["target_assignment"] for m in doc["members"])):
                break
        assert doc["type"] == "consumer" and doc["state"] == "Stable", doc
        assert sorted(m["client_id"] for m in doc["members"]) == ["c0", "c1"]
        assert all(m["member_epoch"] == doc["assignment_epoch"] for m in doc["members"])
        owned = sorted((a["topic"], a["partition"]) for m in doc["members"]
                       for a in m["assignment"])
        assert owned == [(topic_name, p) for p in range(4)]
        assert [m["subscribed_topics"] for m in doc["members"]] == [[topic_name]] * 2
        assert {o["partition"] for o in doc["offsets"]} <= set(range(4))

        listed = json.loads(spool(broker, "groups", "list", "--json", "--type",
                                  "consumer").stdout)
        assert {"group": group, "type": "consumer", "protocol": "consumer",
                "state": "Stable"} in listed
        assert group not in spool(broker, "groups", "list", "--type", "classic").stdout.split()
        table = spool(broker, "groups", "describe", group).stdout
        assert "Target assignment" in table and "consumer protocol" in table
    finally:
        for c in consumers:
            c.close()
