"""The KIP-848/KIP-932 coordinator records: key/value framing of Kafka's generated record types.

Kafka's group and share coordinators write records whose key starts with an
int16 *record type* (the key schema's only version) and whose value starts
with an int16 *value version*, each followed by the generated body at that
version (``tools/codegen/specs/coordinator``, Kafka's JSON)::

    key   : type int16 | <Name>Key body at version ``type``   (never flexible)
    value : version int16 | <Name>Value body at ``version``   (flexible: tagged fields)

A null value is a tombstone (compaction drops the key). The classic records
(types 0-2: offset commits, GroupMetadata) keep their hand-written layouts in
``spool.coordinator.schema``; this module covers every other type:

====  ===========================================  ======================
type  record                                       topic
====  ===========================================  ======================
0     ShareSnapshot                                ``__share_group_state``
1     ShareUpdate                                  ``__share_group_state``
3     ConsumerGroupMetadata                        ``__consumer_offsets``
4     ConsumerGroupPartitionMetadata               ``__consumer_offsets``
5     ConsumerGroupMemberMetadata                  ``__consumer_offsets``
6     ConsumerGroupTargetAssignmentMetadata        ``__consumer_offsets``
7     ConsumerGroupTargetAssignmentMember          ``__consumer_offsets``
8     ConsumerGroupCurrentMemberAssignment         ``__consumer_offsets``
9     ShareGroupPartitionMetadata                  ``__consumer_offsets``
10    ShareGroupMemberMetadata                     ``__consumer_offsets``
11    ShareGroupMetadata                           ``__consumer_offsets``
12    ShareGroupTargetAssignmentMetadata           ``__consumer_offsets``
13    ShareGroupTargetAssignmentMember             ``__consumer_offsets``
14    ShareGroupCurrentMemberAssignment            ``__consumer_offsets``
15    ShareGroupStatePartitionMetadata             ``__consumer_offsets``
16    ConsumerGroupRegularExpression               ``__consumer_offsets``
====  ===========================================  ======================

Types 0 and 1 of ``__share_group_state`` are not the offset-commit types 0
and 1 of ``__consumer_offsets``: the topic says which table applies
(``SHARE_STATE_TYPES`` / ``GROUP_TYPES``).

- ``encode(key_msg, value_msg)`` -> ``(key bytes, value bytes | None)``: the
  key's type is its class's only version; the value is written at its
  newest version (``value_msg`` None: a tombstone).
- ``decode(key, value, types)`` -> ``(key_msg, value_msg | None)``; raises
  ``SchemaError`` (as ``spool.coordinator.schema``) for an unknown type or
  value version, a malformed body, or trailing bytes.
- ``record_type(key)`` reads the int16 type without decoding the rest.
"""

from __future__ import annotations

import struct
from typing import Any

from spool.coordinator.schema import SchemaError
from spool.protocol._generated import DATA_SCHEMAS
from spool.protocol.primitives import ProtocolDecodeError

_I16 = struct.Struct(">h")

_GROUP_NAMES = (
    "ConsumerGroupMetadata", "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
    "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
    "ConsumerGroupCurrentMemberAssignment", "ShareGroupPartitionMetadata",
    "ShareGroupMemberMetadata", "ShareGroupMetadata", "ShareGroupTargetAssignmentMetadata",
    "ShareGroupTargetAssignmentMember", "ShareGroupCurrentMemberAssignment",
    "ShareGroupStatePartitionMetadata", "ConsumerGroupRegularExpression",
)
_SHARE_STATE_NAMES = ("ShareSnapshot", "ShareUpdate")


def _table(names: tuple[str, ...]) -> dict[int, tuple[Any, Any]]:
    out = {}
    for name in names:
        key_cls, value_cls = DATA_SCHEMAS[name + "Key"], DATA_SCHEMAS[name + "Value"]
        lo, hi = key_cls.VALID_VERSIONS
        assert lo == hi, name
        out[lo] = (key_cls, value_cls)
    return out


GROUP_TYPES: dict[int, tuple[Any, Any]] = _table(_GROUP_NAMES)
SHARE_STATE_TYPES: dict[int, tuple[Any, Any]] = _table(_SHARE_STATE_NAMES)


def key_type(key_msg: Any) -> int:
    """The record type of a generated key message (its schema's only version)."""
    return type(key_msg).VALID_VERSIONS[0]


def encode(key_msg: Any, value_msg: Any | None) -> tuple[bytes, bytes | None]:
    """The record's key and value bytes (``value_msg`` None: a tombstone)."""
    t = key_type(key_msg)
    key = _I16.pack(t) + key_msg.to_bytes(t)
    if value_msg is None:
        return key, None
    version = type(value_msg).VALID_VERSIONS[1]
    return key, _I16.pack(version) + value_msg.to_bytes(version)


def record_type(key: bytes) -> int:
    if len(key) < 2:
        raise SchemaError("record key shorter than its int16 type")
    return _I16.unpack_from(key)[0]


def decode(key: bytes, value: bytes | None,
           types: dict[int, tuple[Any, Any]]) -> tuple[Any, Any | None]:
    """The generated key and value messages of one record of a table in ``types``."""
    t = record_type(key)
    if t not in types:
        raise SchemaError(f"unknown coordinator record type {t}")
    key_cls, value_cls = types[t]
    try:
        key_msg = _whole(key_cls, key, t)
        if value is None:
            return key_msg, None
        if len(value) < 2:
            raise SchemaError(f"{value_cls.__name__}: value shorter than its int16 version")
        version = _I16.unpack_from(value)[0]
        lo, hi = value_cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise SchemaError(f"{value_cls.__name__}: unknown value version {version}")
        return key_msg, _whole(value_cls, value, version)
    except (ProtocolDecodeError, struct.error, IndexError, UnicodeDecodeError) as e:
        raise SchemaError(f"malformed coordinator record of type {t}: {e}") from e


def _whole(cls: Any, data: bytes, version: int) -> Any:
    msg, pos = cls.decode(memoryview(data), 2, version)
    if pos != len(data):
        raise SchemaError(f"{cls.__name__}: {len(data) - pos} bytes after the body")
    return msg
