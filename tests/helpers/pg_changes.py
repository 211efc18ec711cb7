"""Seeded PostgreSQL change workloads and their checks, for Connect's end-to-end tests.

``ChangeGenerator(seed, table)`` plans mixed inserts, updates and deletes on one table of
many column types (``COLUMNS``: int8 key, int2/int4/int8, numeric, float8, bool, text,
varchar, date, timestamp, timestamptz, bytea, jsonb, uuid; NULLs in every nullable column),
in transactions of varying size (mostly 1-10 changes, now and then up to 200), and applies
them: ``create(dsn)`` makes the table (``REPLICA IDENTITY FULL``, so deletes carry the
whole ``before`` row), ``run(dsn, n)`` commits ``n`` changes on one connection. The same
seed gives the same changes. Ids grow, and a deleted id is now and then inserted again.

Every change sets ``rev`` to a number no other change uses, so each change event is
known by ``(op, rev)`` (a delete by its ``before`` row's ``rev``). What was committed is
kept: ``rows`` (the table as it must be: id -> row), ``history`` (per id, the
``(op, rev)`` of each change in commit order; the generator commits on one connection, so
commit order is its order), ``applied`` (changes committed so far, readable from another
thread while ``run`` goes on). ``mark_snapshot()``: the table's rows as a snapshot sees
them, each id's history becomes ``[("r", rev)]``.

``compare_tables(dsn_a, dsn_b, table_a, table_b=None) -> TableDiff``: table_b's rows read
as table_a's column types (``col::type``, so a sink that stored a timestamptz as text still
compares), matched by table_a's primary key; the rows only in one, the rows that differ
(column by column), missing and extra columns. ``wait_identical`` polls it.

``decode_event(key, value)`` reads a Debezium change record (JSON, with or without the
schema envelope) as ``(id, op, rev)`` (op ``"tombstone"``, rev None);
``check_events(events, history)`` checks a topic's records against the history: per id,
every change in commit order, each delete followed by its tombstone, nothing missing or
unknown, and redeliveries (at-least-once after a crash: going back to a record already
delivered and on from there) allowed unless ``exactly_once``. It returns the problems found
(empty when there are none).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

# (column, type); id is the primary key. The order is the table's.
COLUMNS: list[tuple[str, str]] = [
    ("id", "bigint"), ("rev", "bigint"), ("name", "text"), ("qty", "integer"),
    ("small", "smallint"), ("price", "numeric(12,2)"), ("ratio", "double precision"),
    ("active", "boolean"), ("born", "date"), ("seen", "timestamp"), ("at", "timestamptz"),
    ("blob", "bytea"), ("doc", "jsonb"), ("uid", "uuid"), ("note", "varchar(40)"),
]
NULLABLE = [c for c, _ in COLUMNS if c not in ("id", "rev")]
_WORDS = ["alpha", "naïve", "日本語", "o'brien", 'quo"te', "back\\slash", "tab\there", "emoji 🚀",
          "", "line\nbreak", "Zürich", "comma,semi;colon"]
_EPOCH = dt.datetime(1970, 1, 1)
# changes per transaction on average (_txn_size: 60% 1-3, 35% 4-20, 5% 21-200), for pacing
MEAN_TXN_SIZE = 0.6 * 2 + 0.35 * 12 + 0.05 * 110.5


@dataclass
class Change:
    op: str  # "c", "u" or "d"
    id: int
    rev: int  # the row's rev after the change (a delete: the deleted row's)
    row: dict | None  # c/u: the whole row after the change


class ChangeGenerator:
    """Plans and applies seeded changes to one table (module doc)."""

    def __init__(self, seed: int, table: str = "items", *, live_target: int = 2000) -> None:
        self.rng = random.Random(seed)
        self.table = table
        self.live_target = live_target  # past it, deletes get likelier than inserts
        self.rows: dict[int, dict] = {}
        self.history: dict[int, list[tuple[str, int]]] = {}
        self.deleted: list[int] = []
        self.next_id = 1
        self.next_rev = 1
        self.applied = 0
        self.transactions = 0
        self._lock = threading.Lock()

    # -- the table ---------------------------------------------------------------------------
    def ddl(self) -> str:
        cols = ", ".join(f'"{c}" {t}' + (" PRIMARY KEY" if c == "id" else
                                         " NOT NULL" if c == "rev" else "")
                         for c, t in COLUMNS)
        return f'CREATE TABLE "{self.table}" ({cols})'

    def create(self, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(self.ddl())
            conn.execute(f'ALTER TABLE "{self.table}" REPLICA IDENTITY FULL')

    # -- planning ----------------------------------------------------------------------------
    def _value(self, col: str):
        r = self.rng
        if col in NULLABLE and r.random() < 0.08:
            return None
        match col:
            case "name":
                return f"{r.choice(_WORDS)} {r.randint(0, 10**6)}"
            case "qty":
                return r.randint(-2**31, 2**31 - 1)
            case "small":
                return r.randint(-2**15, 2**15 - 1)
            case "price":
                return Decimal(r.randint(-10**10 + 1, 10**10 - 1)).scaleb(-2)
            case "ratio":
                return r.choice([0.0, -0.5, 1e-300, 123456.789]) if r.random() < 0.1 else \
                    r.uniform(-1e9, 1e9)
            case "active":
                return r.random() < 0.5
            case "born":
                return dt.date(1970, 1, 1) + dt.timedelta(days=r.randint(-30000, 30000))
            case "seen":
                return _EPOCH + dt.timedelta(microseconds=r.randint(-2 * 10**15, 2 * 10**15))
            case "at":
                return (_EPOCH + dt.timedelta(microseconds=r.randint(0, 2 * 10**15))).replace(
                    tzinfo=dt.UTC)
            case "blob":
                return r.randbytes(r.randint(0, 40))
            case "doc":
                return {"n": r.randint(-1000, 1000), "tags": r.sample(_WORDS, 2),
                        "nested": {"ok": r.random() < 0.5, "x": None}}
            case "uid":
                return uuid.UUID(int=r.getrandbits(128), version=4)
            case "note":
                return r.choice(_WORDS)[:40]
        raise AssertionError(col)

    def _rev(self) -> int:
        self.next_rev += 1
        return self.next_rev - 1

    def _plan_one(self, touched_deletes: set[int]) -> Change:
        r = self.rng
        live = len(self.rows)
        p_insert = 0.6 if live < self.live_target else 0.25
        x = r.random()
        if live == 0 or x < p_insert:
            reuse = [i for i in self.deleted[-50:] if i not in touched_deletes]
            if reuse and r.random() < 0.1:
                key = r.choice(reuse)
                self.deleted.remove(key)
            else:
                key, self.next_id = self.next_id, self.next_id + 1
            row = {c: self._value(c) for c in NULLABLE}
            row.update(id=key, rev=self._rev())
            self.rows[key] = row
            return Change("c", key, row["rev"], dict(row))
        key = r.choice(list(self.rows)) if live < 64 else self._pick_live()
        if x < p_insert + (1 - p_insert) * 0.7:
            row = self.rows[key]
            for c in r.sample(NULLABLE, r.randint(1, 4)):
                row[c] = self._value(c)
            row["rev"] = self._rev()
            return Change("u", key, row["rev"], dict(row))
        row = self.rows.pop(key)
        self.deleted.append(key)
        touched_deletes.add(key)
        return Change("d", key, row["rev"], None)

    def _pick_live(self) -> int:
        # a recent id half the time (several changes to one row in a short span), else any
        keys = list(self.rows)
        if self.rng.random() < 0.5:
            return self.rng.choice(keys[-32:])
        return self.rng.choice(keys)

    def _txn_size(self) -> int:
        x = self.rng.random()
        if x < 0.6:
            return self.rng.randint(1, 3)
        if x < 0.95:
            return self.rng.randint(4, 20)
        return self.rng.randint(21, 200)

    def plan(self, n: int) -> Iterator[list[Change]]:
        """The next ``n`` changes, a transaction's worth at a time; the model (``rows``,
        ``history``) follows as each transaction is planned."""
        left = n
        while left > 0:
            size = min(left, self._txn_size())
            touched: set[int] = set()
            txn = [self._plan_one(touched) for _ in range(size)]
            with self._lock:
                for ch in txn:
                    self.history.setdefault(ch.id, []).append((ch.op, ch.rev))
            left -= size
            yield txn

    # -- applying ----------------------------------------------------------------------------
    def _statements(self) -> dict[str, sql.Composed]:
        t = sql.Identifier(self.table)
        cols = [c for c, _ in COLUMNS]
        insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            t, sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.Placeholder(c) for c in cols))
        update = sql.SQL("UPDATE {} SET {} WHERE id = %(id)s").format(
            t, sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), sql.Placeholder(c))
                                  for c in cols if c != "id"))
        delete = sql.SQL("DELETE FROM {} WHERE id = %(id)s").format(t)
        return {"c": insert, "u": update, "d": delete}

    def apply(self, conn: psycopg.Connection, txn: list[Change]) -> None:
        stmts = self._statements()
        with conn.transaction(), conn.cursor() as cur:
            for ch in txn:
                params = {"id": ch.id} if ch.row is None else \
                    {**ch.row, "doc": None if ch.row["doc"] is None else Jsonb(ch.row["doc"])}
                cur.execute(stmts[ch.op], params)
                if cur.rowcount != 1:
                    raise AssertionError(f"{ch} changed {cur.rowcount} rows")
        with self._lock:
            self.applied += len(txn)
            self.transactions += 1

    def run(self, dsn: str, n: int, *, stop: threading.Event | None = None,
            pause_s: float = 0.0) -> int:
        """Commit ``n`` changes (fewer if ``stop`` is set); ``pause_s`` between transactions.
        The number committed."""
        done = 0
        with psycopg.connect(dsn) as conn:
            for txn in self.plan(n):
                if stop is not None and stop.is_set():
                    break
                self.apply(conn, txn)
                done += len(txn)
                if pause_s:
                    time.sleep(pause_s)
        return done

    def bulk_insert(self, dsn: str, n: int, per_txn: int = 1000) -> int:
        """``n`` new rows (inserts only, new ids) with COPY, ``per_txn`` rows a transaction
        (for throughput benchmarks); the number inserted."""
        cols = [c for c, _ in COLUMNS]
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(self.table), sql.SQL(", ").join(map(sql.Identifier, cols)))
        done = 0
        with psycopg.connect(dsn) as conn:
            while done < n:
                rows = []
                for _ in range(min(per_txn, n - done)):
                    row = {c: self._value(c) for c in NULLABLE}
                    row.update(id=self.next_id, rev=self._rev())
                    self.next_id += 1
                    self.rows[row["id"]] = row
                    rows.append(row)
                with conn.transaction(), conn.cursor() as cur, cur.copy(copy) as cp:
                    for row in rows:
                        cp.write_row([Jsonb(row[c]) if c == "doc" and row[c] is not None
                                      else row[c] for c in cols])
                with self._lock:
                    for row in rows:
                        self.history.setdefault(row["id"], []).append(("c", row["rev"]))
                    self.applied += len(rows)
                    self.transactions += 1
                done += len(rows)
        return done

    def mark_snapshot(self) -> None:
        """Every row as a snapshot reads it: each live id's history is ``[("r", rev)]``,
        a deleted id's empty."""
        with self._lock:
            self.history = {k: [("r", row["rev"])] for k, row in self.rows.items()}


