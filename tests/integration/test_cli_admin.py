"""Admin commands against the session broker, run in-process (``tests.helpers.cli``):
``spool api-versions`` (kafka-broker-api-versions), ``cluster describe``, ``configs alter
--add-config-file`` and the broker's refusals naming the key and what it accepts,
``reassign verify --json``."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import API_BY_KEY, ApiVersionsRequest
from tests.helpers.cli import spool_cli
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)


def test_api_versions_as_kafkas_tool_prints_them(broker):
    with RawClient(broker.bootstrap) as rc:
        answer = rc.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                       client_software_version="0"))
    served = answer.api_keys
    features = {f.name: f.max_version_level for f in answer.finalized_features}
    assert features  # metadata.version at least
    [node] = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
        timeout=10).brokers
    host, port = broker.bootstrap.split(":")
    [doc] = json.loads(spool_cli("api-versions", "--json", "-b", broker.bootstrap).stdout)
    assert (doc["id"], doc["host"], doc["port"], doc["rack"]) == (node, host, int(port), None)
    assert doc["apis"] == [{"api_key": k.api_key, "name": API_BY_KEY[k.api_key].name,
                            "min_version": k.min_version, "max_version": k.max_version,
                            "usable": min(k.max_version, API_BY_KEY[k.api_key].valid_versions[1])}
                           for k in sorted(served, key=lambda k: k.api_key)]
    lines = spool_cli("api-versions", "-b", broker.bootstrap).stdout.splitlines()
    produce = next(a for a in doc["apis"] if a["api_key"] == 0)
    assert lines[0] == f"{host}:{port} (id: {node} rack: null) -> ("
    assert lines[1] == (f"\tProduce(0): {produce['min_version']} to {produce['max_version']} "
                        f"[usable: {produce['usable']}],")
    unserved = sorted(k for k, e in API_BY_KEY.items()
                      if "broker" in e.listeners and k not in {a["api_key"] for a in doc["apis"]})
    assert lines[len(doc["apis"]) + 1:len(doc["apis"]) + 1 + len(unserved)] == [
        f"\t{API_BY_KEY[k].name}({k}): UNSUPPORTED" + ("," if k != unserved[-1] else "")
        for k in unserved]
    assert lines[len(doc["apis"]) + 1 + len(unserved)] == ")"
    assert doc["finalized_features"] == features
    assert lines[len(doc["apis"]) + 2 + len(unserved):] == [
        "finalized features: " + ", ".join(f"{n}={v}" for n, v in sorted(features.items()))]
    down = spool_cli("api-versions", "-b", "127.0.0.1:1", "--timeout", "1")
    assert (down.returncode, down.stderr) == (1, (  # librdkafka's words, as the other commands
        "spool: cannot reach a broker at 127.0.0.1:1: Connect to 127.0.0.1:1 failed: "
        "Connection refused (_TRANSPORT)\n"))


def test_add_config_file_and_refusals_that_name_the_key(broker, topic_name, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    good = tmp_path / "topic.properties"
    good.write_text("# kept a day, compacted too\nretention.ms = 86400000\n"
                    "cleanup.policy=compact,delete\nmax.message.bytes: 2048\n")

    def configs(*args: str):
        return spool_cli("configs", *args, "--topic", topic_name, "-b", broker.bootstrap)

    done = configs("alter", "--add-config-file", str(good))
    assert (done.returncode, done.stderr) == (0, f"configs of topic '{topic_name}' altered\n")
    assert {(e["name"], e["value"], e["source"]) for e in json.loads(
        configs("describe", "--json").stdout)} == {
        ("retention.ms", "86400000", "DYNAMIC_TOPIC_CONFIG"),
        ("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG"),
        ("max.message.bytes", "2048", "DYNAMIC_TOPIC_CONFIG")}
    bad = tmp_path / "bad.properties"
    for text, line in [
        ("retention.ms=abc\n", "retention.ms=abc: expected an integer >= -1"),
        ("cleanup.policy=forever\n",
         "cleanup.policy=forever: expected a comma-separated list of compact, delete"),
        ("message.timestamp.type=Now\n",
         "message.timestamp.type=Now: expected one of CreateTime, LogAppendTime"),
        ("retention.msec=1\n",
         "unknown topic config retention.msec (did you mean 'retention.ms'?)"),
    ]:
        bad.write_text(text)
        refused = configs("alter", "--add-config-file", str(bad))
        assert (refused.returncode, refused.stderr) == (
            1, f"spool: '{topic_name}': {line} (INVALID_CONFIG)\n")
    both = configs("alter", "--add-config-file", str(good), "--add-config", "retention.ms=1")
    assert (both.returncode, both.stderr) == (
        2, "spool: give --add-config or --add-config-file, not both\n")
    missing = configs("alter", "--add-config-file", str(tmp_path / "none.properties"))
    assert (missing.returncode, missing.stderr) == (
        1, f"spool: cannot read --add-config-file {tmp_path / 'none.properties'}: "
           "No such file or directory\n")


def test_reassign_verify_json(broker, topic_name, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    [node] = admin.list_topics(timeout=10).brokers
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [node]},
        {"topic": topic_name, "partition": 1, "replicas": [node + 1]}]}))
    got = spool_cli("reassign", "verify", "--file", str(plan), "--json", "-b", broker.bootstrap)
    assert got.returncode == 1
    assert json.loads(got.stdout) == [
        {"topic": topic_name, "partition": 0, "status": "completed", "replicas": [node],
         "target": [node]},
        {"topic": topic_name, "partition": 1, "status": "elsewhere", "replicas": [node],
         "target": [node + 1]}]
    assert got.stderr == "spool: 1 partition of the plan is not where it says\n"


def test_cluster_describe_on_a_single_node(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(10)
    described = admin.describe_cluster(request_timeout=10).result(15)
    md = admin.list_topics(timeout=10)
    held = sum(len(t.partitions) for t in md.topics.values())
    host, port = broker.bootstrap.split(":")
    doc = json.loads(spool_cli("cluster", "describe", "--json", "-b", broker.bootstrap).stdout)
    assert doc == {"cluster_id": described.cluster_id, "controller_id": described.controller.id,
                   "brokers": [{"id": described.controller.id, "host": host, "port": int(port),
                                "rack": None, "fenced": False, "leaders": held,
                                "replicas": held}]}
    text = spool_cli("cluster", "describe", "-b", broker.bootstrap).stdout.splitlines()
    assert text[0] == f"ClusterId: {described.cluster_id}  Controller: {described.controller.id}"
    assert text[2].split() == [str(described.controller.id), broker.bootstrap, "-", "no",
                               str(held), str(held)]


def test_json_of_what_was_done(broker, topic_name, tmp_path):
    """--json on the commands that otherwise only confirm on stderr: one document on stdout,
    stderr empty: topics create (also --validate-only, --if-not-exists), alter and delete
    (--if-exists), configs alter, groups delete, reassign execute and cancel."""
    def run(*args: str) -> object:
        done = spool_cli(*args, "--json", "-b", broker.bootstrap)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        return json.loads(done.stdout)

    absent = f"absent-{topic_name}"
    assert run("topics", "create", topic_name, "-p", "1", "-c", "retention.ms=60000") == {
        "topic": topic_name, "created": True, "validate_only": False, "partitions": 1,
        "replication_factor": None, "configs": {"retention.ms": "60000"}}
    assert run("topics", "create", topic_name, "--if-not-exists") == {
        "topic": topic_name, "created": False, "validate_only": False, "partitions": None,
        "replication_factor": None, "configs": {}}
    assert run("topics", "create", absent, "-p", "2", "-r", "1", "--validate-only") == {
        "topic": absent, "created": False, "validate_only": True, "partitions": 2,
        "replication_factor": 1, "configs": {}}
    assert run("topics", "alter", topic_name, "-p", "2") == {"topic": topic_name,
                                                              "partitions": 2}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[topic_name].partitions) == 2 and absent not in topics

    assert run("configs", "alter", "--topic", topic_name, "--add-config",
               "segment.ms=3600000,cleanup.policy=[compact,delete]",
               "--delete-config", "retention.ms") == {
        "resource": {"type": "topic", "name": topic_name},
        "set": {"cleanup.policy": "compact,delete", "segment.ms": "3600000"},
        "deleted": ["retention.ms"]}
    assert {e["name"]: e["value"] for e in run("configs", "describe", "--topic", topic_name)
            } == {"cleanup.policy": "compact,delete", "segment.ms": "3600000"}

    [node] = admin.list_topics(timeout=10).brokers
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 1, "replicas": [node]}]}))
    assert run("reassign", "execute", "--file", str(plan)) == {
        "rollback": {"version": 1, "partitions": [
            {"topic": topic_name, "partition": 1, "replicas": [node], "log_dirs": ["any"]}]},
        "started": [{"topic": topic_name, "partition": 1, "replicas": [node]}],
        "failed": []}
    assert run("reassign", "cancel", "--file", str(plan)) == {"cancelled": [], "failed": []}

    group = f"g-{topic_name}"
    spool_cli("groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest",
              "--execute", "-b", broker.bootstrap)  # commits: the group exists, Empty
    assert run("groups", "delete", "-g", group) == {"deleted": [group]}
    assert run("topics", "delete", topic_name, absent, "--if-exists") == {
        "deleted": [topic_name], "absent": [absent]}
    assert topic_name not in admin.list_topics(timeout=10).topics
