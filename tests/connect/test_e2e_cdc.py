"""Change data capture end to end, with crashes: PostgreSQL -> Spool -> PostgreSQL.

Real processes throughout: a broker of the test's own, one PostgreSQL server with two
databases, and two ``spool connect`` workers (distributed mode, a group each): the source
worker runs Debezium's PostgresConnector on table ``items`` of the first database, the sink
worker the JDBC sink connector (upsert by record key, deletes on tombstones, the table
auto-created) into the second. Both use the JSON converter with schemas.

The table starts with rows (read by the connector's initial snapshot); then N seeded mixed
changes (tests/helpers/pg_changes.py) are committed in 2K+1 bursts, as fast as one
connection commits them; during each of the first 2K bursts the source worker or the sink
worker (in turn) is killed with -9 once it is busy with the burst (a quarter of the
burst's records produced, or a quarter of its changes written to the sink's table), and
started again. At the end:

- the sink's table is identical to the source's (every column, compared as the source's
  types), and
- the change topic holds, per key, every committed change in commit order (first
  deliveries), each delete followed by its tombstone; ``at_least_once``: redeliveries
  after a crash allowed; ``exactly_once`` (the source worker with
  ``exactly.once.source.support=enabled``, the connector ``exactly.once.support=required``:
  KIP-618, records and offsets in one transaction), read with read_committed (the sink's
  consumer too, ``consumer.override.isolation.level``): none;
- the replication slot is confirmed past the last change's LSN (the connector committed
  the acknowledged LSNs back to PostgreSQL).

N=5,000 and K=2 by default; N=100,000 and K=5 under ``SPOOL_SOAK=1`` (``make soak``).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.helpers.connect_proc import ConnectProcess, distributed_props, wait_until
from tests.helpers.pg_changes import (
    ChangeGenerator,
    check_events,
    decode_event,
    wait_identical,
)

SOAK = os.environ.get("SPOOL_SOAK") == "1"
N = int(os.environ.get("SPOOL_E2E_CHANGES", 100_000 if SOAK else 5_000))
K = int(os.environ.get("SPOOL_E2E_KILLS", 5 if SOAK else 2))
INITIAL_ROWS = 300
JSON = "org.apache.kafka.connect.json.JsonConverter"
SCHEMAS = {"key.converter": JSON, "value.converter": JSON,
           "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
# short sessions, so a killed worker's group membership (and its sink consumer's) expires fast
WORKER = {"session.timeout.ms": "3000", "heartbeat.interval.ms": "500",
          "rebalance.timeout.ms": "10000", "offset.flush.interval.ms": "500",
          "consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "500",
          "task.shutdown.graceful.timeout.ms": "2000"}


def source_config(pg, db: str, prefix: str, uid: str, eos: bool) -> dict[str, str]:
    return {
        **({"exactly.once.support": "required"} if eos else {}),
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": pg.host, "database.port": str(pg.port),
        "database.user": "postgres", "database.password": "", "database.dbname": db,
        "topic.prefix": prefix, "table.include.list": "public.items",
        "plugin.name": "pgoutput", "slot.name": f"slot_{uid}",
        "publication.name": f"pub_{uid}", "snapshot.mode": "initial",
        **SCHEMAS,
    }


def sink_config(pg, db: str, topic: str, eos: bool) -> dict[str, str]:
    return {
        **({"consumer.override.isolation.level": "read_committed"} if eos else {}),
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connection.url": pg.url(db), "connection.username": "postgres",
        "connection.password": "",
        "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
        "schema.evolution": "basic",
        **SCHEMAS,
    }


def read_topic(bootstrap: str, topic: str) -> tuple[list[tuple[int, str, int | None]], int]:
    """Every record of the topic, decoded, partition by partition, in offset order; and the
    highest ``source.lsn`` among them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-check-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in parts}
        events: list[tuple[int, str, int | None]] = []
        lsn = 0
        for p in parts:
            if ends[p] == 0:
                continue
            c.assign([TopicPartition(topic, p, 0)])
            pos, deadline = 0, time.monotonic() + 120
            while pos < ends[p] and time.monotonic() < deadline:
                m = c.poll(1)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break  # the end (a transaction marker may sit at ends[p] - 1)
                    raise AssertionError(f"reading {topic}: {m.error()}")
                events.append(decode_event(m.key(), m.value()))
                if m.value() is not None:
                    lsn = max(lsn, json.loads(m.value())["payload"]["source"]["lsn"] or 0)
                pos = m.offset() + 1
        return events, lsn
    finally:
        c.close()


def _running(worker: ConnectProcess, name: str) -> None:
    worker.wait_running(name, 1, timeout=90)


class Progress:
    """How far the pipeline got: the change topic's records (the sum of its high
    watermarks), the sink table's highest ``rev`` (0 before it exists)."""

    def __init__(self, bootstrap: str, topic: str, sink_dsn: str, sink_table: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "log_level": 3,
                                  "group.id": f"e2e-progress-{uuid.uuid4().hex}"})
        self.conn = psycopg.connect(sink_dsn, autocommit=True)
        self.sink_table = sink_table

    def topic_end(self) -> int:
        md = self.consumer.list_topics(self.topic, timeout=10).topics[self.topic]
        return sum(self.consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                       timeout=10)[1] for p in md.partitions)

    def sink_rev(self) -> int:
        try:
            q = f'SELECT coalesce(max(rev), 0) FROM "{self.sink_table}"'
            return self.conn.execute(q).fetchone()[0]
        except psycopg.errors.UndefinedTable:
            return 0

    def close(self) -> None:
        self.consumer.close()
        self.conn.close()


