"""Generated message classes: registry, Produce v0-2, records chunks, tagged fields."""

from __future__ import annotations

import struct
import uuid

import pytest

from spool.protocol._generated import API_BY_KEY, DATA_SCHEMAS, MESSAGES
from spool.protocol._generated.api_versions_request import ApiVersionsRequest
from spool.protocol._generated.fetch_request import FetchRequest
from spool.protocol._generated.fetch_response import FetchResponse
from spool.protocol._generated.produce_request import ProduceRequest
from spool.protocol._generated.produce_response import ProduceResponse
from spool.protocol.message import Message
from spool.protocol.primitives import (
    ZERO_UUID,
    ProtocolDecodeError,
    UnsupportedVersionError,
    read_uvarint,
)

# PROTOCOL.md's table: (api key, advertised min, max) the codec must cover.
ADVERTISED = [
    (18, 0, 4), (3, 0, 12), (0, 0, 11), (1, 4, 12), (2, 1, 7), (10, 0, 4), (11, 0, 7),
    (14, 0, 5), (12, 0, 4), (13, 0, 5), (8, 2, 8), (9, 1, 7), (15, 0, 5), (16, 0, 5),
    (42, 0, 2), (47, 0, 0), (22, 0, 4), (24, 0, 3), (25, 0, 3), (28, 0, 3), (26, 0, 3),
    (23, 2, 4), (19, 2, 7), (20, 1, 6), (37, 0, 3), (21, 0, 2), (32, 1, 4), (33, 0, 2),
    (44, 0, 1), (60, 0, 1), (17, 0, 1), (36, 0, 2), (29, 1, 3), (30, 1, 3), (31, 1, 3),
]


@pytest.mark.parametrize(('key', 'lo', 'hi'), ADVERTISED)
def test_registry_covers_advertised_versions(key: int, lo: int, hi: int) -> None:
    entry = API_BY_KEY[key]
    assert entry.valid_versions[0] <= lo and hi <= entry.valid_versions[1]
    assert entry.request.API_KEY == entry.response.API_KEY == key
    assert entry.request.VALID_VERSIONS == entry.response.VALID_VERSIONS == entry.valid_versions
    assert entry.request.__name__ == entry.name + 'Request'


COORDINATOR_RECORDS = (
    'ConsumerGroupMetadata', 'ConsumerGroupPartitionMetadata', 'ConsumerGroupMemberMetadata',
    'ConsumerGroupTargetAssignmentMetadata', 'ConsumerGroupTargetAssignmentMember',
    'ConsumerGroupCurrentMemberAssignment', 'ConsumerGroupRegularExpression',
    'ShareGroupPartitionMetadata', 'ShareGroupMemberMetadata', 'ShareGroupMetadata',
    'ShareGroupTargetAssignmentMetadata', 'ShareGroupTargetAssignmentMember',
    'ShareGroupCurrentMemberAssignment', 'ShareGroupStatePartitionMetadata',
    'ShareSnapshot', 'ShareUpdate',
)


def test_registry_shape() -> None:
    assert API_BY_KEY[0].name == 'Produce'
    assert API_BY_KEY[0].flexible_versions == (9, 13)
    assert API_BY_KEY[17].flexible_versions is None
    assert set(DATA_SCHEMAS) == {
        'ConsumerProtocolAssignment', 'ConsumerProtocolSubscription',
        'LeaderChangeMessage', 'SnapshotHeaderRecord', 'SnapshotFooterRecord',
        'KRaftVersionRecord', 'VotersRecord',
    } | {f'{name}{part}' for name in COORDINATOR_RECORDS for part in ('Key', 'Value')}
    assert all(issubclass(cls, Message) for cls in MESSAGES.values())
    assert ProduceRequest.is_flexible(9) and not ProduceRequest.is_flexible(8)


def test_produce_request_v2_decodes() -> None:
    """v0-2 = v3 without TransactionalId (override of the JSON's 3-13)."""
    records = b'\x00' * 30
    body = (struct.pack('>hi', 1, 1500) + struct.pack('>i', 1) + struct.pack('>h', 1) + b't'
            + struct.pack('>i', 1) + struct.pack('>ii', 0, len(records)) + records)
    for version in (0, 1, 2):
        req = ProduceRequest.from_bytes(body, version)
        assert (req.acks, req.timeout_ms, req.transactional_id) == (1, 1500, None)
        part = req.topic_data[0].partition_data[0]
        assert req.topic_data[0].name == 't' and part.index == 0 and part.records == records
    v3 = ProduceRequest.from_bytes(b'\xff\xff' + body, 3)
    assert v3.topic_data == req.topic_data


