"""The data-plane ``spool`` commands as a user runs them, against the session's broker.

Covers: ``consume -g`` committing every assigned partition's position on exit (a
second run reads exactly the rest; a partition it read nothing from keeps its committed
offset; a commit refused at exit is a warning and exit 0), ``--isolation-level``, ``--encoding
base64|hex`` for binary data; ``produce --null-marker`` (tombstones),
``--print-offsets`` and the summary's partitions and offsets, failures by line
number, ``--stop-on-error``, MESSAGE_TOO_LARGE with the size and the limit (the
producer's, set with ``-X``, and the topic's); the rule an illegal topic name breaks;
``offsets`` (patterns, ranges, --time), ``topics trim``, ``log-dirs describe``.
"""

from __future__ import annotations

import json
import socketserver
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cli import spool_cli
from tests.integration.test_cli import SPOOL, one_error_line, spool

pytestmark = pytest.mark.timeout(120)


def values(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [json.loads(line)["value"] for line in proc.stdout.splitlines()]


# Set-up goes through confluent-kafka in this process: every `spool` run costs a Python
# start-up, and these tests are about the commands they run, not the set-up.
def cli(broker: Any, *args: str, stdin: str | bytes | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """``spool ARGS --bootstrap-server B`` in this process (not ``consume``:
    tests.helpers.cli); a failure fails the test unless ``check`` is off."""
    proc = spool_cli(*args, "--bootstrap-server", broker.bootstrap, stdin=stdin)
    if check and proc.returncode != 0:
        pytest.fail(f"{args} exited {proc.returncode}: {proc.stderr}")
    return proc


def create(broker: Any, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, config=configs)])[topic].result(30)


