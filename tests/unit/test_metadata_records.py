"""spool.protocol.metadata_records against bytes derived by hand from Kafka's specs.

The metadata specs are vendored (tools/codegen/specs/metadata) and
kafka-python has no classes for them, so the independent check here is the
byte layout written out field by field from TopicRecord.json and
PartitionRecord.json, framed as Kafka's MetadataRecordSerde frames them, and
the control record layout of MemoryRecordsBuilder.appendControlRecord.
"""

from __future__ import annotations

import re
import struct
import uuid

import pytest

from spool.protocol._generated import METADATA_RECORDS
from spool.protocol._generated.leader_change_message import LeaderChangeMessage
from spool.protocol._generated.partition_record import PartitionRecord
from spool.protocol._generated.snapshot_footer_record import SnapshotFooterRecord
from spool.protocol._generated.snapshot_header_record import SnapshotHeaderRecord
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol._generated.voters_record import VotersRecord
from spool.protocol.metadata_records import (
    CONTROL_RECORD_CLASSES,
    ControlRecordType,
    MetadataParseError,
    MetadataRecordType,
    decode_control_record,
    decode_record,
    encode_control_record,
    encode_record,
)
from spool.protocol.primitives import ProtocolDecodeError

TOPIC_ID = uuid.UUID('00112233-4455-6677-8899-aabbccddeeff')
TOPIC_ID_BYTES = bytes.fromhex('00112233445566778899aabbccddeeff')


def i32(*values: int) -> bytes:
    return b''.join(struct.pack('>i', v) for v in values)


def test_topic_record_golden() -> None:
    record = TopicRecord(name='foo', topic_id=TOPIC_ID)
    expected = (
        b'\x01'               # frame version 1 (uvarint)
        + b'\x02'             # record type 2 = TOPIC_RECORD (uvarint)
        + b'\x00'             # version 0 (uvarint)
        + b'\x04foo'          # Name: compact string, uvarint(3 + 1) then UTF-8
        + TOPIC_ID_BYTES      # TopicId: 16 bytes, most significant first
        + b'\x00'             # tagged fields: none
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == (record, 0)


def test_partition_record_v0_golden() -> None:
    record = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2],
                             leader=1, leader_epoch=0, partition_epoch=0)
    expected = (
        b'\x01\x03\x00'       # frame 1, type 3 = PARTITION_RECORD, version 0
        + i32(0)              # PartitionId
        + TOPIC_ID_BYTES      # TopicId
        + b'\x04' + i32(1, 2, 3)  # Replicas: compact array, uvarint(3 + 1), int32s
        + b'\x03' + i32(1, 2)  # Isr
        + b'\x01'             # RemovingReplicas: empty compact array
        + b'\x01'             # AddingReplicas: empty
        + i32(1)              # Leader
        + i32(0)              # LeaderEpoch (LeaderRecoveryState is tagged: default 0, absent)
        + i32(0)              # PartitionEpoch
        + b'\x00'             # tagged fields: none
    )
    assert encode_record(record, 0) == expected
    assert decode_record(expected) == (record, 0)


def test_partition_record_newest_version_with_tagged_fields() -> None:
    record = PartitionRecord(partition_id=7, topic_id=TOPIC_ID, replicas=[2], isr=[2], leader=2,
                             leader_recovery_state=1, leader_epoch=5, partition_epoch=9,
                             directories=[TOPIC_ID], eligible_leader_replicas=[2])
    expected = (
        b'\x01\x03\x02'       # frame 1, type 3, version 2 (the newest: the default)
        + i32(7) + TOPIC_ID_BYTES
        + b'\x02' + i32(2)    # Replicas [2]
        + b'\x02' + i32(2)    # Isr [2]
        + b'\x01\x01'         # RemovingReplicas, AddingReplicas: empty
        + i32(2) + i32(5) + i32(9)  # Leader, LeaderEpoch, PartitionEpoch
        + b'\x02' + TOPIC_ID_BYTES  # Directories (v1+): one uuid
        + b'\x02'             # two tagged fields, ascending tags:
        + b'\x00\x01\x01'     #   tag 0 LeaderRecoveryState: size 1, int8 1
        + b'\x01\x05\x02' + i32(2)  # tag 1 EligibleLeaderReplicas: size 5, [2]
    )                         # (LastKnownElr, tag 2, is at its default null: absent)
    assert encode_record(record) == expected
    assert decode_record(expected) == (record, 2)


