"""The Raft core's messages <-> Kafka's wire messages, 1:1 (sans-I/O).

The core (``spool.cluster.raft.messages``) speaks of the one metadata
partition; the wire nests it in ``topics[0].partitions[0]`` of topic
``__cluster_metadata``. ``to_wire(request)`` gives ``(api_key, version,
message)`` to send; ``from_wire_request(api_key, message)`` gives
``(src, request)`` where ``src`` is the sender's node id as the request
names it (Vote: the candidate; Begin/EndQuorumEpoch: the leader; Fetch and
FetchSnapshot: the replica). ``response_to_wire(request, response,
version)`` and ``response_from_wire(request, message)`` do the answers.

Versions sent: Vote v2 (KIP-996's PreVote flag), BeginQuorumEpoch v1 (VoterId),
EndQuorumEpoch v0 (``PreferredSuccessors``), FetchSnapshot v0, and Fetch v15
(the replica in ``ReplicaState``) naming the topic by id, Kafka's
``METADATA_TOPIC_ID`` (``Uuid(0, 1)``), as Kafka's raft client does. A Fetch
naming ``__cluster_metadata`` by name (v12) is understood too.
"""

from __future__ import annotations

import uuid

import spool.protocol._generated.begin_quorum_epoch_request as bqe_req
import spool.protocol._generated.begin_quorum_epoch_response as bqe_resp
import spool.protocol._generated.end_quorum_epoch_request as eqe_req
import spool.protocol._generated.end_quorum_epoch_response as eqe_resp
import spool.protocol._generated.fetch_request as f_req
import spool.protocol._generated.fetch_response as f_resp
import spool.protocol._generated.fetch_snapshot_request as fs_req
import spool.protocol._generated.fetch_snapshot_response as fs_resp
import spool.protocol._generated.vote_request as v_req
import spool.protocol._generated.vote_response as v_resp
from spool.cluster.raft import messages as m
from spool.protocol import _generated as g
from spool.protocol.errors import Errors

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID = Uuid(0L, 1L)

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, FETCH_SNAPSHOT = 52, 53, 54, 1, 59
DESCRIBE_QUORUM = 55
VERSIONS = {VOTE: 2, BEGIN_QUORUM_EPOCH: 1, END_QUORUM_EPOCH: 0, FETCH: 15, FETCH_SNAPSHOT: 0}
API_OF = {m.VoteRequest: VOTE, m.BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH,
          m.EndQuorumEpochRequest: END_QUORUM_EPOCH, m.FetchRequest: FETCH,
          m.FetchSnapshotRequest: FETCH_SNAPSHOT}


class NotMetadataPartition(ValueError):
    """The wire request is not about ``__cluster_metadata`` partition 0."""


def is_metadata_fetch(req: g.FetchRequest) -> bool:
    """Whether a Fetch names the metadata topic (by name, or by id from v13)."""
    return any(t.topic == METADATA_TOPIC or t.topic_id == METADATA_TOPIC_ID for t in req.topics)


def _one_partition(topics, part_attr: str = "partitions"):
    if len(topics) != 1 or len(getattr(topics[0], part_attr)) != 1:
        raise NotMetadataPartition("a Raft request names exactly one topic and partition")
    return getattr(topics[0], part_attr)[0]


# ---- requests


