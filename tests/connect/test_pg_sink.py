"""The JDBC sink (spool.connect.postgres.sink) against a real PostgreSQL, driven through
the SinkTask interface with records shaped as the JSON converter gives them: Debezium
envelopes (spool.connect.postgres.envelope's schemas) and flattened structs."""

from __future__ import annotations

import datetime
import decimal
import time
import uuid

import psycopg
import pytest

from spool.connect import api, converters, data
from spool.connect.api import ConfigError, ConnectError, Header, RetriableError, SinkRecord
from spool.connect.data import DataError, Schema, Struct
from spool.connect.plugins import Plugins
from spool.connect.postgres import envelope as env
from spool.connect.postgres.sink import JdbcSinkConnector, JdbcSinkTask, connect_kwargs
from spool.connect.postgres.source import PostgresSourceTask
from tests.helpers.connect_proc import ConnectProcess, wait_until, write_properties
from tests.helpers.pg_changes import compare_tables

PREFIX = "cdc"

COLUMNS = [
    ("id", data.INT32),
    ("name", data.OPTIONAL_STRING),
    ("price", Schema("bytes", optional=True, name=data.DECIMAL, version=1,
                     parameters=(("scale", "2"), ("connect.decimal.precision", "10")))),
    ("qty", data.OPTIONAL_INT64),
    ("ratio", data.OPTIONAL_FLOAT64),
    ("active", data.OPTIONAL_BOOLEAN),
    ("born", Schema("int32", optional=True, name=env.DATE, version=1)),
    ("seen", Schema("int64", optional=True, name=env.MICRO_TIMESTAMP, version=1)),
    ("at", Schema("string", optional=True, name=env.ZONED_TIMESTAMP, version=1)),
    ("doc", Schema("string", optional=True, name=env.JSON, version=1)),
    ("ref", Schema("string", optional=True, name=env.UUID, version=1)),
    ("blob", data.OPTIONAL_BYTES),
    ("amount", env.variable_scale_decimal_schema()),
]
KEY_COLUMNS = [("id", data.INT32)]
REF = uuid.UUID("0b6f7d1e-58f1-4a3b-9c89-2a4b0a4f11aa")


def row(i: int, name: str, **extra) -> dict:
    base = {"id": i, "name": name, "price": decimal.Decimal(f"{i}.25"), "qty": 10 ** 12 + i,
            "ratio": i / 4, "active": i % 2 == 0, "born": 19000 + i,
            "seen": 1_700_000_000_123_456 + i, "at": "2024-03-01T10:00:00.5Z",
            "doc": '{"a": [1, 2], "b": "x"}', "ref": str(REF), "blob": bytes([0, i % 256, 255]),
            "amount": env.variable_scale_decimal(decimal.Decimal(f"-{i}.0001"))}
    base.update(extra)
    return base


class Events:
    """Debezium change events for one table, as the source writes them."""

    def __init__(self, table: str, columns=COLUMNS, key_columns=KEY_COLUMNS) -> None:
        self.topic = env.topic_name(PREFIX, "public", table)
        self.table = table
        self.row_schema = env.row_schema(PREFIX, "public", table, columns)
        self.value_schema = env.envelope_schema(PREFIX, "public", table, self.row_schema)
        self.key_schema = env.key_schema(PREFIX, "public", table, key_columns)
        self.offset = 0

    def _record(self, key: dict, value: Struct | None, partition: int = 0) -> SinkRecord:
        self.offset += 1
        return SinkRecord(self.topic, partition, self.key_schema, Struct(self.key_schema, key),
                          self.value_schema if value is not None else None, value,
                          kafka_offset=self.offset - 1)

    def change(self, op: str, before: dict | None, after: dict | None) -> SinkRecord:
        source = env.source_struct(version="test", name=PREFIX, db="src", schema="public",
                                   table=self.table, ts_us=1_700_000_000_000_000)
        value = env.envelope(self.value_schema, op,
                             Struct(self.row_schema, before) if before else None,
                             Struct(self.row_schema, after) if after else None, source, 0)
        return self._record({"id": (after or before)["id"]}, value)

    def create(self, r: dict, op: str = "c") -> SinkRecord:
        return self.change(op, None, r)

    def update(self, r: dict) -> SinkRecord:
        return self.change("u", {"id": r["id"]}, r)

    def delete(self, i: int) -> list[SinkRecord]:
        return [self.change("d", {"id": i}, None), self._record({"id": i}, None)]


