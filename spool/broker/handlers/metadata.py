"""Metadata (3), DescribeCluster (60), OffsetForLeaderEpoch (23): what the cluster looks like.

OffsetForLeaderEpoch answers from the partition log's leader epoch cache (its own
docstring below). Metadata and DescribeCluster answer from the broker's ``MetadataView`` (``spool.broker.metadata_view``):
the live brokers with the endpoints of the listener the request came in on,
the controller id, and per partition its leader, leader epoch, replicas, ISR
and offline replicas (a single node: itself, leader and sole replica of
every partition). ``topics`` null (v1+) means all topics; before v1 an empty list
meant all. Unknown topics are created when ``auto.create.topics.enable``
and the request allows it (``allow_auto_topic_creation``, v4+; always
before v4), never internal ones; otherwise UNKNOWN_TOPIC_OR_PARTITION.
Auto-creation runs in the executor (other clients are served meanwhile) and
obeys the broker's partition limit: beyond it the topic's error is
POLICY_VIOLATION. A partition without a leader (on a single node: one whose log does not
exist yet, a creation still running or left uncreated by the limit) is
LEADER_NOT_AVAILABLE with leader -1, as Kafka reports a partition being
created. Internal topics are marked ``is_internal``. In a cluster, auto-creation
is a CreateTopics sent to the active controller (``spool.broker.forwarding``) and
the topic is LEADER_NOT_AVAILABLE until this broker's view has it, as Kafka
answers a topic it just asked to create. Topics by ID (KIP-516): from v12 a request that
names any topic ID is answered for its IDs only, an unknown one UNKNOWN_TOPIC_ID with a
null name, never auto-created; v10-11 requests may not use IDs nor null names
(INVALID_REQUEST for each topic, as Kafka's error response). v13 adds the top-level
``error_code`` (KIP-1102: REBOOTSTRAP_REQUIRED tells a client to bootstrap again);
Kafka's broker, like Spool, answers 0 there. DescribeCluster describes brokers: a
request for controller endpoints (type 2, KIP-919: those are asked of a
controller) is MISMATCHED_ENDPOINT_TYPE, an unknown type
UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0), as Kafka answers.
Authorized operations (``include_*_authorized_operations``: Metadata v8+ topics, v8-10
the cluster; DescribeCluster) come from ``spool.broker.authz``; the cluster's are 0 for a
principal that may not DESCRIBE it, as Kafka answers.

With an authorizer (``spool.broker.authz``), as Kafka's ``handleTopicMetadataRequest``:
asked for all topics, the answer leaves out those the principal may not DESCRIBE; asked
by name, each is TOPIC_AUTHORIZATION_FAILED (no ID, existing or not: nothing disclosed);
by ID, TOPIC_AUTHORIZATION_FAILED with the ID and no name. A topic that auto-creation
would create needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED
and nothing created. OffsetForLeaderEpoch needs CLUSTER_ACTION on the cluster or DESCRIBE
on each topic (TOPIC_AUTHORIZATION_FAILED for each of its partitions).
"""

from __future__ import annotations

import copy
import weakref

from spool.broker.authz import (
    CLUSTER_NAME,
    allowed,
    allowed_cluster,
    allowed_names,
    authorized_operations,
)
from spool.broker.broker import INTERNAL_TOPICS, validate_topic_name
from spool.broker.forwarding import create_topic_via_controller
from spool.broker.registry import handles
from spool.protocol._generated import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from spool.protocol._generated.describe_cluster_response import DescribeClusterBroker
from spool.protocol._generated.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from spool.protocol._generated.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from spool.protocol.acl import OMITTED, AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.primitives import ZERO_UUID
from spool.replica.partition import NotLeader

AUTHORIZED_OPERATIONS_OMITTED = OMITTED
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2  # DescribeCluster endpoint types (KIP-919)


# a broker's view -> {topic name: (TopicView, the entry built from it)}: an entry is reused
# while the view returns the same TopicView object (spool.broker.metadata_view: it does
# until the topic changes); a view replaced (a new metadata image) takes its entries with
# it. Entries are shared between responses: never mutated
# (``_metadata_authorized_operations`` copies before it sets a field).
_ENTRIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MAX_CACHED_ENTRIES = 100_000


