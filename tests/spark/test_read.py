"""Batch read: exact offset ranges, columns, splitting, subscriptions, time travel."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading

import pytest
from confluent_kafka import Producer

from spool.spark.fetch import DataLossError, read_range
from spool.spark.options import parse_options
from tests.spark.conftest import create_topic, produce

BASE_TS = 1_700_000_000_000


@pytest.fixture
def filled(broker, topic_name):
    """3 partitions x 10 records; record i of partition p: key k{p}-{i}, ts BASE_TS + 1000*i."""
    create_topic(broker.bootstrap, topic_name, 3)
    produce(
        broker.bootstrap,
        topic_name,
        [
            {
                "key": f"k{p}-{i}".encode(),
                "value": f"v{p}-{i}".encode(),
                "partition": p,
                "timestamp": BASE_TS + 1000 * i,
                "headers": [("n", str(i).encode()), ("p", None)],
            }
            for p in range(3)
            for i in range(10)
        ],
    )
    return topic_name


def read(spark, bootstrap, **opts):
    r = spark.read.format("spool").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_exact_offset_ranges_return_exactly_those_records(spark, broker, filled):
    df = read(
        spark,
        broker.bootstrap,
        subscribe=filled,
        includeHeaders="true",
        startingOffsets=json.dumps({filled: {"0": 2, "1": -2, "2": 9}}),
        endingOffsets=json.dumps({filled: {"0": 5, "1": 3, "2": -1}}),
    )
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    got = [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows]
    want = [(0, i, f"k0-{i}".encode(), f"v0-{i}".encode()) for i in (2, 3, 4)]
    want += [(1, i, f"k1-{i}".encode(), f"v1-{i}".encode()) for i in (0, 1, 2)]
    want += [(2, 9, b"k2-9", b"v2-9")]
    assert got == want
    first = rows[0]
    assert first.topic == filled
    assert first.timestamp.astimezone(dt.UTC) == dt.datetime.fromtimestamp((BASE_TS + 2000) / 1000, dt.UTC)
    assert first.timestampType == 0
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in first.headers] == [("n", b"2"), ("p", None)]


def test_schema_is_sparks_kafka_schema(spark, broker, filled):
    df = read(spark, broker.bootstrap, subscribe=filled)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )


def test_min_partitions_splits_ranges_without_losing_records(spark, broker, filled):
    df = read(spark, broker.bootstrap, subscribe=filled, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    rows = df.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, i) for p in range(3) for i in range(10)]


def test_assign_and_pattern(spark, broker, filled):
    df = read(spark, broker.bootstrap, assign=json.dumps({filled: [1]}))
    assert {r.partition for r in df.select("partition").collect()} == {1}
    assert df.count() == 10
    pattern = filled[:-8] + ".{8}"
    assert read(spark, broker.bootstrap, subscribePattern=pattern).count() == 30


def test_as_of_a_point_in_time(spark, broker, filled):
    # Records with timestamp < BASE_TS + 4000: offsets 0..3 of each partition.
    df = read(spark, broker.bootstrap, subscribe=filled, endingTimestamp=str(BASE_TS + 4000))
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(p, i) for p in range(3) for i in range(4)]
    by_part = json.dumps({filled: {"0": BASE_TS + 8000, "1": BASE_TS, "2": BASE_TS + 60_000}})
    df = read(spark, broker.bootstrap, subscribe=filled, startingOffsetsByTimestamp=by_part,
              startingOffsetsByTimestampStrategy="latest")
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(0, 8), (0, 9)] + [(1, i) for i in range(10)]


def test_bad_options_fail_with_the_option_named(spark, broker, filled):
    with pytest.raises(Exception, match="subscribe, subscribePattern, assign"):
        read(spark, broker.bootstrap).collect()
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, broker.bootstrap, subscribe=filled, startingOffsets="{nope").collect()


def test_read_committed_reads_plain_records(spark, broker, filled):
    df = read(spark, broker.bootstrap, subscribe=filled, **{"kafka.isolation.level": "read_committed"})
    assert df.count() == 30


def test_reads_over_sasl_ssl_with_scram(spark, tmp_path, topic_name):
    """kafka.security.protocol / kafka.sasl.* / kafka.ssl.* reach both sides: the driver's
    look-ups (librdkafka) and the executors' Fetch path (Spool's own client)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.helpers.secure_broker import SecureBroker

    with SecureBroker(tmp_path / "data", listeners=("SASL_SSL",),
                      scram_users={"alice": "alice-secret"}) as b:
        conf = b.confluent("alice", "SCRAM-SHA-512")
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
        p = Producer(conf)
        for i in range(20):
            p.produce(topic_name, value=b"s%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        options = {f"kafka.{k}": str(v) for k, v in conf.items() if k != "bootstrap.servers"}
        df = read(spark, b.bootstrap(), subscribe=topic_name, **options)
        assert sorted(bytes(r.value) for r in df.collect()) == sorted(b"s%d" % i for i in range(20))


def _fetch_threads():
    return [t for t in threading.enumerate() if t.name == "spool-fetch"]


def _open_sockets():
    """This process's sockets (Linux: /proc/self/fd)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.startswith("socket:"):
            out.add(target)
    return out


def test_a_read_closed_early_stops_its_fetch_thread_and_closes_its_sockets(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 1024, "linger.ms": 5})
    for i in range(2000):  # batches of ~1 KiB: many Fetch requests of 1 KiB
        p.produce(topic_name, value=b"v%05d" % i, partition=0)
    assert p.flush(30) == 0
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic_name,
                          "kafka.max.partition.fetch.bytes": "1024"}, for_read=True)
    sockets = _open_sockets()
    batches = read_range(opts, topic_name, 0, 0, 2000)
    first = next(batches)
    assert 0 < first.num_rows < 2000
    assert len(_fetch_threads()) == 1  # reading ahead meanwhile
    batches.close()  # as Spark does when a query stops reading (e.g. a limit)
    assert _fetch_threads() == []
    assert _open_sockets() <= sockets


def test_a_read_raises_the_fetch_threads_error(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"v", "partition": 0}] * 10)
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic_name,
                          "failOnDataLoss": "true"}, for_read=True)
    with pytest.raises(DataLossError, match="beyond the end of the log"):
        list(read_range(opts, topic_name, 0, 100, 200))
    assert _fetch_threads() == []
