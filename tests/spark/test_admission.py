"""Admission control of the streaming source, checked as a user does: in the query's progress.

maxBytesPerTrigger (estimated from the partition's log size on the leader),
maxOffsetsPerTrigger with the lag figures (SourceProgress.metrics stays empty
for a Python source: spool.spark.lag computes Kafka's figures from the
progress), minOffsetsPerTrigger under availableNow (the run still reaches
its target), minOffsetsPerTrigger holding a trigger back, maxTriggerDelay
letting a small backlog through.
"""

from __future__ import annotations

import json
import math
import time

import pytest
from confluent_kafka import Producer

from spool.protocol._generated import DescribeLogDirsRequest
from spool.protocol._generated.describe_log_dirs_request import DescribableLogDirTopic
from spool.spark.lag import offsets_behind_latest, partition_lag
from spool.spark.options import parse_options
from tests.helpers.raw_client import RawClient
from tests.spark.conftest import create_topic, produce

pytestmark = pytest.mark.timeout(180)


def start(spark, bootstrap, topic, checkpoint, trigger, **opts):
    r = (spark.readStream.format("spool").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in opts.items():
        r = r.option(k, v)
    return (r.load().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
            .trigger(**trigger).start())


def available_now(spark, bootstrap, topic, checkpoint, **opts) -> list:
    """The progress of every micro-batch that read records, in order."""
    q = start(spark, bootstrap, topic, checkpoint, {"availableNow": True}, **opts)
    assert q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return [p.sources[0] for p in q.recentProgress if p.numInputRows > 0]


def wait_for(q, predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert q.exception() is None, q.exception()
        found = [p for p in q.recentProgress if predicate(p)]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_max_bytes_per_trigger_admits_the_estimated_bytes(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"%04d" % i + b"x" * 996} for i in range(200)])
    with RawClient(broker.bootstrap) as c:
        resp = c.request(35, 2, DescribeLogDirsRequest(
            topics=[DescribableLogDirTopic(topic=topic_name, partitions=[0])]))
    (size,) = [p.partition_size for r in resp.results for t in r.topics for p in t.partitions]
    cap = 80_000
    # The documented estimate: bytes per offset = partition size / offsets in the log, and a
    # trigger admits floor(backlog * cap / (backlog * bytes per offset)) while that is short of
    # the backlog.
    per_offset = size / 200
    expected, left = [], 200
    while left:
        n = left if left * per_offset <= cap else max(1, math.floor(left * cap / (left * per_offset)))
        expected.append(n)
        left -= n
    assert 70 <= expected[0] < 80  # ~1 KiB records: fewer than 80 fit in 80 000 bytes
    batches = available_now(spark, broker.bootstrap, topic_name, tmp_path / "cp",
                            maxBytesPerTrigger=str(cap))
    assert [b.numInputRows for b in batches] == expected
    assert json.loads(batches[-1].endOffset) == {topic_name: {"0": 200}}


def test_max_offsets_per_trigger_and_lag_from_progress(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name,
            [{"value": b"a", "partition": 0}] * 100 + [{"value": b"b", "partition": 1}] * 50)
    batches = available_now(spark, broker.bootstrap, topic_name, tmp_path / "cp",
                            maxOffsetsPerTrigger="60")
    # 60 per trigger, shared 2:1 as the backlogs are
    assert [b.numInputRows for b in batches] == [60, 60, 30]
    assert [json.loads(b.endOffset)[topic_name] for b in batches] == [
        {"0": 40, "1": 20}, {"0": 80, "1": 40}, {"0": 100, "1": 50}]
    # A Python source cannot fill SourceProgress.metrics (no ReportsSourceMetrics in PySpark's
    # JVM classes for it); the same figures come from endOffset and latestOffset.
    assert [b.metrics for b in batches] == [{}, {}, {}]
    assert [partition_lag(b) for b in batches] == [
        {topic_name: {0: 60, 1: 30}}, {topic_name: {0: 20, 1: 10}}, {topic_name: {0: 0, 1: 0}}]
    assert offsets_behind_latest(batches[0]) == {
        "minOffsetsBehindLatest": "30", "maxOffsetsBehindLatest": "60",
        "avgOffsetsBehindLatest": "45.0"}


