"""The tools of bench.scale against a real broker, at a few partitions and connections.

``bench.scale_conns``' raw producers must store exactly what they count (whole batches,
no errors); ``bench.scale_startup`` must time a start after SIGTERM and after kill -9 of a
broker whose every partition holds data; ``bench.scale_report`` must render every part.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from bench import scale, scale_conns, scale_report, scale_startup, workloads


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-test"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                for p in range(partitions)]
    finally:
        c.close()


def test_raw_producers_over_connections_store_whole_batches(broker, topic_name) -> None:
    workloads.create_topic(broker.bootstrap, topic_name, 3)
    r = scale_conns.produce_connections(broker.bootstrap, broker.proc.pid, topic_name, 3,
                                        connections=5, seconds=0.5, size=100)
    assert r["errors"] == [] and r["closed_by_broker"] == 0
    assert r["requests"] > 0 and r["records_per_s"] > 0 and r["broker_cpu"] >= 0
    ends = _end_offsets(broker.bootstrap, topic_name, 3)
    assert all(e > 0 and e % scale_conns.BATCH_RECORDS == 0 for e in ends)
    # the warm-up's and the drain's answers are stored but not counted
    assert sum(ends) >= r["requests"] * scale_conns.BATCH_RECORDS


def test_round_robin_producer_writes_every_partition(broker, topic_name) -> None:
    workloads.create_topic(broker.bootstrap, topic_name, 10)
    scale.produce_rr(broker.bootstrap, topic_name, 10, 10, 100, per=1)
    assert _end_offsets(broker.bootstrap, topic_name, 10) == [1] * 10
    scale.produce_rr(broker.bootstrap, topic_name, 10, 10_000, 100)  # 1,000 at a time
    assert _end_offsets(broker.bootstrap, topic_name, 10) == [1_001] * 10


def test_start_up_is_timed_after_sigterm_and_after_kill_9(tmp_path) -> None:
    r = scale_startup.startup(tmp_path, 150, runs=1)
    assert r["topics"] == 2 and r["partitions"] == 150
    for kind in ("clean", "kill9"):
        (start,) = r[kind]
        assert 0 < start["listening"] <= start["metadata"]
        assert start["produce"] > 0 and start["cpu_at_ready"] > 0


def test_report_renders_every_part() -> None:
    one = {"median": 2.0, "min": 1.0, "max": 3.0}
    meta = {"runs": 1, "load_average": 1.0, "when": "now"}
    start = {"listening": 1.0, "metadata": 2.0, "produce": 2.0, "cpu_at_ready": 1.5}
    results = {
        "runs": 1, "spool_partition_cap": 9485,
        "partitions": {**meta, "records": 10, "size": 1024, "rate": 100, "latency_seconds": 1,
                       "by_partitions": {"10": {b: {k: one for k in (
                           "produce", "produce_cpu", "p50", "p99", "latency_cpu_us", "first_s",
                           "first_cpu")} for b in ("spool", "tansu")}}},
        "startup": {"100": {**meta, "partitions": 100, "topics": 1, "clean": [start],
                            "kill9": [start], "stop_s": [1.0], "create_s": 1.0, "fill_s": 1.0}},
        "metadata": {**meta, "topics": 100, **{b: {
            "create_s": 1.0, "create_cpu": 1.0, "all": {"p50": one, "p99": one, "bytes": 10},
            "one": {"p50": one, "p99": one, "bytes": 10}} for b in ("spool", "tansu")}},
        "connections": {**meta, "seconds": 1, "partitions": 10, "batch_records": 16, "depth": 5,
                        "by_connections": {"1": {b: {k: one for k in (
                            "records_per_s", "broker_cpu", "client_cpu",
                            "broker_cpu_us_per_record")} for b in ("spool", "tansu")}}},
    }
    text = scale_report.tables(results)
    for heading in ("### Produce across partitions", "### Start-up",
                    "### Metadata with many topics", "### Produce across connections"):
        assert heading in text
    assert "| 100 | kill -9 | 1.00 (1.00-1.00) | 2.00 (2.00-2.00)" in text