# -- comparing two tables --------------------------------------------------------------------
@dataclass
class TableDiff:
    rows_a: int = 0
    rows_b: int = 0
    missing_columns: list[str] = field(default_factory=list)  # in a, not in b
    extra_columns: list[str] = field(default_factory=list)  # in b, not in a
    only_in_a: list[tuple] = field(default_factory=list)  # keys
    only_in_b: list[tuple] = field(default_factory=list)
    differing: list[tuple[tuple, dict]] = field(default_factory=list)  # key, {col: (a, b)}
    error: str | None = None  # b could not be read (missing table, a failed cast)

    @property
    def identical(self) -> bool:
        return not (self.error or self.missing_columns or self.extra_columns or self.only_in_a
                    or self.only_in_b or self.differing)

    def __str__(self) -> str:
        if self.identical:
            return f"identical ({self.rows_a} rows)"
        parts = [f"{self.rows_a} rows in a, {self.rows_b} in b"]
        if self.error:
            parts.append(f"error: {self.error}")
        if self.missing_columns:
            parts.append(f"columns missing from b: {self.missing_columns}")
        if self.extra_columns:
            parts.append(f"extra columns in b: {self.extra_columns}")
        if self.only_in_a:
            parts.append(f"{len(self.only_in_a)} keys only in a: {self.only_in_a[:10]}")
        if self.only_in_b:
            parts.append(f"{len(self.only_in_b)} keys only in b: {self.only_in_b[:10]}")
        if self.differing:
            parts.append(f"{len(self.differing)} rows differ, e.g. {self.differing[:5]}")
        return "; ".join(parts)