def through_json(records: list[SinkRecord]) -> list[SinkRecord]:
    """The records as a sink task gets them from Kafka: written and read back by Kafka's
    JsonConverter (schemas enabled), key and value."""
    plugins = Plugins.discover()
    key_conv = converters.make(plugins, "org.apache.kafka.connect.json.JsonConverter", {}, True)
    value_conv = converters.make(plugins, "org.apache.kafka.connect.json.JsonConverter", {},
                                 False)
    out = []
    for r in records:
        ks, k = key_conv.to_connect_data(r.topic, None, key_conv.from_connect_data(
            r.topic, None, r.key_schema, r.key))
        vs, v = value_conv.to_connect_data(r.topic, None, value_conv.from_connect_data(
            r.topic, None, r.value_schema, r.value))
        out.append(r.new_record(key_schema=ks, key=k, value_schema=vs, value=v))
    return out


def sink_props(pg, db: str, **over) -> dict[str, str]:
    props = {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
             "connection.url": pg.url(db), "connection.username": "postgres",
             "connection.password": "", "insert.mode": "upsert", "delete.enabled": "true",
             "primary.key.mode": "record_key", "schema.evolution": "basic",
             "table.name.format": "${topic}"}
    props.update(over)
    return props


@pytest.fixture
def task_for(pg, pg_database):
    started: list[JdbcSinkTask] = []

    def make(**over) -> JdbcSinkTask:
        t = JdbcSinkTask()
        t.start(sink_props(pg, pg_database, **over))
        started.append(t)
        return t
    try:
        yield make
    finally:
        for t in started:
            t.stop()


def query(pg, db: str, sql: str, params=()) -> list[tuple]:
    with psycopg.connect(pg.dsn(db)) as conn:
        return conn.execute(sql, params).fetchall()


def column_types(pg, db: str, table: str) -> dict[str, str]:
    return dict(query(pg, db, "SELECT column_name, data_type FROM information_schema.columns "
                              "WHERE table_name = %s", (table,)))


@pytest.mark.parametrize("via_json", [False, True], ids=["structs", "json"])
def test_envelopes_create_the_table_and_upsert_and_delete_by_key(pg, pg_database, task_for,
                                                                  via_json):
    ev = Events("items")
    task = task_for()
    records = [ev.create(row(1, "one"), op="r"), ev.create(row(2, "two"), op="r"),
               ev.create(row(3, "three")), ev.update(row(2, "TWO", qty=None)),
               *ev.delete(3), ev.create(row(4, "four"))]
    task.put(through_json(records) if via_json else records)
    assert column_types(pg, pg_database, "cdc_public_items") == {
        "id": "integer", "name": "text", "price": "numeric", "qty": "bigint",
        "ratio": "double precision", "active": "boolean", "born": "date",
        "seen": "timestamp without time zone", "at": "timestamp with time zone",
        "doc": "jsonb", "ref": "uuid", "blob": "bytea", "amount": "numeric"}
    rows = query(pg, pg_database, "SELECT id, name, price, qty, ratio, active, born, seen, "
                                  "at, doc, ref, blob, amount FROM cdc_public_items ORDER BY id")
    assert [r[:2] for r in rows] == [(1, "one"), (2, "TWO"), (4, "four")]
    one = rows[0]
    assert one[2:] == (decimal.Decimal("1.25"), 10 ** 12 + 1, 0.25, False,
                       datetime.date(2022, 1, 9),
                       datetime.datetime(2023, 11, 14, 22, 13, 20, 123457),
                       datetime.datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=datetime.UTC),
                       {"a": [1, 2], "b": "x"}, REF, bytes([0, 1, 255]),
                       decimal.Decimal("-1.0001"))
    assert rows[1][3] is None  # the update wrote the null
    pk = query(pg, pg_database, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON "
                                "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE "
                                "i.indrelid = 'cdc_public_items'::regclass AND i.indisprimary")
    assert pk == [("id",)]
    assert task.pre_commit({(ev.topic, 0): ev.offset}) == {(ev.topic, 0): ev.offset}


