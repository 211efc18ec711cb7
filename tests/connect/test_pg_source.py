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
from spool.connect.postgres import pgoutput
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


def slot_position(db: psycopg.Connection, slot: str) -> int:
    return pgoutput.parse_lsn(db.execute("SELECT confirmed_flush_lsn::text FROM "
                                         "pg_replication_slots WHERE slot_name = %s",
                                         (slot,)).fetchone()[0])


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


TYPES_DDL = """CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE s1.typed (
  id bigint PRIMARY KEY, i2 smallint, i4 int NOT NULL, f4 real, f8 double precision,
  b bool, n numeric(12,3), nv numeric, m money, t text, vc varchar(10), ch char(3),
  d date, tm time, tm3 time(3), ts timestamp, ts3 timestamp(3), tstz timestamptz,
  ttz timetz, iv interval, by bytea, j json, jb jsonb, u uuid, bit1 bit(1),
  bits bit(10), ia int[], ta text[], e mood, dom posint, inet_ inet)"""

TYPES_ROW = """INSERT INTO s1.typed VALUES (
  {id}, -3, 7, 1.5, -2.25e10, true, 12345.678, -0.000123, 12.34, 'héllo', 'v', 'ab',
  '2024-02-29', '13:14:15.123456', '13:14:15.5', '2024-02-29 13:14:15.123456',
  '1969-12-31 23:59:59.999', '2024-02-29 13:14:15.5+02', '10:00:00+05:30',
  '1 year 2 mons 3 days 04:05:06.5', '\\x00ff', '{{"a": [1, 2]}}', '{{"b": null}}',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', B'1', B'1000000001', '{{1,NULL,3}}',
  '{{"x,y","q\\"z",NULL}}', 'happy', 5, '10.0.0.1/8')"""