def _topic_entry(broker, name: str) -> MetadataResponseTopic:
    view = broker.view
    topic = view.topic(name)
    if topic is None:
        if view.clustered:  # created by the controller, not in this broker's view yet
            return _error_topic(name, Errors.LEADER_NOT_AVAILABLE)
        return _error_topic(name, Errors.UNKNOWN_TOPIC_OR_PARTITION)  # deleted meanwhile
    entries = _ENTRIES.get(view)
    if entries is None:
        entries = _ENTRIES[view] = {}
    hit = entries.get(name)
    if hit is not None and hit[0] is topic:
        return hit[1]
    entry = MetadataResponseTopic(
        error_code=0,
        name=name,
        topic_id=topic.topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            MetadataResponsePartition(
                error_code=0 if p.leader >= 0 else Errors.LEADER_NOT_AVAILABLE,
                partition_index=p.partition_index, leader_id=p.leader,
                leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr), offline_replicas=list(p.offline_replicas),
            )
            for p in topic.partitions
        ],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
    if len(entries) >= MAX_CACHED_ENTRIES:
        entries.clear()  # deleted topics' entries linger: drop them all now and then
    entries[name] = (topic, entry)
    return entry


def _error_topic(name: str, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, is_internal=False, partitions=[],
                                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def _auto_create_in_cluster(broker, name: str) -> bool:
    """Auto-creation in a cluster: a CreateTopics with the controller's defaults."""
    if name in INTERNAL_TOPICS or not broker.config.get_bool("auto.create.topics.enable"):
        return False
    try:
        await create_topic_via_controller(broker, name)
    except KafkaError as e:
        if e.code != Errors.TOPIC_ALREADY_EXISTS:
            raise
    return True


TOPIC_IDS_VERSION = 12  # Metadata by topic ID (v10-11 carry the field, unused)


def _by_id_error(req: MetadataRequest, version: int) -> list[MetadataResponseTopic] | None:
    """v10-11 with a null name or a topic ID: INVALID_REQUEST for each topic (Kafka's
    error response); otherwise None."""
    if req.topics is None or version < 10 or version >= TOPIC_IDS_VERSION:
        return None
    if all(t.name is not None and t.topic_id == ZERO_UUID for t in req.topics):
        return None
    return [MetadataResponseTopic(error_code=Errors.INVALID_REQUEST, name=t.name or "",
                                  topic_id=t.topic_id, is_internal=False, partitions=[],
                                  topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
            for t in req.topics]


def _topics_by_id(ctx, ids: list) -> list[MetadataResponseTopic]:
    """v12+: the topics of these IDs (each once), UNKNOWN_TOPIC_ID for those not known,
    TOPIC_AUTHORIZATION_FAILED with the ID and no name for those the principal may not
    DESCRIBE (Kafka: an ID is not secret)."""
    broker = ctx.broker
    out = []
    for tid in dict.fromkeys(ids):
        name = broker.view.topic_name(tid)
        if name is not None and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            name):
            out.append(_refused_topic(None, tid))
            continue
        entry = _topic_entry(broker, name) if name is not None else None
        if entry is None or entry.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
            entry = MetadataResponseTopic(
                error_code=Errors.UNKNOWN_TOPIC_ID, name=None, topic_id=tid, is_internal=False,
                partitions=[], topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        out.append(entry)
    return out


def _response(ctx, req: MetadataRequest, topics: list[MetadataResponseTopic]) -> MetadataResponse:
    broker = ctx.broker
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in broker.view.brokers(ctx.listener_name)],
        cluster_id=broker.cluster_id,
        controller_id=broker.view.controller_id(),
        topics=topics,
        cluster_authorized_operations=_metadata_authorized_operations(ctx, req, topics),
        error_code=0,
    )


