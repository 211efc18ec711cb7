"""Stateful joins written exactly-once: kill -9 the driver mid-run, restart, compare exactly.

Each test runs an example pipeline as a driver process on ``spark_cluster``
(a standalone master and two 1-core workers: the state lives in the
executors' RocksDB instances, checkpointed under the query's checkpoint),
reading from and writing to ``spool_cluster`` (three brokers, replication
factor 3). The input ends with far-future ticks that move both watermarks
past everything; ``--max-offsets-per-trigger`` (``PER_BATCH``) splits each
topic in two micro-batches, the ticks in the second, so a run is: batch 0,
batch 1 (the rest), batch 2 (no data: the watermark moved, the rest of the
state is written out). The test kills the driver's whole tree as soon as
one task of the exactly-once sink has committed micro-batch 1 (usually
before the other task has and before Spark has written ``commits/1``: the
restart re-runs batch 1 on the state of batch 0 restored from the
checkpoint; the committed task must be skipped, the other must write the
same rows as before) and restarts it on the same checkpoint with
``availableNow``. The output topic read with read_committed must then be
exactly the records computed here from the input: none twice, none missing.
Each pipeline also runs once, to the end, over Spark Connect (the Connect
server on the same cluster is the driver there), with the same exact check.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from spool.spark.source import ensure_progress_topic
from tests.spark.conftest import consume_all, produce
from tests.spark.drivers import kill_tree, start_driver

T0 = 1_800_000_000_000  # ms, a minute boundary
MINUTE = 60_000
PROGRESS_TOPIC = "spool-spark-sink-progress"  # the sink's default progressTopic
PER_BATCH = 64  # records of each topic per micro-batch: 65..128 make two
END = T0 + 1440 * MINUTE  # the ticks' time
RUN_TIMEOUT = 420.0  # one driver run; ~30 s on a quiet machine, 3-4 min seen at load 16-26

pytestmark = pytest.mark.timeout(1200)  # two driver runs per test
# each pipeline killed mid-run on the standalone cluster, and run once over Spark Connect
WHERE = pytest.mark.parametrize("remote", [False, True], ids=["cluster", "connect"])


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def record(key: str, value: dict | None, ts: int) -> dict:
    return {"key": key.encode(), "value": None if value is None else json.dumps(value).encode(),
            "timestamp": ts}


def await_sink_commit(bootstrap: str, checkpoint: Path, batch: int, proc: subprocess.Popen,
                      log: Path, timeout: float = RUN_TIMEOUT) -> None:
    """Until a task of the query's exactly-once sink has committed micro-batch ``batch``: its
    progress record (``transactional.py``) is readable with read_committed. Spark writes
    ``commits/<batch>`` only after every task has, so a kill now is mid-batch. Fails at once
    if the driver exits first."""
    sink_id = "spool-sink-" + hashlib.sha256(str(checkpoint).encode()).hexdigest()[:16]  # source.py
    ensure_progress_topic({"bootstrap.servers": bootstrap}, PROGRESS_TOPIC)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-joins", "log_level": 3,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + timeout
        while True:  # a topic just created may not have a leader everywhere yet
            try:
                _, end = c.get_watermark_offsets(TopicPartition(PROGRESS_TOPIC, 0), timeout=30)
                break
            except KafkaException as e:  # NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE
                assert time.monotonic() < deadline, e
                time.sleep(0.2)
        c.assign([TopicPartition(PROGRESS_TOPIC, 0, end)])
        while True:
            assert proc.poll() is None, f"driver exited {proc.returncode}: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no commit of batch {batch}: {log.read_text()[-3000:]}"
            m = c.poll(0.05)
            if m is None or m.error() is not None or not m.key().startswith(f"{sink_id}-".encode()):
                continue
            if json.loads(m.value())["batchId"] >= batch:
                return
    finally:
        c.close()


def crash_then_finish(module: str, args: list[str], tmp_path: Path, env: dict) -> str:
    """Run ``module`` until its sink has committed part of micro-batch 1, kill -9 its tree,
    run it again to the end with availableNow; its log. Over Spark Connect (``SPARK_REMOTE``
    in ``env``) the driver is the Connect server and killing the client would leave the query
    running there: the pipeline runs once, to the end, with availableNow."""
    cp, log = tmp_path / "cp", tmp_path / "driver.log"
    bootstrap = args[args.index("--bootstrap-server") + 1]
    common = [*args, "--checkpoint", str(cp), "--scratch", str(tmp_path / "scratch"),
              "--delivery-guarantee", "exactly-once"]
    if "SPARK_REMOTE" not in env:
        proc = start_driver(module, [*common, "--trigger", "0",
                                     "--max-offsets-per-trigger", str(PER_BATCH)], log, env)
        try:
            await_sink_commit(bootstrap, cp, 1, proc, log)
        finally:
            kill_tree(proc)
    proc = start_driver(module, [*common, "--trigger", "available-now"], log, env)
    try:
        assert proc.wait(RUN_TIMEOUT) == 0, log.read_text()[-3000:]
    finally:
        kill_tree(proc)
    return log.read_text()


def committed_values(bootstrap: str, topic: str) -> list[str]:
    """Every committed output value, as canonical JSON text, sorted (duplicates kept)."""
    out = []
    for m in consume_all(bootstrap, topic, isolation="read_committed"):
        v = json.loads(m.value())
        assert m.key().decode() == v["order_id"]
        out.append(json.dumps(v, sort_keys=True))
    return sorted(out)


# --- orders joined with payments within 10 minutes ------------------------------------------


def orders_and_payments(rng: random.Random, n: int) -> tuple[list[dict], list[dict]]:
    orders, payments = [], []
    for i in range(n):
        ts = T0 + i * 30_000
        orders.append({"id": f"o{i}", "customer": f"c{rng.randrange(5)}",
                       "amount": round(rng.uniform(1, 99), 2), "ts": ts})
        for j in range(rng.choice((0, 1, 1, 1, 2))):  # unpaid, paid, paid in two parts
            # -1..+13 minutes: some paid before the order or too late, which join nothing
            payments.append({"order": f"o{i}", "id": f"p{i}.{j}", "amount": 1.0,
                             "ts": ts + rng.randrange(-MINUTE, 13 * MINUTE, 1000)})
    payments.sort(key=lambda p: p["ts"])
    return orders, payments


def expected_paid_orders(orders: list[dict], payments: list[dict], within_ms: int) -> list[str]:
    """Left outer join: a row per (order, payment paid 0..within after it), else one null row."""
    out = []
    for o in orders:
        row = {"order_id": o["id"], "customer": o["customer"], "amount": o["amount"],
               "order_time": iso(o["ts"])}
        paid = [p for p in payments if p["order"] == o["id"] and 0 <= p["ts"] - o["ts"] <= within_ms]
        for p in paid or [None]:
            out.append({**row, "payment_id": p and p["id"], "paid": p and p["amount"],
                        "paid_time": p and iso(p["ts"])})
    return sorted(json.dumps(v, sort_keys=True) for v in out)


@WHERE
def test_orders_payments_left_outer_join_exactly_once_across_driver_kill(
        spark_cluster, spool_cluster, topic_name, tmp_path, remote):
    bootstrap = spool_cluster.bootstrap
    orders_t, payments_t, out_t = (f"{topic_name}-{s}" for s in ("orders", "payments", "paid"))
    for t in (orders_t, payments_t, out_t):
        spool_cluster.create_topic(t, 2)
    orders, payments = orders_and_payments(random.Random(19), 100)
    assert all(PER_BATCH < n + 1 <= 2 * PER_BATCH for n in (len(orders), len(payments)))
    produce(bootstrap, orders_t, [
        *(record(o["id"], {"customer": o["customer"], "amount": o["amount"]}, o["ts"])
          for o in orders),
        record("tick-order", {"customer": "-", "amount": 0}, END)])
    produce(bootstrap, payments_t, [
        *(record(p["order"], {"payment_id": p["id"], "amount": p["amount"]}, p["ts"])
          for p in payments),
        record("tick-payment", {"payment_id": "-", "amount": 0}, END)])

    before = spark_cluster.connect_tasks() if remote else 0
    log = crash_then_finish("examples.orders_payments", [
        "--bootstrap-server", bootstrap, "--orders", orders_t, "--payments", payments_t,
        "--sink", out_t, "--join", "left-outer", "--within", "10 minutes",
        "--watermark", "5 minutes"], tmp_path, spark_cluster.env(remote))
    assert "done: joined orders written to" in log
    assert not remote or spark_cluster.connect_tasks() > before  # it ran on the server
    want = expected_paid_orders(orders, payments, 10 * MINUTE)
    assert len(want) > len(orders)  # the data has joins, unpaid orders and split payments
    assert committed_values(bootstrap, out_t) == want


# --- orders enriched from a changelog table (KStream-KTable) --------------------------------


def customer_changelog(rng: random.Random, customers: list[str], n: int) -> list[dict]:
    """Updates and tombstones, in time order, at 17 s + k * 38 s (never an order's time)."""
    out = []
    for k in range(n):
        c = rng.choice(customers)
        profile = None if rng.random() < 0.2 else {"name": f"{c}-v{k}", "tier": rng.randrange(3)}
        out.append({"customer": c, "profile": profile, "ts": T0 + 17_000 + k * 38_000})
    return out


def expected_enriched(orders: list[dict], changelog: list[dict]) -> list[str]:
    """Each order once, with its customer's latest value at or before the order's time."""
    out = []
    for o in orders:
        versions = [c for c in changelog if c["customer"] == o["customer"] and c["ts"] <= o["ts"]]
        out.append({"order_id": o["id"], "order_time": iso(o["ts"]), "customer": o["customer"],
                    "amount": o["amount"], "profile": versions[-1]["profile"] if versions else None})
    return sorted(json.dumps(v, sort_keys=True) for v in out)


@WHERE
def test_enrich_orders_from_changelog_table_exactly_once_across_driver_kill(
        spark_cluster, spool_cluster, topic_name, tmp_path, remote):
    bootstrap = spool_cluster.bootstrap
    orders_t, customers_t, out_t = (f"{topic_name}-{s}" for s in ("orders", "customers", "out"))
    spool_cluster.create_topic(orders_t, 2)
    spool_cluster.create_topic(customers_t, 2, {"cleanup.policy": "compact"})
    spool_cluster.create_topic(out_t, 2)
    rng = random.Random(20)
    customers = [f"c{i}" for i in range(5)]
    changelog = customer_changelog(rng, customers, 80)  # 50 minutes of changes
    orders = [{"id": f"o{i}", "customer": rng.choice([*customers, "c-unknown"]),
               "amount": round(rng.uniform(1, 99), 2), "ts": T0 + i * 30_000} for i in range(100)]
    assert all(PER_BATCH < n + 1 <= 2 * PER_BATCH for n in (len(orders), len(changelog)))
    produce(bootstrap, customers_t, [
        *(record(c["customer"], c["profile"], c["ts"]) for c in changelog),
        record("tick", {"name": "-"}, END)])
    produce(bootstrap, orders_t, [
        *(record(o["id"], {"customer": o["customer"], "amount": o["amount"]}, o["ts"])
          for o in orders),
        record("tick", {"customer": "tick", "amount": 0}, END)])

    before = spark_cluster.connect_tasks() if remote else 0
    log = crash_then_finish("examples.enrich_orders", [
        "--bootstrap-server", bootstrap, "--orders", orders_t, "--customers", customers_t,
        "--sink", out_t, "--watermark", "5 minutes"], tmp_path, spark_cluster.env(remote))
    assert "done: enriched orders written to" in log
    assert not remote or spark_cluster.connect_tasks() > before  # it ran on the server
    want = expected_enriched(orders, changelog)
    profiles = [json.loads(v)["profile"] for v in want]
    assert None in profiles and len({json.dumps(p) for p in profiles}) > 10  # a varied table
    assert committed_values(bootstrap, out_t) == want


def test_enricher_joins_each_order_with_the_value_as_of_its_time():
    """The processor alone (pyspark's TwsTester: no JVM), the edges the driver test's data
    avoids: equal timestamps, a tombstone and a re-creation, the state kept, --join inner."""
    import pandas as pd
    from pyspark.sql.streaming.tws_tester import TwsTester

    from examples.enrich_orders import Enricher

    def rows(*specs) -> pd.DataFrame:
        return pd.DataFrame([
            {"kind": kind, "ts_ms": ts, "partition": 0, "offset": off,
             "order_id": f"o{off}" if kind == "order" else None,
             "value": None if value is None else json.dumps(value)}
            for kind, ts, off, value in specs])

    def out(df: pd.DataFrame) -> list[tuple[str, dict | None]]:
        if df.empty:
            return []
        return sorted((k, json.loads(v)["profile"]) for k, v in zip(df["key"], df["value"],
                                                                   strict=True))

    def tester(inner: bool = False) -> TwsTester:
        return TwsTester(Enricher(inner), timeMode="EventTime",
                         eventTimeExtractor=lambda r: int(r["ts_ms"]))

    t = tester()
    got = t.testInPandas("c1", rows(
        ("order", 1000, 1, {"customer": "c1"}),      # before any version: no profile
        ("customer", 2000, 2, {"v": "a"}),
        ("customer", 2000, 3, {"v": "b"}),           # same time, later offset: wins
        ("order", 2000, 4, {"customer": "c1"}),      # at the version's time: sees it
        ("customer", 3000, 5, None),                 # tombstone
        ("order", 3500, 6, {"customer": "c1"}),
        ("customer", 4000, 7, {"v": "c"}),           # created again
        ("order", 5000, 8, {"customer": "c1"}),
    ))
    assert out(got) == []  # nothing is written before the watermark reaches an order
    assert out(t.setWatermark(3600)) == [("o1", None), ("o4", {"v": "b"}), ("o6", None)]
    # only what a later order can need: nothing at or before 3600 (the newest is a tombstone)
    assert t.peekListState("versions", "c1") == [(4000, 0, 7, json.dumps({"v": "c"}))]
    assert [p[0] for p in t.peekListState("pending", "c1")] == [5000]
    assert out(t.setWatermark(6000)) == [("o8", {"v": "c"})]
    assert t.peekListState("pending", "c1") == []
    assert t.peekListState("versions", "c1") == [(4000, 0, 7, json.dumps({"v": "c"}))]
    # late records (at or before the watermark) never reach the processor, as in Spark
    assert out(t.testInPandas("c1", rows(("order", 5500, 9, {"customer": "c1"})))) == []

    t = tester(inner=True)
    t.testInPandas("c1", rows(("order", 1000, 1, {}), ("customer", 1500, 2, {"v": "a"}),
                              ("order", 2000, 3, {})))
    assert out(t.setWatermark(2500)) == [("o3", {"v": "a"})]
