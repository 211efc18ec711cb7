"""Log compaction on a real broker with confluent-kafka: a compacted topic used as a table.

100k updates over 1k keys, then tombstones for 100 of them. After cleaning, a
consumer from the beginning sees each live key once with its latest value and
each deleted key's tombstone; once delete.retention.ms has passed, nothing for
the deleted keys. Offsets only increase throughout; the partition's disk
footprint shrinks to about the live set (figures printed with -s). Then
kill -9 of the broker while the cleaner is rewriting segments, many times:
after each restart the log reads as the same table.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

KEYS = 1000
UPDATES = 100_000
DELETED = range(0, 1000, 10)  # 100 keys get a tombstone at the end
RETENTION_MS = 6000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": str(256 * 1024),  # test-only key
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(RETENTION_MS),
    # in-flight fetches still read replaced segments for this long (sendfile from their fd)
    "file.delete.delay.ms": "1000",
}
BROKER = {"log.cleaner.backoff.ms": "100", "internal.segment.bytes.enable": "true"}


def key(i: int) -> bytes:
    return b"key-%04d" % i


def create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, config=config)])[topic].result(15)


def set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)


def produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "compression.type": "lz4", "batch.num.messages": 500})
    errors = []
    for k, v in items:
        while True:
            try:
                p.produce(topic, key=k, value=v,
                          on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    assert errors == []


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from the beginning to the high watermark: (offset, key, value)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-check",
                  "enable.auto.commit": False, "fetch.error.backoff.ms": 50})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), 15)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        position = 0
        while position < high and time.monotonic() < deadline:
            for m in c.consume(5000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                out.append((m.offset(), m.key(), m.value()))
                position = m.offset() + 1
            if position < high:
                pos = c.position([TopicPartition(topic, 0)])[0].offset
                position = max(position, pos)
        assert position >= high, f"read stopped at {position} of {high}"
        return out
    finally:
        c.close()


def check_offsets(records) -> None:
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must only increase"


def table_of(records) -> dict[bytes, bytes | None]:
    t: dict[bytes, bytes | None] = {}
    for _, k, v in records:
        t[k] = v
    return t


def updates(start: int, n: int) -> list[tuple[bytes, bytes]]:
    return [(key(i % KEYS), b"value-%d" % i) for i in range(start, start + n)]


def filler(n: int, tag: str) -> list[tuple[bytes, bytes]]:
    """Distinct keys outside the table: they fill the active segment so every table
    record ends up in a cleanable segment."""
    return [(b"filler-%s-%d" % (tag.encode(), i), os.urandom(1000)) for i in range(n)]


def log_bytes(data: Path, topic: str) -> int:
    """Bytes of record batches in the partition's segments below the active one (the
    filler lives in the active segment). File sizes of the .log files, not blocks on
    disk: how many blocks a few small files take depends on the filesystem and on how
    the cleaner happened to group segments, which is not what this test is about."""
    logs = [f for f in (data / f"{topic}-0").iterdir()
            if f.name[:20].isdigit() and f.name.endswith(".log")]
    active = max(int(f.name[:20]) for f in logs)
    return sum(f.stat().st_size for f in logs if int(f.name[:20]) < active)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@pytest.mark.timeout(300)
def test_compacted_topic_is_a_table(fresh_broker, topic_name):
    fresh_broker.overrides.update(BROKER)
    fresh_broker.start()
    bs = fresh_broker.bootstrap
    # nothing is cleanable until the footprint before cleaning has been measured
    create(bs, topic_name, {**TOPIC_CONFIG, "min.compaction.lag.ms": str(3600_000)})
    produce(bs, topic_name, updates(0, UPDATES))
    expected: dict[bytes, bytes | None] = {key(i % KEYS): b"value-%d" % i
                                           for i in range(UPDATES - KEYS, UPDATES)}
    produce(bs, topic_name, [(key(i), None) for i in DELETED])
    for i in DELETED:
        expected[key(i)] = None
    produce(bs, topic_name, filler(300, "a"))
    peak = log_bytes(fresh_broker.data_dir, topic_name)
    set_topic_config(bs, topic_name, "min.compaction.lag.ms", "0")

    def compacted_with_tombstones():
        recs = read_all(bs, topic_name)
        table = [r for r in recs if not r[1].startswith(b"filler-")]
        return recs if len(table) == KEYS else None

    recs = wait_for(compacted_with_tombstones, 120, "the table to be compacted")
    check_offsets(recs)
    table = [r for r in recs if not r[1].startswith(b"filler-")]
    assert table_of(table) == expected  # live keys: latest value; deleted: the tombstone
    assert sum(v is None for _, _, v in table) == len(DELETED)

    def tombstones_gone():
        recs = read_all(bs, topic_name)
        table = [r for r in recs if not r[1].startswith(b"filler-")]
        return recs if len(table) == KEYS - len(DELETED) else None

    recs = wait_for(tombstones_gone, RETENTION_MS / 1000 + 60, "the tombstones to go")
    check_offsets(recs)
    live = {k: v for k, v in expected.items() if v is not None}
    assert table_of([r for r in recs if not r[1].startswith(b"filler-")]) == live
    final = log_bytes(fresh_broker.data_dir, topic_name)
    live_bytes = sum(len(k) + len(v) for k, v in live.items())
    print(f"\ncompaction footprint (record batches below the active segment): "
          f"{peak / 1e3:.0f} kB -> {final / 1e3:.1f} kB; the live table is {len(live)} keys, "
          f"{live_bytes / 1e3:.1f} kB of keys+values before lz4")
    assert final < peak / 10


@pytest.mark.timeout(420)
def test_kill_9_while_cleaning_keeps_the_table(fresh_broker, topic_name):
    rounds = 12
    fresh_broker.overrides.update(BROKER)
    fresh_broker.start()
    bs = fresh_broker.bootstrap
    create(bs, topic_name, {**TOPIC_CONFIG, "internal.segment.bytes": str(64 * 1024)})
    part = fresh_broker.data_dir / f"{topic_name}-0"
    rng = random.Random(7)
    expected: dict[bytes, bytes | None] = {}
    produced = 0
    caught_cleaning = 0
    for r in range(rounds):
        batch = updates(produced, 8000) + [(key(rng.randrange(KEYS)), None) for _ in range(20)]
        produce(bs, topic_name, batch + filler(80, str(r)))
        for k, v in batch:
            expected[k] = v
        produced += 8000

        def cleaning_files():
            return [f for f in part.iterdir() if f.name.endswith((".cleaned", ".swap"))]

        deadline = time.monotonic() + 10
        while not cleaning_files() and time.monotonic() < deadline:
            time.sleep(0.002)
        if cleaning_files():
            caught_cleaning += 1
            time.sleep(rng.random() * 0.05)
        fresh_broker.kill()
        fresh_broker.start()
        bs = fresh_broker.bootstrap
        recs = read_all(bs, topic_name)
        check_offsets(recs)
        got = table_of([x for x in recs if not x[1].startswith(b"filler-")])
        for k, v in expected.items():
            if v is None:
                assert got.get(k) is None, f"round {r}: deleted {k!r} came back"
            else:
                assert got.get(k) == v, f"round {r}: {k!r} lost its latest value"
        assert set(got) <= set(expected)
    print(f"\nkill -9 rounds: {rounds}, of which {caught_cleaning} while .cleaned/.swap "
          "files were being written")
    assert caught_cleaning >= 1


def test_null_key_on_a_compacted_topic_is_rejected(broker, topic_name):
    create(broker.bootstrap, topic_name, {"cleanup.policy": "compact,delete"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0})
    results: list = []
    p.produce(topic_name, key=None, value=b"no key", on_delivery=lambda e, m: results.append(e))
    p.flush(30)  # its own batch: Kafka fails the whole batch holding a keyless record
    p.produce(topic_name, key=b"k", value=b"keyed", on_delivery=lambda e, m: results.append(e))
    assert p.flush(30) == 0
    assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD
    assert results[1] is None
    assert [(k, v) for _, k, v in read_all(broker.bootstrap, topic_name)] == [(b"k", b"keyed")]
