"""The Raft core's messages through Kafka's wire format and back (``spool.cluster.raft.wire``).

Each core request goes to its generated message, to bytes at the version sent, back to
a message and back to the core request equal to the first; each response likewise at
the request's version. The bytes name the metadata partition as Kafka's raft client
does (Fetch by topic id Uuid(0, 1)).
"""

from __future__ import annotations

import pytest

from spool.cluster.raft import messages as m
from spool.cluster.raft import wire
from spool.protocol._generated import API_BY_KEY, FetchRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol.errors import Errors

REQUESTS = [
    m.VoteRequest(cluster_id="c1", candidate_epoch=7, candidate_id=2, last_offset_epoch=6,
                  last_offset=41, pre_vote=True, voter_id=3),
    m.BeginQuorumEpochRequest(cluster_id="c1", leader_id=2, leader_epoch=7, voter_id=1),
    m.EndQuorumEpochRequest(cluster_id="c1", leader_id=2, leader_epoch=7,
                            preferred_successors=(3, 1)),
    m.FetchRequest(cluster_id="c1", replica_id=3, max_wait_ms=500, current_leader_epoch=7,
                   fetch_offset=42, last_fetched_epoch=6, log_start_offset=10, max_bytes=8192),
    m.FetchSnapshotRequest(cluster_id=None, replica_id=3, current_leader_epoch=7,
                           snapshot_id=m.SnapshotId(40, 6), position=1024, max_bytes=4096),
]

LEADER = m.LeaderIdAndEpoch(2, 7)
RESPONSES = [
    m.VoteResponse(error_code=0, leader_id=-1, leader_epoch=7, vote_granted=True),
    m.BeginQuorumEpochResponse(error_code=0, leader_id=2, leader_epoch=7),
    m.EndQuorumEpochResponse(error_code=Errors.FENCED_LEADER_EPOCH, leader_id=4,
                             leader_epoch=9),
    m.FetchResponse(error_code=0, current_leader=LEADER, high_watermark=40,
                    log_start_offset=10, diverging_epoch=m.EpochEndOffset(5, 38),
                    snapshot_id=None, records=b"\x00" * 70),
    m.FetchSnapshotResponse(error_code=0, current_leader=LEADER,
                            snapshot_id=m.SnapshotId(40, 6), size=5000, position=1024,
                            unaligned_records=b"abc"),
]


def _bytes_round_trip(api_key: int, version: int, msg, response: bool = False):
    entry = API_BY_KEY[api_key]
    cls = entry.response if response else entry.request
    decoded = cls.from_bytes(msg.to_bytes(version), version)
    return decoded


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_requests_round_trip(req):
    api_key, version, msg = wire.to_wire(req)
    decoded = _bytes_round_trip(api_key, version, msg)
    src, back = wire.from_wire_request(api_key, decoded, version)
    assert back == req
    expected_src = {m.VoteRequest: req_field(req, "candidate_id"),
                    m.BeginQuorumEpochRequest: req_field(req, "leader_id"),
                    m.EndQuorumEpochRequest: req_field(req, "leader_id")}.get(
        type(req), req_field(req, "replica_id"))
    assert src == expected_src


def req_field(req, name):
    return getattr(req, name, None)


@pytest.mark.parametrize("req,resp", list(zip(REQUESTS, RESPONSES, strict=True)),
                         ids=lambda r: type(r).__name__)
def test_responses_round_trip(req, resp):
    api_key, version, _ = wire.to_wire(req)
    msg = wire.response_to_wire(req, resp, version)
    decoded = _bytes_round_trip(api_key, version, msg, response=True)
    assert wire.response_from_wire(req, decoded) == resp


def test_fetch_names_the_metadata_topic_by_id():
    api_key, version, msg = wire.to_wire(REQUESTS[3])
    assert (api_key, version) == (1, 15)
    decoded = _bytes_round_trip(api_key, version, msg)
    assert decoded.topics[0].topic_id == wire.METADATA_TOPIC_ID
    assert str(wire.METADATA_TOPIC_ID) == "00000000-0000-0000-0000-000000000001"
    assert decoded.replica_state.replica_id == 3


def test_a_v12_fetch_by_name_is_understood():
    req = FetchRequest(replica_id=5, max_wait_ms=100, topics=[FetchTopic(
        topic="__cluster_metadata", partitions=[FetchPartition(
            partition=0, current_leader_epoch=3, fetch_offset=9, last_fetched_epoch=2,
            partition_max_bytes=100)])])
    src, core = wire.from_wire_request(1, _bytes_round_trip(1, 12, req), 12)
    assert src == 5
    assert (core.fetch_offset, core.last_fetched_epoch, core.current_leader_epoch) == (9, 2, 3)


def test_other_topics_are_not_raft_fetches():
    req = FetchRequest(topics=[FetchTopic(topic="orders", partitions=[FetchPartition()])])
    assert not wire.is_metadata_fetch(req)
    with pytest.raises(wire.NotMetadataPartition):
        wire.from_wire_request(1, req, 12)


def test_a_refusal_without_partitions_keeps_its_code():
    req = REQUESTS[0]
    resp = wire.response_from_wire(req, wire.error_response(wire.VOTE,
                                                            Errors.INCONSISTENT_CLUSTER_ID))
    assert resp == m.VoteResponse(Errors.INCONSISTENT_CLUSTER_ID, -1, -1, False)
