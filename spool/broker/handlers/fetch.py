"""Fetch (1): whole batches from segment files, zero copy, with long polling.

For each requested partition the log returns a file region of whole batches
starting at the batch holding ``fetch_offset`` and ending at or before the
high watermark (the LSO under read_committed). The region travels in the
response's chunk list as a ``FileRegion`` and goes out with ``sendfile``.
Limits: ``partition_max_bytes`` per partition and ``max_bytes`` overall,
except that the first non-empty partition always gets at least one whole
batch (KIP-74) so a batch larger than the limits never stalls a consumer.
If fewer than ``min_bytes`` are ready the request waits (a delayed
operation): each append to one of its partitions makes it look again, and
it answers once ``min_bytes`` are there or ``max_wait_ms`` has passed, or
as soon as its client hangs up (an empty answer nobody reads: the wait and
its file regions end with the connection, not with ``max_wait_ms``).
A partition whose file cannot be duplicated (no descriptors left) is
answered without records rather than failing the request.
Fetch sessions (KIP-227, v7+): ``spool.broker.fetch_sessions`` decides what a request
reads (its partitions, or its session's) and what the answer names (every partition, or
only those with something new for an incremental session), and answers the session
errors; the read, the long poll (on every partition read) and the rest below are the same
for all.

Versions, as Kafka 4.2 serves them:

- v13+ name topics by ID (KIP-516), in the request and the response. An ID the broker's
  view does not know (a topic deleted, or deleted and created again under the same name)
  is UNKNOWN_TOPIC_ID for each of its partitions; a replica whose topic ID is not the
  requested one (its log is an older or newer incarnation of the name) is
  INCONSISTENT_TOPIC_ID. The ID is resolved again at every look of a long poll, so a
  topic recreated meanwhile never answers for the old ID.
- v15 carries the follower's id in ``replica_state`` (its broker epoch is not used: no
  KIP-903 ISR check here); v17's ``replica_directory_id`` (JBOD) is ignored; v18's
  ``high_watermark`` (what the follower knows, KIP-1166) is ignored: the answer's high
  watermark is the leader's.
- v16+ (KIP-951): NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry
  ``current_leader`` (the leader and epoch this broker knows: its replica's, or the
  view's when it holds none) and the response's ``node_endpoints`` list the named
  leaders' endpoints on the request's listener, so a client need not ask Metadata.

Consumers read from the partition's leader (``broker.replicas``) up to the
high watermark and wait on its moves. A Fetch with ``replica_id >= 0`` is a
follower's (replication): it reads up to the log end offset, its fetch offset
is its log end offset for the leader (``ReplicaManager.follower_fetched``: the
high watermark, ISR expansion), it is answered with the high watermark after
that update, and it waits on appends; a broker that holds no replica of the
partition gets NOT_LEADER_OR_FOLLOWER.

Fetch from the closest replica (KIP-392, as Kafka's FetchParams/ReplicaManager): a
consumer's Fetch v11+ (it carries the client's ``rack_id``) may be served by a follower,
up to the follower's high watermark (LSO under read_committed), its epoch checked as the
leader's would be; below v11 only the leader serves consumers. With
``replica.selector.class`` set (``spool.replica.selector``) the leader answers a consumer
in another rack with ``preferred_read_replica`` = an in-sync follower of that rack, its
offsets and no records, at once (no long poll); the consumer then fetches there.

With an authorizer (``spool.broker.authz``; without one the request pays one attribute
test), as Kafka's ``handleFetchRequest``: a follower's fetch needs CLUSTER_ACTION on the
cluster (else every partition TOPIC_AUTHORIZATION_FAILED); a consumer's, READ on each
topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, after an unknown topic ID's
UNKNOWN_TOPIC_ID). Refused partitions are not read and take no part in the long poll: a
request with nothing else waits for nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time

from spool.broker.authz import allowed_cluster, allowed_names
from spool.broker.fetch_sessions import new_context
from spool.broker.registry import handles
from spool.broker.server import FileRegion, RateLimitedLog
from spool.protocol._generated import FetchRequest, FetchResponse
from spool.protocol._generated.fetch_request import FetchTopic
from spool.protocol._generated.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    SnapshotId,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError
from spool.replica.manager import REPLICA_KEY
from spool.replica.partition import NotLeader, Partition
from spool.replica.selector import preferred_read_replica

_dup_log = RateLimitedLog(logging.getLogger("spool.fetch"))
# The default tagged structs of every PartitionData, shared (never changed in place: a hint
# replaces ``current_leader``); made per partition they were a third of a 1,000-partition
# read's time
_NO_DIVERGING_EPOCH = EpochEndOffset()
_NO_LEADER = LeaderIdAndEpoch()
_NO_SNAPSHOT = SnapshotId()

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def _leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> int:
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return 0
    if current_leader_epoch < leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    return Errors.UNKNOWN_LEADER_EPOCH


def _consumer_partition(replicas, topic: str, partition: int, version: int) -> Partition:
    """The replica serving a consumer: the leader, or from v11 on any replica held here."""
    try:
        return replicas.leader_partition(topic, partition)
    except NotLeader:
        part = replicas.get_partition(topic, partition) if version >= 11 else None
        if part is None:
            raise
        return part


TOPIC_IDS_VERSION = 13  # KIP-516: topics by ID
REPLICA_STATE_VERSION = 15
LEADER_HINTS_VERSION = 16  # KIP-951
_HINTED = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)


def replica_id_of(req: FetchRequest, version: int) -> int:
    """The fetching follower's id, -1 for a consumer (v15+: in ``replica_state``)."""
    return req.replica_state.replica_id if version >= REPLICA_STATE_VERSION else req.replica_id


