"""ShareFetch (78) v1-2 and ShareAcknowledge (79) v1-2: KIP-932 share consumption.

As Kafka 4.2's ``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest``:

1. Share groups not served (``spool.broker.group_protocols``): UNSUPPORTED_VERSION. A missing group id or member id:
   INVALID_REQUEST. With an authorizer, READ on the group (else
   GROUP_AUTHORIZATION_FAILED, nothing done).
2. The share session (``spool.broker.share_sessions``): its errors (SHARE_SESSION_NOT_FOUND,
   INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, INVALID_REQUEST for
   acknowledgements in an initial fetch) answer the whole request.
3. The member must be one of the share group's (``ShareManager.check_member``): else
   UNKNOWN_MEMBER_ID / GROUP_ID_NOT_FOUND for the whole request; but a FINAL epoch (-1)
   is not checked: a closing ShareConsumer leaves the group (ShareGroupHeartbeat -1) and
   sends its last acknowledgements at the same time, and those must still count.
4. Acknowledgements (ShareAcknowledge, or piggy-backed on ShareFetch) per partition: a
   topic ID nobody knows is UNKNOWN_TOPIC_ID, a topic not READ-able
   TOPIC_AUTHORIZATION_FAILED, a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION,
   malformed batches (first > last, overlapping or descending, no types, a type count
   that is neither 1 nor the range's length, a type outside 0-3: v2's RENEW (4, lock
   renewal) is not served) INVALID_REQUEST; the partition's answer otherwise comes from the share-partition
   (INVALID_RECORD_STATE for records this member does not hold, ...). On ShareFetch the
   result is the partition's ``acknowledge_error_code``.
5. Fetch: the request's partitions (initial epoch) or the session's (later epochs); each is
   acquired for the member on its leader (``spool.broker.share_manager``); not led here:
   NOT_LEADER_OR_FOLLOWER with ``current_leader`` and ``node_endpoints`` (KIP-951). The
   request waits (long poll) until the acquired records reach ``min_bytes`` or
   ``max_wait_ms`` passes; new records or records released by others end the wait.
   ``max_records`` (capped by ``share.fetch.max.fetch.records``) bounds the records
   acquired by one request, ``max_bytes`` the bytes; the first partition with records
   always gets one whole batch. The records go back as the log's record batches (zero
   copy); ``acquired_records`` say which offsets are this member's, with their delivery
   counts; ``acquisition_lock_timeout_ms`` is the group's record lock duration.
   A v2 request with ``is_renew_ack`` only acknowledges (nothing is fetched); v2's
   ``share_acquire_mode`` 1 (record_limit) acquires no more than ``max_records``, cutting
   a batch (0, batch_optimized, takes whole batches); ``batch_size`` is not used.
6. FINAL epoch (-1): acknowledgements only, then the session ends and the member's
   remaining acquired records are released.

A subsequent ShareFetch names only the partitions with records, errors, acknowledgement
results or newly added to the session.
"""

from __future__ import annotations

import asyncio
import logging

from spool.broker.authz import allowed, allowed_names
from spool.broker.group_protocols import share_enabled
from spool.broker.registry import handles
from spool.broker.server import FileRegion
from spool.broker.share_manager import (
    AckBatch,
    PartitionFetch,
    share_manager,
)
from spool.broker.share_sessions import FINAL_EPOCH, INITIAL_EPOCH
from spool.protocol._generated import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from spool.protocol._generated import share_acknowledge_response as ack_rsp
from spool.protocol._generated import share_fetch_response as fetch_rsp
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError

log = logging.getLogger("spool.share")

RECORD_LIMIT = 1  # v2 share_acquire_mode: at most max_records, batches cut (0: whole batches)
_HINTED = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)


def _request_error(ctx, req) -> KafkaError | None:
    """The request-wide checks of steps 1 and 3 (None: go on)."""
    broker = ctx.broker
    if not share_enabled(broker):
        return KafkaError(Errors.UNSUPPORTED_VERSION, "share groups are not enabled")
    if not req.group_id:
        return KafkaError(Errors.INVALID_REQUEST, "the group id is missing")
    if not req.member_id:
        return KafkaError(Errors.INVALID_REQUEST, "the member id is missing")
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return KafkaError(Errors.GROUP_AUTHORIZATION_FAILED)
    return None