def test_record_types_are_kafkas_names_and_numbers() -> None:
    # Kafka's MetadataRecordTypeGenerator: the spec name in UPPER_SNAKE, the apiKey as id
    generated = {key: re.sub(r'(?<!^)(?=[A-Z])', '_', cls.NAME).upper()
                 for key, cls in METADATA_RECORDS.items()}
    assert {t.value: t.name for t in MetadataRecordType} == generated
    assert MetadataRecordType.TOPIC_RECORD == 2 and MetadataRecordType.PARTITION_RECORD == 3
    assert MetadataRecordType.REGISTER_BROKER_RECORD == 0
    assert MetadataRecordType.FENCE_BROKER_RECORD == 7


@pytest.mark.parametrize(('data', 'message'), [
    (b'\x00\x02\x00', 'frame version 0'),
    (b'\x0f\x02\x00', 'frame version 15'),
    (b'\x80\x80\x80\x80\x80\x80', 'frame version'),
    (b'\x01\x80\x80\x80\x80\x80\x80', 'type'),
    (b'\x01\x08\xff\xff\xff\x7f\x80', 'version was too large'),
    (b'\x01\x06\x00', 'unknown metadata record type 6'),
    (b'\x01\x02\x01\x04foo' + TOPIC_ID_BYTES + b'\x00', 'TopicRecord has no version 1'),
    (b'\x01\x02\x00\x04fo', 'failed to deserialize record with type 2'),
    (b'\x01\x02\x00\x04foo' + TOPIC_ID_BYTES + b'\x00\x00', r'1 byte\(s\) of garbage'),
], ids=['frame-0', 'frame-15', 'frame-varint', 'type-varint', 'version-too-large',
       'unknown-type', 'unknown-version', 'truncated-body', 'trailing-bytes'])
def test_decode_refuses_what_kafka_refuses(data: bytes, message: str) -> None:
    with pytest.raises(MetadataParseError, match=message):
        decode_record(data)


def test_encode_refuses_non_records() -> None:
    with pytest.raises(TypeError):
        encode_record(LeaderChangeMessage())


def test_leader_change_control_record_layout() -> None:
    voter = LeaderChangeMessage.Voter(voter_id=1)
    msg = LeaderChangeMessage(version=0, leader_id=1, voters=[voter], granting_voters=[voter])
    key, value = encode_control_record(msg)
    assert key == b'\x00\x00' + b'\x00\x02'  # key version 0, type 2 = LEADER_CHANGE
    assert value == (
        b'\x00\x00'           # the message's own Version field (int16), not a frame prefix
        + i32(1)              # LeaderId
        + b'\x02' + i32(1) + b'\x00'  # Voters: [VoterId 1, no tags] (schema v0: no dir id)
        + b'\x02' + i32(1) + b'\x00'  # GrantingVoters
        + b'\x00'             # tagged fields
    )
    assert decode_control_record(key, value) == msg


def test_snapshot_and_voters_control_records() -> None:
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=1_700_000_000_000)
    key, value = encode_control_record(header)
    assert key == b'\x00\x00\x00\x03'
    assert value == b'\x00\x00' + struct.pack('>q', 1_700_000_000_000) + b'\x00'
    assert decode_control_record(key, value) == header
    key, value = encode_control_record(SnapshotFooterRecord())
    assert (key, value) == (b'\x00\x00\x00\x04', b'\x00\x00\x00')
    endpoint = VotersRecord.Endpoint(name='CONTROLLER', host='h', port=9093)
    voters = VotersRecord(voters=[VotersRecord.Voter(voter_id=1, voter_directory_id=TOPIC_ID,
                                                     endpoints=[endpoint])])
    key, value = encode_control_record(voters)
    assert key == b'\x00\x00\x00\x06'
    assert decode_control_record(key, value) == voters


def test_control_record_classes_cover_kraft_types() -> None:
    assert set(CONTROL_RECORD_CLASSES) == set(ControlRecordType) - {
        ControlRecordType.ABORT, ControlRecordType.COMMIT}


def test_control_record_key_checks() -> None:
    value = SnapshotFooterRecord().to_bytes(0)
    with pytest.raises(ProtocolDecodeError, match='needs 4'):
        decode_control_record(b'\x00\x00\x04', value)
    with pytest.raises(ProtocolDecodeError, match='key version'):
        decode_control_record(b'\xff\xff\x00\x04', value)
    with pytest.raises(ProtocolDecodeError, match='not a KRaft record'):
        decode_control_record(b'\x00\x00\x00\x01', value)  # a COMMIT marker
    # a newer key version is read as version 0, as Kafka does
    assert decode_control_record(b'\x00\x01\x00\x04', value) == SnapshotFooterRecord()