def test_min_offsets_under_available_now_still_reads_to_the_target(spark, broker, topic_name,
                                                                   tmp_path):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"v"}] * 250)
    batches = available_now(spark, broker.bootstrap, topic_name, tmp_path / "cp",
                            minOffsetsPerTrigger="100", maxOffsetsPerTrigger="100",
                            maxTriggerDelay="1h")
    # Kafka's source would hold the last 50 back (fewer than 100) and the run would end there.
    assert [b.numInputRows for b in batches] == [100, 100, 50]


@pytest.fixture
def every_trigger_reported(spark):
    """Progress for every trigger, also those that run no batch (default: one per 10 s)."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(key)
    spark.conf.set(key, "0")
    yield
    spark.conf.set(key, before)


def test_min_offsets_per_trigger_holds_small_backlogs(spark, broker, topic_name, tmp_path,
                                                      every_trigger_reported):
    create_topic(broker.bootstrap, topic_name, 1)
    q = start(spark, broker.bootstrap, topic_name, tmp_path / "cp",
              {"processingTime": "100 milliseconds"},
              minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    try:
        wait_for(q, lambda p: True, "the first trigger")
        produce(broker.bootstrap, topic_name, [{"value": b"v"}] * 30)
        # the source saw the 30 records and admitted none of them
        seen = wait_for(q, lambda p: json.loads(p.sources[0].latestOffset or "{}")
                        == {topic_name: {"0": 30}}, "a trigger that sees 30 records")
        assert seen.numInputRows == 0
        produce(broker.bootstrap, topic_name, [{"value": b"v"}] * 30)
        wait_for(q, lambda p: p.numInputRows > 0, "a batch")
        assert [p.numInputRows for p in q.recentProgress if p.numInputRows] == [60]
    finally:
        q.stop()


def test_max_trigger_delay_admits_a_small_backlog(spark, broker, topic_name, tmp_path,
                                                  every_trigger_reported):
    create_topic(broker.bootstrap, topic_name, 1)
    q = start(spark, broker.bootstrap, topic_name, tmp_path / "cp",
              {"processingTime": "100 milliseconds"},
              minOffsetsPerTrigger="1000", maxTriggerDelay="2s")
    try:
        wait_for(q, lambda p: True, "the first trigger")
        # one record batch, so no trigger can see part of the 10
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000})
        for _ in range(10):
            p.produce(topic_name, b"v", partition=0)
        assert p.flush(30) == 0
        wait_for(q, lambda p: p.numInputRows > 0, "a batch after maxTriggerDelay")
        assert [p.numInputRows for p in q.recentProgress if p.numInputRows] == [10]
    finally:
        q.stop()


def test_admission_options_are_checked():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    o = parse_options({**base, "maxBytesPerTrigger": "64m", "minOffsetsPerTrigger": "5",
                       "maxTriggerDelay": "30s"}, for_read=True, streaming=True)
    assert (o.max_bytes_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (
        64 << 20, 5, 30_000)
    assert parse_options(base, for_read=True, streaming=True).max_trigger_delay_ms == 15 * 60_000
    with pytest.raises(ValueError, match="minOffsetsPerTrigger"):
        parse_options({**base, "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
                      for_read=True, streaming=True)
    for name, bad in (("maxBytesPerTrigger", "0"), ("maxBytesPerTrigger", "1x"),
                      ("maxTriggerDelay", "soon")):
        with pytest.raises(ValueError, match=name):
            parse_options({**base, name: bad}, for_read=True, streaming=True)


def test_byte_limit_is_soft_and_proportional():
    from spool.spark.stream_reader import byte_limit, rate_limit

    begin = {"t": {0: 0, 1: 0}}
    until = {"t": {0: 300, 1: 100}}
    per_offset = {("t", 0): 100.0, ("t", 1): 1000.0}  # backlog: 30 000 + 100 000 bytes
    assert byte_limit(begin, until, per_offset, 130_000) is None  # all of it fits
    n = byte_limit(begin, until, per_offset, 13_000)  # a tenth of the bytes
    assert n == 40 and rate_limit(begin, until, n) == {"t": {0: 30, 1: 10}}  # a tenth of each
    assert byte_limit(begin, until, per_offset, 1) == 1  # one record always goes through
