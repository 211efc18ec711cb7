"""``spool groups`` as real processes against a real broker: list, describe (lag, views,
--all-groups), reset-offsets (dry run, --execute, every target, Kafka's CSV plans),
delete-offsets, delete."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cli import spool_cli

pytestmark = pytest.mark.timeout(120)


def spool(broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    """``spool ARGS -b BROKER`` in-process (``tests.helpers.cli``: the same command tree
    without a child's ~1 s start; test_cli.py keeps the process boundary covered)."""
    p = spool_cli(*args, "-b", broker.bootstrap)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def committed(broker, group: str, topic: str, partitions: int = 2) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
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


def test_describe_views_delete_offsets_and_reset_plans(fresh_broker, topic_name, tmp_path):
    """An assigned partition without a commit shows lag '-'; --state/--members/--all-groups;
    delete-offsets refused while subscribed, then per partition; reset-offsets --all-topics,
    --to-current, --by-duration, --export and --from-file (Kafka's CSV) round trip.

    A broker of its own: --all-groups on the session broker described every other test's
    groups too (hundreds, some with malformed member metadata on purpose), and librdkafka's
    admin client aborted the worker on one of them now and then (rd_kafka_admin_response_parse:
    Assertion 'rko_result' failed) in clean-clone runs."""
    broker = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    old = int(time.time() * 1000) - 2 * 3600_000  # two hours ago: five per partition
    for i in range(30):
        p.produce(topic_name, value=b"%d" % i, partition=i % 3,
                  timestamp=old if i < 15 else 0)
    p.flush(10)
    group = f"views-{topic_name}"

    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
        return spool(broker, *args, ok=ok)

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "views",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic_name])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    c.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
    try:
        doc = json.loads(run("groups", "describe", group, "--json").stdout)
        [member] = doc["members"]
        assert [(o["partition"], o["committed"], o["log_end_offset"], o["lag"], o["member_id"])
                for o in doc["offsets"]] == [(0, 4, 10, 6, member["member_id"]),
                                             (1, None, 10, None, member["member_id"]),
                                             (2, None, 10, None, member["member_id"])]
        rows = [line.split() for line in run("groups", "describe", group)
                .stdout.splitlines()]
        assert rows[2:] == [[topic_name, "0", "4", "10", "6", member["member_id"],
                             member["host"], "views"],
                            [topic_name, "1", "-", "10", "-", member["member_id"],
                             member["host"], "views"],
                            [topic_name, "2", "-", "10", "-", member["member_id"],
                             member["host"], "views"]]
        host, port = broker.bootstrap.split(":")
        state = json.loads(run("groups", "describe", group, "--state", "--json").stdout)
        assert state == {"group": group, "type": "classic", "state": "Stable",
                         "assignor": "range", "members": 1,
                         "coordinator": {"id": doc["coordinator"]["id"], "host": host,
                                         "port": int(port)}}
        members = run("groups", "describe", group, "--members").stdout.splitlines()
        assert members[2].split() == [member["member_id"], "-", member["host"], "views", "3",
                                      f"{topic_name}:0,1,2"]
        busy = run("groups", "delete-offsets", group, "--topic", topic_name, ok=False)
        assert busy.returncode == 1 and busy.stderr == (
            f"spool: offsets of 3 of 3 partitions not deleted: {topic_name}-0: "
            "GROUP_SUBSCRIBED_TO_TOPIC (the group's members consume the topic)\n")
    finally:
        c.close()

    every = json.loads(run("groups", "describe", "--all-groups", "--state",
                             "--json").stdout)
    assert {"group": group, "state": "Empty", "members": 0} == {
        k: v for d in every if d["group"] == group for k, v in d.items()
        if k in ("group", "state", "members")}
    absent = f"absent-{topic_name}"
    missing = run("groups", "reset-offsets", group, "--topic", absent, "--to-earliest", ok=False)
    assert (missing.returncode, missing.stderr) == (
        1, f"spool: topic '{absent}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)\n")
    assert absent not in admin.list_topics(timeout=10).topics  # asking created nothing
    missing = run("groups", "reset-offsets", group, "--topic", f"{topic_name}:1,3",
                  "--to-earliest", ok=False)
    assert (missing.returncode, missing.stderr) == (
        1, f"spool: partition {topic_name}-3 does not exist (topic '{topic_name}' has 3 "
           "partitions) (UNKNOWN_TOPIC_OR_PARTITION)\n")
    export = run("groups", "reset-offsets", group, "--all-topics", "--to-current",
                 "--export", "--dry-run")
    assert export.stdout == f"{topic_name},0,4\n"
    assert run("groups", "reset-offsets", group, "--topic", topic_name,
                 "--to-current", "--export").stdout == (
        f"{topic_name},0,4\n{topic_name},1,10\n{topic_name},2,10\n")
    run("groups", "reset-offsets", group, "--topic", f"{topic_name}:1,2",
          "--by-duration", "PT1H", "--execute")
    assert committed(broker, group, topic_name, 3) == {0: 4, 1: 5, 2: 5}
    # 2.5 hours ago is before the old records: the plan (a dry run) starts at offset 0
    earlier = json.loads(run("groups", "reset-offsets", group, "--topic", f"{topic_name}:1",
                             "--by-duration", "PT2H30M", "--json").stdout)
    assert earlier == [{"topic": topic_name, "partition": 1, "offset": 0}]
    assert committed(broker, group, topic_name, 3) == {0: 4, 1: 5, 2: 5}
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{group},{topic_name},0,7\nother,{topic_name},1,1\n"
                    f"{group},{topic_name},2,99\n")
    run("groups", "reset-offsets", group, "--from-file", str(plan), "--execute")
    assert committed(broker, group, topic_name, 3) == {0: 7, 1: 5, 2: 10}  # 99: clamped

    deleted = json.loads(run("groups", "delete-offsets", group, "--topic",
                               f"{topic_name}:2", "--json").stdout)
    assert deleted == [{"topic": topic_name, "partition": 2, "error": None}]
    assert committed(broker, group, topic_name, 3) == {0: 7, 1: 5, 2: -1001}
    gone = run("groups", "delete-offsets", f"nope-{group}", "--topic", topic_name, ok=False)
    assert (gone.returncode, gone.stderr) == (
        1, f"spool: group 'nope-{group}': the group does not exist (GROUP_ID_NOT_FOUND)\n")
    bad = run("groups", "reset-offsets", group, "--all-topics", "--by-duration",
                "1h", ok=False)
    assert (bad.returncode, bad.stderr) == (2, "spool: bad --by-duration '1h': expected an "
                                               "ISO-8601 duration PnDTnHnMn.nS, e.g. PT1H30M "
                                               "or P1D\n")