def _refused_topic(name: str | None, topic_id=ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name,
                                 topic_id=topic_id, is_internal=False, partitions=[],
                                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _may_not_create(ctx, names: list[str]) -> set[str]:
    """Of the topics auto-creation would create, those the principal may not: without
    CREATE on the cluster, each needs CREATE on itself (Kafka's handleTopicMetadataRequest)."""
    broker = ctx.broker
    missing = {n for n in names if n is not None and not broker.has_topic(n)}
    if not missing or not broker.config.get_bool("auto.create.topics.enable") or (
            allowed_cluster(ctx, AclOperation.CREATE, log_denied=False)):
        return set()
    return missing - allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, missing)


@handles(3, 0, 13)
async def metadata(ctx, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    refused = _by_id_error(req, version)
    if refused is not None:
        return MetadataResponse(throttle_time_ms=0, brokers=[], topics=refused,
                                cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    checked = broker.authorizer is not None
    if version >= TOPIC_IDS_VERSION and req.topics:
        ids = [t.topic_id for t in req.topics if t.topic_id != ZERO_UUID]
        if ids:
            return _response(ctx, req, _topics_by_id(ctx, ids))
    if req.topics is None or (version == 0 and not req.topics):
        names = broker.topic_names()
        if checked:  # all topics: those it may not describe are left out
            names = sorted(allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                         log_denied=False))
        requested = False
    else:
        names = [t.name for t in req.topics]
        requested = True
    allow_create = req.allow_auto_topic_creation if version >= 4 else True
    described = no_create = None
    if checked and requested:
        described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                  [n for n in names if n is not None])
        if allow_create:
            no_create = _may_not_create(ctx, [n for n in names if n in described])
    topics = []
    for name in names:
        if name is None:
            topics.append(_error_topic("", Errors.INVALID_TOPIC_EXCEPTION))
            continue
        if described is not None and name not in described:
            topics.append(_refused_topic(name))  # existing or not: not disclosed
            continue
        if no_create and name in no_create:
            topics.append(MetadataResponseTopic(
                error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name,
                is_internal=name in INTERNAL_TOPICS, partitions=[],
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        if requested and not broker.has_topic(name):
            try:
                validate_topic_name(name)
            except KafkaError as e:
                topics.append(_error_topic(name, e.code))
                continue
            created = False
            if allow_create:
                try:
                    if broker.view.clustered:
                        created = await _auto_create_in_cluster(broker, name)
                    else:
                        created = await broker.run_blocking(broker.auto_create_topic, name)
                except KafkaError as e:
                    topics.append(_error_topic(name, e.code))
                    continue
            if not created:
                topics.append(_error_topic(name, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
        topics.append(_topic_entry(broker, name))
    return _response(ctx, req, topics)


def _metadata_authorized_operations(ctx, req: MetadataRequest, topics) -> int:
    """v8+: each topic's operations when ``include_topic_authorized_operations`` (error
    topics too, as Kafka); the cluster's (v8-10) when ``include_cluster_authorized_operations``.
    Returns the cluster's field."""
    if ctx.api_version < 8:
        return OMITTED
    if req.include_topic_authorized_operations:
        for i, t in enumerate(topics):
            if t.name is not None and t.error_code != Errors.TOPIC_AUTHORIZATION_FAILED:
                topics[i] = t = copy.copy(t)  # entries are shared (``_topic_entry``)
                t.topic_authorized_operations = authorized_operations(ctx, ResourceType.TOPIC,
                                                                      t.name)
    if ctx.api_version <= 10 and req.include_cluster_authorized_operations:
        return _cluster_operations(ctx)
    return OMITTED


def _cluster_operations(ctx) -> int:
    """The cluster's authorized operations, 0 without DESCRIBE on it (Kafka's rule)."""
    if not allowed_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


@handles(60, 0, 2)
async def describe_cluster(ctx, req: DescribeClusterRequest) -> DescribeClusterResponse:
    """The live brokers; from v2 with ``include_fenced_brokers`` the fenced ones too,
    marked ``is_fenced`` (KIP-1073), by node id."""
    broker = ctx.broker
    view = broker.view
    if req.endpoint_type != BROKER_ENDPOINT:  # Kafka's AuthHelper.computeDescribeClusterResponse
        known = req.endpoint_type == CONTROLLER_ENDPOINT
        code = (Errors.INVALID_REQUEST if ctx.api_version == 0 else
                Errors.MISMATCHED_ENDPOINT_TYPE if known else Errors.UNSUPPORTED_ENDPOINT_TYPE)
        msg = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
               "of type CONTROLLER" if known
               else f"Unsupported endpoint type {req.endpoint_type}")
        return DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                                       endpoint_type=req.endpoint_type, cluster_id="",
                                       controller_id=-1, brokers=[])
    brokers = [DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
               for b in view.brokers(ctx.listener_name)]
    if ctx.api_version >= 2 and req.include_fenced_brokers:
        brokers += [DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                          rack=b.rack, is_fenced=True)
                    for b in view.fenced_brokers(ctx.listener_name)]
        brokers.sort(key=lambda b: b.broker_id)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=broker.cluster_id, controller_id=view.controller_id(),
        brokers=brokers,
        cluster_authorized_operations=(
            _cluster_operations(ctx) if req.include_cluster_authorized_operations else OMITTED),
    )


