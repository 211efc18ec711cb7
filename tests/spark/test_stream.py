"""Streaming read: availableNow across runs, maxOffsetsPerTrigger, discovery, failOnDataLoss."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.spark.conftest import create_topic, produce


def run_available_now(spark, bootstrap, checkpoint, **opts) -> list[list[tuple]]:
    """One availableNow run from ``checkpoint``; returns the rows of each micro-batch."""
    batches: list[list[tuple]] = []

    def collect(df, batch_id):
        rows = [(r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect()]
        batches.append(sorted(rows))

    r = spark.readStream.format("spool").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    q = (
        r.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    if q.exception():
        raise RuntimeError(str(q.exception()))
    return [b for b in batches if b]


def values(batches) -> list[bytes]:
    return sorted(v for b in batches for (_, _, _, v) in b)


def recs(prefix: str, n: int, partitions: int = 1) -> list[dict]:
    return [{"value": f"{prefix}{i:03d}".encode(), "partition": i % partitions} for i in range(n)]


def test_available_now_picks_up_appended_data_across_runs(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, recs("a", 20, 2))
    cp = tmp_path / "cp"
    opts = {"subscribe": topic_name, "startingOffsets": "earliest"}
    first = run_available_now(spark, broker.bootstrap, cp, **opts)
    assert values(first) == sorted(f"a{i:03d}".encode() for i in range(20))
    assert run_available_now(spark, broker.bootstrap, cp, **opts) == []
    produce(broker.bootstrap, topic_name, recs("b", 7, 2))
    second = run_available_now(spark, broker.bootstrap, cp, **opts)
    assert values(second) == sorted(f"b{i:03d}".encode() for i in range(7))


def test_starting_offsets_latest_skips_history(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, recs("old", 5))
    cp = tmp_path / "cp"
    assert run_available_now(spark, broker.bootstrap, cp, subscribe=topic_name) == []
    produce(broker.bootstrap, topic_name, recs("new", 3))
    assert values(run_available_now(spark, broker.bootstrap, cp, subscribe=topic_name)) == [
        b"new000", b"new001", b"new002"
    ]


def test_max_offsets_per_trigger_bounds_batches(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker.bootstrap, topic_name, recs("m", 100, 3))
    batches = run_available_now(
        spark, broker.bootstrap, tmp_path / "cp",
        subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="30",
    )
    assert all(len(b) <= 30 for b in batches)
    assert len(batches) >= 4
    assert values(batches) == sorted(f"m{i:03d}".encode() for i in range(100))


def test_new_partitions_and_topics_are_discovered(spark, broker, topic_name, tmp_path):
    first, second = topic_name + "-a", topic_name + "-b"
    create_topic(broker.bootstrap, first, 1)
    produce(broker.bootstrap, first, recs("x", 3))
    cp = tmp_path / "cp"
    opts = {"subscribePattern": topic_name + "-.*", "startingOffsets": "earliest"}
    assert len(values(run_available_now(spark, broker.bootstrap, cp, **opts))) == 3
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_partitions([NewPartitions(first, 2)]).values():
        fut.result(30)
    create_topic(broker.bootstrap, second, 1)
    produce(broker.bootstrap, first, [{"value": b"p1", "partition": 1}])
    produce(broker.bootstrap, second, [{"value": b"t2"}])
    got = [(t, p, v) for b in run_available_now(spark, broker.bootstrap, cp, **opts) for (t, p, _, v) in b]
    assert sorted(got) == [(first, 1, b"p1"), (second, 0, b"t2")]


def _delete_before(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        fut.result(30)


def test_fail_on_data_loss(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, recs("d", 5))
    cp = tmp_path / "cp"
    opts = {"subscribe": topic_name, "startingOffsets": "earliest"}
    assert len(values(run_available_now(spark, broker.bootstrap, cp, **opts))) == 5
    produce(broker.bootstrap, topic_name, recs("e", 5))
    _delete_before(broker.bootstrap, topic_name, 8)  # e000..e002 (offsets 5..7) are gone
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        run_available_now(spark, broker.bootstrap, cp, **opts)
    rest = run_available_now(spark, broker.bootstrap, cp, failOnDataLoss="false", **opts)
    assert values(rest) == [b"e003", b"e004"]