def _split(table: str) -> tuple[str, str]:
    schema, _, name = table.rpartition(".")
    return schema or "public", name


def _columns(conn: psycopg.Connection, table: str) -> list[tuple[str, str]]:
    schema, name = _split(table)
    return conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum", (schema, name)).fetchall()


def _primary_key(conn: psycopg.Connection, table: str) -> list[str]:
    schema, name = _split(table)
    return [r[0] for r in conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indisprimary AND n.nspname = %s AND c.relname = %s "
        "ORDER BY array_position(i.indkey, a.attnum)", (schema, name)).fetchall()]


def _read(conn: psycopg.Connection, table: str, cols: list[tuple[str, str]],
          key: list[str]) -> dict[tuple, tuple]:
    schema, name = _split(table)
    select = sql.SQL("SELECT {} FROM {}.{}").format(
        sql.SQL(", ").join(sql.SQL("{}::" + t).format(sql.Identifier(c)) for c, t in cols),
        sql.Identifier(schema), sql.Identifier(name))
    names = [c for c, _ in cols]
    idx = [names.index(k) for k in key]
    return {tuple(row[i] for i in idx): row for row in conn.execute(select)}


def compare_tables(dsn_a: str, dsn_b: str, table_a: str, table_b: str | None = None,
                   key: list[str] | None = None) -> TableDiff:
    """table_a (in dsn_a) against table_b (in dsn_b, default the same name): module doc."""
    table_b = table_b or table_a
    diff = TableDiff()
    with psycopg.connect(dsn_a) as a, psycopg.connect(dsn_b) as b:
        cols_a = _columns(a, table_a)
        key = key or _primary_key(a, table_a)
        if not key:
            raise ValueError(f"{table_a} has no primary key: give key=[...]")
        rows_a = _read(a, table_a, cols_a, key)
        diff.rows_a = len(rows_a)
        names_b = {c for c, _ in _columns(b, table_b)}
        if not names_b:
            diff.error = f"no table {table_b}"
            return diff
        diff.missing_columns = [c for c, _ in cols_a if c not in names_b]
        diff.extra_columns = sorted(names_b - {c for c, _ in cols_a})
        common = [(c, t) for c, t in cols_a if c in names_b]
        if any(k in diff.missing_columns for k in key):
            diff.error = f"key {key} not in {table_b}"
            return diff
        try:
            rows_b = _read(b, table_b, common, key)
        except psycopg.Error as e:
            diff.error = f"reading {table_b}: {e}"
            return diff
    diff.rows_b = len(rows_b)
    diff.only_in_a = sorted(k for k in rows_a if k not in rows_b)
    diff.only_in_b = sorted(k for k in rows_b if k not in rows_a)
    names = [c for c, _ in common]
    pos_a = [[c for c, _ in cols_a].index(c) for c in names]
    for k in sorted(rows_a.keys() & rows_b.keys()):
        ra, rb = rows_a[k], rows_b[k]
        cells = {c: (ra[pa], rb[i]) for i, (c, pa) in enumerate(zip(names, pos_a, strict=True))
                 if ra[pa] != rb[i]}
        if cells:
            diff.differing.append((k, cells))
    return diff


