"""librdkafka's own mock cluster in a process of its own: the client's produce ceiling.

    with MockCluster() as mock:
        mock.create_topic("t", 64)
        workloads.produce(mock.bootstrap, "t", records, size)

The mock cluster (``rd_kafka_mock_cluster_new``, the C library that confluent-kafka
bundles, called through ctypes) is an in-memory Kafka broker written in C inside
librdkafka. It runs in a child process, so it takes a core of its own exactly as a real
broker does, and the producer in the benchmark's process sees the same client, the same
config and the same loopback TCP as against Spool: what it reaches is the client's ceiling.

``test.mock.num.brokers=1`` on the producer itself would put the mock inside the client
process, sharing its CPU, and cannot create a topic with N partitions (the mock has no
CreateTopics; its auto-created topics have 4), hence ``rd_kafka_mock_topic_create``.

The mock keeps at most 5 MiB (or 100,000 batches) per partition and drops older batches
(``rd_kafka_mock_partition_init``, not configurable): fine for produce, but it cannot hold
the bytes of a consume workload; the consume ceiling is measured from librdkafka's
prefetch queue instead (``bench.consumers``).
"""

from __future__ import annotations

import ctypes
import glob
import multiprocessing as mp
import os
from multiprocessing.connection import Connection

RD_KAFKA_PRODUCER = 0


def _library() -> ctypes.CDLL:
    import confluent_kafka

    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir,
                        "confluent_kafka.libs", "librdkafka*.so*")
    found = glob.glob(libs)
    lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
    lib.rd_kafka_destroy.argtypes = [vp]
    return lib


def _serve(conn: Connection) -> None:
    """The child: one mock cluster with one broker; topics on request until ``None``."""
    lib = _library()
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    lib.rd_kafka_conf_set(conf, b"log_level", b"0", err, len(err))
    rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, len(err))
    if not rk:
        raise RuntimeError(err.value.decode())
    mock = lib.rd_kafka_mock_cluster_new(rk, 1)
    conn.send(lib.rd_kafka_mock_cluster_bootstraps(mock).decode())
    while (cmd := conn.recv()) is not None:
        topic, partitions = cmd
        conn.send(lib.rd_kafka_mock_topic_create(mock, topic.encode(), partitions, 1))
    lib.rd_kafka_mock_cluster_destroy(mock)
    lib.rd_kafka_destroy(rk)


class MockCluster:
    """The mock cluster's child process; ``bootstrap`` and ``pid`` once entered."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.bootstrap = ""
        self.pid = 0

    def __enter__(self) -> MockCluster:
        self._proc.start()
        if not self._conn.poll(30):
            self._proc.kill()
            raise RuntimeError("librdkafka's mock cluster did not start")
        self.bootstrap = self._conn.recv()
        self.pid = self._proc.pid or 0
        return self

    def create_topic(self, topic: str, partitions: int) -> None:
        self._conn.send((topic, partitions))
        if code := self._conn.recv():
            raise RuntimeError(f"mock cluster: creating {topic} failed with error {code}")

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.send(None)
            self._proc.join(10)
        finally:
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