def _topic_names(broker, topic_ids) -> dict:
    name_of = broker.view.topic_name
    return {tid: name_of(tid) for tid in topic_ids}


def _denied(ctx, names) -> set[str]:
    named = {n for n in names if n is not None}
    return named - allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, named)


def _bad_batches(batches) -> str | None:
    """Kafka's validateAcknowledgementBatches: why the batches are INVALID_REQUEST."""
    prev_end = -1
    for b in batches:
        types = b.acknowledge_types
        if b.first_offset > b.last_offset:
            return "an acknowledgement batch ends before it starts"
        if b.first_offset < prev_end:
            return "acknowledgement batches overlap or go backwards"
        if not types:
            return "an acknowledgement batch has no acknowledge types"
        if len(types) > 1 and b.last_offset - b.first_offset != len(types) - 1:
            return "acknowledge types do not match the batch's offsets"
        if any(t < 0 or t > 3 for t in types):  # RENEW (4, v2) is not served
            return "unknown acknowledge type"
        prev_end = b.last_offset
    return None


async def _acknowledge(ctx, group_id: str, member_id: str, topics, names: dict,
                       denied: set[str]) -> dict[tuple, KafkaError | None]:
    """Step 4: ``{(topic_id, partition): error or None}`` for every acknowledged partition."""
    manager = share_manager(ctx.broker)
    view = ctx.broker.view
    out: dict[tuple, KafkaError | None] = {}
    work = []
    for t in topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            batches = p.acknowledgement_batches
            if name is None:
                out[key] = KafkaError(Errors.UNKNOWN_TOPIC_ID)
            elif name in denied:
                out[key] = KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED)
            elif view.partition(name, p.partition_index) is None:
                out[key] = KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif (why := _bad_batches(batches)) is not None:
                out[key] = KafkaError(Errors.INVALID_REQUEST, why)
            elif not batches:
                out[key] = None
            else:
                ack = [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                       for b in batches]
                work.append((key, manager.acknowledge(group_id, member_id, name, t.topic_id,
                                                      p.partition_index, ack)))
    if work:
        results = await asyncio.gather(*(w for _, w in work))
        for (key, _), err in zip(work, results, strict=True):
            out[key] = err
    return out


def _leader(broker, topic: str, partition: int) -> tuple[int, int]:
    part = broker.replicas.get_partition(topic, partition) if broker.replicas else None
    view = broker.view.partition(topic, partition)
    if view is not None and (part is None or view.leader_epoch >= part.leader_epoch):
        return view.leader, view.leader_epoch
    if part is not None:
        return part.leader_id, part.leader_epoch
    return -1, -1