def topic_names(broker, req: FetchRequest, version: int,
                topics: list[FetchTopic] | None = None) -> list[str | None]:
    """The name of each requested topic (of ``topics``, default the request's): from v13
    its ID's (None: no such ID)."""
    if topics is None:
        topics = req.topics
    if version < TOPIC_IDS_VERSION:
        return [t.topic for t in topics]
    name_of = broker.view.topic_name
    return [name_of(t.topic_id) for t in topics]


def _unknown_topic_id(t) -> FetchableTopicResponse:
    return FetchableTopicResponse(topic_id=t.topic_id, partitions=[
        PartitionData(partition_index=p.partition, error_code=Errors.UNKNOWN_TOPIC_ID,
                      high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                      aborted_transactions=None, preferred_read_replica=-1, records=b"")
        for p in t.partitions])


def _refused(t, name: str | None, code: int) -> FetchableTopicResponse:
    return FetchableTopicResponse(topic=name, topic_id=t.topic_id, partitions=[
        PartitionData(partition_index=p.partition, error_code=code,
                      high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                      aborted_transactions=None, preferred_read_replica=-1, records=b"")
        for p in t.partitions])


def _denied_topics(ctx, names: list[str | None]) -> set[str]:
    """The requested topics the principal may not READ (Kafka's handleFetchRequest)."""
    named = {n for n in names if n is not None}
    return named - allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, named)


