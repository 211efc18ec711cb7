"""The pgoutput v1 decoder (spool.connect.postgres.pgoutput): messages built byte by byte
as PostgreSQL's "Logical Replication Message Formats" documents them, and the messages a
real PostgreSQL sends for a transaction of each kind of change."""

from __future__ import annotations

import struct
import time

import psycopg
import pytest

from spool.connect.postgres import pgoutput as po
from tests.helpers.postgres import PostgresServer


def cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def tup(*cols: str | None | object) -> bytes:
    out = struct.pack(">h", len(cols))
    for c in cols:
        if c is None:
            out += b"n"
        elif c is po.UNCHANGED_TOAST:
            out += b"u"
        else:
            raw = str(c).encode()
            out += b"t" + struct.pack(">i", len(raw)) + raw
    return out


def test_transaction_bounds_and_origin():
    ts = 1_000_000  # us after 2000-01-01
    assert po.decode(b"B" + struct.pack(">QqI", 0x1_0000_0010, ts, 4_000_000_000)) == \
        po.Begin(0x1_0000_0010, ts + po.PG_EPOCH_US, 4_000_000_000)
    assert po.decode(b"C" + struct.pack(">BQQq", 0, 10, 58, ts)) == \
        po.Commit(0, 10, 58, ts + po.PG_EPOCH_US)
    assert po.decode(b"O" + struct.pack(">Q", 7) + cstr("node1")) == po.Origin(7, "node1")


def test_relation_and_type():
    msg = (b"R" + struct.pack(">I", 16384) + cstr("public") + cstr("tbl") + b"d"
           + struct.pack(">h", 2)
           + b"\x01" + cstr("id") + struct.pack(">Ii", 23, -1)
           + b"\x00" + cstr("näme") + struct.pack(">Ii", 1043, 14))
    rel = po.decode(msg)
    assert rel == po.Relation(16384, "public", "tbl", "d", (
        po.Column(1, "id", 23, -1), po.Column(0, "näme", 1043, 14)))
    assert [c.is_key for c in rel.columns] == [True, False]
    assert po.decode(b"Y" + struct.pack(">I", 99) + cstr("s") + cstr("mood")) == \
        po.Type(99, "s", "mood")


def test_changes():
    rel = struct.pack(">I", 5)
    assert po.decode(b"I" + rel + b"N" + tup("1", None, "é")) == po.Insert(5, ["1", None, "é"])
    assert po.decode(b"U" + rel + b"N" + tup("1", po.UNCHANGED_TOAST)) == \
        po.Update(5, None, ["1", po.UNCHANGED_TOAST], None)
    assert po.decode(b"U" + rel + b"K" + tup("1", None) + b"N" + tup("2", "x")) == \
        po.Update(5, ["1", None], ["2", "x"], "K")
    assert po.decode(b"U" + rel + b"O" + tup("1", "a") + b"N" + tup("1", "b")) == \
        po.Update(5, ["1", "a"], ["1", "b"], "O")
    assert po.decode(b"D" + rel + b"O" + tup("1", "a")) == po.Delete(5, ["1", "a"], "O")
    assert po.decode(b"T" + struct.pack(">iBII", 2, 3, 5, 6)) == po.Truncate((5, 6), True, True)
    assert po.decode(b"M" + struct.pack(">BQ", 1, 9) + cstr("p") + struct.pack(">i", 2) + b"hi") \
        == po.Message(True, 9, "p", b"hi")


def test_malformed():
    with pytest.raises(ValueError, match="unknown message type 'Z'"):
        po.decode(b"Z")
    with pytest.raises(ValueError, match="Delete without an old tuple"):
        po.decode(b"D" + struct.pack(">I", 5) + b"N" + tup("1"))
    with pytest.raises(ValueError, match="unknown tuple column kind 'b'"):
        po.decode(b"I" + struct.pack(">I", 5) + b"N" + struct.pack(">h", 1) + b"b")


def test_lsn_text():
    assert po.format_lsn(0x1_0000_00AB) == "1/AB"
    assert po.parse_lsn("16/B374D848") == 0x16_B374D848
    assert po.parse_lsn(po.format_lsn(2**63 + 5)) == 2**63 + 5


def test_what_postgresql_sends(pg: PostgresServer, pg_database: str):
    with psycopg.connect(pg.dsn(pg_database), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
        conn.execute("CREATE PUBLICATION pub_t FOR TABLE t")
        conn.execute("SELECT pg_create_logical_replication_slot('po_slot', 'pgoutput')")
        try:
            with conn.transaction():
                conn.execute("INSERT INTO t VALUES (1, 'a'), (2, NULL)")
                conn.execute("UPDATE t SET v = 'b' WHERE id = 1")
                conn.execute("DELETE FROM t WHERE id = 2")
            conn.execute("TRUNCATE t")
            msgs: list = []
            deadline = time.monotonic() + 20
            while len(msgs) < 11 and time.monotonic() < deadline:  # WAL flushed lazily
                msgs += [po.decode(d) for (d,) in conn.execute(
                    "SELECT data FROM pg_logical_slot_get_binary_changes('po_slot', NULL, "
                    "NULL, 'proto_version', '1', 'publication_names', 'pub_t')")]
        finally:
            conn.execute("SELECT pg_drop_replication_slot('po_slot')")
    kinds = [type(m).__name__ for m in msgs]
    assert kinds == ["Begin", "Relation", "Insert", "Insert", "Update", "Delete", "Commit",
                     "Begin", "Relation", "Truncate", "Commit"], kinds
    begin, rel, i1, i2, up, de, commit = msgs[:7]
    assert (rel.namespace, rel.name, rel.replica_identity) == ("public", "t", "f")
    assert [(c.name, c.type_oid) for c in rel.columns] == [("id", 23), ("v", 25)]
    assert (i1.new, i2.new) == (["1", "a"], ["2", None])
    assert (up.old_kind, up.old, up.new) == ("O", ["1", "a"], ["1", "b"])
    assert (de.old_kind, de.old) == ("O", ["2", None])
    assert begin.final_lsn == commit.commit_lsn < commit.end_lsn
    assert begin.xid > 0 and begin.commit_ts_us == commit.commit_ts_us
    assert abs(commit.commit_ts_us / 1e6 - time.time()) < 3600  # the Unix epoch, not 2000's
    assert msgs[9].relation_oids == (rel.oid,)  # the Relation is sent again first
