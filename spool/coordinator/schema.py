"""Keys and values of the records in ``__consumer_offsets`` (Kafka's layouts).

Every record's key starts with an int16 *key version* that says what it is;
values start with their own int16 version. All strings are int16-length
UTF-8, nullable ones use length -1; ``bytes`` are int32-length. A record
with a null value is a tombstone: compaction keeps only the latest record
per key, so a tombstone deletes what its key names.

Offset commit (key versions 0 and 1 are the same layout; we write 1)::

    key   : version int16 = 1 | group string | topic string | partition int32
    value : version int16 = 3 | offset int64 | leader_epoch int32
            | metadata string | commit_timestamp int64

Value versions 0-2 (read only): v0 ``offset, metadata, commit_timestamp``;
v1 adds ``expire_timestamp int64`` after commit_timestamp; v2 drops it.

Group metadata (key version 2)::

    key   : version int16 = 2 | group string
    value : version int16 = 3 | protocol_type string | generation int32
            | protocol string? | leader string? | current_state_timestamp int64
            | members [ member_id string | group_instance_id string?
                        | client_id string | client_host string
                        | rebalance_timeout int32 | session_timeout int32
                        | subscription bytes | assignment bytes ]

``?`` marks nullable. Value versions 0-2 are read too (v0 lacks
rebalance_timeout, current_state_timestamp and group_instance_id; v1 adds
rebalance_timeout; v2 adds current_state_timestamp). Anything else raises
``SchemaError``; the loader logs and skips such a record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SchemaError(ValueError):
    """A key or value that is not one of the known layouts."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


# ---- writing


def _str(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + bytes(b)


def encode_offset_key(k: OffsetKey) -> bytes:
    return _I16.pack(OFFSET_KEY_VERSION) + _str(k.group) + _str(k.topic) + _I32.pack(k.partition)


def encode_offset_value(v: OffsetValue) -> bytes:
    return b"".join((
        _I16.pack(OFFSET_VALUE_VERSION), _I64.pack(v.offset), _I32.pack(v.leader_epoch),
        _str(v.metadata), _I64.pack(v.commit_timestamp),
    ))


def encode_group_key(k: GroupKey) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _str(k.group)


def encode_group_value(v: GroupValue) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION), _str(v.protocol_type), _I32.pack(v.generation),
        _str(v.protocol), _str(v.leader), _I64.pack(v.current_state_timestamp),
        _I32.pack(len(v.members)),
    ]
    for m in v.members:
        parts += [
            _str(m.member_id), _str(m.group_instance_id), _str(m.client_id), _str(m.client_host),
            _I32.pack(m.rebalance_timeout), _I32.pack(m.session_timeout),
            _bytes(m.subscription), _bytes(m.assignment),
        ]
    return b"".join(parts)


# ---- reading


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = bytes(buf)
        self.pos = 0

    def _take(self, st: struct.Struct) -> int:
        if self.pos + st.size > len(self.buf):
            raise SchemaError("truncated")
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise SchemaError("null string")
        if self.pos + n > len(self.buf):
            raise SchemaError("truncated string")
        s = self.buf[self.pos : self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        if self.pos + n > len(self.buf):
            raise SchemaError("truncated bytes")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b


def decode_key(buf: bytes) -> OffsetKey | GroupKey:
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    raise SchemaError(f"unknown key version {version}")


def decode_offset_value(buf: bytes) -> OffsetValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise SchemaError(f"unknown offset value version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    ts = r.i64()
    return OffsetValue(offset, epoch, metadata, ts)


def decode_group_value(buf: bytes) -> GroupValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise SchemaError(f"unknown group value version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    ts = r.i64() if version >= 2 else -1
    value = GroupValue(protocol_type, generation, protocol, leader, ts)
    for _ in range(r.i32()):
        member_id = r.string()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        host = r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if rebalance < 0:
            rebalance = session
        value.members.append(
            MemberValue(member_id, instance, client_id, host, rebalance, session, r.bytes_(), r.bytes_())
        )
    return value


def subscribed_topics(subscription: bytes) -> set[str]:
    """Topics of a ``consumer`` protocol subscription (version int16, topics [string], ...)."""
    try:
        r = _Reader(subscription)
        r.i16()
        return {r.string() for _ in range(r.i32())}
    except SchemaError:
        return set()


def partition_for(group: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: Java ``String.hashCode`` & 0x7fffffff, mod n."""
    h = 0
    for unit in _utf16_units(group):
        h = (31 * h + unit) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % num_partitions


def _utf16_units(s: str):
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]
