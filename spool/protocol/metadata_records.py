"""Kafka's ``__cluster_metadata`` record serde and the KRaft control records.

Metadata records (TopicRecord, PartitionRecord, ...) are the values of the
records in the metadata log and its snapshots. Kafka frames each one as
``MetadataRecordSerde`` (``AbstractApiMessageSerde``) does::

    frame version  uvarint   always 1 (0 was KRaft's 2.8 preview: refused)
    record type    uvarint   the spec's apiKey, e.g. 2 = TopicRecord
    version        uvarint   the record's schema version
    body           the generated message at that version (all metadata
                   record versions are flexible: compact strings/arrays,
                   a tagged-field section at the end of every struct)

The record key is null. ``encode_record(msg, version=None)`` writes that
frame (default: the newest version of ``msg``'s class);
``decode_record(data)`` reads it back as ``(msg, version)`` and raises
:class:`MetadataParseError` (a ``ProtocolDecodeError``) for a frame version
other than 1, a type or version over 32767, an unknown type, a version the
class lacks, a malformed body, or trailing bytes, as Kafka does.

KRaft control records (``ControlRecordType`` 2-6) travel in control batches
(attributes bit 5 set, not transactional, producer id/epoch/base sequence
-1), as ``MemoryRecordsBuilder.appendControlRecord`` writes them::

    key    version int16 = 0, type int16      (4 bytes, ControlRecordType)
    value  the message body at schema version 0 (ControlRecordUtils'
           *_CURRENT_VERSION constants), with NO framing prefix; every one
           of these schemas starts with its own ``Version`` int16 field,
           which Kafka also sets to 0, so the value's first two bytes are
           00 00.

For example LeaderChangeMessage(version=0, leader_id=1, voters=[Voter(1)],
granting_voters=[Voter(1)]) is key ``00 00 00 02`` and value ``00 00``
(Version) ``00 00 00 01`` (LeaderId) ``02 00 00 00 01 00`` (Voters: compact
length 1+1, VoterId, no tags) ``02 00 00 00 01 00`` (GrantingVoters)
``00`` (no tags). ``encode_control_record`` / ``decode_control_record``
handle key and value; a key version other than 0 is read as version 0 (as
Kafka does), bytes after the value's body are ignored (Kafka reads the value
from a slice without checking the end). Transaction markers (types 0 and 1)
are ``spool.records``' business, not this module's; so is the batch: a
caller outside ``protocol`` builds it with
``spool.records.BatchBuilder(base_offset, is_control=True,
partition_leader_epoch=epoch)`` and ``append(key, value, timestamp=...)``.
Kafka's new leader starts its epoch with a control batch holding a
LeaderChangeMessage (then KRaftVersionRecord and VotersRecord when
kraft.version >= 1 and the voter set needs writing); a snapshot's first
batch is a control batch with SnapshotHeaderRecord (then KRaftVersionRecord
and VotersRecord when kraft.version >= 1), its last a SnapshotFooterRecord.

Metadata records go in ordinary (non-control) batches, key null, one
framed record per value.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from spool.protocol._generated import (
    METADATA_RECORDS,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
)
from spool.protocol.message import Message
from spool.protocol.primitives import ProtocolDecodeError, read_uvarint, write_uvarint

__all__ = [
    'FRAME_VERSION', 'MetadataRecordType', 'MetadataParseError', 'RECORD_CLASSES',
    'encode_record', 'decode_record',
    'ControlRecordType', 'CONTROL_RECORD_CLASSES', 'CONTROL_VALUE_VERSION',
    'encode_control_record', 'decode_control_record', 'control_record_type',
]

FRAME_VERSION = 1
_MAX_SHORT = 0x7FFF


class MetadataParseError(ProtocolDecodeError):
    """A metadata record frame or body that Kafka would refuse (MetadataParseException)."""


class MetadataRecordType(IntEnum):
    """Kafka's generated ``MetadataRecordType``: record type -> name (gaps are retired types)."""

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    FENCE_BROKER_RECORD = 7
    UNFENCE_BROKER_RECORD = 8
    REMOVE_TOPIC_RECORD = 9
    DELEGATION_TOKEN_RECORD = 10
    USER_SCRAM_CREDENTIAL_RECORD = 11
    FEATURE_LEVEL_RECORD = 12
    CLIENT_QUOTA_RECORD = 14
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    ACCESS_CONTROL_ENTRY_RECORD = 18
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
    NO_OP_RECORD = 20
    ZK_MIGRATION_STATE_RECORD = 21
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
    BEGIN_TRANSACTION_RECORD = 23
    END_TRANSACTION_RECORD = 24
    ABORT_TRANSACTION_RECORD = 25
    REMOVE_DELEGATION_TOKEN_RECORD = 26
    REGISTER_CONTROLLER_RECORD = 27