def _read_all(broker, req: FetchRequest, version: int, names: list[str | None],
              denied: set[str] | frozenset[str] = frozenset(),
              fetch_topics: list[FetchTopic] | None = None):
    """One pass over the requested partitions (``fetch_topics``, default the request's);
    returns (topics, bytes, any_error): any_error
    also when a consumer was sent to a preferred read replica (both answer at once). A
    topic in ``denied`` is TOPIC_AUTHORIZATION_FAILED for each partition, not an error
    that ends a long poll (Kafka leaves it out of the read)."""
    replicas = broker.replicas
    replica_id = replica_id_of(req, version)
    follower = replica_id >= 0
    by_id = version >= TOPIC_IDS_VERSION
    now_ms = broker.clock.now_ms() if follower else 0
    # KIP-392: a consumer's rack, when the leader may point it elsewhere
    rack = req.rack_id if version >= 11 and not follower and broker.config.get(
        "replica.selector.class") else ""
    racks: dict[int, str | None] | None = None
    budget = req.max_bytes if version >= 3 else 2**31 - 1
    total = 0
    any_error = False
    topics = []
    for t, name in zip(req.topics if fetch_topics is None else fetch_topics, names,
                       strict=True):
        if name is None:  # v13+: an ID nobody knows (Kafka: per partition)
            topics.append(_unknown_topic_id(t))
            any_error = True
            continue
        if denied and name in denied:
            topics.append(_refused(t, name, Errors.TOPIC_AUTHORIZATION_FAILED))
            continue
        parts = []
        for p in t.partitions:
            pd = PartitionData(p.partition, 0, -1, -1, -1, _NO_DIVERGING_EPOCH, _NO_LEADER,
                               _NO_SNAPSHOT, None, -1, b"")
            parts.append(pd)
            try:
                if follower:
                    part = replicas.leader_partition(name, p.partition)
                else:
                    part = _consumer_partition(replicas, name, p.partition, version)
                if by_id and part.topic_id is not None and part.topic_id != t.topic_id:
                    raise KafkaError(Errors.INCONSISTENT_TOPIC_ID)
                err = _leader_epoch_error(p.current_leader_epoch, part.leader_epoch)
                if err:
                    raise KafkaError(err)
                plog = part.log
                if rack and part.is_leader:
                    if racks is None:
                        racks = {b.node_id: b.rack for b in broker.view.brokers()}
                    chosen = preferred_read_replica(part, p.fetch_offset, rack, racks.get,
                                                    broker.clock.now_ms())
                    if chosen >= 0:  # no read: the consumer goes there (Kafka: at once)
                        pd.preferred_read_replica = chosen
                        pd.high_watermark = plog.high_watermark
                        pd.last_stable_offset = plog.last_stable_offset
                        pd.log_start_offset = plog.log_start_offset
                        any_error = True
                        continue
                read_committed = req.isolation_level == READ_COMMITTED and not follower
                max_bytes = min(p.partition_max_bytes, max(budget - total, 0))
                if follower:  # up to the log end; then its state, so the answer has the HW
                    sl = None
                    if max_bytes > 0 or total == 0:
                        sl = plog.read(p.fetch_offset, max_bytes, min_one_batch=(total == 0))
                    replicas.follower_fetched(part, replica_id, p.fetch_offset, now_ms)
                    limit = plog.log_end_offset
                else:
                    if max_bytes <= 0 and total > 0:
                        sl = None
                    else:
                        limit = plog.last_stable_offset if read_committed else plog.high_watermark
                        sl = plog.read(p.fetch_offset, max_bytes, max_offset=limit,
                                       min_one_batch=(total == 0))
                pd.high_watermark = plog.high_watermark
                pd.last_stable_offset = plog.last_stable_offset
                pd.log_start_offset = plog.log_start_offset
                if read_committed:
                    pd.aborted_transactions = []
            except KafkaError as e:
                pd.error_code = e.code
                if version >= LEADER_HINTS_VERSION and e.code in _HINTED:
                    pd.current_leader = _current_leader(broker, name, p.partition, e)
                any_error = True
                continue
            if sl is not None and sl.length > 0:
                try:
                    fd = sl.dup_fd()
                except OSError as e:  # out of descriptors: answer without records, stay up
                    _dup_log(logging.WARNING, "fetch %s-%d: no descriptor for the read: %s",
                             name, p.partition, e)
                    continue
                pd.records = FileRegion(fd, sl.position, sl.length)
                total += sl.length
                if read_committed:
                    pd.aborted_transactions = [
                        AbortedTransaction(producer_id=pid, first_offset=first)
                        for pid, first in plog.aborted_transactions(sl.first_offset, limit)]
        topics.append(FetchableTopicResponse(topic=name, topic_id=t.topic_id, partitions=parts))
    return topics, total, any_error


def _current_leader(broker, topic: str, partition: int, e: KafkaError) -> LeaderIdAndEpoch:
    """KIP-951: the leader as this broker knows it, as Kafka's getCurrentLeader: its
    replica's leader and epoch, else the view's, else none (-1, -1)."""
    if isinstance(e, NotLeader):  # already the newer of the replica's and the view's
        return LeaderIdAndEpoch(leader_id=e.leader, leader_epoch=e.leader_epoch)
    part = broker.replicas.get_partition(topic, partition)
    if part is not None:
        return LeaderIdAndEpoch(leader_id=part.leader_id, leader_epoch=part.leader_epoch)
    view = broker.view.partition(topic, partition)
    if view is not None:
        return LeaderIdAndEpoch(leader_id=view.leader, leader_epoch=view.leader_epoch)
    return LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)


