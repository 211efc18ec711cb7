"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DeleteRecords (21).

In a cluster, CreateTopics, DeleteTopics and CreatePartitions go to the active
controller and its reply is the answer (``spool.broker.forwarding``); what
follows is the single node's own handling.

Each topic or partition gets its own error code and message; one bad topic
never fails the others, except that, as Kafka's controller, a request whose
changes need more than 10,000 metadata records (one per new partition, one
per topic and config) fails whole with POLICY_VIOLATION ("Unable to perform
excessively large batch operation"). Creation beyond the broker's partition
limit (``max.broker.partitions``) is POLICY_VIOLATION for that topic.
Creating runs in the executor: a big request never stalls other clients.
``validate_only`` checks everything, limits included, and changes nothing. A deleted
topic's committed offsets go from every group (Kafka's onPartitionsDeleted), before the
answer; a cluster's brokers drop them when their image loses the topic
(``spool.broker.metadata_publisher``). DeleteRecords with offset -1 means "up to the high watermark";
beyond it is OFFSET_OUT_OF_RANGE.

Authorization (``spool.broker.admin_authz``, Kafka's rules): CreateTopics needs CREATE on
the cluster or the topic (configs in the answer: DESCRIBE_CONFIGS on the topic),
DeleteTopics DELETE on the cluster or the topic (and DESCRIBE to learn that a topic does
not exist), CreatePartitions ALTER on the topic, DeleteRecords DELETE on the topic. On a
cluster the broker checks before it forwards and sends the controller only what is
allowed: Spool forwards without Kafka's Envelope, so the controller cannot check the
client's principal and this check is the one that counts.
"""

from __future__ import annotations

from spool.broker import admin_authz
from spool.broker.broker import INTERNAL_TOPICS
from spool.broker.forwarding import forward
from spool.broker.registry import handles
from spool.protocol._generated import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from spool.protocol._generated.create_partitions_response import CreatePartitionsTopicResult
from spool.protocol._generated.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
)
from spool.protocol._generated.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from spool.protocol._generated.delete_topics_response import DeletableTopicResult
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.storage.metadata import EXCESSIVE, MAX_RECORDS_PER_USER_OP


def _too_large(records: int) -> KafkaError | None:
    """Kafka's answer to a request needing more than one operation's metadata records."""
    if records <= MAX_RECORDS_PER_USER_OP:
        return None
    return KafkaError(Errors.POLICY_VIOLATION,
                      f"{EXCESSIVE}: the request needs {records} metadata records, "
                      f"at most {MAX_RECORDS_PER_USER_OP}")


def _topic_records(t, default_partitions: int) -> int:
    n = len(t.assignments) if t.assignments else t.num_partitions
    if n == -1:
        n = default_partitions
    return 1 + max(n, 0) + len(t.configs)


def _check_assignments(assignments, node_id: int) -> int | None:
    """Manual replica assignments: only this broker exists. Returns the partition count."""
    if not assignments:
        return None
    for i, a in enumerate(sorted(assignments, key=lambda a: a.partition_index)):
        if a.partition_index != i:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1")
        if a.broker_ids != [node_id]:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT, f"only broker {node_id} exists"
            )
    return len(assignments)


def _new_topic_configs(configs) -> dict[str, str]:
    """A new topic's configs by name; a null value is INVALID_CONFIG, as in Kafka (it would
    otherwise vanish silently: null means "delete" only when altering)."""
    nulls = [c.name for c in configs if c.value is None]
    if nulls:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"Null value not supported for topic configs: {', '.join(nulls)}")
    return {c.name: c.value for c in configs}


@handles(19, 2, 7)
async def create_topics(ctx, req: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    refusals, describable = admin_authz.create_topics_checks(ctx, req)
    if broker.view.clustered:
        reply = await admin_authz.run_allowed(req, "topics", refusals,
                                              CreateTopicsResponse(throttle_time_ms=0), "topics",
                                              lambda sub: forward(ctx, sub))
        admin_authz.hide_configs(reply.topics, describable)
        return reply
    results = []
    seen: set[str] = set()
    default_n = broker.config.get_int("num.partitions")
    too_large = _too_large(sum(_topic_records(t, default_n)
                               for t, no in zip(req.topics, refusals, strict=True) if no is None))
    for t, refusal in zip(req.topics, refusals, strict=True):
        if refusal is not None:
            results.append(refusal)
            continue
        r = CreatableTopicResult(name=t.name, error_code=0, error_message=None,
                                 num_partitions=-1, replication_factor=-1, configs=None)
        results.append(r)
        try:
            if too_large is not None:
                raise too_large
            if t.name in seen:
                raise KafkaError(Errors.INVALID_REQUEST, f"topic {t.name!r} appears twice")
            seen.add(t.name)
            n = t.num_partitions
            manual = _check_assignments(t.assignments, broker.node_id)
            if manual is not None:
                if n != -1 or t.replication_factor != -1:
                    raise KafkaError(Errors.INVALID_REQUEST,
                                     "assignments exclude num_partitions and replication_factor")
                n = manual
            configs = _new_topic_configs(t.configs)
            await broker.run_blocking(broker.create_topic, t.name, n,
                                      t.replication_factor if manual is None else 1,
                                      configs, validate_only=req.validate_only)
            r.num_partitions = n if n != -1 else broker.config.get_int("num.partitions")
            r.replication_factor = 1
            if not req.validate_only:
                if not broker.has_topic(t.name):
                    continue  # created, then deleted by a DeleteTopics while this one awaited
                r.topic_id = broker.topic_id(t.name)
            r.configs = [
                CreatableTopicConfigs(name=c.name, value=c.value, read_only=False,
                                      config_source=int(c.source), is_sensitive=False)
                for c in broker.describe_topic_configs(t.name if not req.validate_only else None,
                                                       configs)
            ]
        except KafkaError as e:
            r.error_code = e.code
            r.error_message = e.message
    admin_authz.hide_configs(results, describable)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


@handles(20, 1, 6)
async def delete_topics(ctx, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    field, targets = admin_authz.delete_topics_targets(req, ctx.api_version)
    refusals = admin_authz.delete_topics_refusals(ctx, targets)
    if broker.view.clustered:
        return await admin_authz.run_allowed(req, field, refusals,
                                             DeleteTopicsResponse(throttle_time_ms=0),
                                             "responses", lambda sub: forward(ctx, sub))
    results = []
    for (name, topic_id), refusal in zip(targets, refusals, strict=True):
        if refusal is not None:
            results.append(refusal)
            continue
        r = DeletableTopicResult(name=name, error_code=0, error_message=None)
        results.append(r)
        try:
            if name is None and topic_id is not None:
                name = broker.topic_name_by_id(topic_id)
                r.name = name
            if not broker.config.get_bool("delete.topic.enable"):
                raise KafkaError(Errors.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
            if name in INTERNAL_TOPICS:
                raise KafkaError(Errors.INVALID_REQUEST, f"{name} is an internal topic")
            if name is None or not broker.has_topic(name):
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            r.topic_id = broker.topic_id(name)
            await broker.run_blocking(broker.delete_topic, name)  # renames and fsyncs
            if broker.groups is not None:  # its committed offsets go too (Kafka's)
                await broker.groups.delete_topic_offsets({name})
        except KafkaError as e:
            r.error_code = e.code
            r.error_message = e.message
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


@handles(37, 0, 3)
async def create_partitions(ctx, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    refusals = admin_authz.create_partitions_refusals(ctx, req)
    if broker.view.clustered:
        return await admin_authz.run_allowed(req, "topics", refusals,
                                             CreatePartitionsResponse(throttle_time_ms=0),
                                             "results", lambda sub: forward(ctx, sub))
    results = []
    too_large = _too_large(sum(max(0, t.count - broker.partition_count(t.name))
                               for t, no in zip(req.topics, refusals, strict=True)
                               if no is None and broker.has_topic(t.name)))
    for t, refusal in zip(req.topics, refusals, strict=True):
        if refusal is not None:
            results.append(refusal)
            continue
        r = CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        results.append(r)
        try:
            if too_large is not None:
                raise too_large
            if not broker.has_topic(t.name):
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {t.name!r} does not exist")
            current = broker.partition_count(t.name)
            if t.count <= current:
                raise KafkaError(
                    Errors.INVALID_PARTITIONS,
                    f"topic has {current} partitions; the new count must be larger, not {t.count}",
                )
            if t.assignments is not None:
                if len(t.assignments) != t.count - current:
                    raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                     "one assignment per new partition is needed")
                for a in t.assignments:
                    if a.broker_ids != [broker.node_id]:
                        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                         f"only broker {broker.node_id} exists")
            await broker.run_blocking(broker.create_partitions, t.name, t.count,
                                      req.validate_only)
        except KafkaError as e:
            r.error_code = e.code
            r.error_message = e.message
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


@handles(21, 0, 2)
async def delete_records(ctx, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    broker = ctx.broker
    deletable = admin_authz.topics_allowed(ctx, AclOperation.DELETE, [t.name for t in req.topics])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                             low_watermark=-1, error_code=0)
            if t.name not in deletable:  # checked first: refusals reveal nothing
                r.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                parts.append(r)
                continue
            try:
                plog = broker.replicas.leader_partition(t.name, p.partition_index).log
                offset = plog.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > plog.high_watermark:
                    raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                                     f"offset {p.offset} is beyond the high watermark")
                # the checkpoint write (fsyncs) and segment deletion are file work
                await broker.run_blocking(plog.delete_records_before, offset)
                r.low_watermark = plog.log_start_offset
            except KafkaError as e:
                r.error_code = e.code
            parts.append(r)
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
