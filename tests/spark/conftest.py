"""Spark tier: one session-scoped, loopback-bound local[2] SparkSession over the session broker;
a real Spark standalone cluster (+ Spark Connect) and a 3-broker Spool cluster for the tests
that need them.

``spark_cluster`` (session-scoped, started by the first test that asks for it): a master and
two 1-core workers from the pyspark wheel (spool.spark.standalone); ``.master`` is its
``spark://`` url, ``.connect`` the ``sc://`` url of a Spark Connect server on it (both start
in the background as soon as the fixture is made; each property waits for what it names), ``.env(remote=False)`` the environment a driver process
(``tests.spark.drivers.start_driver``) needs to run there: ``SPARK_MASTER`` (+ the cluster's
SPARK_CONF_DIR: executor memory) or ``SPARK_REMOTE``. ``.cluster`` is the
``StandaloneCluster`` (``apps()``, ``executor_dirs(app_id)``).

``spool_cluster`` (session-scoped): three combined broker/controller processes
(tests.helpers.cluster_proc), racks a, b, c; ``.bootstrap`` lists them all,
``.create_topic(name, partitions)`` makes a topic with replication factor 3 and waits until
every partition has a leader, ``.cluster`` is the ``Cluster``. Both print their processes'
log tails at the end of a session in which a test using them failed.

The ``spark`` extra (pyspark, pyarrow) is required, not optional: ``make``
installs it with the dev extra, so a missing or broken install fails the
tier instead of turning it into skips.

``make test`` runs this tier in one pytest process of its own (one JVM, one of each
cluster), beside ``pytest -n auto`` over the rest: see the Makefile.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow  # noqa: F401  (required: a missing install fails collection)
import pyspark  # noqa: F401
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.spark.session import local_session
from spool.spark.standalone import StandaloneCluster
from tests.helpers.cluster_proc import Cluster


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    session = local_session("spool-tests", local_dir=tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()


# Short-lived JVMs on a shared 2-core machine: no C2 compiler, one GC thread.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkClusterHandle:
    """What tests see of the session's standalone cluster (see the module docstring).

    The cluster, then the Connect server, start on a thread of their own from the moment the
    fixture is made (the Spool cluster and the tests' topics are made meanwhile); ``.master``
    waits for the first, ``.connect`` for both."""

    def __init__(self, cluster: StandaloneCluster) -> None:
        self.cluster = cluster
        self.failed = False
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="spark-cluster")
        self._started = self._pool.submit(cluster.start)
        self._connect = self._pool.submit(cluster.start_connect)

    @property
    def master(self) -> str:
        self._started.result()
        return self.cluster.master_url

    @property
    def connect(self) -> str:
        self._started.result()
        return self._connect.result()

    def stop(self) -> None:
        self._pool.shutdown(wait=True)
        self.cluster.stop(grace=3)  # the session is over: 15 s of grace were used up

    def connect_tasks(self) -> int:
        """Tasks the Connect server's executors have ended so far (it is the driver of every
        pipeline run over Spark Connect): grows when a pipeline really ran there."""
        self.connect  # noqa: B018 (waits for the server)
        app = next(a["id"] for a in self.cluster.apps() if a["name"] == "Spark Connect server")
        return sum(self.cluster.tasks_by_worker(app).values())

    def env(self, remote: bool = False) -> dict[str, str]:
        if remote:
            return {"SPARK_REMOTE": self.connect}
        return {"SPARK_MASTER": self.master, **self.cluster.driver_env()}


class SpoolClusterHandle:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap
        self.failed = False

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> None:
        """Replication factor 3; returns once every partition has a leader on every broker."""
        create_topic(self.bootstrap, name, partitions, config, replication_factor=3)

        def led(node: int):
            ps = self.cluster.partitions(node, name)
            if isinstance(ps, str) or (len(ps) == partitions
                                       and all(p.leader >= 0 for p in ps.values())):
                return ps
            return f"{ps}"

        for b in self.cluster.brokers:
            self.cluster.wait_until(f"{name}: every partition led, as node {b.node_id} sees",
                                    lambda b=b: led(b.node_id))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.failed:
        for name in ("spark_cluster", "spool_cluster"):
            handle = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if handle is not None:
                handle.failed = True
    return rep


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2,
                                worker_cores=1, worker_memory="1g", executor_memory="640m",
                                jvm_options=JVM_OPTIONS)
    handle = SparkClusterHandle(cluster)
    try:
        yield handle
    finally:
        handle.stop()
        if handle.failed:
            print(f"\n===== logs of the Spark cluster in {cluster.base_dir} =====\n"
                  f"{cluster.logs()}")


def _start_spool_cluster(tmp_path_factory) -> Cluster:
    """A formed 3-broker cluster. Its ports are picked free before the brokers bind them,
    and the Spark cluster starting meanwhile on another thread binds ephemeral ports too:
    a broker that finds its port taken ("Address already in use") means a fresh cluster on
    fresh ports (at most 3 tries); any other failure is the test's."""
    for attempt in range(3):
        cluster = Cluster(tmp_path_factory.mktemp("spool-cluster"), racks=("a", "b", "c"),
                          proxied=False, log_level="WARNING", overrides={
                              "offsets.topic.num.partitions": "3",
                              "transaction.state.log.num.partitions": "3",
                          })
        try:
            cluster.start()
            cluster.wait_formed()
            return cluster
        except RuntimeError as e:
            for node in cluster.nodes.values():
                node.kill()
            cluster.stop()
            if "Address already in use" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def spool_cluster(tmp_path_factory):
    cluster = _start_spool_cluster(tmp_path_factory)
    handle = SpoolClusterHandle(cluster)
    try:
        yield handle
    finally:
        for node in cluster.nodes.values():  # the session is over: no graceful shutdown
            node.kill()                       # (SIGTERM: ~20 s of controlled shutdowns)
        cluster.stop()
        if handle.failed:
            print(f"\n===== logs of the Spool cluster in {cluster.base_dir} =====\n"
                  f"{cluster.logs()}")


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None,
                 replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, replication_factor,
                                             config=config or {})]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    """records: dicts with value and optional key, partition, headers, timestamp."""
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


