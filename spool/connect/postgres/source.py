"""The PostgreSQL CDC source: ``PostgresConnector`` and ``PostgresSourceTask``, configured
with Debezium's PostgreSQL connector keys (``CONFIG_DEF``), one task.

**Start.** The task creates the publication if missing (``publication.autocreate.mode``:
``all_tables`` (Debezium's default), ``filtered`` (the included tables; altered to them
on every start), ``disabled``) and the logical replication slot ``slot.name``
(``pgoutput``), which it owns. ``snapshot.mode``:

- ``initial`` (default): when no completed snapshot is in the stored offsets, the slot is
  (re)created with CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT and every captured table
  read in that exported snapshot (``snapshot.py``, op ``"r"``, ``source.snapshot``
  ``"true"``, ``"last"`` on the last row); streaming then starts at the slot's
  consistent point, so snapshot + stream are exact. A snapshot interrupted before its
  last record was committed is redone from scratch on restart, keeping the slot it
  created: the stream then replays from the slot what changed since (deletes included)
  after the new snapshot's rows, which end in the database's state.
- ``always``: the same at every start; ``initial_only``: the snapshot, no stream (and no
  slot); ``never`` / ``no_data``: no snapshot, stream from the slot (created if missing).

**Stream.** psycopg 3 has no COPY BOTH, so there is no START_REPLICATION: the task copies
its slot into a temporary slot of its session (``pg_copy_logical_replication_slot``,
dropped with the connection) and consumes that one with
``pg_logical_slot_get_binary_changes(..., 'proto_version', '1', 'publication_names',
<publication>)``, decoding pgoutput (``pgoutput.py``). Whole transactions arrive in commit
order (read ``max.batch.size`` changes or more at a time, handed out ``max.batch.size``
records at a time; a transaction is held in memory until handed out); each
insert/update/delete of a captured table is a record (``envelope.py``), a delete is
followed by a tombstone when ``tombstones.on.delete``, an update changing the primary
key is a delete (+ tombstone) of the old key and a create of the new. A lost connection
is re-established at the next polls (a new temporary slot, resuming after the last
record polled). Truncates are
never emitted; ``skipped.operations`` (Debezium's, default ``t``) leaves out creates
(``c``), updates (``u``) or deletes (``d``, with their tombstones) too.
``message.key.columns`` (``<schema.table regex>:<column>,...;...``) keys a table by other
columns than its primary key (or gives one without a primary key a key; a delete carries
those columns only when the replica identity has them, e.g. FULL). Only tables matching
``schema.include.list``/``schema.exclude.list`` (regexes on the schema name) and
``table.include.list``/``table.exclude.list`` (regexes on ``schema.table``) are captured.

**Offsets** (source partition ``{"server": <topic.prefix>}``, Debezium's keys): streamed
records ``{"lsn", "lsn_proc", "lsn_commit", "txId", "ts_usec", "messageType",
"lsn_events_processed"}`` where ``lsn_commit`` is the transaction's commit LSN and
``lsn_events_processed`` the record's 1-based position among its transaction's records;
snapshot records ``{"lsn", "txId", "ts_usec", "snapshot": true, "last_snapshot_record",
"snapshot_completed"}``. On restart, streamed transactions up to the stored one, and the
stored one's records up to the stored position, are skipped.

**The slot is advanced only in ``commit()``** (which the runtime calls after writing the
offsets of acknowledged records; with exactly-once, after each transaction), never past a
record not acknowledged: with the records acknowledged (``commit_record``) up to some
record R in poll order, to R's transaction's commit LSN (which keeps that transaction,
whose later records may not be acknowledged yet); with every polled record acknowledged,
past every transaction decoded so far (so traffic on tables not captured does not pin
WAL). After a crash, what was acknowledged but whose offset was not yet written is not
sent again when the slot is already past it; everything else after the stored offset is.
Nothing unacknowledged is dropped.

Columns matching ``column.propagate.source.type`` (regexes on ``schema.table.column``) or
``datatype.propagate.source.type`` (on the type name) get Debezium's
``__debezium.source.column.type``/``length``/``scale`` schema parameters (the JDBC sink
creates ``varchar(40)``, ``numeric(12,2)`` from them).

``before`` carries the old row only as the table's REPLICA IDENTITY logs it: the key
columns by default (other columns null, or their type's zero when NOT NULL, as Debezium),
the whole row with ``ALTER TABLE ... REPLICA IDENTITY FULL``. Unchanged TOASTed values are
Debezium's ``__debezium_unavailable_value`` placeholder (or taken from a FULL old row).
The slot stays when the task stops unless ``slot.drop.on.stop``.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import threading
import time
import uuid
from typing import Any

import psycopg
from psycopg import sql

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
    ConnectError,
    SourceRecord,
    at_least,
    in_values,
)
from spool.connect.data import DataError, Struct
from spool.connect.postgres import envelope as env
from spool.connect.postgres import pgoutput
from spool.connect.postgres.pg_types import (
    SESSION_SETTINGS,
    Catalog,
    ColumnInfo,
    TableInfo,
    zero_value,
)
from spool.connect.postgres.snapshot import Snapshot

log = logging.getLogger(__name__)

SNAPSHOT_MODES = ("initial", "always", "never", "initial_only", "no_data")
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")


def _regex_list(name: str, value: Any) -> None:
    for r in value or []:
        try:
            re.compile(r)
        except re.error as e:
            raise ConfigError({name: [f"Invalid value {r} for configuration {name}: {e}"]}) \
                from None


def _slot_name(name: str, value: Any) -> None:
    if not re.fullmatch(r"[a-z0-9_]{1,63}", value or ""):
        raise ConfigError({name: [
            f"Invalid value {value} for configuration {name}: Valid replication slot name "
            "must contain only digits, lowercase characters and underscores with length "
            "<= 63"]})


def parse_key_columns(value: str) -> list[tuple[re.Pattern[str], tuple[str, ...]]]:
    """``message.key.columns``: ``regex:col,col;regex:col`` -> [(pattern, columns)]."""
    out = []
    for part in (value or "").split(";"):
        if not part.strip():
            continue
        table, sep, cols = part.strip().rpartition(":")
        columns = tuple(c.strip() for c in cols.split(",") if c.strip())
        if not sep or not table or not columns:
            raise ValueError(f"'{part.strip()}' is not '<table regex>:<column>[,<column>...]'")
        out.append((re.compile(table, re.IGNORECASE), columns))
    return out


def _key_columns(name: str, value: Any) -> None:
    try:
        parse_key_columns(value)
    except (ValueError, re.error) as e:
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: {e}"]}) \
            from None


def _topic_prefix(name: str, value: Any) -> None:
    if not re.fullmatch(r"[A-Za-z0-9._-]+", value or ""):
        raise ConfigError({name: [
            f"Invalid value {value} for configuration {name}: Topic prefix must contain only "
            "alphanumeric characters, '.', '_' or '-'"]})


def _group(name: str) -> dict[str, Any]:
    return {"group": name}


CONFIG_DEF = (
    ConfigDef()
    .define("database.hostname", STRING, importance=HIGH,
            doc="Resolvable hostname or IP address of the database server.", **_group("Connection"))
    .define("database.port", INT, 5432, HIGH, "Port of the database server.",
            validator=at_least(1), **_group("Connection"))
    .define("database.user", STRING, importance=HIGH,
            doc="Name of the database user to be used when connecting to the database.",
            **_group("Connection"))
    .define("database.password", PASSWORD, "", HIGH,
            "Password of the database user to be used when connecting to the database.",
            **_group("Connection"))
    .define("database.dbname", STRING, importance=HIGH,
            doc="The name of the database from which the connector should capture changes",
            **_group("Connection"))
    .define("database.sslmode", STRING, "prefer", MEDIUM,
            "Whether to use an encrypted connection: disable, allow, prefer, require, "
            "verify-ca, verify-full.",
            validator=in_values("disable", "allow", "prefer", "require", "verify-ca",
                                "verify-full"), **_group("Connection"))
    .define("topic.prefix", STRING, importance=HIGH,
            doc="Topic prefix that identifies and provides a namespace for the particular "
                "database server/cluster is capturing changes. Topics are named "
                "<topic.prefix>.<schema>.<table>.",
            validator=_topic_prefix, **_group("Connector"))
    .define("plugin.name", STRING, "pgoutput", MEDIUM,
            "The name of the Postgres logical decoding plugin installed on the server; "
            "only pgoutput is supported.", validator=in_values("pgoutput"),
            recommended=("pgoutput",), **_group("Connector"))
    .define("slot.name", STRING, "debezium", MEDIUM,
            "The name of the Postgres logical decoding slot created for streaming changes "
            "from a plugin.", validator=_slot_name, **_group("Connector"))
    .define("slot.drop.on.stop", BOOLEAN, False, LOW,
            "Whether or not to drop the logical replication slot when the connector "
            "finishes orderly.", **_group("Connector"))
    .define("publication.name", STRING, "dbz_publication", MEDIUM,
            "The name of the Postgres 10+ publication used for streaming changes from a "
            "plugin.", **_group("Connector"))
    .define("publication.autocreate.mode", STRING, "all_tables", MEDIUM,
            "Applies only when streaming changes using pgoutput: disabled, all_tables, "
            "filtered.", validator=in_values("disabled", "all_tables", "filtered"),
            recommended=("disabled", "all_tables", "filtered"), **_group("Connector"))
    .define("schema.include.list", LIST, "", MEDIUM,
            "The schemas for which events should be captured (regular expressions).",
            validator=_regex_list, **_group("Filters"))
    .define("schema.exclude.list", LIST, "", MEDIUM,
            "The schemas for which events must not be captured (regular expressions).",
            validator=_regex_list, **_group("Filters"))
    .define("table.include.list", LIST, "", MEDIUM,
            "The tables for which changes are to be captured (regular expressions on "
            "schema.table).", validator=_regex_list, **_group("Filters"))
    .define("table.exclude.list", LIST, "", MEDIUM,
            "Tables that are excluded from the monitoring (regular expressions on "
            "schema.table).", validator=_regex_list, **_group("Filters"))
    .define("snapshot.mode", STRING, "initial", MEDIUM,
            "The criteria for running a snapshot upon startup of the connector: "
            + ", ".join(SNAPSHOT_MODES) + ".", validator=in_values(*SNAPSHOT_MODES),
            recommended=SNAPSHOT_MODES, **_group("Connector"))
    .define("snapshot.fetch.size", INT, 10240, MEDIUM,
            "The maximum number of records that should be loaded into memory while "
            "performing a snapshot.", validator=at_least(1), **_group("Connector"))
    .define("tombstones.on.delete", BOOLEAN, True, MEDIUM,
            "Whether delete operations should be represented by a delete event and a "
            "subsequent tombstone event (true) or only by a delete event (false).",
            **_group("Connector"))
    .define("decimal.handling.mode", STRING, "precise", MEDIUM,
            "Specify how DECIMAL and NUMERIC columns should be represented in change "
            "events: precise, string, double.",
            validator=in_values("precise", "string", "double"),
            recommended=("precise", "string", "double"), **_group("Connector"))
    .define("column.propagate.source.type", LIST, "", LOW,
            "Columns (regular expressions on schema.table.column) whose schemas get the "
            "__debezium.source.column.type/length/scale parameters.",
            validator=_regex_list, **_group("Connector"))
    .define("datatype.propagate.source.type", LIST, "", LOW,
            "Data types (regular expressions on the type name) whose columns' schemas get "
            "the __debezium.source.column.type/length/scale parameters.",
            validator=_regex_list, **_group("Connector"))
    .define("message.key.columns", STRING, "", LOW,
            "The columns of each table's message key instead of its primary key: "
            "'<schema.table regex>:<column>,<column>;...'.", validator=_key_columns,
            **_group("Connector"))
    .define("skipped.operations", LIST, "t", LOW,
            "The operations not emitted: c (create), u (update), d (delete, with its "
            "tombstone), t (truncate: never emitted), none.",
            validator=in_values("c", "u", "d", "t", "none"), **_group("Connector"))
    .define("max.batch.size", INT, 2048, MEDIUM,
            "Maximum size of each batch of source records.", validator=at_least(1),
            **_group("Connector"))
    .define("poll.interval.ms", INT, 500, MEDIUM,
            "Time to wait for new change events to appear after receiving no events, in "
            "milliseconds.", validator=at_least(0), **_group("Connector"))
)


def parse_config(props: dict[str, str]) -> dict[str, Any]:
    return CONFIG_DEF.parse(props)


def conninfo(cfg: dict[str, Any], **extra: Any) -> str:
    return psycopg.conninfo.make_conninfo(
        host=cfg["database.hostname"], port=cfg["database.port"], user=cfg["database.user"],
        password=cfg["database.password"] or None, dbname=cfg["database.dbname"],
        sslmode=cfg["database.sslmode"], application_name=f"spool-connect-{cfg['topic.prefix']}",
        connect_timeout=10, **extra)


class TableFilter:
    """Which tables are captured (the include/exclude lists, module doc)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        def comp(key: str) -> list[re.Pattern[str]]:
            return [re.compile(r, re.IGNORECASE) for r in cfg[key] if r]
        self.schema_in, self.schema_out = comp("schema.include.list"), comp("schema.exclude.list")
        self.table_in, self.table_out = comp("table.include.list"), comp("table.exclude.list")

    def __call__(self, schema: str, table: str) -> bool:
        if schema in SYSTEM_SCHEMAS or schema.startswith("pg_"):
            return False
        full = f"{schema}.{table}"
        if self.schema_in and not any(p.fullmatch(schema) for p in self.schema_in):
            return False
        if any(p.fullmatch(schema) for p in self.schema_out):
            return False
        if self.table_in and not any(p.fullmatch(full) for p in self.table_in):
            return False
        return not any(p.fullmatch(full) for p in self.table_out)