def to_wire(req: m.Request) -> tuple[int, int, object]:
    """``(api_key, version, wire message)`` for a core request."""
    api = API_OF[type(req)]
    version = VERSIONS[api]
    cid = req.cluster_id
    if isinstance(req, m.VoteRequest):
        p = v_req.PartitionData(replica_epoch=req.candidate_epoch, replica_id=req.candidate_id,
                                last_offset_epoch=req.last_offset_epoch,
                                last_offset=req.last_offset, pre_vote=req.pre_vote)
        msg = g.VoteRequest(cluster_id=cid, voter_id=req.voter_id,
                            topics=[v_req.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    elif isinstance(req, m.BeginQuorumEpochRequest):
        p = bqe_req.PartitionData(leader_id=req.leader_id, leader_epoch=req.leader_epoch)
        msg = g.BeginQuorumEpochRequest(
            cluster_id=cid, voter_id=req.voter_id,
            topics=[bqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    elif isinstance(req, m.EndQuorumEpochRequest):
        p = eqe_req.PartitionData(leader_id=req.leader_id, leader_epoch=req.leader_epoch,
                                  preferred_successors=list(req.preferred_successors))
        msg = g.EndQuorumEpochRequest(
            cluster_id=cid, topics=[eqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    elif isinstance(req, m.FetchRequest):
        p = f_req.FetchPartition(partition=0, current_leader_epoch=req.current_leader_epoch,
                                 fetch_offset=req.fetch_offset,
                                 last_fetched_epoch=req.last_fetched_epoch,
                                 log_start_offset=req.log_start_offset,
                                 partition_max_bytes=req.max_bytes)
        msg = g.FetchRequest(cluster_id=cid, replica_state=f_req.ReplicaState(
                                 replica_id=req.replica_id),
                             max_wait_ms=req.max_wait_ms, min_bytes=0, max_bytes=req.max_bytes,
                             topics=[f_req.FetchTopic(topic_id=METADATA_TOPIC_ID,
                                                      partitions=[p])])
    else:
        assert isinstance(req, m.FetchSnapshotRequest)
        p = fs_req.PartitionSnapshot(
            partition=0, current_leader_epoch=req.current_leader_epoch,
            snapshot_id=fs_req.SnapshotId(end_offset=req.snapshot_id.end_offset,
                                          epoch=req.snapshot_id.epoch),
            position=req.position)
        msg = g.FetchSnapshotRequest(
            cluster_id=cid, replica_id=req.replica_id, max_bytes=req.max_bytes,
            topics=[fs_req.TopicSnapshot(name=METADATA_TOPIC, partitions=[p])])
    return api, version, msg


def from_wire_request(api_key: int, msg, version: int = -1) -> tuple[int, m.Request]:
    """``(src node id, core request)`` for a wire request (NotMetadataPartition if it is
    not about the metadata partition)."""
    cid = msg.cluster_id
    if api_key == VOTE:
        p = _one_partition(msg.topics)
        return p.replica_id, m.VoteRequest(
            cluster_id=cid, candidate_epoch=p.replica_epoch, candidate_id=p.replica_id,
            last_offset_epoch=p.last_offset_epoch, last_offset=p.last_offset,
            pre_vote=bool(p.pre_vote), voter_id=msg.voter_id)
    if api_key == BEGIN_QUORUM_EPOCH:
        p = _one_partition(msg.topics)
        return p.leader_id, m.BeginQuorumEpochRequest(
            cluster_id=cid, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
            voter_id=msg.voter_id)
    if api_key == END_QUORUM_EPOCH:
        p = _one_partition(msg.topics)
        successors = tuple(p.preferred_successors) or tuple(
            c.candidate_id for c in p.preferred_candidates)
        return p.leader_id, m.EndQuorumEpochRequest(
            cluster_id=cid, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
            preferred_successors=successors)
    if api_key == FETCH:
        if not is_metadata_fetch(msg):
            raise NotMetadataPartition("not a Fetch of __cluster_metadata")
        p = _one_partition(msg.topics)
        replica = msg.replica_state.replica_id if version >= 15 else msg.replica_id
        return replica, m.FetchRequest(
            cluster_id=cid, replica_id=replica, max_wait_ms=msg.max_wait_ms,
            current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
            last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
            max_bytes=min(msg.max_bytes, p.partition_max_bytes))
    if api_key == FETCH_SNAPSHOT:
        p = _one_partition(msg.topics)
        return msg.replica_id, m.FetchSnapshotRequest(
            cluster_id=cid, replica_id=msg.replica_id,
            current_leader_epoch=p.current_leader_epoch,
            snapshot_id=m.SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            position=p.position, max_bytes=msg.max_bytes)
    raise ValueError(f"api key {api_key} is not a Raft request")


# ---- responses


def response_to_wire(req: m.Request, resp: m.Response, version: int = -1):
    """The wire answer to a (core) request; ``version`` is the request's (Fetch: its
    topic is named as the request named it)."""
    if isinstance(resp, m.VoteResponse):
        p = v_resp.PartitionData(error_code=resp.error_code, leader_id=resp.leader_id,
                                 leader_epoch=resp.leader_epoch, vote_granted=resp.vote_granted)
        return g.VoteResponse(error_code=_top_error(resp.error_code), topics=[
            v_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    if isinstance(resp, m.BeginQuorumEpochResponse):
        p = bqe_resp.PartitionData(error_code=resp.error_code, leader_id=resp.leader_id,
                                   leader_epoch=resp.leader_epoch)
        return g.BeginQuorumEpochResponse(error_code=_top_error(resp.error_code), topics=[
            bqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    if isinstance(resp, m.EndQuorumEpochResponse):
        p = eqe_resp.PartitionData(error_code=resp.error_code, leader_id=resp.leader_id,
                                   leader_epoch=resp.leader_epoch)
        return g.EndQuorumEpochResponse(error_code=_top_error(resp.error_code), topics=[
            eqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    if isinstance(resp, m.FetchResponse):
        de = resp.diverging_epoch or m.EpochEndOffset(-1, -1)
        sid = resp.snapshot_id or m.SnapshotId(-1, -1)
        p = f_resp.PartitionData(
            partition_index=0, error_code=resp.error_code, high_watermark=resp.high_watermark,
            last_stable_offset=resp.high_watermark, log_start_offset=resp.log_start_offset,
            diverging_epoch=f_resp.EpochEndOffset(epoch=de.epoch, end_offset=de.end_offset),
            current_leader=f_resp.LeaderIdAndEpoch(leader_id=resp.current_leader.leader_id,
                                                   leader_epoch=resp.current_leader.leader_epoch),
            snapshot_id=f_resp.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch),
            aborted_transactions=None, records=resp.records if resp.records else b"")
        topic = f_resp.FetchableTopicResponse(
            topic=METADATA_TOPIC if version < 13 else "",
            topic_id=METADATA_TOPIC_ID if version >= 13 else uuid.UUID(int=0), partitions=[p])
        return g.FetchResponse(error_code=0, responses=[topic])
    assert isinstance(resp, m.FetchSnapshotResponse)
    sid = resp.snapshot_id or m.SnapshotId(-1, -1)
    p = fs_resp.PartitionSnapshot(
        index=0, error_code=resp.error_code,
        snapshot_id=fs_resp.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch),
        current_leader=fs_resp.LeaderIdAndEpoch(leader_id=resp.current_leader.leader_id,
                                                leader_epoch=resp.current_leader.leader_epoch),
        size=resp.size, position=resp.position, unaligned_records=resp.unaligned_records)
    return g.FetchSnapshotResponse(error_code=_top_error(resp.error_code), topics=[
        fs_resp.TopicSnapshot(name=METADATA_TOPIC, partitions=[p])])


def _top_error(code: int) -> int:
    """Kafka puts cluster-wide errors at the top level too (a bad cluster id)."""
    return code if code == Errors.INCONSISTENT_CLUSTER_ID else 0


def response_from_wire(req: m.Request, msg) -> m.Response:
    """The core's answer from a wire response to the core request ``req``. A top-level
    error with no partition (the responder refused the whole request) keeps its code."""
    top = getattr(msg, "error_code", 0)
    if isinstance(req, m.VoteRequest):
        p = _partition_or_none(msg.topics)
        if p is None:
            return m.VoteResponse(top or Errors.UNKNOWN_SERVER_ERROR, -1, -1, False)
        return m.VoteResponse(p.error_code or top, p.leader_id, p.leader_epoch,
                              bool(p.vote_granted))
    if isinstance(req, (m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest)):
        cls = (m.BeginQuorumEpochResponse if isinstance(req, m.BeginQuorumEpochRequest)
               else m.EndQuorumEpochResponse)
        p = _partition_or_none(msg.topics)
        if p is None:
            return cls(top or Errors.UNKNOWN_SERVER_ERROR, -1, -1)
        return cls(p.error_code or top, p.leader_id, p.leader_epoch)
    if isinstance(req, m.FetchRequest):
        p = _partition_or_none(msg.responses)
        if p is None:
            return m.FetchResponse(top or Errors.UNKNOWN_SERVER_ERROR,
                                   m.LeaderIdAndEpoch(-1, -1))
        de = p.diverging_epoch
        sid = p.snapshot_id
        records = p.records
        return m.FetchResponse(
            error_code=p.error_code or top,
            current_leader=m.LeaderIdAndEpoch(p.current_leader.leader_id,
                                              p.current_leader.leader_epoch),
            high_watermark=p.high_watermark, log_start_offset=p.log_start_offset,
            diverging_epoch=m.EpochEndOffset(de.epoch, de.end_offset) if de.epoch >= 0 else None,
            snapshot_id=m.SnapshotId(sid.end_offset, sid.epoch) if sid.epoch >= 0 else None,
            records=bytes(records) if records else None)
    assert isinstance(req, m.FetchSnapshotRequest)
    p = _partition_or_none(msg.topics)
    if p is None:
        return m.FetchSnapshotResponse(top or Errors.UNKNOWN_SERVER_ERROR,
                                       m.LeaderIdAndEpoch(-1, -1))
    sid = p.snapshot_id
    return m.FetchSnapshotResponse(
        error_code=p.error_code or top,
        current_leader=m.LeaderIdAndEpoch(p.current_leader.leader_id,
                                          p.current_leader.leader_epoch),
        snapshot_id=m.SnapshotId(sid.end_offset, sid.epoch), size=p.size, position=p.position,
        unaligned_records=bytes(p.unaligned_records or b""))


def _partition_or_none(topics):
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        return None
    return topics[0].partitions[0]


def error_response(api_key: int, code: int, version: int = -1):
    """A whole-request refusal (a request that is not about the metadata partition, or a
    node whose quorum is not running): the top-level error, no partition."""
    cls = {VOTE: g.VoteResponse, BEGIN_QUORUM_EPOCH: g.BeginQuorumEpochResponse,
           END_QUORUM_EPOCH: g.EndQuorumEpochResponse, FETCH: g.FetchResponse,
           FETCH_SNAPSHOT: g.FetchSnapshotResponse}[api_key]
    return cls(error_code=code)
