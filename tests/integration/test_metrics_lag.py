"""State metrics, group counts and consumer lag on a real broker's ``/metrics`` (issue 18).

One broker process for the module, with ``metrics.listeners`` on a reserved port; every
check is a scrape, parsed as Prometheus parses it, of what a user reads on a dashboard:

* consumer lag (kafka-exporter's names): a classic group that consumed and committed
  everything has lag 0 on each partition; records produced after that are exactly its
  lag per partition (and its ``lag_sum``) until it consumes and commits them, then 0
  again; a group that only commits (assign + commit) is lag from its commit to the
  high watermark. Group counts (group-coordinator-metrics): the consuming group is
  classic Stable with one member, the committing-only one classic Empty; once the
  consumer closes both are Empty.
* a consumer-protocol (KIP-848) group counts as consumer Stable, then Empty; a share
  group (KIP-932) as share Stable with its member, Empty once it left.
* per-partition log figures equal the partition's offsets and its segment file's size;
  DeleteRecords moves the log start offset (and kafka-exporter's oldest offset); the
  single node is the active controller, leads every partition it hosts, none is
  under-replicated; background flushes (``flush.ms``) are in the flush histogram.
* every expression of ``docs/grafana/spool-dashboard.json`` names only metrics the broker
  exports.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.cluster_proc import reserve_port
from tests.helpers.raw_client import RawClient
from tests.helpers.scrape import Scrape, scrape
from tests.helpers.share import hb

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "spool-dashboard.json"
GCM = "kafka_server_group_coordinator_metrics_"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    held = reserve_port()
    port = held.getsockname()[1]
    b = BrokerProcess(tmp_path_factory.mktemp("metrics-lag") / "data", {
        "metrics.listeners": f"http://127.0.0.1:{port}",
        "offsets.topic.num.partitions": "2",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.num.partitions": "1",
    })
    try:
        b.start()
    finally:
        held.close()
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield b
    b.stop()


def metrics(node) -> Scrape:
    return scrape(node.metrics_url)


def wait_scrape(node, what: str, ok, timeout: float = 30.0) -> Scrape:
    """Scrape until ``ok(scrape)`` (an event the broker reaches on its own: a group's
    state, a background flush); fail saying what was last seen."""
    deadline = time.monotonic() + timeout
    while True:
        s = metrics(node)
        if ok(s):
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


def create(node, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def produce(node, topic: str, counts: dict[int, int]) -> None:
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    for partition, n in counts.items():
        for i in range(n):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def consume(consumer: Consumer, n: int, timeout: float = 30.0) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while got < n:
        assert time.monotonic() < deadline, f"consumed {got} of {n}"
        for m in consumer.consume(n - got, timeout=1.0):
            assert m.error() is None, m.error()
            got += 1
    return got


def lag_of(s: Scrape, group: str, topic: str, partitions: int) -> list[float | None]:
    return [s.value("kafka_consumergroup_lag", consumergroup=group, topic=topic,
                    partition=str(p)) for p in range(partitions)]


def states(s: Scrape, protocol: str) -> dict[str, float]:
    return {dict(labels)["state"]: v
            for labels, v in s.series(f"{GCM}{protocol}_group_count").items()}


def test_lag_per_partition_then_zero_and_classic_group_states(node):
    topic, group = "lagged", "lagging"
    create(node, topic, 3)
    produce(node, topic, {0: 10, 1: 20, 2: 30})
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    consume(c, 60)
    c.commit(asynchronous=False)
    s = metrics(node)
    assert lag_of(s, group, topic, 3) == [0, 0, 0]
    assert [s.value("kafka_consumergroup_current_offset", consumergroup=group, topic=topic,
                    partition=str(p)) for p in range(3)] == [10, 20, 30]
    assert s.value("kafka_consumergroup_members", consumergroup=group) == 1
    assert states(s, "classic") == {"Empty": 0, "PreparingRebalance": 0,
                                    "CompletingRebalance": 0, "Stable": 1, "Dead": 0}

    produce(node, topic, {0: 3, 1: 5})  # the consumer has not read these yet
    auditor = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "auditor"})
    auditor.commit(offsets=[TopicPartition(topic, 2, 12)], asynchronous=False)
    auditor.close()
    s = metrics(node)
    assert lag_of(s, group, topic, 3) == [3, 5, 0]
    assert s.value("kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 8
    assert s.value("kafka_consumergroup_current_offset_sum", consumergroup=group,
                   topic=topic) == 60
    assert [s.value("kafka_topic_partition_current_offset", topic=topic, partition=str(p))
            for p in range(3)] == [13, 25, 30]
    assert lag_of(s, "auditor", topic, 3) == [None, None, 18]  # 30 - 12; no other commit
    assert states(s, "classic")["Stable"] == 1
    assert states(s, "classic")["Empty"] == 1  # the group that only commits
    assert s.value(GCM + "offset_count") == 4  # 3 partitions of one group, 1 of the other

    consume(c, 8)
    c.commit(asynchronous=False)
    s = metrics(node)
    assert lag_of(s, group, topic, 3) == [0, 0, 0]
    assert s.value("kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 0

    c.close()  # leaves the group: Empty, its offsets kept
    s = wait_scrape(node, "the group empty", lambda s: states(s, "classic")["Stable"] == 0)
    assert states(s, "classic") == {"Empty": 2, "PreparingRebalance": 0,
                                    "CompletingRebalance": 0, "Stable": 0, "Dead": 0}
    assert s.value(GCM + "group_count", protocol="classic") == 2
    assert s.value("kafka_consumergroup_members", consumergroup=group) == 0
    assert lag_of(s, group, topic, 3) == [0, 0, 0]


def test_consumer_protocol_group_counts(node):
    topic, group = "modern", "kip848"
    create(node, topic, 2)
    produce(node, topic, {0: 4, 1: 2})
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        consume(c, 6)
        c.commit(asynchronous=False)
        s = wait_scrape(node, "the consumer group reconciled",
                        lambda s: states(s, "consumer")["Stable"] == 1)
        assert states(s, "consumer") == {"Empty": 0, "Assigning": 0, "Reconciling": 0,
                                         "Stable": 1, "Dead": 0}
        assert s.value(GCM + "group_count", protocol="consumer") == 1
        assert s.value("kafka_consumergroup_members", consumergroup=group) == 1
        assert lag_of(s, group, topic, 2) == [0, 0]
    finally:
        c.close()
    s = wait_scrape(node, "the group empty", lambda s: states(s, "consumer")["Stable"] == 0)
    assert states(s, "consumer")["Empty"] == 1


def test_share_group_counts(node):
    create(node, "shared", 1)
    rc = RawClient(node.bootstrap)
    try:
        joined = hb(rc, "sharers", "m1", 0, ["shared"])
        assert joined.error_code == 0
        s = metrics(node)
        assert states(s, "share") == {"Empty": 0, "Stable": 1, "Dead": 0}
        assert s.value(GCM + "group_count", protocol="share") == 1
        assert hb(rc, "sharers", "m1", -1).error_code == 0  # leaves
        s = metrics(node)
        assert states(s, "share") == {"Empty": 1, "Stable": 0, "Dead": 0}
    finally:
        rc.close()


def test_partition_and_log_figures(node):
    topic = "sized"
    create(node, topic, 2, {"flush.ms": "100"})
    produce(node, topic, {0: 7})
    s = metrics(node)
    seg = node.data_dir / f"{topic}-0" / "00000000000000000000.log"
    for p, end in ((0, 7), (1, 0)):
        key = {"topic": topic, "partition": str(p)}
        assert s.value("kafka_log_log_logendoffset", **key) == end
        assert s.value("kafka_log_log_logstartoffset", **key) == 0
        assert s.value("kafka_log_log_numlogsegments", **key) == 1
    assert s.value("kafka_log_log_size", topic=topic, partition="0") == seg.stat().st_size > 0
    assert s.value("kafka_log_log_size", topic=topic, partition="1") == 0

    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10)
    hosted = sum(len(t.partitions) for t in md.topics.values())
    rm = "kafka_server_replicamanager_"
    assert s.value(rm + "partitioncount") == hosted
    assert s.value(rm + "leadercount") == hosted
    assert s.value(rm + "underreplicatedpartitions") == 0
    assert s.value(rm + "underminisrpartitioncount") == 0
    assert s.value(rm + "offlinereplicacount") == 0
    kc = "kafka_controller_kafkacontroller_"
    assert s.value(kc + "activecontrollercount") == 1
    assert s.value(kc + "globaltopiccount") == len(md.topics)
    assert s.value(kc + "globalpartitioncount") == hosted
    assert s.value(kc + "offlinepartitionscount") == 0
    assert s.value("kafka_topic_partitions", topic=topic) == 2
    assert s.value("kafka_brokers") == 1

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 3)])[TopicPartition(topic, 0, 3)].result(30)
    s = metrics(node)
    assert s.value("kafka_log_log_logstartoffset", topic=topic, partition="0") == 3
    assert s.value("kafka_topic_partition_oldest_offset", topic=topic, partition="0") == 3

    flush = "kafka_log_logflushstats_logflushrateandtimems"
    s = wait_scrape(node, "a background flush (flush.ms=100)",
                    lambda s: s.value(flush + "_count") >= 1)
    assert s.value(flush + "_bucket", le="+Inf") == s.value(flush + "_count")
    assert s.value(flush + "_sum") > 0


PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan", "le", "sum", "min", "max", "avg", "count", "topk",
    "bottomk", "quantile", "stddev", "stdvar", "count_values", "group",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names or matchers, strings, durations or dashboard variables."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # range durations
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", e)
    e = re.sub(r"\$\{?\w+\}?", "", e)  # $var, ${var}
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if rest.startswith("(") or m.group().lower() in PROMQL_WORDS:
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # 5m, 1e3, 0.99
        names.add(m.group())
    return names


def dashboard_queries(board: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    out = []

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(board["panels"]):
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r}", t["expr"]))
    for v in board.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"] if isinstance(v["query"], str) else v["query"]["query"]
            out.append((f"variable {v['name']!r}", q))
    return out


def test_dashboard_names_only_exported_metrics(node):
    board = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(board)
    # a produce/consume round trip first, so that per-request series exist
    create(node, "dash", 1)
    produce(node, "dash", {0: 1})
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "dash",
                  "enable.auto.commit": False})  # assigned: no group made
    c.assign([TopicPartition("dash", 0, 0)])
    consume(c, 1)
    c.close()
    exported = metrics(node).sample_names()
    assert len(queries) >= 20
    unknown = {}
    for where, q in queries:
        lv = re.fullmatch(r"\s*label_values\((.*?)(?:,\s*\w+)?\)\s*", q)
        names = metric_names(lv.group(1) if lv else q)
        assert names, f"{where}: no metric in {q!r}"
        if names - exported:
            unknown[where] = sorted(names - exported)
    assert unknown == {}