def test_column_types_as_debeziums_defaults_alike_in_snapshot_and_stream(pg, pg_database, db):
    db.execute("CREATE SCHEMA s1")
    db.execute(TYPES_DDL)
    db.execute(TYPES_ROW.format(id=1))
    db.execute("INSERT INTO s1.typed (id, i4) VALUES (2, 0)")  # nulls
    d = Driver(props(pg, pg_database))
    try:
        snap = d.poll(2)
        d.ack(snap)
        db.execute(TYPES_ROW.format(id=3))
        (streamed,) = d.poll(1)
    finally:
        d.stop()
    row = dict(snap[0].value["after"])
    assert dict(streamed.value["after"]) == {**row, "id": 3}
    assert streamed.value_schema == snap[0].value_schema
    schema = snap[0].value_schema.field("after").schema
    names = {f.name: (f.schema.type, f.schema.name) for f in schema.fields}
    expect = {
        "id": (("int64", None), 1), "i2": (("int16", None), -3), "i4": (("int32", None), 7),
        "f4": (("float32", None), 1.5), "f8": (("float64", None), -2.25e10),
        "b": (("boolean", None), True),
        "n": (("bytes", env.DECIMAL), decimal.Decimal("12345.678")),
        "m": (("bytes", env.DECIMAL), decimal.Decimal("12.34")),
        "t": (("string", None), "héllo"), "vc": (("string", None), "v"),
        "ch": (("string", None), "ab "),
        "d": (("int32", env.DATE), 19782),
        "tm": (("int64", env.MICRO_TIME), 47655123456),
        "tm3": (("int32", env.TIME), 47655500),
        "ts": (("int64", env.MICRO_TIMESTAMP), 1709212455123456),
        "ts3": (("int64", env.TIMESTAMP), -1),
        "tstz": (("string", env.ZONED_TIMESTAMP), "2024-02-29T11:14:15.500000Z"),
        "ttz": (("string", env.ZONED_TIME), "04:30:00.000000Z"),
        "iv": (("int64", env.MICRO_DURATION),
               int((365.25 + 2 * 30.4375 + 3) * 86400e6) + (4 * 3600 + 5 * 60 + 6) * 10**6
               + 500000),
        "by": (("bytes", None), b"\x00\xff"),
        "j": (("string", env.JSON), '{"a": [1, 2]}'),
        "jb": (("string", env.JSON), '{"b": null}'),
        "u": (("string", env.UUID), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        "bit1": (("boolean", None), True),
        "bits": (("bytes", env.BITS), (0b1000000001).to_bytes(2, "little")),
        "ia": (("array", None), [1, None, 3]),
        "ta": (("array", None), ["x,y", 'q"z', None]),
        "e": (("string", env.ENUM), "happy"),
        "dom": (("int32", None), 5),
        "inet_": (("string", None), "10.0.0.1/8"),
    }
    for col, (typ, value) in expect.items():
        assert (col, names[col]) == (col, typ)
        assert (col, row[col]) == (col, value)
    nv = row["nv"]
    assert schema.field("nv").schema.name == env.VARIABLE_SCALE_DECIMAL
    assert env.decimal_from_variable_scale(nv) == decimal.Decimal("-0.000123")
    assert schema.field("e").schema.params["allowed"] == "sad,ok,happy"
    assert schema.field("i4").schema.optional is False
    assert schema.field("t").schema.optional is True
    nulls = dict(snap[1].value["after"])
    assert {k for k, v in nulls.items() if v is not None} == {"id", "i4"}
    from spool.connect.converters.json import JsonConverter  # every value fits its schema
    conv = JsonConverter()
    conv.configure({}, False)
    for r in (*snap, streamed):
        schema, value = conv.to_connect_data(
            r.topic, None, conv.from_connect_data(r.topic, None, r.value_schema, r.value))
        assert value["after"]["id"] == r.value["after"]["id"]


@pytest.mark.parametrize("sql_value, pg_type, expected", [
    ("'2024-02-29'", "date", 19782),
    ("'0044-03-15 BC'", "date", -735_160),
    ("'12345-01-01'", "date", 3_789_391),
    ("'infinity'", "date", 106_751_991),
    ("'1900-01-01 00:00:00.000001'", "timestamp", -2_208_988_799_999_999),
    ("'-infinity'", "timestamp", -9223372036832400000),
    ("'2024-01-01 00:00:00+14'", "timestamptz", "2023-12-31T10:00:00.000000Z"),
    ("'0010-06-01 12:00:00.25 BC'", "timestamptz(2)", "-0009-06-01T12:00:00.25Z"),
    ("'12345-06-01 00:00:00'", "timestamptz(0)", "+12345-06-01T00:00:00Z"),
    ("'24:00:00'", "time", 86_400_000_000),
    ("'23:59:59.999-08'", "timetz(3)", "07:59:59.999Z"),
    ("'-1 years -2 mons +3 days -04:05:06.5'", "interval",
     -(14 * 30.4375 - 3) * 86_400_000_000 - (4 * 3600 + 5 * 60 + 6.5) * 1_000_000),
    ("'NaN'", "float8", "nan"),
    ("'-Infinity'", "float4", float("-inf")),
    ("'-$1,234.50'", "money", decimal.Decimal("-1234.50")),
    ("'{\"a\\\\b\",\"\",\"NULL\"}'", "text[]", ["a\\b", "", "NULL"]),
    ("'[0:1]={1,2}'", "int[]", [1, 2]),
    ("B'0000000011'", "varbit", b"\x03\x00"),
])
def test_text_outputs_read_as_debezium_values(pg, pg_database, db, sql_value, pg_type,
                                              expected):
    """PostgreSQL's text output of edge values (the session settings the task uses) read
    as Debezium's values: BC and five-digit years, infinities, offsets, negative intervals,
    NaN, money, arrays with quotes and backslashes."""
    from spool.connect.postgres.pg_types import SESSION_SETTINGS, Catalog
    from spool.connect.postgres.snapshot import text_loaders

    for setting in SESSION_SETTINGS:
        db.execute(setting)
    db.execute(f"CREATE TEMP TABLE tt (v {pg_type})")
    db.execute(f"INSERT INTO tt VALUES ({sql_value})")
    oid, typmod = db.execute("SELECT atttypid, atttypmod FROM pg_attribute WHERE attrelid = "
                             "'tt'::regclass AND attname = 'v'").fetchone()
    text_loaders(db, {int(oid)})
    (text,) = db.execute("SELECT v FROM tt").fetchone()
    _, parse = Catalog(db, topic_prefix="x").column_type(int(oid), int(typmod))
    got = parse(text)
    if expected == "nan":
        assert got != got
    elif isinstance(expected, float) and not isinstance(got, str):
        assert got == pytest.approx(expected, abs=1)
    else:
        assert got == expected, text


def test_acknowledged_changes_are_not_resent_and_unacknowledged_are(pg, pg_database, db):
    """The slot moves only in commit(), to what the stored offsets cover; a restarted task
    sends exactly what was not acknowledged, even from the middle of a transaction."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
    p = props(pg, pg_database, snapshot_mode="never")
    store: dict = {}
    d = Driver(p, store)
    try:
        start = slot_position(db, p["slot.name"])
        with db.transaction():
            for i in range(5):
                db.execute("INSERT INTO t VALUES (%s, 0)", (i,))
        db.execute("UPDATE t SET v = 1 WHERE id = 0")
        got = d.poll(6)
        assert [o[1] for o in ops(got)] == ["c"] * 5 + ["u"]
        assert slot_position(db, p["slot.name"]) == start  # nothing acknowledged
        d.ack(got[:3])  # the transaction's first three of five
        mid = slot_position(db, p["slot.name"])
        assert mid != start
    finally:
        d.stop()
    d = Driver(p, store)
    try:
        again = d.poll(3)  # the rest of the transaction and the update, once
        assert [(o[1], o[2]) for o in ops(again)] == [("c", {"id": 3}), ("c", {"id": 4}),
                                                        ("u", {"id": 0})]
        d.quiet()
        d.ack(again)
        assert slot_position(db, p["slot.name"]) > mid
    finally:
        d.stop()
    d = Driver(p, store)
    try:
        d.quiet()
        db.execute("DELETE FROM t WHERE id = 4")
        assert [o[1] for o in ops(d.poll(2))] == ["d", None]
    finally:
        d.stop()  # not acknowledged: sent again
    d = Driver(p, store)
    try:
        assert [o[1] for o in ops(d.poll(2))] == ["d", None]
    finally:
        d.stop()


def test_a_large_transaction_is_handed_out_in_batches(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    p = props(pg, pg_database, snapshot_mode="never", max_batch_size="100")
    store: dict = {}
    d = Driver(p, store)
    try:
        db.execute("INSERT INTO t SELECT generate_series(1, 1000)")
        sizes, got = [], []
        while len(got) < 250:
            batch = d.task.poll()
            if batch:
                sizes.append(len(batch))
                got += batch
        assert sizes == [100, 100, 100]
        d.ack(got[:250])
    finally:
        d.stop()
    d = Driver(p, store)
    try:
        rest = d.poll(750)
        assert [r.key["id"] for r in rest] == list(range(251, 1001))
        assert rest[-1].source_offset["lsn_events_processed"] == 1000
    finally:
        d.stop()


def test_snapshot_is_exact_with_the_stream(pg, pg_database, db):
    """Rows committed after the slot's exported snapshot come once, in the stream; an
    interrupted snapshot is redone on restart."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 250) g")
    p = props(pg, pg_database, max_batch_size="100")
    store: dict = {}
    d = Driver(p, store)
    try:
        first = d.poll(100)
        d.ack(first)  # a part of the snapshot only
    finally:
        d.stop()
    d = Driver(p, store)  # snapshot again, from scratch
    try:
        db.execute("INSERT INTO t VALUES (251, 'after')")
        db.execute("UPDATE t SET v = 'y' WHERE id = 1")
        snap = d.poll(250)
        assert [r.value["op"] for r in snap] == ["r"] * 250
        assert sorted(r.key["id"] for r in snap) == list(range(1, 251))
        assert {r.value["after"]["v"] for r in snap} == {"x"}
        assert [r.value["source"]["snapshot"] for r in snap[-2:]] == ["true", "last"]
        d.ack(snap)
        stream = d.poll(2)
        assert [(o[1], o[3]) for o in ops(stream)] == [("c", {"id": 251, "v": "after"}),
                                                       ("u", {"id": 1, "v": "y"})]
        d.ack(stream)
        d.quiet()
    finally:
        d.stop()
    d = Driver(p, store)  # snapshot completed: streaming only
    try:
        d.quiet()
    finally:
        d.stop()