def changes_with_crashes(gen: ChangeGenerator, dsn: str, n: int, progress: Progress,
                         victims: list[tuple[ConnectProcess, str]]) -> None:
    """Commit ``n`` changes in ``len(victims) + 1`` bursts, each as fast as one connection
    commits them; during burst i, once victim i is busy with it (the source: a quarter of
    the burst's records produced; the sink: a quarter of its changes written), kill -9 the
    victim, start it again and wait for its connector to run."""
    sizes = [n // (len(victims) + 1)] * len(victims)
    sizes.append(n - sum(sizes))
    for i, size in enumerate(sizes):
        errors: list[BaseException] = []
        records, rev = progress.topic_end(), gen.next_rev

        def commit(size: int = size, errors: list[BaseException] = errors) -> None:
            try:
                gen.run(dsn, size)
            except BaseException as e:  # noqa: BLE001 - reported by the caller's thread
                errors.append(e)

        t = threading.Thread(target=commit, name="changes")
        t.start()
        try:
            if i < len(victims):
                worker, name = victims[i]
                if name == "pg-source":
                    busy = lambda r=records, z=size: progress.topic_end() >= r + z // 4  # noqa: E731
                else:
                    busy = lambda r=rev, z=size: progress.sink_rev() >= r + z // 4  # noqa: E731
                wait_until(busy, timeout=120, interval=0.005, what=f"{name} busy")
                worker.kill()
                time.sleep(0.3 * (i % 3))
                worker.restart()
                _running(worker, name)
        finally:
            t.join()
        assert not errors, errors


def _diagnosis(*workers: ConnectProcess) -> str:
    out = []
    for w in workers:
        out.append(f"--- {w.name} log tail:\n{w.log_tail(3000)}")
    return "\n".join(out)


@pytest.mark.timeout(3600 if SOAK else 300)
@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_cdc_to_postgres_survives_kill_9_of_both_workers(fresh_broker, pg, pg_database,
                                                         tmp_path, delivery):
    fresh_broker.overrides.update({"group.min.session.timeout.ms": "1000",
                                   "num.partitions": "3"})
    eos = delivery == "exactly_once"
    broker = fresh_broker.start()
    uid = uuid.uuid4().hex[:8]
    src_db = pg_database
    sink_db = pg.create_database(f"{pg_database}_sink")
    src_dsn, sink_dsn = pg.dsn(src_db), pg.dsn(sink_db)
    prefix = f"e2e{uid}"
    topic = f"{prefix}.public.items"
    sink_table = f"{prefix}_public_items"  # table.name.format ${topic}, dots as _

    gen = ChangeGenerator(seed=21, table="items")
    gen.create(src_dsn)
    gen.run(src_dsn, INITIAL_ROWS)
    gen.mark_snapshot()

    source = ConnectProcess(tmp_path / "source", distributed_props(
        broker.bootstrap, f"e2e-src-{uid}", **WORKER,
        **{"exactly.once.source.support": "enabled" if eos else "disabled"}), name="source")
    sink = ConnectProcess(tmp_path / "sink", distributed_props(
        broker.bootstrap, f"e2e-sink-{uid}", **WORKER), name="sink")
    try:
        source.start()
        sink.start()
        a = source.call("POST", "/connectors", {"name": "pg-source",
                                               "config": source_config(pg, src_db, prefix, uid, eos)})
        assert a.status == 201, a.text
        _running(source, "pg-source")
        a = sink.call("POST", "/connectors", {"name": "pg-sink",
                                             "config": sink_config(pg, sink_db, topic, eos)})
        assert a.status == 201, a.text
        _running(sink, "pg-sink")
        diff = wait_identical(src_dsn, sink_dsn, "items", sink_table, timeout=90)
        assert diff.identical, f"after the snapshot: {diff}\n{_diagnosis(source, sink)}"

        progress = Progress(broker.bootstrap, topic, sink_dsn, sink_table)
        try:
            changes_with_crashes(gen, src_dsn, N, progress,
                                 [(source, "pg-source"), (sink, "pg-sink")] * K)
        finally:
            progress.close()
        assert gen.applied == INITIAL_ROWS + N

        diff = wait_identical(src_dsn, sink_dsn, "items", sink_table,
                              timeout=600 if SOAK else 120)
        assert diff.identical, f"{diff}\n{_diagnosis(source, sink)}"
        events, lsn = read_topic(broker.bootstrap, topic)
        problems = check_events(events, gen.history, exactly_once=eos)
        assert not problems, (f"{len(problems)} problems in {len(events)} records of {topic}: "
                              f"{problems[:10]}")
        # everything acknowledged: the slot is moved past the last change (WAL released)
        assert lsn > 0
        with psycopg.connect(src_dsn, autocommit=True) as conn:
            wait_until(lambda: conn.execute(
                "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots "
                "WHERE slot_name = %s", (f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}", f"slot_{uid}")
            ).fetchone()[0], timeout=30, what=f"slot_{uid} confirmed past {lsn}")
    finally:
        for w in (source, sink):
            w.stop()
        with psycopg.connect(src_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{uid}",))
