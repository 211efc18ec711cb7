"""The example pipelines against a real broker: windowed totals, replay to Parquet, as-of."""

from __future__ import annotations

import json
import re

from examples.as_of import as_of
from examples.replay_to_parquet import replay
from examples.windowed_aggregates import follow, start
from tests.spark.conftest import consume_all, create_topic, produce

T0 = 1_800_000_000_000  # a minute boundary (ms)


def order(customer: str, amount: float, ts: int) -> dict:
    return {"key": customer.encode(), "value": json.dumps({"amount": amount}).encode(), "timestamp": ts}


def test_windowed_totals_emit_each_closed_window_once(spark, broker, topic_name, tmp_path,
                                                     capsys):
    src, dst = topic_name + "-orders", topic_name + "-totals"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 1)
    orders = [order("a", 1.5, T0 + 1000 * i) for i in range(10)]
    orders += [order("b", 2.0, T0 + 30_000), order("b", 3.0, T0 + 61_000), order("a", 4.0, T0 + 119_000)]
    orders += [order("tick", 0.0, T0 + 600_000)]  # moves the watermark past the first two windows
    produce(broker.bootstrap, src, orders)
    q = start(spark, broker.bootstrap, src, dst, str(tmp_path / "cp"), "at-least-once")
    assert follow(q) is True  # to the end (available-now), a line per micro-batch
    assert q.exception() is None
    lines = capsys.readouterr().out.splitlines()
    assert lines and lines[0].startswith("batch 0: 14 records read (")
    assert all(re.fullmatch(r"batch \d+: \d+ records read \(\d+/s\)(, \d+ written)? in \d+ "
                            r"ms; offsets now .*", line) for line in lines), lines
    got = sorted(
        (v["customer"], v["window_start"], v["orders"], v["amount"])
        for v in (json.loads(m.value()) for m in consume_all(broker.bootstrap, dst))
    )
    assert got == [
        ("a", "2027-01-15T08:00:00Z", 10, 15.0),
        ("a", "2027-01-15T08:01:00Z", 1, 4.0),
        ("b", "2027-01-15T08:00:00Z", 1, 2.0),
        ("b", "2027-01-15T08:01:00Z", 1, 3.0),
    ]


def test_replay_whole_history_to_parquet(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker.bootstrap, topic_name, [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(90)])
    out = str(tmp_path / "table")
    assert replay(spark, broker.bootstrap, topic_name, out, min_partitions=6) == 90
    rows = spark.read.parquet(out).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(f"v{i}".encode() for i in range(90))
    assert {r.partition for r in rows} == {0, 1, 2}


def test_as_of_a_point_in_time_gives_latest_value_per_key(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(
        broker.bootstrap,
        topic_name,
        [
            {"key": b"x", "value": b"x1", "timestamp": T0},
            {"key": b"y", "value": b"y1", "timestamp": T0 + 1},
            {"key": b"x", "value": b"x2", "timestamp": T0 + 2},
            {"key": b"y", "value": None, "timestamp": T0 + 3},
            {"key": b"z", "value": b"z1", "timestamp": T0 + 4},
            {"key": b"x", "value": b"x3", "timestamp": T0 + 5},
        ],
    )
    snap = lambda at: sorted((r.key, r.value) for r in as_of(spark, broker.bootstrap, topic_name, at).collect())  # noqa: E731
    assert snap(T0 + 2) == [("x", "x1"), ("y", "y1")]
    assert snap(T0 + 5) == [("x", "x2"), ("z", "z1")]
    assert snap(T0 + 100) == [("x", "x3"), ("z", "z1")]
