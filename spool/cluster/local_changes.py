"""``local_changes(old, new, broker_id)``: what a new metadata image asks of one broker.

A broker that follows the metadata log publishes each new image and acts on the
difference for itself (Kafka's ``TopicsDelta.localChanges``):

    deletes    partitions it held a replica of in ``old`` and does not in ``new``
               (the topic was deleted, or the replica was moved away): stop and
               delete the local log
    leaders    partitions it leads in ``new`` whose registration is new or changed
               (became leader, new leader epoch, ISR or replicas changed)
    followers  partitions it is a replica of, not leading, in ``new`` whose
               registration is new or changed: become (or stay) a follower of
               ``registration.leader`` (-1: no leader yet)

A partition whose registration did not change appears nowhere. Topics the two
images share unchanged are skipped by identity, so the diff costs what changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from spool.cluster.image import MetadataImage, PartitionRegistration, TopicImage


class TopicIdPartition(NamedTuple):
    """A partition by topic id, with the topic's name (the log dir is named by it)."""

    topic_id: UUID
    topic: str
    partition: int


@dataclass(frozen=True)
class LocalReplicaChanges:
    """One broker's part of an image change (module doc)."""

    deletes: frozenset[TopicIdPartition]
    leaders: Mapping[TopicIdPartition, PartitionRegistration]
    followers: Mapping[TopicIdPartition, PartitionRegistration]

    def __bool__(self) -> bool:
        return bool(self.deletes or self.leaders or self.followers)


def local_changes(old: MetadataImage, new: MetadataImage, broker_id: int) -> LocalReplicaChanges:
    """What ``broker_id`` must do to go from ``old`` to ``new`` (module doc)."""
    deletes: set[TopicIdPartition] = set()
    leaders: dict[TopicIdPartition, PartitionRegistration] = {}
    followers: dict[TopicIdPartition, PartitionRegistration] = {}
    for tid, before in old.topics_by_id.items():
        after = new.topics_by_id.get(tid)
        if after is before:
            continue
        for pid, p in before.partitions.items():
            if broker_id in p.replicas:
                q = None if after is None else after.partitions.get(pid)
                if q is None or broker_id not in q.replicas:
                    deletes.add(TopicIdPartition(tid, before.name, pid))
    for tid, after in new.topics_by_id.items():
        before = old.topics_by_id.get(tid)
        if after is before:
            continue
        _changed(before, after, broker_id, leaders, followers)
    return LocalReplicaChanges(frozenset(deletes), leaders, followers)


def _changed(before: TopicImage | None, after: TopicImage, broker_id: int,
             leaders: dict, followers: dict) -> None:
    for pid, p in after.partitions.items():
        if broker_id not in p.replicas:
            continue
        prev = None if before is None else before.partitions.get(pid)
        if prev == p:
            continue
        key = TopicIdPartition(after.topic_id, after.name, pid)
        (leaders if p.leader == broker_id else followers)[key] = p
