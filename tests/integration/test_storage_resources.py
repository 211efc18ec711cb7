"""Storage resources of a real broker: descriptors per partition."""

from __future__ import annotations

import os

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def open_fds(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def test_an_idle_partition_holds_one_descriptor(fresh_broker):
    """Was 5 per partition (the .log, and the .index and .timeindex each held twice by
    their mmaps); now only the active segment's .log stays open."""
    fresh_broker.start()
    pid = fresh_broker.proc.pid
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("warmup", 1)])["warmup"].result(10)
    before = len(open_fds(pid))
    topics = [f"fds-{i}" for i in range(20)]
    for f in admin.create_topics([NewTopic(t, 10) for t in topics]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "linger.ms": 0})
    for t in topics:
        for part in range(10):
            p.produce(t, value=b"x" * 100, partition=part)
    assert p.flush(30) == 0
    n = len(open_fds(pid))
    index_fds = [t for t in open_fds(pid) if t.endswith(("index", "timeindex"))]
    assert index_fds == []
    assert (n - before) / 200 < 1.2


def test_inactive_segments_hold_a_bounded_number_of_descriptors(fresh_broker):
    """Was one .log descriptor (and two per index) for every segment; now inactive
    segments' files are opened on use and at most 256 stay open."""
    from confluent_kafka import Consumer, TopicPartition

    max_open = 256  # spool.storage.segment.DEFAULT_MAX_OPEN_FILES
    fresh_broker.overrides["internal.segment.bytes.enable"] = "true"  # test-only seam
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("many-segments", 1, config={
        "internal.segment.bytes": "2000"})])["many-segments"].result(10)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "linger.ms": 0})
    n = max_open + 60
    for i in range(n):
        p.produce("many-segments", value=b"%06d" % i + b"x" * 2000)
        p.flush(10)
    fresh_broker.stop()
    fresh_broker.start()
    c = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "fds",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("many-segments", 0, 0)])
    seen = []
    while len(seen) < n:
        seen += [m.value()[:6] for m in c.consume(100, 5) if m.error() is None]
    c.close()
    assert seen == [b"%06d" % i for i in range(n)]
    logs = [t for t in open_fds(fresh_broker.proc.pid) if "many-segments-0/" in t]
    assert all(t.endswith(".log") for t in logs)
    assert len(logs) <= max_open + 1
