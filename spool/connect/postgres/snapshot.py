"""The initial snapshot: every captured table's rows, read in one transaction.

``Snapshot(dsn, tables, catalog_args, snapshot_name=None)``: ``open()`` starts a
REPEATABLE READ transaction on a connection of its own and, given ``snapshot_name`` (the
snapshot CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT exported), imports it with SET
TRANSACTION SNAPSHOT: the rows read are then exactly the database as of the slot's
consistent point, so the stream that follows starts where the snapshot ends (nothing lost,
nothing twice). ``rows()`` yields ``(TableInfo, row Struct)`` table by table (the tables in
the order given), reading through a server-side cursor ``fetch_size`` rows at a time, all
values in their text output (``pg_types``). ``tx_id`` is the snapshot transaction's id;
``close()`` ends it (idempotent).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import psycopg
from psycopg import sql
from psycopg.adapt import Loader

from spool.connect.data import Struct
from spool.connect.postgres.pg_types import SESSION_SETTINGS, Catalog, TableInfo


class _Text(Loader):
    """Every value as its text output (what pgoutput sends), not psycopg's Python types."""

    def load(self, data: Any) -> str:
        return bytes(data).decode()


def text_loaders(conn: psycopg.Connection, oids: Iterable[int] = ()) -> None:
    """Make ``conn`` return every column as ``str``."""
    for t in psycopg.postgres.types:
        conn.adapters.register_loader(t.oid, _Text)
        if t.array_oid:
            conn.adapters.register_loader(t.array_oid, _Text)
    for oid in oids:
        conn.adapters.register_loader(oid, _Text)


class Snapshot:
    """One snapshot of ``tables`` (oids), module doc."""

    def __init__(self, dsn: str, tables: list[int], *, topic_prefix: str,
                 decimal_mode: str = "precise", snapshot_name: str | None = None,
                 fetch_size: int = 10240, propagate: Any = None,
                 key_override: Any = None) -> None:
        self.dsn = dsn
        self.tables = tables
        self.snapshot_name = snapshot_name
        self.fetch_size = fetch_size
        self.prefix = topic_prefix
        self.decimal_mode = decimal_mode
        self.propagate = propagate
        self.key_override = key_override
        self.conn: psycopg.Connection | None = None
        self.tx_id: int | None = None
        self.catalog: Catalog | None = None

    def open(self) -> Snapshot:
        conn = psycopg.connect(self.dsn, autocommit=True)
        try:
            for s in SESSION_SETTINGS:
                conn.execute(s)
            conn.autocommit = False
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            if self.snapshot_name:
                conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                    sql.Literal(self.snapshot_name)))
            (tx,) = conn.execute("SELECT txid_current()").fetchone()  # type: ignore[misc]
            self.tx_id = int(tx)
            self.catalog = Catalog(conn, topic_prefix=self.prefix,
                                   decimal_mode=self.decimal_mode, propagate=self.propagate,
                                   key_override=self.key_override)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return self

    def rows(self) -> Iterator[tuple[TableInfo, Struct]]:
        assert self.conn is not None and self.catalog is not None, "open() first"
        for n, oid in enumerate(self.tables):
            info = self.catalog.table(oid)
            text_loaders(self.conn, {c.type_oid for c in info.columns})
            query = sql.SQL("SELECT {} FROM {}.{}").format(
                sql.SQL(", ").join(sql.Identifier(c.name) for c in info.columns),
                sql.Identifier(info.schema_name), sql.Identifier(info.name))
            with self.conn.cursor(name=f"spool_snapshot_{n}") as cur:
                cur.itersize = self.fetch_size
                cur.execute(query)
                for row in cur:
                    yield info, info.row(list(row))

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.rollback()
            finally:
                conn.close()