def _endpoints(ctx, leaders: set[int], cls) -> list:
    view = ctx.broker.view
    return [cls(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in (view.broker(n, ctx.listener_name) for n in sorted(leaders) if n >= 0)
            if b]


def _release(results: dict) -> None:
    for r in results.values():
        if isinstance(r.records, FileRegion):
            r.records.close()


# ---- ShareFetch


def _fetch_error(code: int, msg: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                              responses=[], node_endpoints=[])


@handles(78, 1, 2)
async def share_fetch(ctx, req: ShareFetchRequest) -> ShareFetchResponse:
    broker = ctx.broker
    err = _request_error(ctx, req)
    if err is not None:
        return _fetch_error(err.code, err.message)
    manager = share_manager(broker)
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    acking = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    asked = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    try:
        if epoch != FINAL_EPOCH:
            manager.check_member(group_id, member_id)
        session, full = manager.sessions.fetch_context(group_id, member_id, epoch, asked,
                                                       forgotten, acking, ctx.conn)
    except KafkaError as e:
        return _fetch_error(e.code, e.message)
    manager.watch_connection(ctx.conn)
    if epoch == INITIAL_EPOCH or session is None:
        wanted = list(dict.fromkeys(asked)) if session is not None else []
    else:
        wanted = list(session.partitions)
    names = _topic_names(broker, {t for t, _ in wanted} | {t.topic_id for t in req.topics})
    denied = _denied(ctx, names.values())

    acks: dict[tuple, KafkaError | None] = {}
    if acking:
        acks = await _acknowledge(ctx, group_id, member_id,
                                  [t for t in req.topics
                                   if any(p.acknowledgement_batches for p in t.partitions)],
                                  names, denied)
    results: dict[tuple, PartitionFetch] = {}
    renew_only = ctx.api_version >= 2 and req.is_renew_ack  # v2: acknowledge, fetch nothing
    if wanted and req.max_records != 0 and req.max_bytes != 0 and not renew_only:
        results = await manager.fetch(
            ctx, group_id, member_id, [(tid, p, names.get(tid)) for tid, p in wanted],
            denied, max_wait_ms=req.max_wait_ms, min_bytes=req.min_bytes,
            max_bytes=req.max_bytes, max_records=req.max_records,
            record_limit=ctx.api_version >= 2 and req.share_acquire_mode == RECORD_LIMIT)
    if ctx.conn.gone:
        _release(results)
        return _fetch_error(0)
    if epoch == FINAL_EPOCH:
        await manager.close_session(group_id, member_id)
    return _fetch_response(ctx, group_id, session if not full else None, results, acks)


def _fetch_response(ctx, group_id: str, session, results: dict, acks: dict
                    ) -> ShareFetchResponse:
    broker = ctx.broker
    by_topic: dict = {}
    leaders: set[int] = set()
    for key in list(results) + [k for k in acks if k not in results]:
        r = results.get(key)
        ack = acks.get(key, None)
        pd = fetch_rsp.PartitionData(
            partition_index=key[1], current_leader=fetch_rsp.LeaderIdAndEpoch(-1, -1))
        if key in acks and ack is not None:
            pd.acknowledge_error_code = ack.code
            pd.acknowledge_error_message = ack.message
        if r is not None:
            pd.error_code = r.error_code
            pd.error_message = r.error_message
            pd.records = r.records
            pd.acquired_records = [fetch_rsp.AcquiredRecords(f, la, c) for f, la, c in r.acquired]
            if r.error_code in _HINTED and r.topic is not None:
                lid, lep = _leader(broker, r.topic, key[1])
                pd.current_leader = fetch_rsp.LeaderIdAndEpoch(lid, lep)
                leaders.add(lid)
            if session is not None and key not in acks and not session.must_answer(
                    key, bool(r.acquired), r.error_code):
                continue
        by_topic.setdefault(key[0], []).append(pd)
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=0,
        acquisition_lock_timeout_ms=share_manager(broker).lock_duration_ms(group_id),
        responses=[fetch_rsp.ShareFetchableTopicResponse(topic_id=tid, partitions=parts)
                   for tid, parts in by_topic.items()],
        node_endpoints=_endpoints(ctx, leaders, fetch_rsp.NodeEndpoint))


# ---- ShareAcknowledge


def _ack_error(code: int, msg: str | None = None) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                                    responses=[], node_endpoints=[])


@handles(79, 1, 2)
async def share_acknowledge(ctx, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    broker = ctx.broker
    err = _request_error(ctx, req)
    if err is not None:
        return _ack_error(err.code, err.message)
    manager = share_manager(broker)
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    try:
        if epoch != FINAL_EPOCH:
            manager.check_member(group_id, member_id)
        manager.sessions.acknowledge_context(group_id, member_id, epoch)
    except KafkaError as e:
        return _ack_error(e.code, e.message)
    names = _topic_names(broker, {t.topic_id for t in req.topics})
    denied = _denied(ctx, names.values())
    acks = await _acknowledge(ctx, group_id, member_id, req.topics, names, denied)
    if epoch == FINAL_EPOCH:
        await manager.close_session(group_id, member_id)
    by_topic: dict = {}
    leaders: set[int] = set()
    for (tid, p), e in acks.items():
        pd = ack_rsp.PartitionData(partition_index=p,
                                   current_leader=ack_rsp.LeaderIdAndEpoch(-1, -1))
        if e is not None:
            pd.error_code, pd.error_message = e.code, e.message
            name = names.get(tid)
            if e.code in _HINTED and name is not None:
                lid, lep = _leader(broker, name, p)
                pd.current_leader = ack_rsp.LeaderIdAndEpoch(lid, lep)
                leaders.add(lid)
        by_topic.setdefault(tid, []).append(pd)
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=0,
        acquisition_lock_timeout_ms=manager.lock_duration_ms(group_id),
        responses=[ack_rsp.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=parts)
                   for tid, parts in by_topic.items()],
        node_endpoints=_endpoints(ctx, leaders, ack_rsp.NodeEndpoint))