def captured_tables(conn: psycopg.Connection, accept: TableFilter) -> list[tuple[int, str, str]]:
    """(oid, schema, table) of the captured ordinary tables, by schema then name; a
    partitioned table's rows are its partitions' (as pgoutput publishes them)."""
    rows = conn.execute(
        "SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
        "ORDER BY n.nspname, c.relname").fetchall()
    return [(int(o), s, t) for o, s, t in rows if accept(s, t)]


def key_override(cfg: dict[str, Any]) -> Any:
    """``schema.table -> key columns | None`` from message.key.columns (None when unset)."""
    rules = parse_key_columns(cfg["message.key.columns"])
    if not rules:
        return None

    def columns(table: str) -> tuple[str, ...] | None:
        return next((cols for p, cols in rules if p.fullmatch(table)), None)
    return columns


def source_type_propagation(cfg: dict[str, Any]) -> Any:
    """``(schema.table.column, type name) -> bool`` from column/datatype.propagate.source.type,
    None when both are empty."""
    cols = [re.compile(r, re.IGNORECASE) for r in cfg["column.propagate.source.type"] if r]
    types = [re.compile(r, re.IGNORECASE) for r in cfg["datatype.propagate.source.type"] if r]
    if not cols and not types:
        return None

    def propagate(column: str, type_name: str) -> bool:
        return any(p.fullmatch(column) for p in cols) or any(p.fullmatch(type_name)
                                                              for p in types)
    return propagate