def test_produce_response_v0_to_v2_layout() -> None:
    part = ProduceResponse.PartitionProduceResponse(index=2, error_code=35, base_offset=-1,
                                                    log_append_time_ms=-1)
    resp = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name='t', partition_responses=[part])], throttle_time_ms=7)
    topics = struct.pack('>i', 1) + b'\x00\x01t' + struct.pack('>i', 1)
    assert resp.to_bytes(0) == topics + struct.pack('>ihq', 2, 35, -1)
    assert resp.to_bytes(1) == topics + struct.pack('>ihq', 2, 35, -1) + struct.pack('>i', 7)
    assert resp.to_bytes(2) == topics + struct.pack('>ihqq', 2, 35, -1, -1) + struct.pack('>i', 7)


class SendfileRegion:
    """Stands for a file slice the connection will sendfile()."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


@pytest.mark.parametrize('version', [4, 11, 12, 16])
def test_records_object_is_its_own_chunk(version: int) -> None:
    data = b'R' * 100
    topic_id = uuid.UUID(int=7)

    def response(records: object) -> FetchResponse:
        part = FetchResponse.PartitionData(partition_index=0, high_watermark=5, records=records)
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
            topic='t', topic_id=topic_id, partitions=[part])])

    region = SendfileRegion(len(data))
    chunks: list = []
    response(region).encode(version, chunks)
    assert sum(c is region for c in chunks) == 1
    spliced = b''.join(data if c is region else c for c in chunks)
    assert spliced == response(data).to_bytes(version)
    decoded = FetchResponse.from_bytes(spliced, version)
    assert decoded.responses[0].partitions[0].records == data
    assert isinstance(decoded.responses[0].partitions[0].records, memoryview)


def _tag_numbers(section: bytes) -> list[int]:
    view = memoryview(section)
    count, pos = read_uvarint(view, 0)
    tags = []
    for _ in range(count):
        tag, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        tags.append(tag)
        pos += size
    assert pos == len(section)
    return tags


def test_tagged_fields_written_only_when_not_default_in_tag_order() -> None:
    req = FetchRequest(replica_id=-1, topics=[], forgotten_topics_data=[], rack_id='')
    plain = req.to_bytes(15)
    assert plain.endswith(b'\x00')  # no tagged field set: empty section
    req.cluster_id = 'c'
    req.replica_state = FetchRequest.ReplicaState(replica_id=3, replica_epoch=4)
    tagged = req.to_bytes(15)
    section = tagged[len(plain) - 1:]
    assert _tag_numbers(section) == [0, 1]
    assert FetchRequest.from_bytes(tagged, 15) == req
    # at v12-14 ReplicaState is not a field at all: dropped, not written
    assert _tag_numbers(req.to_bytes(12)[len(FetchRequest(replica_id=-1).to_bytes(12)) - 1:]) \
        == [0]


def test_tagged_uuid_at_default_is_not_written() -> None:
    part = FetchRequest.FetchPartition(partition=1)
    assert part.replica_directory_id == ZERO_UUID
    assert part.to_bytes(17).endswith(b'\x00')
    part.replica_directory_id = uuid.UUID(int=1)
    data = part.to_bytes(17)
    assert data.endswith(b'\x01\x00\x10' + uuid.UUID(int=1).bytes)
    assert FetchRequest.FetchPartition.from_bytes(data, 17) == part


def test_unknown_tags_are_skipped() -> None:
    req = ApiVersionsRequest(client_software_name='c', client_software_version='1')
    data = req.to_bytes(3)
    assert data.endswith(b'\x00')
    with_unknown = data[:-1] + b'\x02' + b'\x05\x03abc' + b'\x09\x00'
    assert ApiVersionsRequest.from_bytes(with_unknown, 3) == req


def test_absent_fields_are_dropped_and_defaulted() -> None:
    req = ProduceRequest(transactional_id='tx', acks=1, timeout_ms=5)
    assert ProduceRequest.from_bytes(req.to_bytes(2), 2) == ProduceRequest(acks=1, timeout_ms=5)


def test_version_and_trailing_byte_errors() -> None:
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().to_bytes(14)
    with pytest.raises(UnsupportedVersionError):
        FetchRequest.decode(b'', 0, 3)
    with pytest.raises(ProtocolDecodeError):
        ApiVersionsRequest.from_bytes(b'\x00', 0)
    with pytest.raises(ProtocolDecodeError):
        ProduceRequest.from_bytes(b'\x00\x01', 3)


def test_equality_and_repr() -> None:
    a = FetchResponse.PartitionData(partition_index=1, records=b'xy')
    b = FetchResponse.PartitionData(partition_index=1, records=memoryview(b'xy'))
    assert a == b and a != FetchResponse.PartitionData(partition_index=2, records=b'xy')
    assert 'partition_index=1' in repr(a)
    assert FetchResponse.PartitionData().current_leader == FetchResponse.LeaderIdAndEpoch()
    assert FetchResponse.PartitionData().aborted_transactions == []
    assert FetchResponse.FetchableTopicResponse().topic_id == ZERO_UUID