@handles(23, 2, 4)
async def offset_for_leader_epoch(ctx, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    """Where each requested leader epoch ends in this leader's log (KIP-101/KIP-279; a
    follower truncates there, a consumer checks its position, KIP-320), from the log's
    leader epoch cache (``LeaderEpochCache.end_offset_for``). Kafka's checks, in order:
    ``current_leader_epoch`` (-1: none) below this broker's epoch of the partition is
    FENCED_LEADER_EPOCH, above it UNKNOWN_LEADER_EPOCH; then a partition this broker does
    not lead is NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION. An
    epoch nothing is known of is leader_epoch -1, end_offset -1 with no error.
    ``replica_id`` (v3+: a follower's node id, -1 a consumer, -2 unset) changes nothing:
    Kafka answers replicas and consumers alike, from the leader only."""
    broker = ctx.broker
    denied: set[str] = set()
    if broker.authorizer is not None and not allowed_cluster(ctx, AclOperation.CLUSTER_ACTION,
                                                             log_denied=False):
        named = {t.topic for t in req.topics}
        denied = named - allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
    topics = []
    for t in req.topics:
        if t.topic in denied:
            parts = [EpochEndOffset(error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                    partition=p.partition, leader_epoch=-1, end_offset=-1)
                     for p in t.partitions]
        else:
            parts = [_epoch_end_offset(broker, t.topic, p) for p in t.partitions]
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _epoch_end_offset(broker, topic: str, p) -> EpochEndOffset:
    r = EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
    cur = p.current_leader_epoch
    try:
        part = broker.replicas.leader_partition(topic, p.partition)
        plog, epoch = part.log, part.leader_epoch
    except NotLeader as e:  # the epoch check comes first (Kafka's getLocalLog)
        r.error_code = _fenced(cur, e.leader_epoch) or e.code
        return r
    except KafkaError as e:
        r.error_code = e.code
        return r
    r.error_code = _fenced(cur, epoch)
    if r.error_code:
        return r
    cache, leo = plog.leader_epochs, plog.log_end_offset
    if cache.latest < 0 <= p.leader_epoch:
        # nothing appended in any epoch yet: as if this leader had recorded its epoch's
        # start at the log end on becoming leader (Kafka's makeLeader; a single node never
        # becomes leader, it always is)
        r.leader_epoch, r.end_offset = ((p.leader_epoch, leo) if p.leader_epoch <= epoch
                                        else (-1, -1))
    else:
        r.leader_epoch, r.end_offset = cache.end_offset_for(p.leader_epoch, leo)
    return r


def _fenced(current_leader_epoch: int, epoch: int) -> int:
    if current_leader_epoch < 0:
        return 0
    if current_leader_epoch < epoch:
        return Errors.FENCED_LEADER_EPOCH
    if current_leader_epoch > epoch:
        return Errors.UNKNOWN_LEADER_EPOCH
    return 0