def test_group_named_by_option_as_kafka_spells_it(broker, topic_name):
    """--group/-g names the groups of describe (repeatable), reset-offsets, delete-offsets and
    delete (repeatable), as kafka-consumer-groups does; the positional form is the same
    command; neither, or both naming different groups, is one usage line."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        p.produce(topic_name, value=b"%d" % i, partition=i % 2)
    p.flush(10)
    g1, g2 = f"opt1-{topic_name}", f"opt2-{topic_name}"
    for g, offset in ((g1, "1"), (g2, "2")):  # an unknown group: the commit creates it
        spool(broker, "groups", "reset-offsets", "--group", g, "--topic", topic_name,
              "--to-offset", offset, "--execute")
    assert committed(broker, g1, topic_name) == {0: 1, 1: 1}
    spool(broker, "groups", "reset-offsets", g2, "-g", g2, "--topic", f"{topic_name}:1",
          "--to-offset", "3", "--execute")  # both forms naming the same group
    assert committed(broker, g2, topic_name) == {0: 2, 1: 3}

    def offsets(doc: dict) -> list:
        return [(o["partition"], o["committed"], o["lag"]) for o in doc["offsets"]]

    one = json.loads(spool(broker, "groups", "describe", "-g", g1, "--json").stdout)
    assert (one["group"], one["state"], offsets(one)) == (g1, "Empty", [(0, 1, 2), (1, 1, 2)])
    both = json.loads(spool(broker, "groups", "describe", "--group", g1, "--group", g2,
                            "--json").stdout)
    assert [(d["group"], offsets(d)) for d in both] == [
        (g1, [(0, 1, 2), (1, 1, 2)]), (g2, [(0, 2, 1), (1, 3, 0)])]
    assert both == json.loads(spool(broker, "groups", "describe", g1, g2, "--json").stdout)
    deleted = json.loads(spool(broker, "groups", "delete-offsets", "-g", g2, "--topic",
                               f"{topic_name}:0", "--json").stdout)
    assert deleted == [{"topic": topic_name, "partition": 0, "error": None}]
    assert committed(broker, g2, topic_name) == {0: -1001, 1: 3}

    usage = [
        (("describe",), "name the groups to describe or give --all-groups (not both)"),
        (("describe", g1, "-g", g2), "name the groups positionally or with --group, not both"),
        (("reset-offsets", "--topic", topic_name, "--to-earliest"),
         "name the group: GROUP or --group GROUP"),
        (("reset-offsets", g1, "--group", g2, "--topic", topic_name, "--to-earliest"),
         f"two groups named: '{g1}' and --group '{g2}'"),
        (("delete-offsets", "--topic", topic_name), "name the group: GROUP or --group GROUP"),
        (("delete-offsets", g1, "-g", g2, "--topic", topic_name),
         f"two groups named: '{g1}' and --group '{g2}'"),
        (("delete",), "name the groups to delete: GROUP... or --group GROUP..."),
        (("delete", g1, "--group", g2), "name the groups positionally or with --group, not both"),
    ]
    for args, line in usage:
        bad = spool(broker, "groups", *args, ok=False)
        assert (bad.returncode, bad.stdout, bad.stderr) == (2, "", f"spool: {line}\n"), args
    assert committed(broker, g1, topic_name) == {0: 1, 1: 1}  # nothing was done

    spool(broker, "groups", "delete", "-g", g1, "--group", g2)
    listed = spool(broker, "groups", "list").stdout.split()
    assert g1 not in listed and g2 not in listed