class PostgresConnector(api.SourceConnector):
    """Debezium's ``io.debezium.connector.postgresql.PostgresConnector`` (module doc)."""

    def start(self, props: dict[str, str]) -> None:
        parse_config(props)
        self.props = dict(props)

    def task_class(self) -> type[api.Task]:
        return PostgresSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one task: one slot, one ordered stream

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, props: dict[str, str]) -> dict[str, api.ConfigValue]:
        values = CONFIG_DEF.validate(props)
        if any(v.errors for v in values.values()):
            return values
        cfg = {n: v.value for n, v in values.items()}
        try:
            with psycopg.connect(conninfo(cfg), connect_timeout=5) as conn:
                (level,) = conn.execute("SHOW wal_level").fetchone()  # type: ignore[misc]
                if level != "logical":
                    values["database.hostname"].errors.append(
                        f"Postgres server wal_level property must be 'logical' but is: '{level}'")
        except psycopg.Error as e:
            values["database.hostname"].errors.append(
                f"Error while validating connector config: {str(e).strip()}")
        return values

    def exactly_once_support(self, props: dict[str, str]) -> str | None:
        return api.ExactlyOnceSupport.SUPPORTED

    def stop(self) -> None:
        pass


class PostgresSourceTask(api.SourceTask):
    """The one task of a PostgresConnector (module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # poll/stop: the main connection
        self._acks = threading.Lock()  # commit_record/commit/poll's bookkeeping
        self._stopping = threading.Event()
        self.conn: psycopg.Connection | None = None
        self._advance_conn: psycopg.Connection | None = None
        self._snapshot: Snapshot | None = None
        self._snapshot_rows: Any = None
        self._lookahead: Any = None
        self.streaming = False
        self.temp_slot: str | None = None
        self._tables: dict[int, TableInfo | None] = {}
        self._identity: dict[int, frozenset[str]] = {}  # the replica identity's columns
        self._table_cache: dict[tuple, TableInfo] = {}
        self._resume: tuple[int, int] | None = None  # (lsn_commit, events) to skip
        self._tx: pgoutput.Begin | None = None
        self._tx_events = 0
        self._prev_commit_lsn: int | None = None
        # records polled and not yet acknowledged, in poll order: id(offset) -> [offset, acked]
        self._pending: dict[int, list[Any]] = {}
        self._acked_offset: dict[str, Any] | None = None  # the acknowledged prefix's last
        self._last_offset: dict[str, Any] | None = None  # the last polled
        self._last_end_lsn = 0
        self._advanced_to = 0
        self._buffer: collections.deque[tuple[str, bytes]] = collections.deque()
        self._buffer_read_to = 0

    # ---- lifecycle

    def start(self, props: dict[str, str]) -> None:
        self.cfg = cfg = parse_config(props)
        self.prefix: str = cfg["topic.prefix"]
        self.slot: str = cfg["slot.name"]
        self.publication: str = cfg["publication.name"]
        self.partition = {"server": self.prefix}
        self.accept = TableFilter(cfg)
        self.dsn = conninfo(cfg)
        self.batch = cfg["max.batch.size"]
        self.poll_interval = cfg["poll.interval.ms"] / 1000
        self.tombstones = cfg["tombstones.on.delete"]
        self.skipped = {op.lower() for op in cfg["skipped.operations"]} - {"none"}
        self._version = self.version()  # source.version; read once (package metadata)
        reader = getattr(getattr(self, "context", None), "offset_storage_reader", None)
        offset = reader.offset(self.partition) if reader is not None else None
        try:
            self._start(offset)
        except BaseException:
            self._close()
            raise

    def _start(self, offset: dict[str, Any] | None) -> None:
        cfg = self.cfg
        self.conn = self._connect()
        propagate, keys = source_type_propagation(cfg), key_override(cfg)
        self.catalog = Catalog(self.conn, topic_prefix=self.prefix,
                               decimal_mode=cfg["decimal.handling.mode"], propagate=propagate,
                               key_override=keys)
        mode = cfg["snapshot.mode"].lower()
        snapshot_done = offset is not None and (not offset.get("snapshot")
                                                or bool(offset.get("last_snapshot_record"))
                                                or bool(offset.get("snapshot_completed")))
        do_snapshot = mode == "always" or (mode in ("initial", "initial_only")
                                           and not snapshot_done)
        self.streaming = mode != "initial_only"
        tables = [oid for oid, _, _ in captured_tables(self.conn, self.accept)]
        snapshot_name = None
        consistent_lsn = 0
        repl = None
        try:
            if self.streaming:
                self._ensure_publication()
                if do_snapshot and mode != "always" and self._slot_exists():
                    # a snapshot interrupted (or never recorded) with the slot created: keep
                    # the slot, so what changed while the task was down (deletes among it)
                    # is streamed after the new snapshot, which is read in a snapshot of its
                    # own; the replay ends in the database's state
                    log.info("postgres source %s: slot %s kept for the snapshot taken again",
                             self.prefix, self.slot)
                elif do_snapshot:
                    self._drop_slot(self.conn, self.slot)
                    repl, consistent_lsn, snapshot_name = self._create_slot(export=True)
                elif not self._slot_exists():
                    if offset is not None and not offset.get("snapshot"):
                        log.warning("replication slot %s is missing: created anew, changes "
                                    "since the last offset may be lost", self.slot)
                    self._create_slot(export=False)
                if offset is not None and not offset.get("snapshot") and not do_snapshot:
                    self._resume = (int(offset["lsn_commit"]),
                                    int(offset.get("lsn_events_processed", 0)))
            if do_snapshot:
                snap = Snapshot(self.dsn, tables, topic_prefix=self.prefix,
                                decimal_mode=cfg["decimal.handling.mode"],
                                snapshot_name=snapshot_name,
                                fetch_size=cfg["snapshot.fetch.size"],
                                propagate=propagate, key_override=keys).open()
                self._snapshot = snap
                if not consistent_lsn:
                    consistent_lsn = pgoutput.parse_lsn(self.conn.execute(
                        "SELECT pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]
                self._snapshot_lsn = consistent_lsn
                self._snapshot_ts = int(time.time() * 1_000_000)
                self._snapshot_rows = snap.rows()
        finally:
            if repl is not None:
                repl.close()  # the snapshot is imported: the exporter may go
        if self.streaming:
            self.temp_slot = f"{self.slot[:40]}_spool_{uuid.uuid4().hex[:12]}"
            self.conn.execute("SELECT pg_copy_logical_replication_slot(%s, %s, true)",
                              (self.slot, self.temp_slot))
        log.info("postgres source %s: %s, snapshot %s, slot %s", self.prefix,
                 "streaming" if self.streaming else "snapshot only",
                 "running" if do_snapshot else "skipped", self.slot)

    def stop(self) -> None:
        self._stopping.set()
        got = self._lock.acquire(timeout=30)
        try:
            self._close()
            if self.cfg.get("slot.drop.on.stop") if hasattr(self, "cfg") else False:
                try:
                    with psycopg.connect(self.dsn, autocommit=True) as c:
                        self._drop_slot(c, self.slot)
                except psycopg.Error as e:
                    log.warning("dropping slot %s: %s", self.slot, e)
        finally:
            if got:
                self._lock.release()

    def _close(self) -> None:
        for attr in ("_snapshot", "conn", "_advance_conn"):
            obj = getattr(self, attr)
            setattr(self, attr, None)
            if obj is not None:
                try:
                    obj.close()
                except Exception as e:  # noqa: BLE001 - closing anyway
                    log.debug("closing %s: %s", attr, e)
        self._snapshot_rows = None

    # ---- database helpers

    def _connect(self, **extra: Any) -> psycopg.Connection:
        conn = psycopg.connect(conninfo(self.cfg, **extra), autocommit=True)
        if not extra:
            for s in SESSION_SETTINGS:
                conn.execute(s)
        return conn

    def _slot_exists(self) -> bool:
        assert self.conn is not None
        row = self.conn.execute(
            "SELECT plugin, database FROM pg_replication_slots WHERE slot_name = %s",
            (self.slot,)).fetchone()
        if row is None:
            return False
        if row[0] != "pgoutput" or row[1] != self.cfg["database.dbname"]:
            raise ConnectError(f"Replication slot {self.slot} exists for plugin {row[0]} on "
                               f"database {row[1]}, not pgoutput on "
                               f"{self.cfg['database.dbname']}")
        return True

    @staticmethod
    def _drop_slot(conn: psycopg.Connection, slot: str) -> None:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s", (slot,))

    def _create_slot(self, *, export: bool) -> tuple[psycopg.Connection, int, str | None]:
        repl = self._connect(replication="database")
        try:
            row = repl.execute(sql.SQL("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput {}").format(
                sql.Identifier(self.slot),
                sql.SQL("EXPORT_SNAPSHOT" if export else "NOEXPORT_SNAPSHOT"))).fetchone()
        except BaseException:
            repl.close()
            raise
        assert row is not None
        if not export:
            repl.close()
        return repl, pgoutput.parse_lsn(row[1]), row[2]

    def _ensure_publication(self) -> None:
        assert self.conn is not None
        mode = self.cfg["publication.autocreate.mode"].lower()
        exists = self.conn.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s",
                                   (self.publication,)).fetchone()
        if mode == "disabled":
            if exists is None:
                raise ConnectError("Publication autocreation is disabled, please create one "
                                   f"and restart the connector: {self.publication}")
            return
        name = sql.Identifier(self.publication)
        if mode == "all_tables":
            if exists is None:
                self._create_publication(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES")
                                         .format(name))
            return
        tables = sql.SQL(", ").join(sql.Identifier(s, t) for _, s, t
                                    in captured_tables(self.conn, self.accept))
        empty = not captured_tables(self.conn, self.accept)
        if exists is None:
            self._create_publication(
                sql.SQL("CREATE PUBLICATION {}").format(name) if empty else
                sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(name, tables))
        elif not exists[0] and not empty:
            self.conn.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(name, tables))

    def _create_publication(self, stmt: sql.Composed) -> None:
        assert self.conn is not None
        try:
            self.conn.execute(stmt)
        except psycopg.errors.DuplicateObject:
            pass  # created meanwhile

    # ---- polling

    def poll(self) -> list[SourceRecord]:
        with self._lock:
            if self._stopping.is_set() or self.conn is None:
                return []
            if self._snapshot_rows is not None:
                return self._poll_snapshot()
            if not self.streaming:
                self._stopping.wait(self.poll_interval)
                return []
            try:
                records = self._poll_stream()
            except psycopg.OperationalError as e:  # the connection is lost: reconnect
                if self._stopping.is_set():
                    return []
                log.warning("postgres source %s: connection lost (%s), reconnecting",
                            self.prefix, str(e).strip())
                self._reconnect()
                records = []
            except (psycopg.Error, DataError) as e:
                if self._stopping.is_set():
                    return []
                raise ConnectError(f"Error while streaming changes from slot {self.slot}: "
                                   f"{e}") from e
        if not records:
            self._stopping.wait(self.poll_interval)
        return records

    def _poll_snapshot(self) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        rows = self._snapshot_rows
        item = self._lookahead if self._lookahead is not None else next(rows, None)
        self._lookahead = None
        tx_id = self._snapshot.tx_id if self._snapshot is not None else None
        while item is not None:
            nxt = next(rows, None)
            info, row = item
            last = nxt is None
            offset = {"lsn": self._snapshot_lsn, "txId": tx_id,
                      "ts_usec": self._snapshot_ts, "snapshot": True,
                      "last_snapshot_record": last, "snapshot_completed": last}
            source = env.source_struct(
                version=self._version, name=self.prefix, db=self.cfg["database.dbname"],
                schema=info.schema_name, table=info.name, ts_us=self._snapshot_ts,
                snapshot="last" if last else "true", tx_id=tx_id,
                lsn=self._snapshot_lsn)
            out.append(self._record(info, env.OP_READ, None, row, source, offset))
            item = nxt
            if len(out) >= self.batch and item is not None:
                self._lookahead = item
                break
        if self._lookahead is None:  # done
            snap, self._snapshot, self._snapshot_rows = self._snapshot, None, None
            if snap is not None:
                snap.close()
            log.info("postgres source %s: snapshot done", self.prefix)
        self._note_polled(out)
        return out

    def _poll_stream(self) -> list[SourceRecord]:
        """At most ``max.batch.size`` records from the changes read; read more (whole
        transactions, at least ``max.batch.size`` changes) when all are handed out."""
        assert self.conn is not None
        if not self._buffer:
            self._buffer = collections.deque(self.conn.execute(
                "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes(%s, NULL, %s, "
                "'proto_version', '1', 'publication_names', %s)",
                (self.temp_slot, self.batch, self.publication)).fetchall())
            # how far the temporary slot has read: every transaction committed before it
            # is in what was returned (pgoutput leaves out those with nothing published)
            (read_to,) = self.conn.execute(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                "WHERE slot_name = %s", (self.temp_slot,)).fetchone() or (None,)
            self._buffer_read_to = pgoutput.parse_lsn(read_to) if read_to else 0
        out: list[SourceRecord] = []
        end_lsn = 0
        buffer = self._buffer
        while buffer and len(out) < self.batch:
            lsn_text, payload = buffer.popleft()
            msg = pgoutput.decode(payload)
            if isinstance(msg, pgoutput.Begin):
                self._tx, self._tx_events = msg, 0
            elif isinstance(msg, pgoutput.Commit):
                self._prev_commit_lsn = msg.commit_lsn
                end_lsn = msg.end_lsn
                if self._resume is not None and msg.commit_lsn >= self._resume[0]:
                    self._resume = None
                self._tx = None
            elif isinstance(msg, pgoutput.Relation):
                self._relation(msg)
            elif isinstance(msg, (pgoutput.Insert, pgoutput.Update, pgoutput.Delete)):
                info = self._tables.get(msg.relation_oid)
                if info is not None and self._tx is not None:
                    for rec in self._change(info, msg, pgoutput.parse_lsn(lsn_text)):
                        if self.skipped and (rec.value["op"] if rec.value is not None
                                             else "d") in self.skipped:
                            continue
                        self._tx_events += 1
                        if self._skip():
                            continue
                        offset = rec.source_offset
                        assert offset is not None
                        offset["lsn_events_processed"] = self._tx_events
                        out.append(rec)
        if not buffer:
            end_lsn = max(end_lsn, self._buffer_read_to)
        # one step, records first: commit() must never see the end LSN without them pending
        self._note_polled(out, end_lsn)
        return out

    def _reconnect(self) -> None:
        """A new connection and temporary slot, resuming after the last record polled
        (the old temporary slot went with the old connection)."""
        with self._acks:
            last = self._last_offset
        if last is not None and not last.get("snapshot"):
            self._resume = (int(last["lsn_commit"]), int(last["lsn_events_processed"]))
        self._tx = None
        self._buffer.clear()
        old, self.conn = self.conn, None
        if old is not None:
            try:
                old.close()
            except psycopg.Error:
                pass
        try:
            conn = self._connect()
            self.temp_slot = f"{self.slot[:40]}_spool_{uuid.uuid4().hex[:12]}"
            conn.execute("SELECT pg_copy_logical_replication_slot(%s, %s, true)",
                         (self.slot, self.temp_slot))
        except psycopg.OperationalError as e:  # not yet: the next poll tries again
            log.warning("postgres source %s: reconnecting: %s", self.prefix, str(e).strip())
            self.conn = _Closed()  # type: ignore[assignment]
            return
        self.conn = conn
        self.catalog.conn = conn

    def _skip(self) -> bool:
        if self._resume is None or self._tx is None:
            return False
        commit_lsn, events = self._resume
        return self._tx.final_lsn < commit_lsn or (self._tx.final_lsn == commit_lsn
                                                   and self._tx_events <= events)

    def _relation(self, msg: pgoutput.Relation) -> None:
        if not self.accept(msg.namespace, msg.name):
            self._tables[msg.oid] = None
            return
        cols = tuple((c.name, c.type_oid, c.type_modifier) for c in msg.columns)
        key = (msg.oid, msg.namespace, msg.name, cols)
        info = self._table_cache.get(key)
        if info is None:
            info = self.catalog.table(msg.oid, list(cols))
            if (info.schema_name, info.name) != (msg.namespace, msg.name):  # dropped since
                info = self.catalog.build(msg.oid, msg.namespace, msg.name, list(cols), {},
                                          tuple(c.name for c in msg.columns if c.is_key))
            self._table_cache[key] = info
        self._tables[msg.oid] = info
        self._identity[msg.oid] = frozenset(c.name for c in msg.columns if c.is_key)

    def _change(self, info: TableInfo, msg: Any, lsn: int) -> list[SourceRecord]:
        tx = self._tx
        assert tx is not None
        kind = {pgoutput.Insert: "INSERT", pgoutput.Update: "UPDATE",
                pgoutput.Delete: "DELETE"}[type(msg)]
        offset = {"lsn": lsn, "lsn_proc": lsn, "lsn_commit": tx.final_lsn, "txId": tx.xid,
                  "ts_usec": tx.commit_ts_us, "messageType": kind}
        seq = json.dumps([str(self._prev_commit_lsn) if self._prev_commit_lsn else None,
                          str(lsn)])
        source = env.source_struct(
            version=self._version, name=self.prefix, db=self.cfg["database.dbname"],
            schema=info.schema_name, table=info.name, ts_us=tx.commit_ts_us, snapshot="false",
            sequence=seq, tx_id=tx.xid, lsn=lsn)
        old = None
        old_kind = getattr(msg, "old_kind", None)
        if getattr(msg, "old", None) is not None:
            old = self._old_row(info, msg.old, old_kind,
                                self._identity.get(msg.relation_oid, frozenset()))
        if isinstance(msg, pgoutput.Insert):
            return [self._record(info, env.OP_CREATE, None, info.row(msg.new), source, offset)]
        if isinstance(msg, pgoutput.Delete):
            return self._delete(info, old, source, offset)
        new_texts = list(msg.new)
        if old_kind == "O":  # unchanged TOAST: the old row has it
            for i, v in enumerate(new_texts):
                if v is pgoutput.UNCHANGED_TOAST and i < len(msg.old):
                    new_texts[i] = msg.old[i]
        after = info.row(new_texts)
        if old is not None and info.key_schema is not None \
                and info.key(old) != info.key(after):  # the primary key changed
            return [*self._delete(info, old, source, offset),
                    self._record(info, env.OP_CREATE, None, after, source, offset)]
        return [self._record(info, env.OP_UPDATE, old, after, source, offset)]

    def _old_row(self, info: TableInfo, texts: list[Any], kind: str | None,
                 keys: frozenset[str]) -> Struct:
        """The old row of an update or delete; under a ``K`` tuple only the replica
        identity's columns (``keys``) are there."""
        if kind != "K":
            return info.row(texts)

        def absent(col: ColumnInfo) -> Any:
            return None if col.schema.optional else zero_value(col.schema)
        masked = [t if c.name in keys else _ABSENT for c, t in
                  zip(info.columns, texts, strict=False)]
        return info.row(masked, missing=absent)

    def _delete(self, info: TableInfo, old: Struct | None, source: Struct,
                offset: dict[str, Any]) -> list[SourceRecord]:
        out = [self._record(info, env.OP_DELETE, old, None, source, offset)]
        if self.tombstones:
            d = out[0]
            out.append(d.new_record(value_schema=None, value=None,
                                    source_offset=dict(d.source_offset)))  # type: ignore[arg-type]
        return out

    def _record(self, info: TableInfo, op: str, before: Struct | None, after: Struct | None,
                source: Struct, offset: dict[str, Any]) -> SourceRecord:
        row = after if after is not None else before
        key = info.key(row) if row is not None else None
        now = int(time.time() * 1_000_000)
        value = env.envelope(info.envelope_schema, op, before, after, source, now)
        return SourceRecord(topic=info.topic, kafka_partition=None,
                            key_schema=info.key_schema, key=key,
                            value_schema=info.envelope_schema, value=value,
                            source_partition=self.partition, source_offset=dict(offset))

    # ---- acknowledgements and the slot

    def _note_polled(self, records: list[SourceRecord], end_lsn: int = 0) -> None:
        """``records`` are handed out; ``end_lsn``: every transaction before it has been."""
        with self._acks:
            for r in records:
                self._pending[id(r.source_offset)] = [r.source_offset, False]
            if records:
                self._last_offset = records[-1].source_offset
            self._last_end_lsn = max(self._last_end_lsn, end_lsn)

    def commit_record(self, record: SourceRecord, metadata: api.RecordMetadata | None) -> None:
        with self._acks:
            entry = self._pending.get(id(record.source_offset))
            if entry is None:
                return
            entry[1] = True
            pending = self._pending
            while pending:  # the acknowledged prefix, in poll order
                first = next(iter(pending))
                offset, acked = pending[first]
                if not acked:
                    break
                del pending[first]
                self._acked_offset = offset

    def commit(self) -> None:
        """Advance the slot past what is acknowledged (module doc)."""
        if not self.streaming:
            return
        with self._acks:
            if self._snapshot_rows is not None:
                return
            acked = self._acked_offset
            target = int(acked["lsn_commit"]) if acked and not acked.get("snapshot") else 0
            if not self._pending:  # everything polled is acknowledged
                target = max(target, self._last_end_lsn)
        if target > self._advanced_to:
            self.advance(target)

    def advance(self, lsn: int) -> None:
        """Move the slot's confirmed position to ``lsn`` (never backwards)."""
        try:
            conn = self._advance_conn
            if conn is None or conn.closed:
                conn = self._advance_conn = psycopg.connect(self.dsn, autocommit=True)
            row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                               "WHERE slot_name = %s", (self.slot,)).fetchone()
            if row is None or row[0] is None:
                return
            if lsn > pgoutput.parse_lsn(row[0]):
                conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)",
                             (self.slot, pgoutput.format_lsn(lsn)))
            self._advanced_to = lsn
        except psycopg.Error as e:
            log.warning("advancing slot %s to %s: %s", self.slot, pgoutput.format_lsn(lsn), e)
        finally:
            if self._stopping.is_set() and self._advance_conn is not None:
                self._advance_conn.close()
                self._advance_conn = None


_ABSENT: Any = object()


class _Closed:
    """Stands for a connection to re-establish: every use raises OperationalError."""

    closed = True

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("not connected")

    def close(self) -> None:
        pass
