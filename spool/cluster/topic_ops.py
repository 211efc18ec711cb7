"""Topic writes of the controller: CreateTopics, CreatePartitions, DeleteTopics, ISR changes.

Each function computes, from one image, the records to write and the response as
Kafka's controller answers it (``ReplicationControlManager``): one error code and
message per topic, in request order; one bad topic never fails the others, except
that a request needing more than ``MAX_RECORDS_PER_USER_OP`` (10,000) records fails
whole with POLICY_VIOLATION, as the single-node path does. ``validate_only`` checks
everything and writes nothing.

CreateTopics: names are checked by ``spool.storage.manager.validate_topic_name``
(INVALID_TOPIC), configs by ``spool.storage.config.validate_topic_overrides``
(INVALID_CONFIG); a name that differs from an existing one only by '.' versus '_'
collides (INVALID_TOPIC); a name given twice is INVALID_REQUEST for both. Without
assignments, ``num_partitions`` and ``replication_factor`` -1 take
``num.partitions`` / ``default.replication.factor`` and ``placement.place`` puts the
replicas on the brokers not in controlled shutdown (INVALID_REPLICATION_FACTOR when
they are too few or all fenced). Manual assignments must name registered brokers,
once each, the same number for every partition, partitions 0..n-1, at least one
active broker each (INVALID_REPLICA_ASSIGNMENT). A new partition's ISR is its
active replicas, its leader the first of them, epochs 0. Records: TopicRecord, its
ConfigRecords, then its PartitionRecords.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID

from spool.cluster.image import (
    BROKER_RESOURCE,
    NO_LEADER,
    TOPIC_RESOURCE,
    MetadataImage,
    PartitionRegistration,
)
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.cluster.partition_change import Election, partition_change
from spool.cluster.placement import UsableBroker, place
from spool.protocol._generated.config_record import ConfigRecord
from spool.protocol._generated.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from spool.protocol._generated.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from spool.protocol._generated.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from spool.protocol._generated.partition_change_record import PartitionChangeRecord
from spool.protocol._generated.remove_topic_record import RemoveTopicRecord
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.primitives import ZERO_UUID
from spool.storage.config import describe_topic_configs, validate_topic_overrides
from spool.storage.manager import validate_topic_name
from spool.storage.metadata import EXCESSIVE, MAX_RECORDS_PER_USER_OP

METADATA_TOPIC_ID = UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID; never a topic's id


def usable_brokers(img: MetadataImage) -> list[UsableBroker]:
    """Brokers that may get new replicas: registered, not in controlled shutdown."""
    return [UsableBroker(b.broker_id, b.rack, b.fenced) for b in img.brokers.values()
            if not b.in_controlled_shutdown]


def new_topic_id(img: MetadataImage, rng: random.Random, taken: set[UUID]) -> UUID:
    while True:
        tid = UUID(int=rng.getrandbits(128), version=4)
        if tid not in img.topics_by_id and tid not in taken and tid != METADATA_TOPIC_ID:
            return tid


def _too_large(records: int) -> KafkaError | None:
    if records <= MAX_RECORDS_PER_USER_OP:
        return None
    return KafkaError(Errors.POLICY_VIOLATION,
                      f"{EXCESSIVE}: the request needs {records} metadata records, "
                      f"at most {MAX_RECORDS_PER_USER_OP}")


def _new_partition(replicas: list[int], img: MetadataImage, what: str) -> PartitionRegistration:
    isr = [r for r in replicas if r in img.brokers and img.brokers[r].active]
    if not isr:
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         f"All brokers specified in the manual partition assignment for "
                         f"{what} are fenced or in controlled shutdown.")
    return PartitionRegistration(replicas=tuple(replicas), isr=tuple(isr), leader=isr[0])


def check_manual_assignment(replicas: list[int], img: MetadataImage, rf: int | None) -> None:
    if not replicas:
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for b in sorted(replicas):
        if b not in img.brokers:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {b}, but no "
                             f"such broker is registered.")
    if len(set(replicas)) != len(replicas):
        dup = next(b for b in sorted(replicas) if replicas.count(b) > 1)
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes the broker {dup} more "
                         f"than once.")
    if rf is not None and len(replicas) != rf:
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with "
                         f"{len(replicas)} replica(s), but this is not consistent with "
                         f"previous partitions, which have {rf} replica(s).")


def _assigned_partitions(t: Any, img: MetadataImage) -> list[PartitionRegistration]:
    if t.replication_factor != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was "
                         "specified, but replication factor was not set to -1.")
    if t.num_partitions != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was "
                         "specified, but numPartitions was not set to -1.")
    by_index: dict[int, list[int]] = {}
    rf = None
    for a in t.assignments:
        if a.partition_index in by_index:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT, f"Found multiple manual "
                             f"partition assignments for partition {a.partition_index}")
        check_manual_assignment(list(a.broker_ids), img, rf)
        rf = len(a.broker_ids)
        by_index[a.partition_index] = list(a.broker_ids)
    if sorted(by_index) != list(range(len(by_index))):
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         "partitions should be a consecutive 0-based integer sequence")
    return [_new_partition(by_index[i], img, f"partition {i}") for i in range(len(by_index))]


def _placed_partitions(t: Any, img: MetadataImage, config: ControllerConfig,
                       rng: random.Random) -> list[PartitionRegistration]:
    if t.replication_factor < -1 or t.replication_factor == 0:
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be "
                         "larger than 0, or -1 to use the default value.")
    if t.num_partitions < -1 or t.num_partitions == 0:
        raise KafkaError(Errors.INVALID_PARTITIONS,
                         "Number of partitions was set to an invalid non-positive value.")
    n = config.num_partitions if t.num_partitions == -1 else t.num_partitions
    rf = config.default_replication_factor if t.replication_factor == -1 else t.replication_factor
    _too_many(n)
    out = []
    for replicas in place(usable_brokers(img), n, rf, rng):
        isr = [r for r in replicas if img.brokers[r].active]
        out.append(PartitionRegistration(replicas=tuple(replicas), isr=tuple(isr),
                                         leader=isr[0]))
    return out


def _too_many(partitions: int) -> None:
    err = _too_large(partitions)
    if err is not None:
        raise err


def _new_topic_configs(t: Any) -> dict[str, str]:
    nulls = [c.name for c in t.configs if c.value is None]
    if nulls:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"Null value not supported for topic configs: {', '.join(nulls)}")
    given = {c.name: c.value for c in t.configs}
    return {k: v for k, v in validate_topic_overrides(given).items() if v is not None}


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def create_topics(img: MetadataImage, config: ControllerConfig, rng: random.Random,
                  req: Any) -> ControllerResult[CreateTopicsResponse]:
    """CreateTopics (module doc)."""
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    collisions = {_collision_key(n): n for n in img.topics_by_name}
    cluster_default = img.config(BROKER_RESOURCE, "")
    records: list[Any] = []
    results = []
    taken: set[UUID] = set()
    for t in req.topics:
        r = CreatableTopicResult(name=t.name, error_code=0, error_message=None,
                                 num_partitions=-1, replication_factor=-1, configs=None)
        results.append(r)
        try:
            if counts[t.name] > 1:
                raise KafkaError(Errors.INVALID_REQUEST, "Duplicate topic name.")
            validate_topic_name(t.name)
            if t.name in img.topics_by_name:
                raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            other = collisions.get(_collision_key(t.name))
            if other is not None:
                raise KafkaError(Errors.INVALID_TOPIC,
                                 f"Topic '{t.name}' collides with existing topic: {other}")
            configs = _new_topic_configs(t)
            parts = (_assigned_partitions(t, img) if t.assignments
                     else _placed_partitions(t, img, config, rng))
        except KafkaError as e:
            r.error_code, r.error_message = e.code, e.message
            continue
        collisions[_collision_key(t.name)] = t.name
        tid = new_topic_id(img, rng, taken)
        taken.add(tid)
        r.topic_id, r.num_partitions = tid, len(parts)
        r.replication_factor = len(parts[0].replicas)
        r.configs = [CreatableTopicConfigs(name=c.name, value=c.value, read_only=False,
                                           config_source=int(c.source), is_sensitive=False)
                     for c in describe_topic_configs(configs, {}, config.static_props,
                                                     cluster_default)]
        records.append(TopicRecord(name=t.name, topic_id=tid))
        records += [ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name,
                                 name=k, value=v) for k, v in configs.items()]
        records += [p.to_record(tid, i) for i, p in enumerate(parts)]
    _fail_if_too_large(records, results)
    response = CreateTopicsResponse(throttle_time_ms=0, topics=results)
    return ControllerResult([] if req.validate_only else records, response)


def _fail_if_too_large(records: list[Any], results: Sequence[Any]) -> None:
    err = _too_large(len(records))
    if err is None:
        return
    records.clear()
    for r in results:
        if r.error_code == 0:
            r.error_code, r.error_message = err.code, err.message
            if isinstance(r, CreatableTopicResult):
                r.topic_id, r.configs, r.num_partitions, r.replication_factor = (
                    ZERO_UUID, None, -1, -1)


def create_partitions(img: MetadataImage, config: ControllerConfig, rng: random.Random,
                      req: Any) -> ControllerResult[CreatePartitionsResponse]:
    """CreatePartitions: grow topics to ``count`` partitions, placed or assigned."""
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    records: list[Any] = []
    results = []
    for t in req.topics:
        r = CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        results.append(r)
        try:
            if counts[t.name] > 1:
                raise KafkaError(Errors.INVALID_REQUEST, "Duplicate topic name.")
            records += _new_partitions(img, rng, t)
        except KafkaError as e:
            r.error_code, r.error_message = e.code, e.message
    _fail_if_too_large(records, results)
    response = CreatePartitionsResponse(throttle_time_ms=0, results=results)
    return ControllerResult([] if req.validate_only else records, response)


def _new_partitions(img: MetadataImage, rng: random.Random, t: Any) -> list[Any]:
    topic = img.topic(t.name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist.")
    current = len(topic.partitions)
    if t.count < current:
        raise KafkaError(Errors.INVALID_PARTITIONS, f"The topic {t.name} currently has "
                         f"{current} partition(s); {t.count} would not be an increase.")
    if t.count == current:
        raise KafkaError(Errors.INVALID_PARTITIONS,
                         f"Topic already has {current} partition(s).")
    adding = t.count - current
    _too_many(adding)
    rf = len(topic.partitions[0].replicas)
    if t.assignments is not None:
        if len(t.assignments) != adding:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {adding} additional partition(s), but only "
                             f"{len(t.assignments)} assignment(s) were specified.")
        parts = []
        for i, a in enumerate(t.assignments):
            check_manual_assignment(list(a.broker_ids), img, rf)
            parts.append(_new_partition(list(a.broker_ids), img, f"partition {current + i}"))
    else:
        parts = []
        for replicas in place(usable_brokers(img), adding, rf, rng):
            isr = [r for r in replicas if img.brokers[r].active]
            parts.append(PartitionRegistration(replicas=tuple(replicas), isr=tuple(isr),
                                               leader=isr[0]))
    return [p.to_record(topic.topic_id, current + i) for i, p in enumerate(parts)]


def delete_topics(img: MetadataImage, config: ControllerConfig,
                  targets: Sequence[tuple[str | None, UUID | None]]
                  ) -> ControllerResult[DeleteTopicsResponse]:
    """DeleteTopics by (name, None) or (None, topic id): one RemoveTopicRecord each.
    TOPIC_DELETION_DISABLED (delete.topic.enable=false), UNKNOWN_TOPIC_OR_PARTITION,
    UNKNOWN_TOPIC_ID, INVALID_REQUEST for a topic named twice."""
    seen: dict[UUID, int] = {}
    for name, tid in targets:
        t = img.topics_by_id.get(tid) if tid is not None else img.topic(name or "")
        if t is not None:
            seen[t.topic_id] = seen.get(t.topic_id, 0) + 1
    records: list[Any] = []
    results = []
    for name, tid in targets:
        r = DeletableTopicResult(name=name, error_code=0, error_message=None)
        if tid is not None:
            r.topic_id = tid
        results.append(r)
        try:
            if not config.delete_topic_enable:
                raise KafkaError(Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            if tid is not None:
                t = img.topics_by_id.get(tid)
                if t is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_ID,
                                     "This server does not host this topic ID.")
            else:
                t = img.topic(name or "")
                if t is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Topic '{name}' does not exist.")
            r.name, r.topic_id = t.name, t.topic_id
            if seen[t.topic_id] > 1:
                raise KafkaError(Errors.INVALID_REQUEST, "Duplicate topic name or id.")
            records.append(RemoveTopicRecord(topic_id=t.topic_id))
        except KafkaError as e:
            r.error_code, r.error_message = e.code, e.message
    _fail_if_too_large(records, results)
    return ControllerResult(records, DeleteTopicsResponse(throttle_time_ms=0, responses=results))


def unclean_election_enabled(img: MetadataImage, config: ControllerConfig, topic: str) -> bool:
    """``unclean.leader.election.enable``: topic, cluster default, static, else false."""
    key = "unclean.leader.election.enable"
    for layer in (img.config(TOPIC_RESOURCE, topic), img.config(BROKER_RESOURCE, ""),
                  config.static_props):
        value = layer.get(key)
        if value is not None:
            return str(value).lower() == "true"
    return False


def isr_changes(img: MetadataImage, config: ControllerConfig,
                select: Callable[[PartitionRegistration], bool], *,
                remove: int = NO_LEADER, add: int = NO_LEADER
                ) -> Iterator[PartitionChangeRecord]:
    """PartitionChangeRecords for the selected partitions (by topic name, partition):
    ``remove`` leaves their ISR and may not lead; ``add`` may lead even while the image
    still shows it fenced (it is being unfenced); others must be active to lead."""
    def acceptable(r: int) -> bool:
        if r == remove:
            return False
        b = img.brokers.get(r)
        return r == add or (b is not None and b.active)

    for name in sorted(img.topics_by_name):
        t = img.topics_by_name[name]
        election = (Election.UNCLEAN if unclean_election_enabled(img, config, name)
                    else Election.ONLINE)
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            if not select(p):
                continue
            rec = partition_change(t.topic_id, pid, p, acceptable,
                                   target_isr=[r for r in p.isr if r != remove],
                                   election=election)
            if rec is not None:
                yield rec