def test_changes_while_an_interrupted_snapshot_is_down_are_streamed_after_it(
        pg, pg_database, db):
    """A row sent by a snapshot that was then interrupted, and deleted (or updated) before
    the snapshot is taken again, gets its delete: the slot is kept, and what changed while
    the task was down is streamed after the new snapshot."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 5) g")
    p = props(pg, pg_database, max_batch_size="2")
    store: dict = {}
    d = Driver(p, store)
    try:
        first = d.poll(2)
        assert sorted(r.key["id"] for r in first) == [1, 2]
        d.ack(first)  # a part of the snapshot only
    finally:
        d.stop()
    db.execute("DELETE FROM t WHERE id = 2")
    db.execute("UPDATE t SET v = 'y' WHERE id = 1")
    d = Driver(p, store)
    try:
        snap = d.poll(4)
        assert sorted((r.key["id"], r.value["after"]["v"]) for r in snap) == [
            (1, "y"), (3, "x"), (4, "x"), (5, "x")]
        d.ack(snap)
        stream = d.poll(3)
        assert [(o[1], o[2]) for o in ops(stream)] == [("d", {"id": 2}), (None, {"id": 2}),
                                                       ("u", {"id": 1})]
        d.ack(stream)
        d.quiet()
    finally:
        d.stop()


def test_filters_filtered_publication_and_uncaptured_traffic(pg, pg_database, db):
    db.execute("CREATE TABLE a (id int PRIMARY KEY)")
    db.execute("CREATE TABLE b (id int PRIMARY KEY)")
    db.execute("CREATE TABLE nokey (v int)")
    db.execute('CREATE TABLE "Odd tablé" (id int PRIMARY KEY)')
    p = props(pg, pg_database, table_include_list="public\\.(a|nokey|Odd.*)",
              publication_autocreate_mode="filtered", publication_name="pub_f")
    d = Driver(p)
    try:
        published = {r[0] for r in db.execute(
            "SELECT tablename FROM pg_publication_tables WHERE pubname = 'pub_f'")}
        assert published == {"a", "nokey", "Odd tablé"}
        d.quiet()
        db.execute("INSERT INTO b VALUES (1)")
        db.execute("INSERT INTO a VALUES (1)")
        db.execute("INSERT INTO nokey VALUES (7)")
        db.execute('INSERT INTO "Odd tablé" VALUES (3)')
        got = d.poll(3)
        assert ops(got) == [("srv.public.a", "c", {"id": 1}, {"id": 1}),
                            ("srv.public.nokey", "c", None, {"v": 7}),
                            ("srv.public.Odd_tabl_", "c", {"id": 3}, {"id": 3})]
        assert got[1].key_schema is None
        d.ack(got)
        before = slot_position(db, p["slot.name"])
        db.execute("ALTER PUBLICATION pub_f ADD TABLE b")
        db.execute("INSERT INTO b SELECT generate_series(2, 5)")  # not captured
        deadline = time.monotonic() + 20
        while slot_position(db, p["slot.name"]) == before and time.monotonic() < deadline:
            d.quiet(1)
            d.ack([])
        assert slot_position(db, p["slot.name"]) > before  # WAL is not pinned
    finally:
        d.stop()


def test_partitions_are_captured_as_their_own_tables(pg, pg_database, db):
    db.execute("CREATE TABLE m (id int, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at)")
    db.execute("CREATE TABLE m_2023 PARTITION OF m FOR VALUES FROM ('2023-01-01') TO "
               "('2024-01-01')")
    db.execute("CREATE TABLE m_2024 PARTITION OF m FOR VALUES FROM ('2024-01-01') TO "
               "('2025-01-01')")
    db.execute("INSERT INTO m VALUES (1, '2023-05-01')")
    d = Driver(props(pg, pg_database))
    try:
        (snap,) = d.poll(1)
        d.ack([snap])
        db.execute("INSERT INTO m VALUES (2, '2024-05-01')")
        (streamed,) = d.poll(1)
        assert [(r.topic, dict(r.key)) for r in (snap, streamed)] == [
            ("srv.public.m_2023", {"id": 1, "at": 19478}),
            ("srv.public.m_2024", {"id": 2, "at": 19844})]
    finally:
        d.stop()


def test_replica_identity_full_and_primary_key_changes(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    p = props(pg, pg_database, tombstones_on_delete="false")
    d = Driver(p)
    try:
        d.ack(d.poll(1))
        db.execute("UPDATE t SET v = 'b' WHERE id = 1")
        db.execute("UPDATE t SET id = 2 WHERE id = 1")
        db.execute("DELETE FROM t")
        got = d.poll(4)
        assert [(r.value["op"], dict(r.key),
                 r.value["before"] and dict(r.value["before"]),
                 r.value["after"] and dict(r.value["after"])) for r in got] == [
            ("u", {"id": 1}, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}),
            ("d", {"id": 1}, {"id": 1, "v": "b"}, None),  # the key changed: d, then c
            ("c", {"id": 2}, None, {"id": 2, "v": "b"}),
            ("d", {"id": 2}, {"id": 2, "v": "b"}, None)]  # no tombstones
        d.quiet()
    finally:
        d.stop()


def test_unchanged_toast_values_and_schema_changes(pg, pg_database, db):
    """An update leaving a TOASTed value unchanged: the value from the old row under
    REPLICA IDENTITY FULL, Debezium's placeholder otherwise. A column added or dropped
    while streaming changes the events' schema from the next change on."""
    big = uuid.uuid4().hex * 400  # 12,800 characters, incompressible enough to be TOASTed
    db.execute("CREATE TABLE full_ (id int PRIMARY KEY, v int, doc text)")
    db.execute("ALTER TABLE full_ REPLICA IDENTITY FULL")
    db.execute("CREATE TABLE dflt (id int PRIMARY KEY, v int, doc text)")
    for t in ("full_", "dflt"):
        db.execute(f"ALTER TABLE {t} ALTER COLUMN doc SET STORAGE EXTERNAL")
        db.execute(f"INSERT INTO {t} VALUES (1, 0, %s)", (big,))
    d = Driver(props(pg, pg_database, snapshot_mode="no_data"))
    try:
        db.execute("UPDATE full_ SET v = 1")
        db.execute("UPDATE dflt SET v = 1")
        full, dflt = d.poll(2)
        assert full.value["after"]["doc"] == big and full.value["before"]["doc"] == big
        assert dflt.value["after"]["doc"] == "__debezium_unavailable_value"
        d.ack([full, dflt])
        db.execute("ALTER TABLE dflt ADD COLUMN extra numeric(4,1) NOT NULL DEFAULT 2.5")
        db.execute("UPDATE dflt SET v = 2, doc = 'small'")
        db.execute("ALTER TABLE dflt DROP COLUMN doc")
        db.execute("INSERT INTO dflt VALUES (2, 3)")
        added, dropped = d.poll(2)
        assert dict(added.value["after"]) == {"id": 1, "v": 2, "doc": "small",
                                              "extra": decimal.Decimal("2.5")}
        assert added.value_schema.field("after").schema.field("extra").schema.optional is False
        assert dict(dropped.value["after"]) == {"id": 2, "v": 3, "extra": decimal.Decimal("2.5")}
        d.ack([added, dropped])
    finally:
        d.stop()


