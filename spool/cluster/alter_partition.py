"""AlterPartition: a partition leader asks the controller to shrink or expand its ISR.

Kafka's rules (``ReplicationControlManager.alterPartition``), in our own code. The
request's broker epoch must be the leader's registered one (else the whole answer is
STALE_BROKER_EPOCH, nothing written). Then per partition, in this order:

    unknown topic                 UNKNOWN_TOPIC_ID (v2+: by id) / UNKNOWN_TOPIC_OR_PARTITION
    unknown partition             UNKNOWN_TOPIC_OR_PARTITION
    leader or partition epoch newer than the controller's   NOT_CONTROLLER
    leader epoch older            FENCED_LEADER_EPOCH
    sender is not the leader      INVALID_REQUEST
    partition epoch older         INVALID_UPDATE_VERSION
    new ISR not a duplicate-free subset of the replicas, or without the leader,
    or RECOVERING with more than one member, or RECOVERED -> RECOVERING   INVALID_REQUEST
    an ISR member fenced, in controlled shutdown, unregistered, or (v3) with another
    broker epoch                  INELIGIBLE_REPLICA (v0-1: OPERATION_NOT_ATTEMPTED)

A valid change writes a PartitionChangeRecord (new ISR, leader recovery state; the
leader stays) and answers the partition's state after it: leader, leader epoch, ISR,
partition epoch (the epoch the record will give it). A change to nothing writes
nothing and answers the current state.

An ISR change may finish a partition reassignment (``partition_change``; see
``reassignment``): the removing replicas leave, and if the sender was one of them the
leader moves. The record is written and the sender is answered NEW_LEADER_ELECTED
(v2+; FENCED_LEADER_EPOCH before), so it waits for the metadata, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from spool.cluster.image import NO_LEADER_CHANGE, MetadataImage, PartitionRegistration
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.cluster.partition_change import Election, partition_change
from spool.cluster.topic_ops import unclean_election_enabled
from spool.protocol._generated import AlterPartitionRequest, AlterPartitionResponse
from spool.protocol._generated import alter_partition_response as apr
from spool.protocol.errors import Errors
from spool.protocol.primitives import ZERO_UUID

RECOVERED, RECOVERING = 0, 1


def _broker_states(p: Any, version: int) -> list[tuple[int, int]]:
    if version >= 3:
        return [(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs]
    return [(b, -1) for b in p.new_isr]


def _validate(img: MetadataImage, broker_id: int, part: PartitionRegistration | None,
              p: Any, version: int) -> int:
    if part is None:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    if p.leader_epoch > part.leader_epoch or p.partition_epoch > part.partition_epoch:
        return Errors.NOT_CONTROLLER
    if p.leader_epoch < part.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if broker_id != part.leader:
        return Errors.INVALID_REQUEST
    if p.partition_epoch < part.partition_epoch:
        return Errors.INVALID_UPDATE_VERSION
    states = _broker_states(p, version)
    isr = [b for b, _ in states]
    if len(set(isr)) != len(isr) or not set(isr) <= set(part.replicas) or part.leader not in isr:
        return Errors.INVALID_REQUEST
    if p.leader_recovery_state == RECOVERING and len(isr) > 1:
        return Errors.INVALID_REQUEST
    if part.leader_recovery_state == RECOVERED and p.leader_recovery_state == RECOVERING:
        return Errors.INVALID_REQUEST
    for b, epoch in states:
        reg = img.brokers.get(b)
        if reg is None or not reg.active or (epoch != -1 and epoch != reg.epoch):
            return Errors.INELIGIBLE_REPLICA if version > 1 else Errors.OPERATION_NOT_ATTEMPTED
    return Errors.NONE


def alter_partition(img: MetadataImage, config: ControllerConfig, req: AlterPartitionRequest,
                    version: int) -> ControllerResult[AlterPartitionResponse]:
    """AlterPartition (module doc)."""
    b = img.brokers.get(req.broker_id)
    if b is None or b.epoch != req.broker_epoch:
        return ControllerResult([], AlterPartitionResponse(
            throttle_time_ms=0, error_code=Errors.STALE_BROKER_EPOCH, topics=[]))
    records: list[Any] = []
    topics = []
    for t in req.topics:
        out = apr.TopicData(topic_name=t.topic_name, topic_id=t.topic_id, partitions=[])
        topics.append(out)
        topic = img.topics_by_id.get(t.topic_id) if version > 1 else img.topic(t.topic_name)
        if topic is None or (version > 1 and t.topic_id == ZERO_UUID):
            code = Errors.UNKNOWN_TOPIC_ID if version > 1 else Errors.UNKNOWN_TOPIC_OR_PARTITION
            out.partitions += [apr.PartitionData(partition_index=p.partition_index,
                                                 error_code=code) for p in t.partitions]
            continue
        election = (Election.UNCLEAN if unclean_election_enabled(img, config, topic.name)
                    else Election.ONLINE)
        for p in t.partitions:
            part = topic.partitions.get(p.partition_index)
            code = _validate(img, req.broker_id, part, p, version)
            if code != Errors.NONE:
                out.partitions.append(apr.PartitionData(partition_index=p.partition_index,
                                                        error_code=code))
                continue
            assert part is not None
            rec = partition_change(
                topic.topic_id, p.partition_index, part,
                lambda r: r in img.brokers and img.brokers[r].active,
                target_isr=[s for s, _ in _broker_states(p, version)], election=election,
                leader_recovery_state=p.leader_recovery_state)
            if rec is not None:
                records.append(rec)
                part = part.merge(rec)
                if rec.leader not in (NO_LEADER_CHANGE, req.broker_id):
                    out.partitions.append(apr.PartitionData(
                        partition_index=p.partition_index,
                        error_code=Errors.NEW_LEADER_ELECTED if version > 1
                        else Errors.FENCED_LEADER_EPOCH))
                    continue
            out.partitions.append(apr.PartitionData(
                partition_index=p.partition_index, error_code=0, leader_id=part.leader,
                leader_epoch=part.leader_epoch, isr=list(part.isr),
                leader_recovery_state=part.leader_recovery_state,
                partition_epoch=part.partition_epoch))
    return ControllerResult(records, AlterPartitionResponse(throttle_time_ms=0, error_code=0,
                                                           topics=topics))
