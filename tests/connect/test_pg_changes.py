"""The end-to-end tests' own tools (tests/helpers/pg_changes.py) against a real PostgreSQL:
the generator's table is what its model says, the same seed gives the same table,
compare_tables finds each kind of difference, check_events each kind of disorder."""

from __future__ import annotations

import datetime as dt
import uuid

import psycopg
import pytest

from tests.helpers.pg_changes import ChangeGenerator, check_events, compare_tables


@pytest.fixture
def two_dbs(pg, pg_database):
    other = pg.create_database(f"{pg_database}_b")
    return pg.dsn(pg_database), pg.dsn(other)


def _model_rows(gen: ChangeGenerator) -> dict[int, dict]:
    return {k: dict(v) for k, v in gen.rows.items()}


def test_generator_applies_what_it_plans_and_is_seeded(two_dbs):
    a, b = two_dbs
    gen = ChangeGenerator(7, "items")
    gen.create(a)
    assert gen.run(a, 1500) == 1500
    assert gen.applied == 1500 and gen.transactions > 100
    with psycopg.connect(a) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = {r["id"]: r for r in cur.execute("SELECT * FROM items")}
    assert rows == _model_rows(gen)
    ops = [op for h in gen.history.values() for op, _ in h]
    assert min(ops.count(op) for op in "cud") > 100
    revs = [rev for h in gen.history.values() for op, rev in h if op != "d"]
    assert len(revs) == len(set(revs))  # every c/u has a rev of its own
    nulls = {c for r in rows.values() for c, v in r.items() if v is None}
    assert nulls >= {"name", "price", "at", "blob", "doc", "uid"}

    twin = ChangeGenerator(7, "items")
    twin.create(b)
    twin.run(b, 1500)
    assert compare_tables(a, b, "items").identical


def test_compare_tables_reports_each_difference(two_dbs):
    a, b = two_dbs
    gen = ChangeGenerator(3, "t")
    gen.create(a)
    gen.run(a, 300)
    twin = ChangeGenerator(3, "t")
    twin.create(b)
    twin.run(b, 300)
    ids = sorted(gen.rows)
    with psycopg.connect(b, autocommit=True) as conn:
        conn.execute("UPDATE t SET qty = qty + 1, note = 'changed' WHERE id = %s", (ids[0],))
        conn.execute("DELETE FROM t WHERE id = %s", (ids[1],))
        conn.execute("INSERT INTO t (id, rev) VALUES (999999, 1)")
    diff = compare_tables(a, b, "t")
    assert not diff.identical
    assert diff.only_in_a == [(ids[1],)] and diff.only_in_b == [(999999,)]
    assert [k for k, _ in diff.differing] == [(ids[0],)]
    cells = diff.differing[0][1]
    assert set(cells) <= {"qty", "note"} and cells["note"][1] == "changed"
    assert "1 keys only in a" in str(diff)

    with psycopg.connect(b, autocommit=True) as conn:
        conn.execute("ALTER TABLE t DROP COLUMN ratio, ADD COLUMN __deleted text")
    diff = compare_tables(a, b, "t")
    assert diff.missing_columns == ["ratio"] and diff.extra_columns == ["__deleted"]
    assert compare_tables(a, a, "t").identical
    assert compare_tables(a, b, "t", "nope").error == "no table nope"


def test_compare_tables_reads_b_as_a_types(two_dbs):
    """A sink that stored timestamptz, jsonb, uuid and numeric as text still compares equal."""
    a, b = two_dbs
    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)
    u = uuid.uuid4()
    with psycopg.connect(a, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, at timestamptz, doc jsonb, u uuid, "
                     "p numeric(6,2), d date)")
        conn.execute("INSERT INTO s VALUES (1, %s, '{\"x\": [1, 2]}', %s, 12.50, '1900-02-03')",
                     (at, u))
    with psycopg.connect(b, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int8 PRIMARY KEY, at text, doc text, u text, p text, "
                     "d date)")
        conn.execute("INSERT INTO s VALUES (1, '2024-05-06T07:08:09.123456Z', '{\"x\":[1,2]}', "
                     "%s, '12.5', '1900-02-03')", (str(u),))
    assert compare_tables(a, b, "s").identical, compare_tables(a, b, "s")


def test_check_events():
    history = {1: [("c", 1), ("u", 3), ("d", 3), ("c", 6)], 2: [("r", 2), ("u", 4)],
               3: [("c", 5)]}
    t = "tombstone", None
    exact = [(1, "c", 1), (2, "r", 2), (1, "u", 3), (2, "u", 4), (1, "d", 3), (1, *t),
             (3, "c", 5), (1, "c", 6)]
    assert check_events(exact, history) == []
    assert check_events(exact, history, exactly_once=True) == []
    # a crash: everything after the delete sent again (the tombstone now follows a create)
    replay = [*exact, (1, *t), (3, "c", 5), (1, "c", 6)]
    assert check_events(replay, history) == []
    assert check_events(replay, history, exactly_once=True) == [
        "id 1: record 5 ('tombstone', None) delivered again",
        "id 3: record 1 ('c', 5) delivered again"]
    assert check_events(exact[:-2], history) == [
        "id 1: missing from ('c', 6) (1 of 5)", "id 3: missing from ('c', 5) (1 of 1)"]
    swapped = [exact[2], exact[0], *exact[1:2], *exact[3:]]
    assert check_events(swapped, history) == [
        "id 1: record 0 is ('u', 3), expected ('c', 1) (after [])"]
    no_tomb = [e for e in exact if e[1] != "tombstone"]
    assert check_events(no_tomb, history) == [
        "id 1: record 3 is ('c', 6), expected ('tombstone', None) (after [('u', 3), ('d', 3)])"]
    assert check_events([*exact, (3, *t)], history) == [
        "id 3: record 1 is ('tombstone', None), expected nothing (after [('c', 5)])"]
    assert check_events([*exact, (9, "c", 9)], history) == [
        "id 9: record 0 is ('c', 9), expected nothing (after [])"]
    # a replay that stops short leaves the row as it was before its last change
    assert check_events([*exact, (2, "r", 2)], history) == [
        "id 2: ends with a redelivered ('r', 2), not with ('u', 4)"]


def test_bulk_insert_writes_the_rows_it_plans(two_dbs):
    a, _ = two_dbs
    gen = ChangeGenerator(5, "bulk")
    gen.create(a)
    gen.run(a, 50)
    assert gen.bulk_insert(a, 2500, per_txn=1000) == 2500
    with psycopg.connect(a) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = {r["id"]: r for r in cur.execute("SELECT * FROM bulk")}
    assert rows == _model_rows(gen) and len(rows) > 2500