def test_source_types_propagated_as_debezium_does(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY, name varchar(40), price numeric(12,2), "
               "code char(3), n int)")
    db.execute("INSERT INTO t VALUES (1, 'a', 1, 'x', 2)")
    d = Driver(props(pg, pg_database, column_propagate_source_type="public\\.t\\.(name|price)",
                     datatype_propagate_source_type="bpchar"))
    try:
        (r,) = d.poll(1)
    finally:
        d.stop()
    row = r.value_schema.field("after").schema
    assert {f.name: f.schema.params for f in row.fields
            if any(k.startswith("__debezium") for k in f.schema.params)} == {
        "name": {"__debezium.source.column.type": "VARCHAR",
                 "__debezium.source.column.length": "40"},
        "price": {"scale": "2", "connect.decimal.precision": "12",
                  "__debezium.source.column.type": "NUMERIC",
                  "__debezium.source.column.length": "12",
                  "__debezium.source.column.scale": "2"},
        "code": {"__debezium.source.column.type": "BPCHAR",
                 "__debezium.source.column.length": "3"}}


def test_initial_only_and_slot_drop_on_stop(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db.execute("INSERT INTO t VALUES (1)")
    p = props(pg, pg_database, snapshot_mode="initial_only")
    d = Driver(p)
    try:
        d.ack(d.poll(1))
        db.execute("INSERT INTO t VALUES (2)")
        d.quiet()
    finally:
        d.stop()
    assert db.execute("SELECT count(*) FROM pg_replication_slots "
                      "WHERE database = current_database()").fetchone()[0] == 0
    p = props(pg, pg_database, slot_drop_on_stop="true", snapshot_mode="no_data")
    d = Driver(p)
    try:
        d.quiet()
        assert slot_position(db, p["slot.name"])
    finally:
        d.stop()
    assert db.execute("SELECT count(*) FROM pg_replication_slots "
                      "WHERE database = current_database()").fetchone()[0] == 0


def test_snapshot_always_disabled_publication_and_a_foreign_slot(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db.execute("INSERT INTO t VALUES (1)")
    p = props(pg, pg_database, snapshot_mode="always")
    store: dict = {}
    for _ in range(2):  # a snapshot at every start
        d = Driver(p, store)
        try:
            assert [r.value["op"] for r in d.poll(1)] == ["r"]
            d.ack([])
            d.quiet()
        finally:
            d.stop()
    with pytest.raises(api.ConnectError, match="Publication autocreation is disabled"):
        Driver(props(pg, pg_database, publication_autocreate_mode="disabled",
                     publication_name="nope"))
    db.execute("SELECT pg_create_logical_replication_slot('foreign_slot', 'test_decoding')")
    try:
        with pytest.raises(api.ConnectError, match="exists for plugin test_decoding"):
            Driver(props(pg, pg_database, slot_name="foreign_slot", snapshot_mode="never"))
    finally:
        db.execute("SELECT pg_drop_replication_slot('foreign_slot')")


def test_skipped_operations_and_message_key_columns(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY, code text NOT NULL, v int)")
    db.execute("ALTER TABLE t REPLICA IDENTITY FULL")  # a delete's key needs code
    db.execute("CREATE TABLE nokey (a int NOT NULL, b int)")
    p = props(pg, pg_database, snapshot_mode="never", skipped_operations="u,t",
              message_key_columns="public\\.t:code;public\\.no.*:a")
    d = Driver(p)
    try:
        db.execute("INSERT INTO t VALUES (1, 'x', 0)")
        db.execute("UPDATE t SET v = 1")
        db.execute("DELETE FROM t")
        db.execute("INSERT INTO nokey VALUES (5, 6)")
        db.execute("TRUNCATE nokey")
        got = d.poll(4)
        assert [(r.topic, r.value and r.value["op"], dict(r.key)) for r in got] == [
            ("srv.public.t", "c", {"code": "x"}), ("srv.public.t", "d", {"code": "x"}),
            ("srv.public.t", None, {"code": "x"}), ("srv.public.nokey", "c", {"a": 5})]
        assert got[0].key_schema.name == "srv.public.t.Key"
        d.quiet()
    finally:
        d.stop()
    errors = PostgresConnector().validate({**p, "message.key.columns": "public.t",
                                           "skipped.operations": "x"})
    assert errors["message.key.columns"].errors == [
        "Invalid value public.t for configuration message.key.columns: 'public.t' is not "
        "'<table regex>:<column>[,<column>...]'"]
    assert errors["skipped.operations"].errors == [
        "Invalid value x for configuration skipped.operations: String must be one of: "
        "c, u, d, t, none"]


def test_connector_config_and_validation(pg, pg_database):
    c = PostgresConnector()
    ok = props(pg, pg_database)
    values = c.validate(ok)
    assert {k: v.errors for k, v in values.items() if v.errors} == {}
    bad = {**ok, "plugin.name": "decoderbufs", "database.port": "x"}
    del bad["topic.prefix"]
    errors = {k: v.errors for k, v in c.validate(bad).items() if v.errors}
    assert errors == {
        "plugin.name": ["Invalid value decoderbufs for configuration plugin.name: String "
                        "must be one of: pgoutput"],
        "database.port": ["Invalid value x for configuration database.port: Not a number "
                          "of type INT"],
        "topic.prefix": ['Missing required configuration "topic.prefix" which has no '
                         'default value.']}
    down = c.validate({**ok, "database.dbname": "no_such_db"})
    assert down["database.hostname"].errors and "no_such_db" in down["database.hostname"].errors[0]
    c.start(ok)
    assert c.task_configs(4) == [ok]
    assert c.task_class() is PostgresSourceTask
    with pytest.raises(api.ConfigError):
        PostgresSourceTask().start({**ok, "snapshot.mode": "sometimes"})


def test_a_lost_connection_is_reestablished_without_loss_or_repeats(pg, pg_database, db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    p = props(pg, pg_database, snapshot_mode="never")
    d = Driver(p)
    try:
        db.execute("INSERT INTO t VALUES (1)")
        first = d.poll(1)  # polled, not acknowledged
        temp_slot = d.task.temp_slot
        (pid,) = db.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name "
                            "LIKE %s", (p["slot.name"] + "_spool_%",)).fetchone()
        db.execute("SELECT pg_terminate_backend(%s)", (pid,))
        db.execute("INSERT INTO t VALUES (2)")
        rest = d.poll(1)
        assert [r.key["id"] for r in first + rest] == [1, 2]
        assert d.task.temp_slot != temp_slot  # a new session, a new temporary slot
        d.quiet()
        d.ack(first + rest)
    finally:
        d.stop()


def _event(r: api.SourceRecord) -> tuple[int, str, int | None]:
    if r.value is None:
        return r.key["id"], "tombstone", None
    row = r.value["before"] if r.value["op"] == "d" else r.value["after"]
    return r.key["id"], r.value["op"], row["rev"]


def test_mixed_changes_across_restarts_arrive_once_in_commit_order(pg, pg_database):
    """A seeded mix of inserts, updates and deletes in transactions of varying size,
    committed while the task is stopped K times with only a random prefix of what it sent
    acknowledged: the acknowledged events are every change, once, in commit order per
    key, each delete followed by its tombstone (CI: 3,000 changes, 5 restarts; SPOOL_SOAK=1:
    30,000 and 20)."""
    import os
    import random
    import threading

    from tests.helpers.pg_changes import ChangeGenerator, check_events

    soak = os.environ.get("SPOOL_SOAK") == "1"
    n, restarts = (30_000, 20) if soak else (3_000, 5)
    dsn = pg.dsn(pg_database)
    gen = ChangeGenerator(21, "items")
    gen.create(dsn)
    gen.run(dsn, 300)
    gen.mark_snapshot()
    rng = random.Random(6)
    p = props(pg, pg_database, max_batch_size="97")
    store: dict = {}
    events: list[tuple[int, str, int | None]] = []

    d = Driver(p, store)  # the snapshot, acknowledged whole
    snap = d.poll(len(gen.rows))
    d.ack(snap)
    events += [_event(r) for r in snap]
    done = threading.Event()
    writer = threading.Thread(target=lambda: (gen.run(dsn, n, pause_s=0.001), done.set()))
    writer.start()
    try:
        for _ in range(restarts):
            sent: list[api.SourceRecord] = []
            deadline = time.monotonic() + 20
            while len(sent) < n // (restarts + 1) and time.monotonic() < deadline:
                sent += d.task.poll()
            acked = sent[:rng.randint(0, len(sent))]
            d.ack(acked)
            events += [_event(r) for r in acked]
            d.stop()  # the rest was never acknowledged
            d = Driver(p, store)
        writer.join(120)
        assert done.is_set()
        want = sum(len(h) + sum(op == "d" for op, _ in h) for h in gen.history.values())
        rest: list[api.SourceRecord] = []
        deadline = time.monotonic() + 60
        while len(events) + len(rest) < want and time.monotonic() < deadline:
            rest += d.task.poll()
        d.ack(rest)
        events += [_event(r) for r in rest]
        d.quiet()
    finally:
        done.wait(120)
        writer.join()
        d.stop()
    assert check_events(events, gen.history, exactly_once=True) == []


def test_streaming_goes_on_after_the_server_restarts():
    """PostgreSQL restarted under a streaming task (its own server: the shared one stays
    up): polls while it is down return nothing, then the stream resumes after the last
    polled change, nothing lost or repeated."""
    import shutil

    server = PostgresServer.in_temp_dir().start()
    try:
        server.create_database("r")
        with psycopg.connect(server.dsn("r"), autocommit=True) as c:
            c.execute("CREATE TABLE t (id int PRIMARY KEY)")
        d = Driver(props(server, "r", snapshot_mode="never"))
        try:
            with psycopg.connect(server.dsn("r"), autocommit=True) as c:
                c.execute("INSERT INTO t VALUES (1)")
            first = d.poll(1)
            server.stop()
            assert d.task.poll() == []  # down: nothing, no failure
            server.start()
            with psycopg.connect(server.dsn("r"), autocommit=True) as c:
                c.execute("INSERT INTO t VALUES (2)")
            rest = d.poll(1)
            assert [r.key["id"] for r in first + rest] == [1, 2]
            d.quiet()
            d.ack(first + rest)
        finally:
            d.stop()
    finally:
        server.stop()
        shutil.rmtree(server.base_dir, ignore_errors=True)


# ---- through the runtime: a Worker producing to a real broker


class _Statuses:
    def __init__(self) -> None:
        self.states: dict[Any, list[tuple[str, str | None]]] = {}

    def connector_status(self, name: str, state: str, trace: str | None = None) -> None:
        self.states.setdefault(name, []).append((state, trace))

    def task_status(self, task_id: Any, state: str, trace: str | None = None) -> None:
        self.states.setdefault(task_id, []).append((state, trace))

    def connector_topic(self, name: str, topic: str) -> None:
        pass

    def wait(self, who: Any, state: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.states.get(who, [])
            if got and got[-1][0] == state:
                return
            assert not got or got[-1][0] != "FAILED", got[-1][1]
            time.sleep(0.05)
        raise AssertionError(f"{who}: {self.states.get(who)}, not {state}")


def _worker(bootstrap: str, **extra: str):
    from spool.connect.offset_store import KafkaOffsetStore
    from spool.connect.plugins import Plugins
    from spool.connect.worker import Worker
    from spool.connect.worker_config import WorkerConfig

    uid = uuid.uuid4().hex[:8]
    config = WorkerConfig.from_props({
        "bootstrap.servers": bootstrap, "group.id": f"pgsrc-{uid}",
        "config.storage.topic": f"pgsrc-configs-{uid}",
        "offset.storage.topic": f"pgsrc-offsets-{uid}",
        "status.storage.topic": f"pgsrc-status-{uid}", "offset.storage.partitions": "1",
        "offset.flush.interval.ms": "100",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", **extra},
        standalone=False)
    store = KafkaOffsetStore(config)
    store.start()
    statuses = _Statuses()
    return Worker(config, Plugins.discover(), store, statuses), store, statuses


def _read(bootstrap: str, topic: str, n: int, timeout: float = 30.0, **conf: str) -> list:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    out: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            out.extend(m for m in c.consume(100, 0.2) if m.error() is None)
        extra = c.consume(100, 0.5)  # nothing more
        out.extend(m for m in extra if m.error() is None)
    finally:
        c.close()
    return out


def _changes(msgs: list) -> list[tuple]:
    import json as _json

    out = []
    for m in msgs:
        key = _json.loads(m.key())["payload"]
        if m.value() is None:
            out.append((None, key))
            continue
        v = _json.loads(m.value())["payload"]
        out.append((v["op"], key, v["after"] if v["after"] is not None else v["before"]))
    return out


@pytest.mark.parametrize("eos", [False, True], ids=["at-least-once", "exactly-once"])
def test_through_the_worker_to_spool(broker, pg, pg_database, db, eos):
    """Snapshot and stream through the runtime (JsonConverter with schemas) into Spool;
    the slot advances once the worker commits the offsets; a restarted task resumes after
    what was acknowledged. Exactly-once (KIP-618): records and offsets in transactions."""
    import json as _json

    from spool.connect.herder import TaskId

    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text, n numeric(6,2))")
    db.execute("INSERT INTO t VALUES (1, 'a', 1.25), (2, 'b', NULL)")
    prefix = f"cdc{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}.public.t"
    p = {**props(pg, pg_database), "name": prefix, "tasks.max": "1", "topic.prefix": prefix}
    extra = {"exactly.once.source.support": "enabled"} if eos else {}
    read = {"isolation.level": "read_committed"} if eos else {}
    worker, store, statuses = _worker(broker.bootstrap, **extra)
    tid = TaskId(prefix, 0)
    try:
        worker.start_connector(prefix, p, "STARTED", lambda _n: None)
        (tc,) = worker.connector_task_configs(prefix, 1)
        worker.start_task(tid, p, tc, "STARTED")
        statuses.wait(tid, "RUNNING")
        start = slot_position(db, p["slot.name"])
        db.execute("UPDATE t SET v = 'aa' WHERE id = 1")
        db.execute("DELETE FROM t WHERE id = 2")
        msgs = _read(broker.bootstrap, topic, 5, **read)
        assert _changes(msgs) == [
            ("r", {"id": 1}, {"id": 1, "v": "a", "n": "fQ=="}),  # Decimal: base64, Kafka's
            ("r", {"id": 2}, {"id": 2, "v": "b", "n": None}),
            ("u", {"id": 1}, {"id": 1, "v": "aa", "n": "fQ=="}),
            ("d", {"id": 2}, {"id": 2, "v": None, "n": None}),
            (None, {"id": 2})]
        schema = _json.loads(msgs[0].value())["schema"]
        assert (schema["name"], schema["version"]) == (f"{topic}.Envelope", 2)
        assert [f["field"] for f in schema["fields"]][:4] == ["before", "after", "source", "op"]
        deadline = time.monotonic() + 20
        while slot_position(db, p["slot.name"]) == start and time.monotonic() < deadline:
            time.sleep(0.1)
        assert slot_position(db, p["slot.name"]) > start
        worker.stop_tasks([tid])
        db.execute("INSERT INTO t VALUES (3, 'c', 0)")
        worker.start_task(tid, p, tc, "STARTED")
        msgs = _read(broker.bootstrap, topic, 6, **read)
        assert _changes(msgs)[5:] == [("c", {"id": 3}, {"id": 3, "v": "c", "n": "AA=="})]
        assert [s for s, _ in statuses.states[tid]] == ["RUNNING", "UNASSIGNED", "RUNNING"]
    finally:
        worker.stop()
        store.stop()