def test_replay_after_a_restart_ends_with_the_same_table(pg, pg_database, task_for):
    ev = Events("replayed")
    history = [ev.create(row(i, f"v{i}")) for i in range(1, 21)]
    history += [ev.update(row(i, f"w{i}")) for i in range(1, 21, 3)]
    for i in range(2, 21, 4):
        history += ev.delete(i)
    history += [ev.create(row(2, "back"))]
    task_for().put(history)
    expected = query(pg, pg_database, "SELECT * FROM cdc_public_replayed ORDER BY id")
    assert len(expected) == 16
    again = task_for()  # a new task replays from an older committed offset, twice
    again.put(history[7:])
    again.put(history[len(history) // 2:])
    assert query(pg, pg_database, "SELECT * FROM cdc_public_replayed ORDER BY id") == expected


def test_unavailable_toasted_values_leave_the_column_as_it_is(pg, pg_database, task_for):
    ev = Events("toasted", columns=[("id", data.INT32), ("name", data.OPTIONAL_STRING),
                                    ("big", data.OPTIONAL_STRING),
                                    ("raw", data.OPTIONAL_BYTES)])
    task = task_for()
    task.put([ev.create({"id": 1, "name": "a", "big": "x" * 10000, "raw": b"r" * 5000})])
    task.put([ev.update({"id": 1, "name": "b", "big": "__debezium_unavailable_value",
                         "raw": b"__debezium_unavailable_value"})])
    assert query(pg, pg_database, "SELECT name, length(big), length(raw) FROM "
                                  "cdc_public_toasted") == [("b", 10000, 5000)]


def test_flattened_records_and_tombstones(pg, pg_database, task_for):
    key_schema = data.struct("k", [("code", data.STRING), ("n", data.INT16)])
    value_schema = data.struct("v", [("code", data.STRING), ("n", data.INT16),
                                     ("label", data.OPTIONAL_STRING),
                                     ("tags", data.array(data.STRING, optional=True))])

    def rec(code: str, n: int, label: str | None, offset: int, tags=None) -> SinkRecord:
        key = Struct(key_schema, {"code": code, "n": n})
        value = None if label is None else Struct(value_schema, {
            "code": code, "n": n, "label": label, "tags": tags})
        return SinkRecord("flat.topic", 1, key_schema, key,
                          value_schema if value is not None else None, value,
                          kafka_offset=offset)
    task = task_for()
    task.put([rec("a", 1, "first", 0, ["x", "y"]), rec("b", 2, "second", 1),
              rec("a", 1, "again", 2, []), rec("b", 2, None, 3), rec("c", 3, "third", 4)])
    assert query(pg, pg_database, "SELECT code, n, label, tags FROM flat_topic ORDER BY code") \
        == [("a", 1, "again", []), ("c", 3, "third", None)]
    assert column_types(pg, pg_database, "flat_topic")["tags"] == "ARRAY"
    assert task.pre_commit({("flat.topic", 1): 5, ("flat.topic", 0): 3}) == {
        ("flat.topic", 1): 5}  # only what was written: nothing of partition 0


def test_basic_schema_evolution_adds_columns_and_none_refuses(pg, pg_database, task_for):
    ev = Events("evolving", columns=COLUMNS[:2])
    task_for().put([ev.create({"id": 1, "name": "old"})])
    wider = Events("evolving", columns=[*COLUMNS[:2], ("extra", data.OPTIONAL_STRING),
                                        ("flag", Schema("boolean", default=True))])
    task_for().put([wider.create({"id": 2, "name": "new", "extra": "e", "flag": False})])
    assert query(pg, pg_database, "SELECT * FROM cdc_public_evolving ORDER BY id") == [
        (1, "old", None, True), (2, "new", "e", False)]

    required = Events("evolving", columns=[*COLUMNS[:2], ("must", data.STRING)])
    with pytest.raises(ConnectError, match="field 'must' is not optional but has no default"):
        task_for().put([required.create({"id": 3, "name": "x", "must": "m"})])

    frozen = task_for(**{"schema.evolution": "none"})
    with pytest.raises(ConnectError, match="schema evolution is disabled"):
        frozen.put([Events("missing").create(row(1, "x"))])
    even_wider = Events("evolving", columns=[*COLUMNS[:2], ("other", data.OPTIONAL_STRING)])
    with pytest.raises(ConnectError, match="schema evolution is disabled"):
        frozen.put([even_wider.create({"id": 4, "name": "y", "other": "o"})])
    frozen.put([ev.update({"id": 1, "name": "renamed"})])  # an existing table's columns
    assert query(pg, pg_database, "SELECT name FROM cdc_public_evolving WHERE id = 1") == [
        ("renamed",)]


def test_a_put_is_one_transaction(pg, pg_database, task_for):
    ev = Events("atomic", columns=COLUMNS[:2])
    task = task_for(**{"insert.mode": "insert"})
    task.put([ev.create({"id": 1, "name": "a"})])
    consumed = {(ev.topic, 0): 4}
    before = task.pre_commit(consumed)
    assert before == {(ev.topic, 0): 1}
    with pytest.raises(ConnectError, match="duplicate key"):
        task.put([ev.create({"id": 2, "name": "b"}), ev.create({"id": 3, "name": "c"}),
                  ev.create({"id": 1, "name": "dup"})])
    assert query(pg, pg_database, "SELECT id, name FROM cdc_public_atomic") == [(1, "a")]
    assert task.pre_commit(consumed) == before  # nothing of the failed batch is committed
    task.put([ev.create({"id": 2, "name": "b"})])  # the same task goes on afterwards
    assert query(pg, pg_database, "SELECT count(*) FROM cdc_public_atomic") == [(2,)]


def test_batches_larger_than_batch_size_and_the_reduction_buffer(pg, pg_database, task_for):
    ev = Events("many", columns=COLUMNS[:2])
    records = [ev.create({"id": i % 700, "name": f"n{i}"}) for i in range(3000)]
    records += [r for i in range(0, 700, 7) for r in ev.delete(i)]
    task_for(**{"batch.size": "64"}).put(records)
    model = {i % 700: f"n{i}" for i in range(3000)}
    expected = sorted((i, n) for i, n in model.items() if i % 7)
    assert query(pg, pg_database, "SELECT * FROM cdc_public_many ORDER BY id") == expected
    repeated = [ev.create({"id": 10_000 + i % 37, "name": f"r{i}"}) for i in range(500)]
    task_for().put(repeated)  # keys repeat within 50 rows: the multi-row upserts are cut
    assert query(pg, pg_database, "SELECT * FROM cdc_public_many WHERE id >= 10000 "
                                  "ORDER BY id") == sorted(
        {10_000 + i % 37: f"r{i}" for i in range(500)}.items())
    with psycopg.connect(pg.dsn(pg_database), autocommit=True) as conn:
        conn.execute("DELETE FROM cdc_public_many WHERE id >= 10000")
    with psycopg.connect(pg.dsn(pg_database), autocommit=True) as conn:
        conn.execute("TRUNCATE cdc_public_many")
    task_for(**{"use.reduction.buffer": "true"}).put(records)
    assert query(pg, pg_database, "SELECT * FROM cdc_public_many ORDER BY id") == expected


def test_key_modes_kafka_record_value_header_and_update(pg, pg_database, task_for):
    schema = data.struct("v", [("sku", data.STRING), ("qty", data.INT32)])

    def rec(sku: str, qty: int, offset: int, topic: str = "kafka.keyed", **kw) -> SinkRecord:
        return SinkRecord(topic, 2, None, None, schema, Struct(schema, {"sku": sku, "qty": qty}),
                          kafka_offset=offset, **kw)
    task_for(**{"insert.mode": "insert", "primary.key.mode": "kafka",
                "delete.enabled": "false"}).put([rec("a", 1, 10), rec("a", 2, 11)])
    assert query(pg, pg_database, "SELECT * FROM kafka_keyed ORDER BY __connect_offset") == [
        ("kafka.keyed", 2, 10, "a", 1), ("kafka.keyed", 2, 11, "a", 2)]

    by_value = task_for(**{"primary.key.mode": "record_value", "primary.key.fields": "sku",
                           "delete.enabled": "false", "table.name.format": "stock"})
    by_value.put([rec("a", 1, 0, "t"), rec("b", 5, 1, "t"), rec("a", 3, 2, "t")])
    assert query(pg, pg_database, "SELECT sku, qty FROM stock ORDER BY sku") == [
        ("a", 3), ("b", 5)]
    task_for(**{"insert.mode": "update", "primary.key.mode": "record_value",
                "primary.key.fields": "sku", "delete.enabled": "false",
                "table.name.format": "stock"}).put([rec("b", 6, 3, "t"), rec("zz", 9, 4, "t")])
    assert query(pg, pg_database, "SELECT sku, qty FROM stock ORDER BY sku") == [
        ("a", 3), ("b", 6)]  # update never inserts

    by_header = task_for(**{"primary.key.mode": "record_header", "delete.enabled": "false",
                            "table.name.format": "by_header"})
    hdr = (Header("tenant", data.STRING, "acme"),)
    by_header.put([rec("a", 1, 0, "h", headers=hdr), rec("b", 2, 1, "h", headers=hdr)])
    assert query(pg, pg_database, "SELECT tenant, sku, qty FROM by_header") == [
        ("acme", "b", 2)]


def test_infinite_and_out_of_python_range_dates_and_times(pg, pg_database, task_for):
    """pgsource's markers for infinity (PostgreSQL JDBC's) and dates Python's datetime
    cannot hold (BC, after 9999) arrive as PostgreSQL has them."""
    cols = [("id", data.INT32), ("born", COLUMNS[6][1]), ("seen", COLUMNS[7][1]),
            ("clock", Schema("int64", optional=True, name=env.MICRO_TIME, version=1))]
    ev = Events("temporal", columns=cols)
    day_us = 86_400_000_000
    values = [(1, 106751991, 9223372036825200000, 0),  # +infinity
              (2, -106751992, -9223372036832400000, day_us),  # -infinity, 24:00
              (3, -719528 - 366, (-719528 - 366) * day_us + 1, 1),  # 2 BC
              (4, 2932897, 2932897 * day_us + 5_000_000, 3_723_000_004)]  # year 10000
    task_for().put([ev.create({"id": i, "born": b, "seen": s, "clock": c})
                    for i, b, s, c in values])
    assert query(pg, pg_database, "SELECT born::text, seen::text, clock::text FROM "
                                  "cdc_public_temporal ORDER BY id") == [
        ("infinity", "infinity", "00:00:00"),
        ("-infinity", "-infinity", "24:00:00"),
        ("0002-01-01 BC", "0002-01-01 00:00:00.000001 BC", "00:00:00.000001"),
        ("10000-01-01", "10000-01-01 00:00:05", "01:02:03.000004")]


def test_field_include_and_exclude_lists(pg, pg_database, task_for):
    ev = Events("filtered", columns=COLUMNS[:4])
    r = ev.create({"id": 1, "name": "n", "price": decimal.Decimal("2.50"), "qty": 3})
    task_for(**{"field.exclude.list": f"{ev.topic}:price,other.topic:name",
                "table.name.format": "excluded"}).put([r])
    assert query(pg, pg_database, "SELECT * FROM excluded") == [(1, "n", 3)]
    task_for(**{"field.include.list": f"{ev.topic}:id,{ev.topic}:qty",
                "table.name.format": "included"}).put([r])
    assert query(pg, pg_database, "SELECT * FROM included") == [(1, 3)]
    both = JdbcSinkConnector().validate({"connection.url": pg.url(), "field.include.list": "a:b",
                                         "field.exclude.list": "a:c"})
    assert both["field.exclude.list"].errors == [
        "Cannot define both column.exclude.list and column.include.list. Please specify "
        "only one."]


def test_primitive_and_schemaless_keys_and_values(pg, pg_database, task_for):
    task = task_for(**{"primary.key.fields": "id", "table.name.format": "loose"})
    task.put([SinkRecord("t", 0, None, 7, None, {"name": "seven", "meta": {"a": 1}, "n": 1.5},
                         kafka_offset=0),
              SinkRecord("t", 0, None, 8, None, {"name": "eight", "meta": None, "n": 2.5},
                         kafka_offset=1),
              SinkRecord("t", 0, None, 7, None, None, kafka_offset=2)])
    assert column_types(pg, pg_database, "loose") == {
        "id": "bigint", "name": "text", "meta": "jsonb", "n": "double precision"}
    assert query(pg, pg_database, "SELECT * FROM loose") == [(8, "eight", None, 2.5)]
    with pytest.raises(ConnectError, match="primary.key.fields configuration must be"):
        task_for(**{"table.name.format": "loose"}).put(
            [SinkRecord("t", 0, data.INT64, 9, None, {"name": "x"}, kafka_offset=3)])


def test_names_truncate_and_schema_change_events(pg, pg_database, task_for):
    ev = Events("MixedCase", columns=[("id", data.INT32), ("Title", data.OPTIONAL_STRING)])
    with psycopg.connect(pg.dsn(pg_database), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA archive")
    task_for(**{"table.name.format": "archive.${source.table}_copy"}).put(
        [ev.create({"id": 1, "Title": "t"})])
    assert query(pg, pg_database, "SELECT id, title FROM archive.mixedcase_copy") == [(1, "t")]
    quoted = task_for(**{"quote.identifiers": "true", "truncate.enabled": "true"})
    quoted.put([ev.create({"id": 2, "Title": "T"})])
    assert query(pg, pg_database, 'SELECT "Title" FROM "cdc_public_MixedCase"') == [("T",)]
    quoted.put([ev.change("t", None, {"id": 0})])
    assert query(pg, pg_database, 'SELECT count(*) FROM "cdc_public_MixedCase"') == [(0,)]
    change_schema = data.struct("io.debezium.connector.postgresql.SchemaChangeValue",
                                [("ddl", data.STRING)])
    with pytest.raises(DataError, match="Schema change records are not supported"):
        quoted.put([SinkRecord("cdc", 0, None, None, change_schema,
                               Struct(change_schema, {"ddl": "x"}))])


def test_schema_missing_for_the_table_fails_the_put(pg, pg_database, task_for):
    """table.name.format naming a schema that does not exist: the DDL fails, ConnectError."""
    ev = Events("noschema", columns=COLUMNS[:2])
    with pytest.raises(ConnectError, match='schema "nowhere" does not exist'):
        task_for(**{"table.name.format": "nowhere.t"}).put([ev.create({"id": 1, "name": "a"})])


def test_a_lost_connection_is_retriable_and_the_retry_succeeds(pg, pg_database, task_for):
    ev = Events("retried", columns=COLUMNS[:2])
    task = task_for()
    task.put([ev.create({"id": 1, "name": "a"})])
    query(pg, pg_database, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = %s AND pid <> pg_backend_pid()", (pg_database,))
    batch = [ev.create({"id": 2, "name": "b"})]
    with pytest.raises(RetriableError):
        task.put(batch)
    task.put(batch)  # the runtime retries the same records: a new connection
    assert query(pg, pg_database, "SELECT id FROM cdc_public_retried ORDER BY id") == [
        (1,), (2,)]


def test_configuration_is_checked_as_debezium_does(pg):
    c = JdbcSinkConnector()
    errors = {n: v.errors for n, v in c.validate({
        "connection.url": "jdbc:mysql://h/db", "insert.mode": "upsert",
        "delete.enabled": "true", "batch.size": "zero"}).items() if v.errors}
    assert errors == {
        "connection.url": ["Invalid value jdbc:mysql://h/db for configuration connection.url: "
                           "Only jdbc:postgresql: URLs are supported"],
        "insert.mode": ["When using UPSERT, please define 'primary.key.mode'."],
        "delete.enabled": ["When 'delete.enabled' is set to 'true', the 'primary.key.mode' "
                           "option must be set to 'record_key'."],
        "batch.size": ["Invalid value zero for configuration batch.size: Not a number of "
                       "type INT"]}
    assert c.validate({"connection.url": "jdbc:postgresql://h/db", "insert.mode": "upsert",
                       "primary.key.mode": "record_value"})["insert.mode"].errors == [
        "When using UPSERT, please define 'primary.key.fields'."]
    missing = c.validate({})["connection.url"].errors
    assert missing == ['Missing required configuration "connection.url" which has no '
                       'default value.']
    with pytest.raises(ConfigError, match="insert.mode"):
        JdbcSinkTask().start({"connection.url": pg.url(), "insert.mode": "merge"})
    c.start({"connection.url": pg.url(), "primary.key.mode": "record_key"})
    assert c.task_configs(3) == [{"connection.url": pg.url(),
                                  "primary.key.mode": "record_key"}] * 3
    assert connect_kwargs("jdbc:postgresql://db1:6543,db2/shop?sslmode=require"
                          "&currentSchema=s1&user=u", None, "pw") == {
        "host": "db1,db2", "port": "6543,5432", "dbname": "shop", "user": "u",
        "password": "pw", "connect_timeout": 10, "sslmode": "require",
        "options": "-c search_path=s1"}
    assert connect_kwargs("jdbc:postgresql:shop", "me", None) == {
        "host": "localhost", "port": "5432", "dbname": "shop", "user": "me",
        "connect_timeout": 10}


# ---- through the runtime: a `spool connect` worker reading a real topic

def test_a_sink_worker_killed_mid_stream_ends_with_the_exact_table(pg, pg_database, broker,
                                                                   tmp_path, topic_name):
    """Debezium change events on a 3-partition topic (JSON with schemas, as the source
    writes them) into PostgreSQL through a standalone worker killed with -9 while it
    writes: after a restart the table is exactly the changes' final state."""
    import random

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(30)
    ev = Events("killed", columns=COLUMNS[:2])
    ev.topic = topic_name
    rng, model, records = random.Random(21), {}, []
    for n in range(3000):
        i = rng.randrange(300)
        if i in model and rng.random() < 0.2:
            records += ev.delete(i)
            del model[i]
        else:
            records.append((ev.update if i in model else ev.create)({"id": i, "name": f"{n}"}))
            model[i] = f"{n}"
    plugins = Plugins.discover()
    conv = "org.apache.kafka.connect.json.JsonConverter"
    key_conv = converters.make(plugins, conv, {}, True)
    value_conv = converters.make(plugins, conv, {}, False)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for r in records:
        producer.produce(topic_name, key=key_conv.from_connect_data(
            topic_name, None, r.key_schema, r.key), value=value_conv.from_connect_data(
            topic_name, None, r.value_schema, r.value))
    assert producer.flush(30) == 0

    sink_name = f"pg-sink-{uuid.uuid4().hex[:8]}"  # its group connect-<name> on the shared broker
    worker = ConnectProcess(tmp_path / "worker", {
        "bootstrap.servers": broker.bootstrap, "key.converter": conv, "value.converter": conv,
        "offset.storage.file.filename": str(tmp_path / "worker.offsets"),
        "offset.flush.interval.ms": "300"}, standalone=True, connector_files=[
        write_properties(tmp_path / "sink.properties", sink_props(
            pg, pg_database, name=sink_name, **{"tasks.max": "2", "topics": topic_name,
                                                "consumer.override.max.poll.records": "50",
                                                # the killed consumers leave the group soon
                                                "consumer.override.session.timeout.ms": "6000",
                                                "consumer.override.heartbeat.interval.ms":
                                                    "1000",
                                                "table.name.format": "killed"}))])
    table = "SELECT id, name FROM killed ORDER BY id"

    def rows() -> list[tuple]:
        try:
            return query(pg, pg_database, table)
        except psycopg.errors.UndefinedTable:
            return []
    try:
        worker.start()
        wait_until(lambda: len(rows()) >= 20, 60, interval=0.05, what="the sink writing")
        worker.kill()
        worker.restart()
        wait_until(lambda: rows() == sorted(model.items()), 90, what="the final table")
        worker.wait_running(sink_name, 2)
        bad = {"name": "bad-sink", "connector.class": "JdbcSinkConnector", "topics": topic_name,
               "connection.url": "jdbc:mysql://h/db", "insert.mode": "upsert"}
        a = worker.call("PUT", "/connector-plugins/JdbcSinkConnector/config/validate", bad)
        assert a.status == 200 and a.body["error_count"] == 2
        assert {c["value"]["name"]: c["value"]["errors"] for c in a.body["configs"]
                if c["value"]["errors"]} == {
            "connection.url": ["Invalid value jdbc:mysql://h/db for configuration "
                               "connection.url: Only jdbc:postgresql: URLs are supported"],
            "insert.mode": ["When using UPSERT, please define 'primary.key.mode'."]}
        a = worker.call("POST", "/connectors", {"name": "bad-sink", "config": bad})
        assert a.status == 400 and a.body["message"].startswith(
            "Connector configuration is invalid and contains the following 2 error(s):")
    finally:
        worker.kill()


# ---- with the real source: PostgresSourceTask's events, through JSON, into the sink

class _Offsets(api.OffsetStorageReader):
    def offset(self, partition: dict) -> dict | None:
        return None


class _SourceContext(api.SourceTaskContext):
    def __init__(self, props: dict[str, str]) -> None:
        self.offset_storage_reader = _Offsets()
        self.configs = props


WIDE = """CREATE TABLE wide (id int PRIMARY KEY, b bool, i2 int2, i8 int8, f4 float4,
    f8 float8, n numeric(10,3), nu numeric, m money, t text, vc varchar(10), ch char(4),
    d date, tm time(0), tm6 time, ttz timetz, ts timestamp(3), ts6 timestamp,
    tstz timestamptz, iv interval, ba bytea, bt bit(5), vb varbit, js jsonb, x xml,
    u uuid, e mood, ia int4[], ta text[], addr inet)"""
WIDE_ROWS = [
    "(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(2, true, -32768, 9223372036854775807, 1.5, -2.25e-300, 1234567.125, -0.000001234,"
    " 12.34, 'naïve ''q'' \"d\" \\ 日本', 'short', 'ab', '2024-02-29', '23:59:59',"
    " '12:34:56.789012', '10:11:12.5+05:30', '2024-01-01 00:00:00.123',"
    " '1999-12-31 23:59:59.999999', '2024-05-01 10:00:00.25+02', '3 days 04:05:06.7',"
    " '\\x00ff10', B'00101', B'1011', '{\"k\": [1, null, \"v\"], \"n\": 1.50}',"
    " '<a x=\"1\">t</a>', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'happy', '{1,NULL,-3}',"
    " '{\"a b\",NULL,\"\"}', '192.168.0.1/24')",
    # (infinite and BC values: test_infinite_and_out_of_python_range_dates_and_times;
    # compare_tables reads rows into Python's datetime, which cannot hold them, and NaN is
    # not equal to itself there. A varbit's leading zeros are lost: Debezium's Bits is the
    # bit string's number, and its length parameter is the column's maximum)
    "(3, false, 0, 0, '-Infinity', 'Infinity', 0, 0, 0, '', '', '', '0001-01-01', '00:00:00',"
    " '00:00:00.000001', '00:00:00Z', '1970-01-01', '9999-12-31 23:59:59.999999',"
    " '2000-01-01 00:00:00+00', '0',"
    " '\\x', B'00000', B'', '[]', '', '00000000-0000-0000-0000-000000000000', 'sad', '{}',"
    " '{}', '::1')",
]


@pytest.mark.parametrize("propagate", [False, True], ids=["default", "propagated-types"])
def test_every_column_type_of_the_source_arrives_equal(pg, pg_database, task_for, propagate):
    """The PostgreSQL source's events for a table of 30 column types (snapshot, then
    inserts, an update, a delete), through Kafka's JsonConverter, into the sink: the two
    tables are equal (tests/helpers/pg_changes.compare_tables). With
    ``column.propagate.source.type`` the sink's columns have the source's types."""
    src_db = pg.create_database(f"src_{uuid.uuid4().hex[:12]}")
    src, sink = pg.dsn(src_db), pg.dsn(pg_database)
    for dsn in (src, sink):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    with psycopg.connect(src, autocommit=True) as c:
        c.execute(WIDE)
        c.execute("ALTER TABLE wide REPLICA IDENTITY FULL")
        c.execute("INSERT INTO wide VALUES " + ", ".join(WIDE_ROWS[:2]))
    source_props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": pg.host, "database.port": str(pg.port),
        "database.user": "postgres", "database.dbname": src_db, "topic.prefix": "srv",
        "table.include.list": "public.wide", "slot.name": f"s_{uuid.uuid4().hex[:10]}",
        "slot.drop.on.stop": "true", "poll.interval.ms": "50",
        **({"column.propagate.source.type": ".*"} if propagate else {})}
    source = PostgresSourceTask()
    source.initialize(_SourceContext(source_props))
    source.start(source_props)
    events: list[api.SourceRecord] = []

    def polled(n: int) -> None:
        deadline = time.monotonic() + 30
        while len(events) < n and time.monotonic() < deadline:
            events.extend(source.poll())
        assert len(events) == n
    try:
        polled(2)  # the snapshot
        with psycopg.connect(src, autocommit=True) as c:
            c.execute("INSERT INTO wide VALUES " + WIDE_ROWS[2])
            c.execute("UPDATE wide SET t = 'changed', ia = '{7}', ts6 = now() WHERE id = 2")
            c.execute("INSERT INTO wide (id, t) VALUES (4, 'gone')")
            c.execute("DELETE FROM wide WHERE id = 4")
        polled(7)  # c, u, c, d and its tombstone
    finally:
        source.stop()
    records = [SinkRecord(r.topic, 0, r.key_schema, r.key, r.value_schema, r.value,
                          kafka_offset=i) for i, r in enumerate(events)]
    task_for().put(through_json(records))
    diff = compare_tables(src, sink, "wide", "srv_public_wide")
    assert diff.identical, str(diff)
    types = dict(query(pg, src_db, TYPES, ("wide",)))
    sunk = dict(query(pg, pg_database, TYPES, ("srv_public_wide",)))
    differ = {c: sunk[c] for c, t in types.items() if sunk[c] != t}
    if propagate:  # every type but the fractional precision of time(0) and timestamp(3)
        assert differ == {"tm": "time without time zone", "ts": "timestamp without time zone"}
    else:
        assert differ == {"m": "numeric", "vc": "text", "ch": "text",
                          "ts": "timestamp without time zone", "tm": "time without time zone",
                          "e": "text", "addr": "text", "bt": "bit varying(5)"}


TYPES = ("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
         "attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum")