def wait_identical(dsn_a: str, dsn_b: str, table_a: str, table_b: str | None = None, *,
                   timeout: float = 60.0, interval: float = 0.5) -> TableDiff:
    """``compare_tables`` until identical or ``timeout``; the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        diff = compare_tables(dsn_a, dsn_b, table_a, table_b)
        if diff.identical or time.monotonic() > deadline:
            return diff
        time.sleep(interval)


# -- checking the change topic ---------------------------------------------------------------
def _payload(raw: bytes) -> dict:
    doc = json.loads(raw)
    if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
        return doc["payload"]
    return doc


def decode_event(key: bytes | None, value: bytes | None) -> tuple[int, str, int | None]:
    """(id, op, rev) of a Debezium change record; op "tombstone" for a tombstone."""
    if key is None:
        raise ValueError("a change record without a key")
    k = _payload(key)
    ident = int(k["id"] if isinstance(k, dict) else k)
    if value is None:
        return ident, "tombstone", None
    v = _payload(value)
    row = v["before"] if v["op"] == "d" else v["after"]
    return ident, v["op"], int(row["rev"])


def expected_events(history: list[tuple[str, int]]) -> list[tuple[str, int | None]]:
    """One id's records in commit order: its changes, a tombstone after each delete."""
    out: list[tuple[str, int | None]] = []
    for op, rev in history:
        out.append((op, rev))
        if op == "d":
            out.append(("tombstone", None))
    return out