def _leader_endpoints(ctx, topics) -> list[NodeEndpoint]:
    """KIP-951: the endpoints of the live leaders named in ``current_leader`` hints."""
    leaders = {p.current_leader.leader_id for t in topics for p in t.partitions
               if p.error_code in _HINTED}
    view = ctx.broker.view
    return [NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in (view.broker(n, ctx.listener_name) for n in sorted(leaders) if n >= 0)
            if b]


# Partitions not read at all (Kafka answers them before the read: not counted)
_NOT_READ = frozenset({Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID,
                       Errors.TOPIC_AUTHORIZATION_FAILED})
# Failures Kafka expects (readFromLog: not counted as failed fetch requests)
_EXPECTED_FETCH_ERRORS = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_LEADER_EPOCH, Errors.FENCED_LEADER_EPOCH,
    Errors.REPLICA_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR, Errors.INCONSISTENT_TOPIC_ID,
    Errors.OFFSET_OUT_OF_RANGE})


def _count(metrics, topics, follower: bool) -> None:
    """BrokerTopicMetrics of the answer: a partition read, the record bytes sent (to a
    consumer: BytesOut; to a follower: ReplicationBytesOut), an unexpected failure."""
    for t in topics:
        stats = None
        for p in t.partitions:
            code = p.error_code
            if code and code in _NOT_READ:
                continue
            if stats is None:
                stats = metrics.topic(t.topic)
            stats.total_fetch_requests += 1
            if code:
                if code not in _EXPECTED_FETCH_ERRORS:
                    stats.failed_fetch_requests += 1
            elif p.records:
                if follower:
                    stats.replication_bytes_out += len(p.records)
                else:
                    stats.bytes_out += len(p.records)


def _release(topics) -> None:
    for t in topics:
        for p in t.partitions:
            if isinstance(p.records, FileRegion):
                p.records.close()


@handles(1, 4, 18)
async def fetch(ctx, req: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    version = ctx.api_version
    follower = replica_id_of(req, version) >= 0
    denied: set[str] | frozenset[str] = frozenset()
    if broker.authorizer is not None and follower:  # a follower needs CLUSTER_ACTION
        if not allowed_cluster(ctx, AclOperation.CLUSTER_ACTION):
            return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
                _refused(t, name, Errors.TOPIC_AUTHORIZATION_FAILED)
                for t, name in zip(req.topics, topic_names(broker, req, version), strict=True)])
    # KIP-227: what is read (the request's partitions or its session's), how it is answered
    fctx = new_context(broker.fetch_sessions, version, req, follower, broker.clock.now_ms())
    if fctx.error:
        return FetchResponse(throttle_time_ms=0, error_code=fctx.error, session_id=0,
                             responses=[])
    wanted = fctx.topics
    names = topic_names(broker, req, version, wanted)
    if broker.authorizer is not None and not follower:
        denied = _denied_topics(ctx, names)
    topics, total, any_error = _read_all(broker, req, version, names, denied, wanted)
    pairs = [(name, p.partition) for t, name in zip(wanted, names, strict=True)
             if name is not None and name not in denied for p in t.partitions]
    if follower:  # a follower waits for appends, a consumer for the HW
        keys = [(REPLICA_KEY, name, p) for name, p in pairs]
    else:
        keys = pairs
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    conn = ctx.conn
    try:
        while total < req.min_bytes and not any_error and keys and not conn.gone:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            # a delayed fetch: wait for an append to one of its partitions, then look again
            waited = time.perf_counter()  # the clock of every other RequestMetrics phase
            await broker.wait_for_append(keys, remaining, interrupt=conn.hangup_future())
            ctx.timer.remote_s += time.perf_counter() - waited  # RequestMetrics' remote time
            _release(topics)
            if conn.gone:  # the client hung up: nobody reads the answer
                return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[])
            if version >= TOPIC_IDS_VERSION:  # a topic deleted meanwhile answers no more
                names = topic_names(broker, req, version, wanted)
            topics, total, any_error = _read_all(broker, req, version, names, denied, wanted)
    except BaseException:  # cancelled (shutdown)
        _release(topics)
        raise
    _count(broker.metrics, topics, follower)
    session_id, topics = fctx.respond(topics, broker.clock.now_ms())
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id,
                         responses=topics,
                         node_endpoints=_leader_endpoints(ctx, topics)
                         if version >= LEADER_HINTS_VERSION and any_error else [])
