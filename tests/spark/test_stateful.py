"""Stateful pipelines (RocksDB state, exactly-once sink): kill -9 the driver mid-run, restart, compare.

Each test runs an example pipeline as a driver process (``tests.spark.drivers``) on
the standalone Spark cluster (``spark_cluster``: executors on two 1-core workers)
against the 3-broker Spool cluster (``spool_cluster``, replication factor 3),
with a processing-time trigger and a small ``maxOffsetsPerTrigger``, kills its
whole tree once micro-batches have committed and output is in the sink,
restarts it from the same checkpoint with ``availableNow`` and checks the sink,
read with read_committed, against the exact output computed here from the
input: ``examples.dedup_orders`` (``dropDuplicatesWithinWatermark``) and
``examples.sessions`` (``transformWithStateInPandas`` with event-time timers).
The state must survive the crash: repeated orders and session events that
arrive after the restart meet state written before it. Each also runs once,
to the end, over Spark Connect (``SPARK_REMOTE``: the Connect server on the
same cluster is the driver, so killing the client process would not be a
driver crash), with the same exact check.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.spark.conftest import consume_all, produce
from tests.spark.drivers import kill_tree, start_driver

T0 = 1_800_000_000_000  # event times (ms)
# each pipeline killed mid-run on the standalone cluster, and run once over Spark Connect
WHERE = pytest.mark.parametrize("remote", [False, True], ids=["cluster", "connect"])
RUN_TIMEOUT = 360.0  # per driver run; ~30 s on an idle 2-core machine, minutes under load


def driver(module: str, bootstrap: str, src: str, dst: str, cp: Path, scratch: Path,
           trigger: str, env: dict[str, str], *extra: str) -> subprocess.Popen:
    return start_driver(f"examples.{module}", [
        "--bootstrap-server", bootstrap, "--source", src, "--sink", dst,
        "--checkpoint", str(cp), "--scratch", str(scratch), "--trigger", trigger,
        "--delivery-guarantee", "exactly-once", *extra,
    ], scratch / "driver.log", env)


def kill_mid_batch(proc: subprocess.Popen, cp: Path, bootstrap: str, dst: str,
                   log: Path) -> None:
    """SIGKILL the driver's tree inside a micro-batch (its offsets written, its commit not)
    once a micro-batch is committed and the sink has committed output."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "spool-stateful-tests",
                  "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(dst, p) for p in c.list_topics(dst, timeout=30).topics[dst].partitions]
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            assert proc.poll() is None, f"driver ended early:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no progress:\n{log.read_text()[-3000:]}"
            n = len(list((cp / "commits").glob("[0-9]*")))
            if n and (cp / "offsets" / str(n)).exists() and any(
                    c.get_watermark_offsets(tp, timeout=30, cached=False)[1] for tp in tps):
                break
            time.sleep(0.2)
    finally:
        c.close()
    kill_tree(proc)


