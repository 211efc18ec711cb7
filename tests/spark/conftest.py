"""Spark tier: one session-scoped, loopback-bound local[2] SparkSession over the session broker.

The ``spark`` extra (pyspark, pyarrow) is required, not optional: ``make``
installs it with the dev extra, so a missing or broken install fails the
tier instead of turning it into skips.

Under pytest-xdist one worker runs this whole tier (one JVM): see
``pytest_xdist_make_scheduler`` in tests/conftest.py.
"""

from __future__ import annotations

import pyarrow  # noqa: F401  (required: a missing install fails collection)
import pyspark  # noqa: F401
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spool.spark.session import local_session


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    session = local_session("spool-tests", local_dir=tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    """records: dicts with value and optional key, partition, headers, timestamp."""
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list:
    """Every record of every partition of ``topic`` now, in (partition, offset) order."""
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