def check_events(events: Iterable[tuple[int, str, int | None]],
                 history: dict[int, list[tuple[str, int]]], *,
                 exactly_once: bool = False) -> list[str]:
    """Problems with a topic's events (in partition order) against the history (module doc).

    Per id, the records must be ``expected_events(history[id])`` in order, except that at
    any point the stream may go back to a record already delivered and go on from there
    (a redelivery after a crash: the records after the last committed offset sent again),
    which ``exactly_once`` forbids; and the last record must be the last expected one (a
    replay that stopped short would leave an old row behind)."""
    per_key: dict[int, list[tuple[str, int | None]]] = {}
    for ident, op, rev in events:
        per_key.setdefault(ident, []).append((op, rev))
    problems: list[str] = []
    for ident in sorted(per_key.keys() | {k for k, h in history.items() if h}):
        problem = _check_key(per_key.get(ident, []), expected_events(history.get(ident, [])),
                             exactly_once)
        if problem:
            problems.append(f"id {ident}: {problem}")
    return problems


def _check_key(got: list, want: list, exactly_once: bool) -> str | None:
    cur = reached = -1  # positions in want: of the last record, of the furthest one
    for i, ev in enumerate(got):
        if cur + 1 < len(want) and want[cur + 1] == ev:
            cur += 1
        else:
            back = [j for j in range(reached + 1) if want[j] == ev]
            if not back:
                nxt = want[reached + 1] if reached + 1 < len(want) else "nothing"
                return f"record {i} is {ev}, expected {nxt} (after {want[:reached + 1][-2:]})"
            if exactly_once:
                return f"record {i} {ev} delivered again"
            cur = back[-1]
        reached = max(reached, cur)
    if reached + 1 < len(want):
        return f"missing from {want[reached + 1]} ({len(want) - reached - 1} of {len(want)})"
    if cur != reached:
        return f"ends with a redelivered {want[cur]}, not with {want[reached]}"
    return None
