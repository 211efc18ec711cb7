"""The pgoutput logical replication protocol, version 1: ``decode(data) -> message``.

Each message is one row's ``data`` from ``pg_logical_slot_{peek,get}_binary_changes(...,
'proto_version', '1', 'publication_names', ...)`` (or one XLogData payload of
START_REPLICATION). The messages, as PostgreSQL's "Logical Replication Message Formats":

- ``Begin(final_lsn, commit_ts_us, xid)``, ``Commit(flags, commit_lsn, end_lsn,
  commit_ts_us)``: a transaction's bounds; ``final_lsn`` == ``commit_lsn`` is the LSN of
  its commit record, ``end_lsn`` the end of it (a slot confirmed at ``end_lsn`` no longer
  sends the transaction; confirmed at ``commit_lsn`` it still does).
- ``Origin(commit_lsn, name)``, ``Type(oid, namespace, name)``.
- ``Relation(oid, namespace, name, replica_identity, columns)``: sent before the first
  change of a table in a session and after its definition changes; ``columns`` are
  ``Column(flags, name, type_oid, type_modifier)`` (flags bit 1: part of the replica
  identity key).
- ``Insert(relation_oid, new)``, ``Update(relation_oid, old, new, old_kind)``,
  ``Delete(relation_oid, old, old_kind)``: tuples are lists with one entry per column:
  ``None`` (SQL NULL), ``UNCHANGED_TOAST`` (an unchanged TOASTed value the message leaves
  out), or the column's text output (``str``). ``old_kind`` is ``"K"`` (only the replica
  identity's key columns are set, others None) or ``"O"`` (REPLICA IDENTITY FULL: the old
  row), or None when an update carries no old tuple.
- ``Truncate(relation_oids, cascade, restart_identity)``;
  ``Message(transactional, lsn, prefix, content)`` (pg_logical_emit_message).

Timestamps are microseconds since the Unix epoch (the protocol's are since 2000-01-01).
``decode`` raises ``ValueError`` on a message it does not know.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

PG_EPOCH_US = 946_684_800_000_000
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")  # 2000-01-01 in us since 1970-01-01


class _UnchangedToast:
    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Any = _UnchangedToast()

Tuple = list  # of str | None | UNCHANGED_TOAST


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_ts_us: int
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(frozen=True)
class Origin:
    commit_lsn: int
    name: str


@dataclass(frozen=True)
class Column:
    flags: int
    name: str
    type_oid: int
    type_modifier: int

    @property
    def is_key(self) -> bool:
        return bool(self.flags & 1)


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Type:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Insert:
    relation_oid: int
    new: Tuple


@dataclass(frozen=True)
class Update:
    relation_oid: int
    old: Tuple | None
    new: Tuple
    old_kind: str | None


@dataclass(frozen=True)
class Delete:
    relation_oid: int
    old: Tuple
    old_kind: str


@dataclass(frozen=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class Message:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Decoded = Begin | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate \
    | Message


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 1

    def u8(self) -> int:
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def char(self) -> str:
        return chr(self.u8())

    def i16(self) -> int:
        (v,) = struct.unpack_from(">h", self.buf, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        (v,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return v

    def u32(self) -> int:
        (v,) = struct.unpack_from(">I", self.buf, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        (v,) = struct.unpack_from(">q", self.buf, self.pos)
        self.pos += 8
        return v

    def u64(self) -> int:
        (v,) = struct.unpack_from(">Q", self.buf, self.pos)
        self.pos += 8
        return v

    def cstr(self) -> str:
        end = self.buf.index(0, self.pos)
        s = self.buf[self.pos:end].decode()
        self.pos = end + 1
        return s

    def raw(self, n: int) -> bytes:
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(v)

    def tuple(self) -> Tuple:
        buf, pos = self.buf, self.pos
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        out: Tuple = []
        append = out.append
        for _ in range(n):
            kind = buf[pos]
            pos += 1
            if kind == 0x74:  # 't'
                (size,) = _I32.unpack_from(buf, pos)
                pos += 4
                append(buf[pos:pos + size].decode())
                pos += size
            elif kind == 0x6E:  # 'n'
                append(None)
            elif kind == 0x75:  # 'u'
                append(UNCHANGED_TOAST)
            else:  # 'b' (binary) only with the binary option, which is not asked for
                raise ValueError(f"pgoutput: unknown tuple column kind {chr(kind)!r}")
        self.pos = pos
        return out


def decode(data: bytes | memoryview) -> Decoded:
    """One pgoutput message (module doc)."""
    buf = bytes(data)
    r = _Reader(buf)
    tag = chr(buf[0])
    if tag == "B":
        return Begin(r.u64(), r.i64() + PG_EPOCH_US, r.u32())
    if tag == "C":
        return Commit(r.u8(), r.u64(), r.u64(), r.i64() + PG_EPOCH_US)
    if tag == "O":
        return Origin(r.u64(), r.cstr())
    if tag == "R":
        oid, ns, name, ident = r.u32(), r.cstr(), r.cstr(), r.char()
        cols = tuple(Column(r.u8(), r.cstr(), r.u32(), r.i32()) for _ in range(r.i16()))
        return Relation(oid, ns, name, ident, cols)
    if tag == "Y":
        return Type(r.u32(), r.cstr(), r.cstr())
    if tag == "I":
        oid = r.u32()
        if r.char() != "N":
            raise ValueError("pgoutput: Insert without a new tuple")
        return Insert(oid, r.tuple())
    if tag == "U":
        oid = r.u32()
        kind = r.char()
        old, old_kind = None, None
        if kind in ("K", "O"):
            old, old_kind = r.tuple(), kind
            kind = r.char()
        if kind != "N":
            raise ValueError("pgoutput: Update without a new tuple")
        return Update(oid, old, r.tuple(), old_kind)
    if tag == "D":
        oid = r.u32()
        kind = r.char()
        if kind not in ("K", "O"):
            raise ValueError("pgoutput: Delete without an old tuple")
        return Delete(oid, r.tuple(), kind)
    if tag == "T":
        n = r.i32()
        opts = r.u8()
        return Truncate(tuple(r.u32() for _ in range(n)), bool(opts & 1), bool(opts & 2))
    if tag == "M":
        flags = r.u8()
        lsn, prefix = r.u64(), r.cstr()
        return Message(bool(flags & 1), lsn, prefix, r.raw(r.i32()))
    raise ValueError(f"pgoutput: unknown message type {tag!r}")


def format_lsn(lsn: int) -> str:
    """``0/16B3748``: PostgreSQL's pg_lsn text."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)
