"""The example pipelines on a real Spark standalone cluster and through Spark Connect.

Each pipeline runs as its own driver process (``python -m examples...``) against
``spark_cluster`` (a master and two 1-core workers from the pyspark wheel) reading from
``spool_cluster`` (three brokers, topics with replication factor 3, so each task fetches
from its partition's leader, wherever that is). ``windowed_aggregates`` (streaming read,
exactly-once sink) runs once with ``SPARK_MASTER=spark://...`` (the driver is the test's
child, its executors are the workers' children) and once with ``SPARK_REMOTE=sc://...``
(the driver is the Connect server; the client process only sends plans);
``replay_to_parquet`` (a batch read; the executors write the table) through Connect. The output is checked exactly, and so is where the work ran: every task
that ended in the application's event log (``SparkListenerTaskEnd``) ran on an executor
that one of the two workers started (its dir ``work/worker-N/<app id>/<executor id>``); a
local-mode driver would register no application at the master, and its tasks would run
on executor ``driver``. Over Connect, ``format("spool")`` resolves
on the server with no register call: the server's Python finds ``pyspark_spool``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.spark.conftest import consume_all, produce
from tests.spark.drivers import kill_tree, start_driver

# Two clusters to start and a Spark driver per test: the project-wide 300 s per test is
# exceeded on a machine shared by several Spark runs.
pytestmark = pytest.mark.timeout(600)
T0 = 1_800_000_000_000  # a minute boundary (ms)
CONNECT_APP = "Spark Connect server"


def run_driver(module: str, args: list[str], log: Path, env: dict[str, str],
               timeout: float = 300) -> str:
    proc = start_driver(module, args, log, env)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{module} still running after {timeout} s:\n"
                             f"{log.read_text()[-4000:]}") from None
    finally:
        kill_tree(proc)  # (its own process group: pytest's timeout would leave it running)
    out = log.read_text()
    assert rc == 0, f"{module} exited {rc}:\n{out[-4000:]}"
    return out


class Where:
    """Which application runs the pipeline, and the tasks its executors ran before it."""

    def __init__(self, spark_cluster, remote: bool) -> None:
        self.spark_cluster = spark_cluster
        self.remote = remote
        self.env = spark_cluster.env(remote=remote)  # starts the Connect server if remote
        self.apps_before = {a["id"] for a in spark_cluster.cluster.apps()}
        self.connect_id = (next(a["id"] for a in spark_cluster.cluster.apps()
                                if a["name"] == CONNECT_APP) if remote else None)
        self.before = (spark_cluster.cluster.tasks_by_worker(self.connect_id) if remote else {})

    def tasks(self, app_name: str) -> dict[int, int]:
        """The tasks the pipeline ran, per worker number (any other key: not on a worker)."""
        if self.remote:
            after = self.spark_cluster.cluster.tasks_by_worker(self.connect_id)
            return {n: after[n] - self.before.get(n, 0) for n in after
                    if after[n] != self.before.get(n, 0)}
        new = [a for a in self.spark_cluster.cluster.apps()
               if a["id"] not in self.apps_before and a["name"] == app_name]
        assert len(new) == 1, new
        return {n: k for n, k in self.spark_cluster.cluster.tasks_by_worker(new[0]["id"]).items()
                if k}


@pytest.fixture(params=["master", "remote"])
def where(request, spark_cluster, spool_cluster) -> Where:
    return Where(spark_cluster, request.param == "remote")


def order(customer: str, amount: float, ts: int) -> dict:
    return {"key": customer.encode(), "value": json.dumps({"amount": amount}).encode(),
            "timestamp": ts}


def test_windowed_totals_on_the_cluster(spark_cluster, spool_cluster, where, topic_name,
                                        tmp_path):
    src, dst = topic_name + "-orders", topic_name + "-totals"
    spool_cluster.create_topic(src, 2)
    spool_cluster.create_topic(dst, 1)
    orders = [order("a", 1.5, T0 + 1000 * i) for i in range(10)]
    orders += [order("b", 2.0, T0 + 30_000), order("b", 3.0, T0 + 61_000),
               order("a", 4.0, T0 + 119_000)]
    orders += [order("tick", 0.0, T0 + 600_000)]  # moves the watermark past both windows
    produce(spool_cluster.bootstrap, src, orders)
    out = run_driver("examples.windowed_aggregates", [
        "-b", spool_cluster.bootstrap, "--source", src, "--sink", dst,
        "--checkpoint", str(tmp_path / "cp"), "--scratch", str(tmp_path / "scratch"),
        "--delivery-guarantee", "exactly-once",
    ], tmp_path / "driver.log", where.env)
    assert f"done: windows written to {dst}" in out
    got = sorted(
        (v["customer"], v["window_start"], v["orders"], v["amount"])
        for v in (json.loads(m.value())
                  for m in consume_all(spool_cluster.bootstrap, dst, "read_committed"))
    )
    assert got == [
        ("a", "2027-01-15T08:00:00Z", 10, 15.0),
        ("a", "2027-01-15T08:01:00Z", 1, 4.0),
        ("b", "2027-01-15T08:00:00Z", 1, 2.0),
        ("b", "2027-01-15T08:01:00Z", 1, 3.0),
    ]
    tasks = where.tasks("order-totals")
    assert set(tasks) <= {1, 2} and sum(tasks.values()) >= 2, tasks  # 2 source partitions


def test_replay_to_parquet_over_connect(spark_cluster, spool_cluster, topic_name, tmp_path):
    where = Where(spark_cluster, remote=True)
    spool_cluster.create_topic(topic_name, 3)
    produce(spool_cluster.bootstrap, topic_name,
            [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 3}
             for i in range(90)])
    table = tmp_path / "table"
    out = run_driver("examples.replay_to_parquet", [
        "-b", spool_cluster.bootstrap, "--topic", topic_name, "--out", str(table),
        "--min-partitions", "6", "--scratch", str(tmp_path / "scratch"),
    ], tmp_path / "driver.log", where.env)
    assert f"90 records of {topic_name} written to {table}" in out
    rows = pq.read_table(table).to_pylist()
    assert sorted((int(r["partition"]), r["offset"], r["key"], r["value"]) for r in rows) == [
        (i % 3, i // 3, f"k{i}".encode(), f"v{i}".encode()) for i in
        sorted(range(90), key=lambda i: (i % 3, i // 3))]
    tasks = where.tasks("replay")
    assert set(tasks) <= {1, 2} and sum(tasks.values()) >= 6, tasks  # 6 read tasks at least
