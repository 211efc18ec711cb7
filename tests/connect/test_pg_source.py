"""The PostgreSQL CDC source (spool.connect.postgres.source) against a real PostgreSQL.

The task is driven through the plugin API as the runtime drives it: ``start``, ``poll``,
``commit_record`` for each acknowledged record, the offsets of acknowledged records
stored, then ``commit``. ``Driver`` plays the runtime's part with an in-memory offset
store (what the worker's offset store answers through ``OffsetStorageReader``).
"""

from __future__ import annotations

import decimal
import time
import uuid
from typing import Any

import psycopg
import pytest

from spool.connect import api
from spool.connect.postgres import envelope as env
from spool.connect.postgres.source import PostgresConnector, PostgresSourceTask
from tests.helpers.postgres import PostgresServer


class Reader(api.OffsetStorageReader):
    def __init__(self, store: dict) -> None:
        self.store = store

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.store.get(tuple(sorted(partition.items())))


class Context(api.SourceTaskContext):
    def __init__(self, store: dict, props: dict[str, str]) -> None:
        self.offset_storage_reader = Reader(store)
        self.configs = props


class Driver:
    """A source task run as the worker runs it (module doc)."""

    def __init__(self, props: dict[str, str], store: dict | None = None) -> None:
        self.props = props
        self.store = {} if store is None else store
        self.task = PostgresSourceTask()
        self.task.initialize(Context(self.store, props))
        self.task.start(props)

    def poll(self, n: int, timeout: float = 20.0) -> list[api.SourceRecord]:
        """Poll until ``n`` records came (exactly: more is a failure)."""
        out: list[api.SourceRecord] = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            out.extend(self.task.poll())
        assert len(out) == n, [(r.topic, r.value and r.value["op"]) for r in out]
        return out

    def quiet(self, polls: int = 3) -> None:
        """Nothing more comes."""
        for _ in range(polls):
            got = self.task.poll()
            assert got == [], [(r.topic, r.value and r.value["op"], r.key) for r in got]

    def ack(self, records: list[api.SourceRecord]) -> None:
        """Acknowledge ``records`` (in order), store the last one's offset, then commit()."""
        for r in records:
            self.task.commit_record(r, api.RecordMetadata(r.topic, 0, 0))
        if records:
            last = records[-1]
            self.store[tuple(sorted(last.source_partition.items()))] = dict(last.source_offset)
        self.task.commit()

    def stop(self) -> None:
        self.task.stop()


@pytest.fixture
def db(pg: PostgresServer, pg_database: str):
    conn = psycopg.connect(pg.dsn(pg_database), autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


def props(pg: PostgresServer, dbname: str, **extra: str) -> dict[str, str]:
    p = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
         "database.hostname": pg.host, "database.port": str(pg.port),
         "database.user": "postgres", "database.dbname": dbname, "topic.prefix": "srv",
         "slot.name": f"s_{uuid.uuid4().hex[:10]}", "poll.interval.ms": "50"}
    p.update({k.replace("_", "."): v for k, v in extra.items()})
    return p


def ops(records: list[api.SourceRecord]) -> list[tuple]:
    """(topic, op or None for a tombstone, key dict, after/before id) per record."""
    out = []
    for r in records:
        key = dict(r.key) if r.key is not None else None
        if r.value is None:
            out.append((r.topic, None, key))
        else:
            row = r.value["after"] if r.value["after"] is not None else r.value["before"]
            out.append((r.topic, r.value["op"], key, dict(row)))
    return out


def slot_position(db: psycopg.Connection, slot: str) -> str:
    return db.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                      "WHERE slot_name = %s", (slot,)).fetchone()[0]


def wait_flushed(db: psycopg.Connection) -> None:
    """The test server runs synchronous_commit=off: decoding sees a commit once its WAL is
    flushed (within wal_writer_delay); flush now."""
    db.execute("SELECT pg_switch_wal()") if False else db.execute("CHECKPOINT")


def test_snapshot_then_stream_in_debeziums_envelope(pg, pg_database, db):
    db.execute("CREATE TABLE public.items (id int PRIMARY KEY, name text NOT NULL, "
               "price numeric(10,2))")
    db.execute("INSERT INTO items VALUES (1, 'a', 1.50), (2, 'b', NULL)")
    p = props(pg, pg_database)
    d = Driver(p)
    try:
        snap = d.poll(2)
        assert ops(snap) == [
            ("srv.public.items", "r", {"id": 1}, {"id": 1, "name": "a",
                                                  "price": decimal.Decimal("1.50")}),
            ("srv.public.items", "r", {"id": 2}, {"id": 2, "name": "b", "price": None})]
        assert [r.value["source"]["snapshot"] for r in snap] == ["true", "last"]
        assert snap[-1].source_offset["last_snapshot_record"] is True
        r = snap[0]
        assert r.key_schema.name == "srv.public.items.Key"
        assert r.value_schema.name == "srv.public.items.Envelope"
        assert [f.name for f in r.value_schema.fields] == [
            "before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction"]
        assert r.value_schema.field("after").schema.name == "srv.public.items.Value"
        price = r.value_schema.field("after").schema.field("price").schema
        assert (price.name, price.params["scale"], price.optional) == (env.DECIMAL, "2", True)
        src = r.value["source"]
        assert (src["connector"], src["name"], src["db"], src["schema"], src["table"]) == (
            "postgresql", "srv", pg_database, "public", "items")
        assert r.source_partition == {"server": "srv"}
        d.ack(snap)

        with db.transaction():
            db.execute("INSERT INTO items VALUES (3, 'c', 3)")
            db.execute("UPDATE items SET name = 'aa' WHERE id = 1")
        db.execute("DELETE FROM items WHERE id = 2")
        got = d.poll(4)
        assert ops(got) == [
            ("srv.public.items", "c", {"id": 3}, {"id": 3, "name": "c",
                                                  "price": decimal.Decimal("3.00")}),
            ("srv.public.items", "u", {"id": 1}, {"id": 1, "name": "aa",
                                                  "price": decimal.Decimal("1.50")}),
            ("srv.public.items", "d", {"id": 2}, {"id": 2, "name": "", "price": None}),
            ("srv.public.items", None, {"id": 2})]
        c, u, dl, _ = got
        assert c.value["before"] is None and u.value["before"] is None  # REPLICA IDENTITY DEFAULT
        assert dl.value["after"] is None
        assert c.value["source"]["txId"] == u.value["source"]["txId"]
        assert dl.value["source"]["txId"] != c.value["source"]["txId"]
        assert c.value["source"]["snapshot"] == "false"
        assert c.value["source"]["lsn"] == c.source_offset["lsn"] > 0
        assert [r.source_offset["lsn_events_processed"] for r in got] == [1, 2, 1, 2]
        d.quiet()
    finally:
        d.stop()
