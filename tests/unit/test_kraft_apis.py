"""The KRaft and inter-broker APIs (Kafka 4.2's specs) through the request/response headers.

They are in the generated API table, so the broker's dispatch picks request
header v2 for their flexible versions and v1 otherwise (BeginQuorumEpoch
and EndQuorumEpoch v0 are not flexible), exactly as for the client APIs.
Being in the table does not make the broker advertise them: ApiVersions
comes from the handler registry.
"""

from __future__ import annotations

import struct

import pytest

from spool.protocol._generated import API_BY_KEY
from spool.protocol._generated.vote_request import VoteRequest
from spool.protocol.headers import (
    encode_request_header,
    parse_request_header,
    peek_request_header,
    response_header,
)
from tools.codegen.schema import specs_by_name

KRAFT_APIS = {
    52: 'Vote', 53: 'BeginQuorumEpoch', 54: 'EndQuorumEpoch', 55: 'DescribeQuorum',
    56: 'AlterPartition', 58: 'Envelope', 59: 'FetchSnapshot', 62: 'BrokerRegistration',
    63: 'BrokerHeartbeat', 64: 'UnregisterBroker', 67: 'AllocateProducerIds',
    70: 'ControllerRegistration', 80: 'AddRaftVoter', 81: 'RemoveRaftVoter',
    82: 'UpdateRaftVoter',
}
CASES = [(key, v) for key in KRAFT_APIS for v in range(API_BY_KEY[key].valid_versions[0],
                                                       API_BY_KEY[key].valid_versions[1] + 1)]


def test_kraft_apis_are_in_the_api_table() -> None:
    assert {key: API_BY_KEY[key].name for key in KRAFT_APIS} == KRAFT_APIS
    specs = specs_by_name()
    # from Kafka 4.2's schemas (kio), except AlterPartition: Spool keeps the v0-1 that 4.2 dropped
    assert {name for name in KRAFT_APIS.values() if specs[name + 'Request'].vendored} == {
        'AlterPartition'}
    assert API_BY_KEY[53].flexible_versions == (1, 1)  # v0 uses request header v1
    # Kafka's listener types: what a controller listener may serve
    assert API_BY_KEY[52].listeners == ('controller',)
    assert API_BY_KEY[62].listeners == ('controller',)
    assert API_BY_KEY[55].listeners == ('broker', 'controller')
    assert 'controller' in API_BY_KEY[1].listeners  # Fetch: followers fetch the metadata log
    assert API_BY_KEY[0].listeners == ('broker',)  # Produce


@pytest.mark.parametrize(('api_key', 'version'), CASES,
                         ids=[f'{KRAFT_APIS[k]}-v{v}' for k, v in CASES])
def test_request_and_response_frames(api_key: int, version: int) -> None:
    entry = API_BY_KEY[api_key]
    flexible = entry.request.is_flexible(version)
    frame = (encode_request_header(api_key, version, 7, 'controller-2', flexible)
             + entry.request().to_bytes(version))
    assert peek_request_header(frame) == (api_key, version, 7)
    header, pos = parse_request_header(memoryview(frame), entry.request.is_flexible(version))
    assert header.client_id == 'controller-2'
    assert entry.request.from_bytes(memoryview(frame)[pos:], version) == entry.request()
    # response header v1 (with its empty tagged-field section) exactly when flexible
    head = response_header(7, entry.response.is_flexible(version), api_key)
    assert head == struct.pack('>i', 7) + (b'\x00' if flexible else b'')


def test_vote_request_v0_frame_golden() -> None:
    req = VoteRequest(cluster_id='c', topics=[VoteRequest.TopicData(
        topic_name='__cluster_metadata', partitions=[VoteRequest.PartitionData(
            partition_index=0, replica_epoch=3, replica_id=1, last_offset_epoch=2,
            last_offset=100)])])
    frame = encode_request_header(52, 0, 9, None, True) + req.to_bytes(0)
    assert frame == (
        b'\x00\x34\x00\x00'   # api key 52, version 0
        + b'\x00\x00\x00\x09'  # correlation id
        + b'\xff\xff'         # client id null (int16 length even in header v2)
        + b'\x00'             # header tagged fields
        + b'\x02c'            # ClusterId: compact nullable string "c"
        + b'\x02'             # Topics: one (VoterId is v1+)
        + b'\x13__cluster_metadata'  # TopicName: uvarint(18 + 1)
        + b'\x02'             # Partitions: one
        + struct.pack('>iiiiq', 0, 3, 1, 2, 100)  # index, epoch, candidate, last epoch, offset
        + b'\x00'             # PartitionData tags
        + b'\x00'             # TopicData tags
        + b'\x00'             # VoteRequest tags
    )
    header, pos = parse_request_header(memoryview(frame), True)
    assert VoteRequest.from_bytes(memoryview(frame)[pos:], 0) == req


def test_vote_request_v2_adds_pre_vote() -> None:
    """v2 (KIP-996) = v1 plus PreVote, last in PartitionData."""
    part = VoteRequest.PartitionData(partition_index=0, replica_epoch=4, replica_id=1,
                                     last_offset_epoch=3, last_offset=10, pre_vote=True)
    req = VoteRequest(cluster_id='c', voter_id=2, topics=[VoteRequest.TopicData(
        topic_name='__cluster_metadata', partitions=[part])])
    v1 = req.to_bytes(1)
    # v1 ends: LastOffset, PartitionData tags, TopicData tags, VoteRequest tags
    assert v1[-11:] == struct.pack('>q', 10) + b'\x00\x00\x00'
    assert req.to_bytes(2) == v1[:-3] + b'\x01' + v1[-3:]
    assert VoteRequest.from_bytes(req.to_bytes(2), 2) == req
    assert VoteRequest.from_bytes(v1, 1).topics[0].partitions[0].pre_vote is False
