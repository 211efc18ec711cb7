"""The ``spool`` client commands, run as real processes against a real broker.

Covers: topics create/list/describe/alter/delete (and the one-line error for
an existing or missing topic), produce from stdin with keys, headers, an
explicit partition and compression, consume back with --json, --format,
--max-messages, --offset and --from-time (keyed records must land on
``(murmur2(key) & 0x7fffffff) % n``, the Java client's rule), configs
describe/alter round-trips, and a clear, bounded error for an unreachable
bootstrap server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.helpers.murmur2 import partition_for as partition_of

pytestmark = pytest.mark.timeout(120)

SPOOL = [sys.executable, "-m", "spool.cli.main"]


def spool(
    broker: Any, *args: str, stdin: str | None = None, timeout: float = 45, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [*SPOOL, *args]
    if broker is not None:
        cmd += ["--bootstrap-server", broker.bootstrap]
    proc = subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{args} exited {proc.returncode}: {proc.stderr}")
    return proc


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spool: "), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def consume_json(broker: Any, topic: str, *args: str) -> list[dict[str, Any]]:
    proc = spool(broker, "consume", topic, "--json", "--timeout", "5", *args)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def describe(broker: Any, topic: str) -> dict[str, Any]:
    docs = json.loads(spool(broker, "topics", "describe", topic, "--json").stdout)
    assert [d["name"] for d in docs] == [topic]
    return docs[0]


def test_topics_lifecycle(broker: Any, topic_name: str) -> None:
    spool(
        broker,
        "topics",
        "create",
        topic_name,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
    )

    assert topic_name in spool(broker, "topics", "list").stdout.splitlines()
    listed = {t["name"]: t for t in json.loads(spool(broker, "topics", "list", "--json").stdout)}
    assert listed[topic_name]["partitions"] == 3
    assert listed[topic_name]["replication_factor"] == 1

    doc = describe(broker, topic_name)
    assert [p["partition"] for p in doc["partitions"]] == [0, 1, 2]
    for p in doc["partitions"]:
        assert p["leader"] >= 0
        assert p["replicas"] == [p["leader"]]
        assert p["isr"] == [p["leader"]]
        assert p["offline"] == [] and p["adding"] == [] and p["removing"] == []
    assert doc["configs"] == {"retention.ms": "3600000"}
    assert doc["replication_factor"] == 1
    plain = spool(broker, "topics", "describe", topic_name).stdout.splitlines()
    node = doc["partitions"][0]["leader"]
    assert plain == [
        f"Topic: {topic_name}\tTopicId: {doc['topic_id']}\tPartitionCount: 3"
        f"\tReplicationFactor: 1\tConfigs: retention.ms=3600000",
        *(f"\tTopic: {topic_name}\tPartition: {i}\tLeader: {node}\tReplicas: {node}"
          f"\tIsr: {node}\tOffline: " for i in range(3))]
    healthy = spool(broker, "topics", "under-replicated", topic_name, "--json")
    assert (json.loads(healthy.stdout), healthy.stderr) == ([], "no under-replicated partitions\n")

    again = spool(broker, "topics", "create", topic_name, "--partitions", "1", check=False)
    line = one_error_line(again)
    assert line == f"spool: topic '{topic_name}' already exists (TOPIC_ALREADY_EXISTS)"
    spool(broker, "topics", "create", topic_name, "--if-not-exists")

    spool(broker, "topics", "alter", topic_name, "--partitions", "5")
    assert [p["partition"] for p in describe(broker, topic_name)["partitions"]] == [0, 1, 2, 3, 4]

    spool(broker, "topics", "delete", topic_name)
    deadline = time.monotonic() + 10
    while topic_name in spool(broker, "topics", "list").stdout.splitlines():
        assert time.monotonic() < deadline, "deleted topic still listed"
        time.sleep(0.2)
    gone = one_error_line(spool(broker, "topics", "delete", topic_name, check=False))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in gone
    missing = one_error_line(spool(broker, "topics", "describe", topic_name, check=False))
    assert missing == f"spool: topic '{topic_name}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"


def test_produce_keys_headers_consume_json(broker: Any, topic_name: str) -> None:
    n = 4
    spool(broker, "topics", "create", topic_name, "--partitions", str(n))
    keys = [f"key-{i}" for i in range(40)]
    lines = "".join(f"{k}:value {i}:{k}\n" for i, k in enumerate(keys))
    proc = spool(
        broker,
        "produce",
        topic_name,
        "--key-separator",
        ":",
        "--headers",
        "h1=a,h2=b",
        "--acks",
        "all",
        stdin=lines,
    )
    counts = [sum(partition_of(k.encode(), n) == p for k in keys) for p in range(n)]
    where = ", ".join(f"partition {p}: offsets 0-{c - 1}" for p, c in enumerate(counts))
    assert proc.stderr.strip().splitlines() == [
        f"spool: 40 records sent to '{topic_name}' ({where})"]

    records = consume_json(broker, topic_name, "--from-beginning", "--max-messages", "40")
    assert len(records) == 40
    by_key = {r["key"]: r for r in records}
    assert sorted(by_key) == sorted(keys)
    for i, k in enumerate(keys):
        r = by_key[k]
        assert r["topic"] == topic_name
        assert r["value"] == f"value {i}:{k}"  # split at the first separator only
        assert r["headers"] == [["h1", "a"], ["h2", "b"]]
        assert r["partition"] == partition_of(k.encode(), n), k
        assert isinstance(r["timestamp"], int) and r["timestamp"] > 0
    for p in range(n):  # per partition: offsets 0.. in production order
        mine = [r for r in records if r["partition"] == p]
        assert [r["offset"] for r in mine] == list(range(len(mine)))
        assert [r["key"] for r in mine] == [k for k in keys if partition_of(k.encode(), n) == p]


def test_produce_partition_compression_and_format(broker: Any, topic_name: str) -> None:
    spool(broker, "topics", "create", topic_name, "--partitions", "3")
    spool(
        broker,
        "produce",
        topic_name,
        "--partition",
        "2",
        "--compression",
        "gzip",
        "--acks",
        "1",
        "-K",
        "=",
        stdin="a=1\nb=2\n",
    )
    out = spool(
        broker,
        "consume",
        topic_name,
        "--partition",
        "2",
        "--from-beginning",
        "--max-messages",
        "2",
        "--timeout",
        "5",
        "--format",
        "%p|%o|%k|%s|%K\\n",
    ).stdout
    assert out == "2|0|a|1|1\n2|1|b|2|1\n"
    bad = spool(broker, "produce", topic_name, "-K", "=", stdin="novalue\n", check=False)
    assert bad.returncode != 0 and "no key separator" in bad.stderr


def test_consume_offset_and_from_time(broker: Any, topic_name: str) -> None:
    spool(broker, "topics", "create", topic_name, "--partitions", "1")
    spool(broker, "produce", topic_name, stdin="".join(f"old-{i}\n" for i in range(5)))
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    spool(broker, "produce", topic_name, stdin="".join(f"new-{i}\n" for i in range(3)))

    def values(*args: str) -> list[str]:
        return [r["value"] for r in consume_json(broker, topic_name, *args)]

    first = consume_json(broker, topic_name, "--from-beginning", "--max-messages", "1")
    assert first[0]["key"] is None and first[0]["headers"] == []
    assert (first[0]["partition"], first[0]["offset"], first[0]["value"]) == (0, 0, "old-0")

    news = ["new-0", "new-1", "new-2"]
    assert values("--from-time", str(middle_ms), "--max-messages", "3") == news
    iso = datetime.fromtimestamp(middle_ms / 1000, UTC).isoformat()
    assert values("--from-time", iso, "--max-messages", "3") == news
    assert values("--offset", "3", "--partition", "0", "--max-messages", "3") == [
        "old-3",
        "old-4",
        "new-0",
    ]
    assert values("--offset=-2", "--max-messages", "2") == ["new-1", "new-2"]
    # --from-time after the last record: nothing, and it stops on --timeout
    assert values("--from-time", str(int(time.time() * 1000) + 60_000), "--timeout", "2") == []


def test_configs_roundtrip(broker: Any, topic_name: str) -> None:
    spool(broker, "topics", "create", topic_name, "--partitions", "1")
    spool(
        broker,
        "configs",
        "alter",
        "--topic",
        topic_name,
        "--add-config",
        "retention.ms=123456,cleanup.policy=[compact,delete]",
    )

    def overrides() -> dict[str, dict[str, Any]]:
        out = spool(broker, "configs", "describe", "--topic", topic_name, "--json").stdout
        return {e["name"]: e for e in json.loads(out)}

    got = overrides()
    assert got["retention.ms"]["value"] == "123456"
    assert got["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert got["cleanup.policy"]["value"] == "compact,delete"
    assert describe(broker, topic_name)["configs"]["retention.ms"] == "123456"
    plain = spool(broker, "configs", "describe", "--topic", topic_name).stdout
    assert any(
        line.split()[:3] == ["retention.ms", "123456", "DYNAMIC_TOPIC_CONFIG"]
        for line in plain.splitlines()
    ), plain

    spool(broker, "configs", "alter", "--topic", topic_name, "--delete-config", "retention.ms")
    assert "retention.ms" not in overrides()
    everything = json.loads(
        spool(broker, "configs", "describe", "--topic", topic_name, "--all", "--json").stdout
    )
    retention = [e for e in everything if e["name"] == "retention.ms"]
    assert retention and retention[0]["source"] != "DYNAMIC_TOPIC_CONFIG"

    leader = describe(broker, topic_name)["partitions"][0]["leader"]
    broker_cfg = json.loads(
        spool(broker, "configs", "describe", "--broker", str(leader), "--all", "--json").stdout
    )
    assert {e["name"] for e in broker_cfg} >= {"num.partitions", "log.retention.ms"}
    unknown = one_error_line(spool(broker, "configs", "describe", "--broker", "4242", check=False))
    assert "broker 4242 is not in the cluster" in unknown

    bad = spool(broker, "configs", "alter", "--topic", topic_name, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_unreachable_bootstrap_is_one_line_error() -> None:
    """A refused connection is reported within seconds, not after the 30 s default timeout."""
    for args in (["topics", "list"], ["consume", "nope"], ["produce", "nope"]):
        # (a 30 s wait would overrun the 20 s timeout: no clock read, no timing assertion)
        proc = spool(
            None, *args, "--bootstrap-server", "127.0.0.1:1", stdin="x\n", timeout=20, check=False
        )
        assert one_error_line(proc) == (
            "spool: cannot reach a broker at 127.0.0.1:1: "
            "Connect to ipv4#127.0.0.1:1 failed: Connection refused (_TRANSPORT)"), args
    bad = spool(None, "topics", "list", "-X", "no.such.setting=1", "--bootstrap-server",
                "127.0.0.1:1", check=False)
    assert one_error_line(bad) == ('spool: bad -X setting: No such configuration property: '
                                   '"no.such.setting" (_INVALID_ARG)')


def test_broker_config_override_roundtrip(broker: Any) -> None:
    """A per-broker override is DYNAMIC_BROKER_CONFIG, as in Kafka (kafka-configs --broker 0)."""

    def entries() -> dict[str, dict[str, Any]]:
        out = spool(broker, "configs", "describe", "--broker", "0", "--json").stdout
        return {e["name"]: e for e in json.loads(out)}

    # longer than the default week: harmless to the other tests on this broker
    spool(broker, "configs", "alter", "--broker", "0", "--add-config", "log.retention.ms=604800001")
    try:
        got = entries()["log.retention.ms"]
        assert (got["value"], got["source"]) == ("604800001", "DYNAMIC_BROKER_CONFIG")
    finally:
        spool(broker, "configs", "alter", "--broker", "0", "--delete-config", "log.retention.ms")
    assert "log.retention.ms" not in entries()


def test_replication_commands_refuse_bad_input_before_asking(tmp_path) -> None:
    """Bad options or plans: one line and exit 2, nothing sent (no broker listens here)."""
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    two_dirs = tmp_path / "dirs.json"
    two_dirs.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}))
    cases = [
        (["elect-leaders", "--type", "preferred"],
         "spool: give either --topic (with --partition) or --all"),
        (["elect-leaders", "--type", "preferred", "--all", "--topic", "t"],
         "spool: give either --topic (with --partition) or --all"),
        (["elect-leaders", "--type", "unclean", "--all", "--partition", "0"],
         "spool: --partition needs --topic"),
        (["reassign", "execute", "--file", str(tmp_path / "missing.json")],
         f"spool: cannot read {tmp_path / 'missing.json'}: No such file or directory"),
        (["reassign", "verify", "--file", str(bad_json)], f"spool: {bad_json}: not JSON"),
        (["reassign", "cancel", "--file", str(two_dirs)],
         f"spool: {two_dirs}: t-0: size of replicas list [1, 2] is different from size of "
         "log dirs list ['any']"),
    ]
    for args, line in cases:
        proc = spool(None, *args, "--bootstrap-server", "127.0.0.1:1", check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert one_error_line(proc).startswith(line), (args, proc.stderr)
