"""Batch and streaming write: what is written reads back equal; murmur2 placement; guarantees."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from spool.spark.capabilities import supports_transactions  # noqa: E402
from tests.helpers.murmur2 import murmur2  # noqa: E402
from tests.spark.conftest import consume_all, create_topic, produce  # noqa: E402

HEADERS = "array<struct<key: string, value: binary>>"


def test_batch_write_then_read_back_equals_input(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    rows = [
        (f"k{i}".encode(), f"value-{i}".encode(), [("h", f"{i}".encode())], i % 3 if i % 4 == 0 else None)
        for i in range(60)
    ]
    df = spark.createDataFrame(rows, f"key binary, value binary, headers {HEADERS}, partition int")
    df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic_name
    ).mode("append").save()
    back = (
        spark.read.format("spool")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic_name)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    got = {bytes(r.key): (bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers], r.partition) for r in back}
    assert len(back) == 60
    for i, (key, value, headers, part) in enumerate(rows):
        want_part = part if part is not None else (murmur2(key) & 0x7FFFFFFF) % 3
        assert got[key] == (value, headers, want_part), i


def test_topic_column_and_string_values(spark, broker, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    create_topic(broker.bootstrap, a, 1)
    create_topic(broker.bootstrap, b, 1)
    df = spark.createDataFrame(
        [(a if i % 2 else b, None, f"s{i}") for i in range(10)], "topic string, key string, value string"
    )
    df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    assert sorted(m.value() for m in consume_all(broker.bootstrap, a)) == [f"s{i}".encode() for i in (1, 3, 5, 7, 9)]
    assert sorted(m.value() for m in consume_all(broker.bootstrap, b)) == [f"s{i}".encode() for i in (0, 2, 4, 6, 8)]
    assert all(m.key() is None for m in consume_all(broker.bootstrap, a))


def test_write_without_value_or_topic_is_refused(spark, broker):
    df = spark.createDataFrame([(b"k",)], "key binary")
    w = df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).mode("append")
    with pytest.raises(Exception, match="value column is required"):
        w.option("topic", "x").save()
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="topic column or the topic option"):
        df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()


def _stream_copy(spark, bootstrap, source, sink, checkpoint, guarantee):
    q = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    if q.exception():
        raise RuntimeError(str(q.exception()))


def test_streaming_at_least_once_copy(spark, broker, topic_name, tmp_path):
    src, dst = topic_name + "-in", topic_name + "-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(40)])
    _stream_copy(spark, broker.bootstrap, src, dst, tmp_path / "cp", "at-least-once")
    produce(broker.bootstrap, src, [{"key": b"late", "value": b"late"}])
    _stream_copy(spark, broker.bootstrap, src, dst, tmp_path / "cp", "at-least-once")
    got = sorted((m.key(), m.value(), m.partition()) for m in consume_all(broker.bootstrap, dst))
    want = sorted(
        (k, v, (murmur2(k) & 0x7FFFFFFF) % 2)
        for k, v in [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)] + [(b"late", b"late")]
    )
    assert got == want


def test_exactly_once_is_refused_without_broker_transactions(spark, broker, topic_name, tmp_path):
    if supports_transactions(broker.bootstrap):
        pytest.skip("the broker supports transactions: the exactly-once sink runs (test_exactly_once)")
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"x"}])
    with pytest.raises(Exception, match="deliveryGuarantee=at-least-once"):
        _stream_copy(spark, broker.bootstrap, topic_name, topic_name + "-out", tmp_path / "cp", "exactly-once")
