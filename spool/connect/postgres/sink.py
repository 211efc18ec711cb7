"""The PostgreSQL sink: ``JdbcSinkConnector`` and ``JdbcSinkTask``, with the Debezium JDBC
sink connector's keys (``io.debezium.connector.jdbc.JdbcSinkConnector``).

Keys: ``connection.url`` (``jdbc:postgresql://host[:port][,host2...]/db[?user=&password=
&sslmode=&currentSchema=&connectTimeout=&ApplicationName=]``, or ``jdbc:postgresql:db``),
``connection.username``, ``connection.password``, ``insert.mode`` (``insert``: INSERT;
``upsert``: INSERT ... ON CONFLICT (key) DO UPDATE; ``update``: UPDATE ... WHERE key),
``primary.key.mode`` (``none``, ``kafka``, ``record_key``, ``record_value``,
``record_header``) and ``primary.key.fields``, ``delete.enabled`` (needs
``primary.key.mode=record_key``), ``truncate.enabled``, ``schema.evolution`` (``none``:
the table must exist with every column; ``basic``: tables are created from the record's
schema, missing columns added with ALTER TABLE ADD COLUMN; columns are never dropped or
changed), ``table.name.format`` (default ``${topic}``, dots in the topic as ``_``),
``quote.identifiers``, ``database.time_zone`` (the session's TimeZone, default UTC),
``batch.size`` (statements per pipeline round trip), ``use.reduction.buffer`` (within one
``put``, only the last change of each key is written), ``field.include.list`` /
``field.exclude.list``. Debezium's ``connection.pool.*``, ``hibernate.*`` and naming
strategy keys are accepted and ignored (one connection per task). How records are read:
``sink_records``; types and statements: ``sink_sql``.

Delivery: each ``put`` is one PostgreSQL transaction (every record of the batch, in order,
pipelined), committed before ``put`` returns; ``pre_commit`` answers the offsets (the
original topic/partition, KIP-793) after the last record written, for the partitions in the
runtime's ``offsets`` (those assigned), so what Kafka commits is
exactly what PostgreSQL has. After a crash the records after the committed offsets are
written again: upserts and deletes are idempotent, so the table ends the same
(``insert.mode=insert`` is not: a replayed insert fails on the primary key, as Debezium's).
A lost connection raises ``RetriableError`` (the runtime retries the same batch on a new
connection); any other database error, ``ConnectError`` (the task fails).
Threads: all calls come from the task's thread.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
from typing import Any

import psycopg

from spool.connect import api
from spool.connect.api import (
    BOOLEAN,
    HIGH,
    INT,
    LIST,
    LOW,
    MEDIUM,
    PASSWORD,
    STRING,
    ConfigDef,
    ConfigError,
    ConfigValue,
    ConnectError,
    RetriableError,
    SinkRecord,
    at_least,
    in_values,
)
from spool.connect.postgres import sink_sql
from spool.connect.postgres.sink_records import Change, Settings, describe, original_offset
from spool.connect.postgres.sink_sql import ColumnDef, TableId

log = logging.getLogger(__name__)

INSERT_MODES = ("insert", "upsert", "update")
PRIMARY_KEY_MODES = ("none", "kafka", "record_key", "record_value", "record_header")
SCHEMA_EVOLUTION_MODES = ("none", "basic")


def _jdbc_url(name: str, value: Any) -> None:
    if value is not None and not str(value).startswith("jdbc:postgresql:"):
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                  "Only jdbc:postgresql: URLs are supported"]})


def config_def() -> ConfigDef:
    g, d = "Connection", "Connector"
    return (ConfigDef()
            .define("connection.url", STRING, importance=HIGH, doc="Valid JDBC URL",
                    validator=_jdbc_url, group=g, order=1, display_name="Hostname")
            .define("connection.username", STRING, None, HIGH,
                    "Name of the database user to be used when connecting to the connection.",
                    group=g, order=2, display_name="User")
            .define("connection.password", PASSWORD, None, HIGH,
                    "Password of the database user to be used when connecting to the "
                    "connection.", group=g, order=3, display_name="Password")
            .define("insert.mode", STRING, "insert", HIGH,
                    "The insertion mode to use: insert, upsert or update.",
                    validator=in_values(*INSERT_MODES), group=d, order=1,
                    recommended=INSERT_MODES)
            .define("delete.enabled", BOOLEAN, False, MEDIUM,
                    "Whether to treat null record values (and Debezium 'd' events) as "
                    "deletes. Requires primary.key.mode to be record_key.", group=d, order=2)
            .define("truncate.enabled", BOOLEAN, False, MEDIUM,
                    "Whether to process Debezium 't' events as TRUNCATE.", group=d, order=3)
            .define("table.name.format", STRING, "${topic}", MEDIUM,
                    "A format string for the table, which may contain '${topic}' as a "
                    "placeholder for the original topic name.", group=d, order=4)
            .define("primary.key.mode", STRING, "none", MEDIUM, "The primary key mode",
                    validator=in_values(*PRIMARY_KEY_MODES), group=d, order=5,
                    recommended=PRIMARY_KEY_MODES)
            .define("primary.key.fields", LIST, "", MEDIUM,
                    "A comma-separated list of primary key field names.", group=d, order=6)
            .define("schema.evolution", STRING, "none", MEDIUM,
                    "Controls how schema evolution is handled by the sink connector",
                    validator=in_values(*SCHEMA_EVOLUTION_MODES), group=d, order=7,
                    recommended=SCHEMA_EVOLUTION_MODES)
            .define("quote.identifiers", BOOLEAN, False, MEDIUM,
                    "When false, identifiers are lower-cased as PostgreSQL does to unquoted "
                    "names.", group=d, order=8)
            .define("database.time_zone", STRING, "UTC", LOW,
                    "The timezone used when inserting temporal values.", group=d, order=9)
            .define("batch.size", INT, 500, MEDIUM,
                    "Statements sent per round trip within a put's transaction.",
                    validator=at_least(1), group=d, order=10)
            .define("use.reduction.buffer", BOOLEAN, False, LOW,
                    "Write only the most recent change of each key within a put.",
                    group=d, order=11)
            .define("field.include.list", LIST, "", LOW,
                    "Fields written, as <topic>:<field> entries (all when empty).",
                    group="Filters", order=1)
            .define("field.exclude.list", LIST, "", LOW,
                    "Fields not written, as <topic>:<field> entries.", group="Filters",
                    order=2))


def cross_check(values: dict[str, Any], given: dict[str, str]) -> dict[str, list[str]]:
    """The checks between keys (Debezium's ``validateInsertMode``, ``validateDeleteEnabled``)."""
    errors: dict[str, list[str]] = {}
    pk_mode = str(values.get("primary.key.mode") or "none").lower()
    if str(values.get("insert.mode") or "").lower() == "upsert":
        if "primary.key.mode" not in given or pk_mode == "none":
            errors["insert.mode"] = ["When using UPSERT, please define 'primary.key.mode'."]
        elif pk_mode == "record_value" and not values.get("primary.key.fields"):
            errors["insert.mode"] = ["When using UPSERT, please define 'primary.key.fields'."]
    if values.get("field.include.list") and values.get("field.exclude.list"):
        errors["field.exclude.list"] = ["Cannot define both column.exclude.list and "
                                        "column.include.list. Please specify only one."]
    for key in ("delete.enabled", "truncate.enabled"):
        if values.get(key) is True and pk_mode != "record_key":
            errors[key] = [f"When '{key}' is set to 'true', the 'primary.key.mode' option "
                           "must be set to 'record_key'."]
    return errors


def connect_kwargs(url: str, user: str | None, password: str | None) -> dict[str, Any]:
    """psycopg.connect's keyword arguments for a ``jdbc:postgresql:`` URL."""
    m = re.fullmatch(r"jdbc:postgresql:(?://([^/?]*)/?)?([^?]*)(?:\?(.*))?", url.strip())
    if m is None:
        raise ConfigError({"connection.url": [f"Invalid value {url} for configuration "
                                              "connection.url: not a jdbc:postgresql: URL"]})
    hosts, db, query = m.group(1) or "", m.group(2), m.group(3) or ""
    names, ports = [], []
    for part in filter(None, hosts.split(",")):
        h, _, p = part.rpartition(":") if not part.endswith("]") else (part, "", "")
        h, p = (h, p) if h else (p, "")
        names.append(h.strip("[]") or "localhost")
        ports.append(p or "5432")
    params = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
    kw: dict[str, Any] = {"host": ",".join(names or ["localhost"]),
                          "port": ",".join(ports or ["5432"]),
                          "dbname": urllib.parse.unquote(db) or None,
                          "user": user or params.get("user"),
                          "password": password or params.get("password"),
                          "connect_timeout": int(params.get("connectTimeout", "10") or 10)}
    for jdbc, libpq in (("sslmode", "sslmode"), ("ApplicationName", "application_name"),
                        ("applicationName", "application_name")):
        if jdbc in params:
            kw[libpq] = params[jdbc]
    if "currentSchema" in params:
        kw["options"] = f"-c search_path={params['currentSchema']}"
    return {k: v for k, v in kw.items() if v is not None}


class JdbcSinkConnector(api.SinkConnector):
    """The connector: every task gets the connector's configuration."""

    def start(self, props: dict[str, str]) -> None:
        values = config_def().parse(props)
        errors = cross_check(values, props)
        if errors:
            raise ConfigError(errors)
        self.props = dict(props)

    def task_class(self) -> type[api.Task]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def config_def(self) -> ConfigDef:
        return config_def()

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        values = config_def().validate(props)
        typed = {n: v.value for n, v in values.items() if not v.errors}
        for name, messages in cross_check(typed, props).items():
            values[name].errors.extend(messages)
        return values


class JdbcSinkTask(api.SinkTask):
    """Writes each ``put`` in one transaction (module doc)."""

    def __init__(self) -> None:
        self.conn: psycopg.Connection | None = None
        self.tables: dict[TableId, dict[str, str]] = {}
        self.processed: dict[tuple[str, int], int] = {}
        self.statements: dict[tuple, str] = {}  # (table, kind, keys, columns) -> SQL

    def start(self, props: dict[str, str]) -> None:
        values = config_def().parse(props)
        errors = cross_check(values, props)
        if errors:
            raise ConfigError(errors)
        self.connect_kw = connect_kwargs(values["connection.url"], values["connection.username"],
                                         values["connection.password"])
        self.insert_mode = values["insert.mode"].lower()
        self.evolution = values["schema.evolution"].lower()
        self.batch_size = values["batch.size"]
        self.reduce = values["use.reduction.buffer"]
        self.time_zone = values["database.time_zone"]
        listed = values["field.exclude.list"] or values["field.include.list"]
        entries = frozenset(tuple(e.strip().split(":")) for e in listed
                            if e.count(":") == 1)
        self.settings = Settings(values["table.name.format"], values["primary.key.mode"].lower(),
                                 tuple(values["primary.key.fields"]), values["delete.enabled"],
                                 values["truncate.enabled"], not values["quote.identifiers"],
                                 entries, not values["field.exclude.list"])
        self._connect()

    def _connect(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            try:
                self.conn = psycopg.connect(**self.connect_kw)
                self.conn.execute("SELECT set_config('TimeZone', %s, false)", (self.time_zone,))
                self.conn.commit()
            except psycopg.OperationalError as e:
                self.conn = None
                raise RetriableError(f"Could not connect to PostgreSQL: {e}") from e
            self.tables.clear()
        return self.conn

    # ---- SinkTask

    def put(self, records: list[SinkRecord]) -> None:
        started = time.perf_counter()
        changes = [c for r in records if (c := describe(r, self.settings)) is not None]
        if self.reduce:
            changes = _reduced(changes)
        if changes:
            conn = self._connect()
            try:
                self._ensure_tables(conn, changes)
                self._write(conn, changes)
            except psycopg.OperationalError as e:
                self._drop_connection()
                raise RetriableError(f"Lost the connection to PostgreSQL: {e}") from e
            except psycopg.Error as e:
                self.tables.clear()  # a failed DDL or write: read the catalog again
                try:
                    conn.rollback()  # a failed catalog read leaves its transaction aborted
                except psycopg.Error:
                    self._drop_connection()
                raise ConnectError(f"Failed to process a sink record: {e}") from e
        for r in records:
            topic, partition, offset = original_offset(r)
            self.processed[(topic, partition)] = offset + 1
        if records:
            log.debug("put of %d records (%d changes) in %.1f ms", len(records), len(changes),
                      (time.perf_counter() - started) * 1000)

    def pre_commit(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The offsets after the last record written, of the partitions still assigned."""
        return {tp: o for tp, o in self.processed.items() if tp in offsets}

    def close(self, partitions: list[tuple[str, int]]) -> None:
        for tp in partitions:
            self.processed.pop(tuple(tp), None)  # type: ignore[arg-type]

    def stop(self) -> None:
        self._drop_connection()

    def _drop_connection(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    # ---- tables

    def _ensure_tables(self, conn: psycopg.Connection, changes: list[Change]) -> None:
        """Create missing tables and add missing columns (schema.evolution=basic)."""
        wanted: dict[TableId, dict[str, ColumnDef]] = {}
        keys: dict[TableId, list[str]] = {}
        for ch in changes:
            cols = wanted.setdefault(ch.table, {})
            if ch.kind != "write":
                continue
            keys.setdefault(ch.table, [n for n, _, _ in ch.keys])
            for i, (name, schema, value) in enumerate(ch.keys + ch.values):
                if name not in cols or (cols[name].type == "text" and schema is None
                                        and value is not None):
                    cols[name] = _column_def(name, schema, value, key=i < len(ch.keys))
        for table, cols in wanted.items():
            if table not in self.tables:
                existing = sink_sql.read_table(conn, table)
                conn.commit()
                if existing is None and not cols:
                    continue  # only deletes or truncates for a table that is not there
                if existing is None:
                    self._ddl(conn, table, sink_sql.create_table(
                        table, list(cols.values()), keys.get(table, [])), "create")
                    continue
                self.tables[table] = existing
            missing = [c for n, c in cols.items() if n not in self.tables[table]]
            if missing:
                for c in missing:
                    if not c.nullable and c.default is None:
                        raise ConnectError(f"Cannot ALTER table '{table}' because field "
                                           f"'{c.name}' is not optional but has no default "
                                           "value")
                self._ddl(conn, table, sink_sql.add_columns(table, missing), "alter")

    def _ddl(self, conn: psycopg.Connection, table: TableId, sql: str, what: str) -> None:
        if self.evolution != "basic":
            raise ConnectError(f"Cannot {what} table {table} because schema evolution is "
                               "disabled")
        log.info("%s", sql)
        try:
            with conn.transaction():
                conn.execute(sql)
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject,
                psycopg.errors.DuplicateTable, psycopg.errors.DuplicateColumn):
            pass  # another task created it meanwhile
        conn.commit()
        table_cols = sink_sql.read_table(conn, table)
        conn.commit()
        if table_cols is None:
            raise ConnectError(f"Could not find table: {table}")
        self.tables[table] = table_cols

    # ---- rows

    def _statement(self, ch: Change) -> tuple[str, list[Any]] | None:
        if ch.table not in self.tables:
            return None  # a delete or truncate on a table that does not exist
        key_names = tuple(n for n, _, _ in ch.keys)
        names = tuple(n for n, _, _ in ch.values) if ch.kind == "write" else ()
        shape = (ch.table, ch.kind, key_names, names)
        sql = self.statements.get(shape)
        if sql is None:
            sql = self.statements[shape] = self._sql(ch.table, ch.kind, list(key_names),
                                                     list(names))
        if not sql:
            return None
        if ch.kind == "truncate":
            return sql, []
        key_params = [sink_sql.to_db(s, v) for _, s, v in ch.keys]
        if ch.kind == "delete":
            return sql, key_params
        params = [sink_sql.to_db(s, v) for _, s, v in ch.values]
        if self.insert_mode == "update":
            return sql, params + key_params
        return sql, key_params + params

    def _sql(self, table: TableId, kind: str, keys: list[str], names: list[str]) -> str:
        """The statement for a change of this shape ("" when there is nothing to do)."""
        if kind == "truncate":
            return sink_sql.truncate(table)
        if kind == "delete":
            if not keys:
                raise ConnectError(f"Cannot delete from table {table} with no key fields "
                                   "defined.")
            return sink_sql.delete(table, keys)
        if self.insert_mode == "upsert":
            if not keys:
                raise ConnectError(f"Cannot write to table {table.table} with no key fields "
                                   "defined.")
            return sink_sql.upsert(table, keys, names)
        if self.insert_mode == "update":
            return sink_sql.update(table, keys, names) if names else ""
        return sink_sql.insert(table, keys + names)

    def _write(self, conn: psycopg.Connection, changes: list[Change]) -> None:
        """Every change in order, in one transaction, consecutive equal statements batched."""
        with conn.transaction(), conn.pipeline() as pipeline, conn.cursor() as cur:
            run_sql: str | None = None
            run: list[list[Any]] = []
            sent = 0
            for ch in changes + [None]:
                st = self._statement(ch) if ch is not None else ("", [])
                if st is None:
                    continue
                if run and (ch is None or st[0] != run_sql or len(run) >= self.batch_size):
                    cur.executemany(run_sql, run)
                    sent += len(run)
                    run = []
                    if sent >= self.batch_size:
                        pipeline.sync()
                        sent = 0
                run_sql = st[0]
                run.append(st[1])


def _column_def(name: str, schema: Any, value: Any, *, key: bool) -> ColumnDef:
    if schema is None:
        return ColumnDef(name, sink_sql.guess_type(value), nullable=not key)
    return ColumnDef(name, sink_sql.column_type(schema),
                     nullable=not key and (schema.optional or schema.default is not None),
                     default=schema.default if not key and isinstance(
                         schema.default, (bool, int, float, str)) else None)


def _reduced(changes: list[Change]) -> list[Change]:
    """The last change of each key (and truncates, which drop what came before them)."""
    last: dict[Any, Change] = {}
    for i, ch in enumerate(changes):
        if ch.kind == "truncate":
            for k in [k for k, c in last.items() if c.table == ch.table]:
                del last[k]
            last[(ch.table, "truncate", i)] = ch
        elif not ch.keys:
            last[(ch.table, "row", i)] = ch
        else:
            k = (ch.table, tuple(_hashable(v) for _, _, v in ch.keys))
            last.pop(k, None)  # re-inserted at the end: the order of last changes is kept
            last[k] = ch
    return list(last.values())


def _hashable(v: Any) -> Any:
    return repr(v) if isinstance(v, (dict, list, bytearray)) else v