def send(broker: Any, topic: str, records: list[tuple[bytes | None, bytes, int | None]]) -> None:
    """(key, value, partition or None) each, in order; keyed ones by the Java client's rule."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for key, value, partition in records:
        p.produce(topic, value, key, **({} if partition is None else {"partition": partition}))
    assert p.flush(30) == 0


def test_consume_group_commits_every_assigned_partition(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 3)
    send(broker, topic_name, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(12)])
    g = f"g-{topic_name}"
    first = spool(broker, "consume", topic_name, "-g", g, "-n", "5", "--from-beginning", "--json")
    rest = spool(broker, "consume", topic_name, "-g", g, "--timeout", "1", "--json")
    assert len(values(first)) == 5
    assert sorted(values(first) + values(rest)) == sorted(f"v{i}" for i in range(12))
    assert rest.stderr == "spool: 7 records consumed\n"

    # a new group without --from-beginning starts at the end of every partition, and
    # commits it: records produced after it left are all read by the next run
    late = f"late-{topic_name}"
    none = spool(broker, "consume", topic_name, "-g", late, "--timeout", "1")
    assert (none.stdout, none.stderr) == ("", "spool: 0 records consumed\n")
    send(broker, topic_name, [(k.encode(), v.encode(), None) for k, v in zip("abcd", "xyzw", strict=True)])
    after = spool(broker, "consume", topic_name, "-g", late, "--timeout", "1", "--json")
    assert sorted(values(after)) == ["w", "x", "y", "z"]


def test_consume_group_keeps_the_commit_of_a_partition_it_read_nothing_from(
        broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 2)
    send(broker, topic_name, [(None, f"p{p}-{i}".encode(), p) for p in (0, 1) for i in range(3)])
    g = f"g-{topic_name}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": g})
    c.commit(offsets=[TopicPartition(topic_name, p, 1) for p in (0, 1)], asynchronous=False)
    c.close()
    # one record from one partition: the other keeps its commit (1), not the log end
    one = spool(broker, "consume", topic_name, "-g", g, "-n", "1", "--json")
    rest = spool(broker, "consume", topic_name, "-g", g, "--timeout", "1", "--json")
    assert sorted(values(one) + values(rest)) == ["p0-1", "p0-2", "p1-1", "p1-2"]
    assert len(values(one)) == 1


def test_consume_group_whose_commit_at_exit_is_refused_warns_and_exits_0(
        broker: Any, topic_name: str) -> None:
    """The records are printed and consumed; the commit at exit is refused (the group
    has a live member, this run is none: UNKNOWN_MEMBER_ID): a warning, exit 0."""
    create(broker, topic_name, 1)
    send(broker, topic_name, [(None, f"v{i}".encode(), 0) for i in range(3)])
    g = f"g-{topic_name}"
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": g,
                       "enable.auto.commit": False})
    assigned = threading.Event()
    member.subscribe([topic_name], on_assign=lambda c, tps: assigned.set())
    try:
        while not assigned.is_set():  # the group is Stable with one member
            member.poll(0.2)
        proc = spool(broker, "consume", topic_name, "-g", g, "--partition", "0", "--offset",
                     "0", "-n", "2", check=False)
    finally:
        member.close()
    assert (proc.returncode, proc.stdout) == (0, "v0\nv1\n")
    assert proc.stderr.splitlines() == [
        f"spool: warning: the positions were not committed to group '{g}': "
        "Commit failed: Unknown member (UNKNOWN_MEMBER_ID); "
        "a new run of the group starts from its last committed offsets",
        "spool: 2 records consumed"]


def test_consume_isolation_level(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic_name})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic_name, b"committed")
    p.commit_transaction(30)
    args = ("consume", topic_name, "--from-beginning", "--timeout", "1")
    assert spool(broker, *args).stdout == "aborted\ncommitted\n"  # Kafka's default
    assert spool(broker, *args, "--isolation-level", "read_committed").stdout == "committed\n"


def test_consume_binary_values_as_base64_and_hex(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 1)
    cli(broker, "produce", topic_name, "-K", ":", "-H", "h=1", stdin=b"\x00k:\xff\xfe\x01\n")
    args = ("consume", topic_name, "--from-beginning", "--timeout", "1")
    doc = json.loads(spool(broker, *args, "--json", "--encoding", "base64").stdout)
    assert (doc["key"], doc["value"], doc["headers"]) == ("AGs=", "//4B", [["h", "MQ=="]])
    assert spool(broker, *args, "-f", "%k %s %h\\n", "-e", "hex").stdout == "006b fffe01 h=31\n"


def test_produce_null_marker_offsets_and_failed_lines(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 1)
    lines = "a:1\nb:NULL\nno separator\nNULL:4\n"
    proc = cli(broker, "produce", topic_name, "-K", ":", "--null-marker", "NULL",
                 "--print-offsets", stdin=lines, check=False)
    assert proc.returncode == 1
    assert sorted(proc.stdout.splitlines()) == [
        "line 1: partition 0, offset 0", "line 2: partition 0, offset 1",
        "line 4: partition 0, offset 2"]
    assert proc.stderr.splitlines() == [
        "spool: line 3: no key separator ':'; not sent",
        f"spool: 3 records sent to '{topic_name}' (partition 0: offsets 0-2), "
        "1 failed (line 3)"]
    got = spool(broker, "consume", topic_name, "--from-beginning", "--timeout", "1",
                "-f", "%o %K %S %k=%s\\n")
    assert got.stdout == "0 1 1 a=1\n1 1 -1 b=\n2 -1 1 =4\n"

    # --stop-on-error: nothing after the failed line is sent
    stop = cli(broker, "produce", topic_name, "-K", ":", "--stop-on-error",
                 stdin="c:5\nbad\nd:6\n", check=False)
    assert stop.returncode == 1
    assert stop.stderr.splitlines() == [
        "spool: line 2: no key separator ':'; not sent",
        f"spool: 1 record sent to '{topic_name}' (partition 0: offset 3), 1 failed (line 2)"]
    assert spool(broker, "consume", topic_name, "--offset", "3", "--timeout", "1").stdout == "5\n"


def test_message_too_large_says_size_and_limit(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 1, **{"max.message.bytes": "1000"})
    big = "k:" + "x" * 2000 + "\n"
    local = cli(broker, "produce", topic_name, "-K", ":", "-X", "message.max.bytes=1500",
                  stdin="k:ok\n" + big, check=False)
    assert local.stderr.splitlines() == [
        "spool: line 2: record of 2001 bytes is larger than the producer's message.max.bytes "
        "1500 (set it with -X message.max.bytes=N) (MESSAGE_TOO_LARGE)",
        f"spool: 1 record sent to '{topic_name}' (partition 0: offset 0), 1 failed (line 2)"]
    remote = cli(broker, "produce", topic_name, "-K", ":", stdin=big, check=False)
    assert remote.stderr.splitlines() == [
        "spool: line 1: not delivered: record of 2001 bytes, in a batch larger than "
        f"max.message.bytes 1000 of topic '{topic_name}' (MESSAGE_TOO_LARGE)",
        f"spool: 0 records sent to '{topic_name}', 1 failed (line 1)"]


def test_illegal_topic_name_says_the_rule(broker: Any) -> None:
    rule = ("Topic name is invalid: 'a b' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'")
    for args in (["topics", "create", "a b"], ["consume", "a b"]):
        proc = spool(broker, *args, stdin="x\n", check=False)
        assert proc.returncode == 2
        assert one_error_line(proc) == f"spool: {rule} (INVALID_TOPIC_EXCEPTION)"
    # the broker says the same to any client
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    err = admin.create_topics([NewTopic("a b", 1)])["a b"].exception(30)
    assert err is not None and err.args[0].str() == rule


def test_offsets_trim_and_log_dirs(broker: Any, topic_name: str, tmp_path: Path) -> None:
    """kafka-get-offsets, kafka-delete-records and kafka-log-dirs, run in-process
    (tests.helpers.cli: seven calls, ~3 s of interpreter start each as children)."""
    t = topic_name
    create(broker, t, 2)
    send(broker, t, [(None, v.encode(), 0) for v in "abcde"] + [(None, b"x", 1)] * 3)
    assert cli(broker, "offsets", t).stdout == f"{t}:0:5\n{t}:1:3\n"
    future = cli(broker, "offsets", "--topic", t, "--partitions", "0,1", "--time",
                   "99999999999999")
    assert (future.stdout, future.stderr) == (
        "", "spool: 2 partitions with no record at or after 99999999999999 not listed\n")

    trimmed = cli(broker, "topics", "trim", t, "--before-offset", "2", "--partition", "0")
    assert trimmed.stdout.splitlines() == ["Topic" + " " * (len(t) - 3) + "Partition  LowWatermark",
                                           f"{t}  0          2"]
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [{"topic": t, "partition": 1, "offset": -1}],
                                "version": 1}))
    whole = cli(broker, "topics", "trim", "--offset-json-file", str(plan), "--json")
    assert json.loads(whole.stdout) == [{"topic": t, "partition": 1, "low_watermark": 3}]
    past = cli(broker, "topics", "trim", t, "--before-offset", "9", "-p", "0", check=False)
    assert past.returncode == 1 and past.stderr.splitlines() == [
        f"spool: '{t}-0': offset 9 is beyond the high watermark (OFFSET_OUT_OF_RANGE)",
        "spool: 1 of 1 partitions not trimmed"]
    earliest = cli(broker, "offsets", f"{t}:1-", f"{t}:0", "--time", "-2")
    assert earliest.stdout == f"{t}:0:2\n{t}:1:3\n"
    # N-M leaves M out (GetOffsetShell's ranges); earliest-local (-4) is earliest here
    assert cli(broker, "offsets", f"{t}:0-1", "--time", "-4").stdout == f"{t}:0:2\n"

    doc = json.loads(cli(broker, "log-dirs", "describe", "--topic-list", t, "--json").stdout)
    data = broker.data_dir.resolve()
    sizes = {p: sum(f.stat().st_size for f in (data / f"{t}-{p}").glob("*.log")) for p in (0, 1)}
    assert doc == {"version": 1, "brokers": [{"broker": doc["brokers"][0]["broker"], "logDirs": [
        {"logDir": str(data), "error": None, "partitions": [
            {"partition": f"{t}-{p}", "size": sizes[p], "offsetLag": 0, "isFuture": False}
            for p in (0, 1)]}]}]}
    assert min(sizes.values()) > 0
    table = cli(broker, "log-dirs", "describe", "--topic-list", t).stdout.splitlines()
    assert table[0].split() == ["Broker", "LogDir", "Topic", "Partition", "Size", "OffsetLag",
                                "Future"]
    broker_id = str(doc["brokers"][0]["broker"])
    assert [line.split() for line in table[1:]] == [
        [broker_id, str(data), t, str(p), str(sizes[p]), "0", "false"] for p in (0, 1)]


def test_a_port_that_is_not_kafka_is_named() -> None:
    """A server that answers in another protocol where a broker was expected: one line
    within seconds, saying so."""

    class NotKafka(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(1024)
            self.request.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            self.request.recv(1024)  # until the client gives up

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), NotKafka)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    try:
        proc = subprocess.run([*SPOOL, "topics", "list", "--bootstrap-server", address],
                              capture_output=True, text=True, timeout=20)
    finally:
        server.shutdown()
        server.server_close()
    assert one_error_line(proc) == (
        f"spool: cannot reach a broker at {address}: what answered there does not speak "
        "Kafka's protocol: Receive failed: Invalid response size 1213486160 (0..100000000) "
        "(_BAD_MSG)")