@pytest.fixture
def drivers():
    """Start drivers through ``drivers.append(proc)``; the test's end kills any left."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        kill_tree(proc)


def finish(proc: subprocess.Popen, log: Path) -> str:
    """Wait for an available-now run to end; its output."""
    assert proc.wait(RUN_TIMEOUT) == 0, log.read_text()[-3000:]
    return log.read_text()


@pytest.mark.timeout(900)  # two driver runs (RUN_TIMEOUT each), with the clusters' start-up
@WHERE
def test_dedup_orders_exactly_once_across_a_driver_kill(spark_cluster, spool_cluster, topic_name,
                                                       tmp_path, drivers, remote):
    bootstrap, env = spool_cluster.bootstrap, spark_cluster.env(remote)
    src, dst = topic_name + "-orders", topic_name + "-deduped"
    spool_cluster.create_topic(src, 3)
    spool_cluster.create_topic(dst, 2)
    rng = random.Random(19)

    def order(i: int, ts: int) -> dict:
        value = json.dumps({"order_id": i, "amount": i % 97 + 0.5}).encode()
        return {"key": f"c{i % 5}".encode(), "value": value, "timestamp": ts}

    # 120 orders 1 s apart; every third sent again up to 60 s (event time) later, in time
    # order: two micro-batches of 80, the second holding repeats of orders of the first
    firsts = [order(i, T0 + 1000 * i) for i in range(120)]
    again = [order(i, T0 + 1000 * i + rng.randrange(1000, 60_000)) for i in range(0, 120, 3)]
    produce(bootstrap, src, sorted(firsts + again, key=lambda r: r["timestamp"]))
    cp, scratch = tmp_path / "cp", tmp_path / "scratch"
    scratch.mkdir()
    log = scratch / "driver.log"
    before = spark_cluster.connect_tasks() if remote else 0
    if not remote:  # over Connect the driver is the server: one run to the end
        drivers.append(driver("dedup_orders", bootstrap, src, dst, cp, scratch, "0.5", env,
                              "--max-offsets-per-trigger", "80"))
        kill_mid_batch(drivers[-1], cp, bootstrap, dst, log)  # in batch 1
    drivers.append(driver("dedup_orders", bootstrap, src, dst, cp, scratch, "available-now",
                          env))
    assert "done: first copies written to" in finish(drivers[-1], log)
    assert not remote or spark_cluster.connect_tasks() > before  # it ran on the server

    got = [(m.key(), m.value()) for m in consume_all(bootstrap, dst, isolation="read_committed")]
    assert sorted(got) == sorted((r["key"], r["value"]) for r in firsts)


def sessions_of(times: list[int], gap_ms: int) -> list[tuple[int, int, int]]:
    """(start, end, events) of the runs of ``times`` (sorted) at most ``gap_ms`` apart."""
    out: list[tuple[int, int, int]] = []
    for t in times:
        if out and t - out[-1][1] <= gap_ms:
            out[-1] = (out[-1][0], t, out[-1][2] + 1)
        else:
            out.append((t, t, 1))
    return out


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


@pytest.mark.timeout(900)
@WHERE
def test_sessions_exactly_once_across_a_driver_kill(spark_cluster, spool_cluster, topic_name,
                                                    tmp_path, drivers, remote):
    bootstrap, env = spool_cluster.bootstrap, spark_cluster.env(remote)
    src, dst = topic_name + "-clicks", topic_name + "-sessions"
    spool_cluster.create_topic(src, 3)
    spool_cluster.create_topic(dst, 2)
    rng = random.Random(23)
    gap = 60_000
    clicks: dict[str, list[int]] = {}
    for u in range(6):  # bursts of clicks 1-20 s apart, 2-4 minutes of quiet between bursts
        t, times = T0 + rng.randrange(60_000), []
        while t < T0 + 20 * 60_000:
            for _ in range(rng.randrange(1, 12)):
                times.append(t)
                t += rng.randrange(1000, 20_000)
            t += rng.randrange(120_000, 240_000)
        clicks[f"u{u}"] = times
    events = sorted((t, u) for u, times in clicks.items() for t in times)
    events += [(T0 + 3_600_000, "tick")] * 3  # an hour later: the watermark passes every session
    # round robin over the partitions: a micro-batch's share of each covers the same time
    # span, so no click falls behind the watermark (2 minutes); two micro-batches of data
    produce(bootstrap, src, [{"key": u.encode(), "value": b"{}", "timestamp": t, "partition": i % 3}
                             for i, (t, u) in enumerate(events)])
    cp, scratch = tmp_path / "cp", tmp_path / "scratch"
    scratch.mkdir()
    log = scratch / "driver.log"
    before = spark_cluster.connect_tasks() if remote else 0
    if not remote:  # over Connect the driver is the server: one run to the end
        drivers.append(driver("sessions", bootstrap, src, dst, cp, scratch, "0.5", env,
                              "--max-offsets-per-trigger", str((len(events) + 1) // 2)))
        # batch 1 closes the sessions that ended before the first half's watermark; kill in
        # batch 2 (no data): the one that closes all the others
        kill_mid_batch(drivers[-1], cp, bootstrap, dst, log)
    drivers.append(driver("sessions", bootstrap, src, dst, cp, scratch, "available-now", env))
    assert "done: closed sessions written to" in finish(drivers[-1], log)
    assert not remote or spark_cluster.connect_tasks() > before  # it ran on the server

    got = [(m.key().decode(), json.loads(m.value()))
           for m in consume_all(bootstrap, dst, isolation="read_committed")]
    want = [(u, {"user": u, "start": iso(s), "end": iso(e), "events": n})
            for u, times in clicks.items() for s, e, n in sessions_of(times, gap)]
    key = lambda kv: (kv[0], kv[1]["start"])  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)
