"""spool.coordinator.records: Kafka's KIP-848/KIP-932 coordinator record framing."""

from __future__ import annotations

import uuid

import pytest

from spool.coordinator.records import GROUP_TYPES, SHARE_STATE_TYPES, decode, encode, record_type
from spool.coordinator.schema import SchemaError
from spool.protocol._generated import DATA_SCHEMAS as D


def _assignment(epoch: int):
    tp = D['ConsumerGroupCurrentMemberAssignmentValue'].TopicPartitions(
        topic_id=uuid.UUID(int=7), partitions=[0, 2])
    return D['ConsumerGroupCurrentMemberAssignmentValue'](
        member_epoch=epoch, previous_member_epoch=epoch - 1, state=0,
        assigned_partitions=[tp], partitions_pending_revocation=[])


def test_key_is_type_then_body_value_is_version_then_flexible_body() -> None:
    key, value = encode(D['ConsumerGroupCurrentMemberAssignmentKey']('g', 'm'), _assignment(3))
    assert key == b'\x00\x08' + b'\x00\x01g' + b'\x00\x01m'
    assert value[:2] == b'\x00\x00' and value[2:6] == b'\x00\x00\x00\x03'
    assert value.endswith(b'\x00')  # the value's empty tagged-field section
    k, v = decode(key, value, GROUP_TYPES)
    assert (k.group_id, k.member_id, v) == ('g', 'm', _assignment(3))


def test_tombstone_and_types_per_topic() -> None:
    key, value = encode(D['ConsumerGroupMetadataKey']('orders'), None)
    assert value is None and record_type(key) == 3
    assert decode(key, None, GROUP_TYPES) == (D['ConsumerGroupMetadataKey']('orders'), None)
    assert sorted(GROUP_TYPES) == list(range(3, 17))
    assert sorted(SHARE_STATE_TYPES) == [0, 1]
    snap_key, _ = encode(D['ShareSnapshotKey']('g', uuid.UUID(int=1), 4), None)
    assert record_type(snap_key) == 0
    with pytest.raises(SchemaError, match='unknown coordinator record type 0'):
        decode(snap_key, None, GROUP_TYPES)


@pytest.mark.parametrize('mangle, message', [
    (lambda k, v: (k, v + b'\x00'), 'bytes after the body'),
    (lambda k, v: (k, b'\x00\x09' + v[2:]), 'unknown value version 9'),
    (lambda k, v: (k[:-1], v), 'malformed'),
    (lambda k, v: (b'\x00', v), 'shorter than its int16 type'),
])
def test_bad_records_raise_schema_error(mangle, message) -> None:
    key, value = encode(D['ConsumerGroupCurrentMemberAssignmentKey']('g', 'm'), _assignment(1))
    with pytest.raises(SchemaError, match=message):
        decode(*mangle(key, value), GROUP_TYPES)