# How long consume_all(read_committed) waits for the transactions on a topic to complete:
# a transaction a killed producer left open ends at its transaction.timeout.ms (60 s in the
# exactly-once sink) plus the broker's abort sweep (10 s), and a committed one within
# moments (its markers are written after EndTxn's answer, as in Kafka).
STABLE_TIMEOUT = 90.0


def wait_until_stable(bootstrap: str, topic: str, timeout: float = STABLE_TIMEOUT) -> None:
    """Wait until no transaction is open on any partition of ``topic``: each one's last stable
    offset (what a read_committed consumer can read up to) has reached its high watermark.

    A producer's ``commit_transaction()`` returns once the coordinator has logged the commit;
    the COMMIT markers reach the partitions after that (on a cluster, over WriteTxnMarkers to
    the partitions' leaders, then replicated), so for a moment the records are written but
    not yet readable with read_committed. A test that reads "everything committed" right after
    the writer ended must wait for that, or it reads up to the LSO and misses the last
    transactions."""
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": "spool-spark-tests",
                      "isolation.level": "read_uncommitted"})
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "spool-spark-tests",
                          "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(topic, p)
               for p in plain.list_topics(topic, timeout=30).topics[topic].partitions]
        deadline = time.monotonic() + timeout
        while True:
            high = [plain.get_watermark_offsets(tp, timeout=30, cached=False)[1] for tp in tps]
            lso = [committed.get_watermark_offsets(tp, timeout=30, cached=False)[1] for tp in tps]
            open_ = {tp.partition: (s, h) for tp, s, h in zip(tps, lso, high, strict=True)
                     if s < h}
            if not open_:
                return
            assert time.monotonic() < deadline, (
                f"{topic}: transactions still open after {timeout} s "
                f"(partition: (last stable offset, high watermark)) {open_}")
            time.sleep(0.05)
    finally:
        committed.close()
        plain.close()


def consume_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list:
    """Every record of every partition of ``topic`` now, in (partition, offset) order. With
    ``read_committed``: every committed record once no transaction is open on the topic
    (``wait_until_stable``), so the last transactions committed are read too."""
    if isolation == "read_committed":
        wait_until_stable(bootstrap, topic)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spool-spark-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        md = c.list_topics(topic, timeout=30).topics[topic]
        tps, ends = [], {}
        for p in md.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high > low:
                tps.append(TopicPartition(topic, p, low))
                ends[p] = high
        out = []
        if not tps:
            return out
        c.assign(tps)
        eof: set[int] = set()
        while len(eof) < len(tps):
            m = c.poll(5)
            assert m is not None, "consume_all timed out"
            if m.error():
                eof.add(m.partition())
                continue
            out.append(m)
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        c.close()