RECORD_CLASSES: dict[MetadataRecordType, type[Message]] = {
    MetadataRecordType(key): cls for key, cls in METADATA_RECORDS.items()
}


def encode_record(msg: Message, version: int | None = None) -> bytes:
    """Frame ``msg`` as a metadata record value (newest version of its class by default)."""
    record_type = type(msg).API_KEY
    if record_type not in METADATA_RECORDS or METADATA_RECORDS[record_type] is not type(msg):
        raise TypeError(f'{type(msg).__name__} is not a metadata record')
    if version is None:
        version = type(msg).VALID_VERSIONS[1]
    out = [write_uvarint(FRAME_VERSION), write_uvarint(record_type), write_uvarint(version)]
    msg.encode(version, out)
    return b''.join(out)


def _read_short(buf: memoryview, pos: int, entity: str) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(buf, pos)
    except ProtocolDecodeError as exc:
        raise MetadataParseError(f'error while reading {entity}: {exc}') from exc
    if value > _MAX_SHORT:
        raise MetadataParseError(f'value for {entity} was too large: {value}')
    return value, pos


def decode_record(data: bytes | bytearray | memoryview) -> tuple[Message, int]:
    """Read one framed metadata record value; return ``(msg, version)``."""
    buf = memoryview(data)
    frame_version, pos = _read_short(buf, 0, 'frame version')
    if frame_version != FRAME_VERSION:
        raise MetadataParseError(
            f'unknown metadata record frame version {frame_version} '
            f'(only {FRAME_VERSION} is supported; 0 was the KRaft preview in 2.8)')
    record_type, pos = _read_short(buf, pos, 'type')
    version, pos = _read_short(buf, pos, 'version')
    cls = METADATA_RECORDS.get(record_type)
    if cls is None:
        raise MetadataParseError(f'unknown metadata record type {record_type}')
    if version not in cls._DECODERS:
        raise MetadataParseError(f'{cls.__name__} has no version {version}')
    try:
        msg, end = cls.decode(buf, pos, version)
    except ProtocolDecodeError as exc:
        raise MetadataParseError(
            f'failed to deserialize record with type {record_type}: {exc}') from exc
    if end != len(buf):
        raise MetadataParseError(
            f'found {len(buf) - end} byte(s) of garbage after {cls.__name__} v{version}')
    return msg, version


# ------------------------------------------------------------------ control records

class ControlRecordType(IntEnum):
    """Kafka's ``ControlRecordType``: the ``type`` in a control record's key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_RECORD_CLASSES: dict[ControlRecordType, type[Message]] = {
    ControlRecordType.LEADER_CHANGE: LeaderChangeMessage,
    ControlRecordType.SNAPSHOT_HEADER: SnapshotHeaderRecord,
    ControlRecordType.SNAPSHOT_FOOTER: SnapshotFooterRecord,
    ControlRecordType.KRAFT_VERSION: KRaftVersionRecord,
    ControlRecordType.KRAFT_VOTERS: VotersRecord,
}
_CONTROL_TYPE_OF = {cls: t for t, cls in CONTROL_RECORD_CLASSES.items()}

# The schema version Kafka writes and reads every KRaft control value at.
CONTROL_VALUE_VERSION = 0
_CONTROL_KEY = struct.Struct('>hh')
CONTROL_KEY_VERSION = 0


def encode_control_record(msg: Message) -> tuple[bytes, bytes]:
    """``(key, value)`` of a KRaft control record for ``msg``."""
    control_type = _CONTROL_TYPE_OF.get(type(msg))
    if control_type is None:
        raise TypeError(f'{type(msg).__name__} is not a KRaft control record')
    key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)
    return key, msg.to_bytes(CONTROL_VALUE_VERSION)


def control_record_type(key: bytes | bytearray | memoryview) -> int:
    """The ``type`` of a control record key (any int16: unknown types are the caller's call)."""
    if len(key) < _CONTROL_KEY.size:
        raise ProtocolDecodeError(f'control record key has {len(key)} bytes, needs 4')
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ProtocolDecodeError(f'invalid control record key version {version}')
    return control_type


def decode_control_record(key: bytes | bytearray | memoryview,
                          value: bytes | bytearray | memoryview) -> Message:
    """The KRaft control message of a control record (types 2-6 only)."""
    control_type = control_record_type(key)
    cls = CONTROL_RECORD_CLASSES.get(control_type)  # type: ignore[call-overload]
    if cls is None:
        raise ProtocolDecodeError(f'control record type {control_type} is not a KRaft record')
    msg, _end = cls.decode(memoryview(value), 0, CONTROL_VALUE_VERSION)
    return msg
