"""Topics' partitions as the cluster reports them: leader, replicas, ISR, offline replicas,
and the replicas an ongoing reassignment adds or removes.

``describe(bootstrap, timeout, names)`` asks one broker (``spool.cli.wire``):
Metadata v12 (``names`` None: every topic) and, when the broker serves it,
ListPartitionReassignments for those topics. A broker that serves no
ListPartitionReassignments (or answers it with an error) simply shows no
reassignment. ``PartitionInfo.under_replicated`` is Kafka's rule
(``TopicCommand.isUnderReplicated``): the ISR is smaller than the replica set less
the replicas being added.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from spool.cli import wire
from spool.cli.common import CliError, no_such_topic
from spool.protocol._generated import ListPartitionReassignmentsRequest
from spool.protocol._generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsTopics,
)
from spool.protocol.errors import Errors

_MISSING = (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.INVALID_TOPIC_EXCEPTION)


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas) - len(self.adding)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < self.replication_factor

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PartitionInfo:
        return cls(**doc)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    error_code: int
    topic_id: uuid.UUID
    internal: bool
    partitions: list[PartitionInfo]

    def to_json(self, configs: dict[str, str]) -> dict[str, Any]:
        first = self.partitions[0].replication_factor if self.partitions else 0
        return {"name": self.name, "topic_id": str(self.topic_id), "internal": self.internal,
                "replication_factor": first,
                "partitions": [p.to_json() for p in self.partitions], "configs": configs}


def check_exists(found: dict[str, TopicInfo], name: str) -> None:
    """CliError (exit 1) unless ``name`` was described."""
    t = found.get(name)
    if t is None or t.error_code in _MISSING:
        raise no_such_topic(name)
    if t.error_code == Errors.TOPIC_AUTHORIZATION_FAILED:
        raise CliError(f"'{name}': {wire.error_text(t.error_code)}", 1)


def describe(bootstrap: str, timeout: float, names: list[str] | None) -> dict[str, TopicInfo]:
    return wire.run(bootstrap, timeout, lambda admin: _describe(admin, names))


async def ongoing_reassignments(admin: wire.WireAdmin, topics: dict[str, list[int]] | None
                                ) -> dict[tuple[str, int], Any] | None:
    """(topic, partition) -> OngoingPartitionReassignment; None when the broker cannot say."""
    if 46 not in admin.served:
        return None
    req = ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None if topics is None else [
        ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
        for t, ps in topics.items()])
    resp = await admin.request(req, 0)
    if resp.error_code:
        return None
    return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}


async def _describe(admin: wire.WireAdmin, names: list[str] | None) -> dict[str, TopicInfo]:
    md = await admin.metadata(names)
    listed = {t.name: [p.partition_index for p in t.partitions]
              for t in md.topics if t.error_code not in _MISSING and t.partitions}
    moving = (await ongoing_reassignments(admin, listed)) if listed else None
    out = {}
    for t in md.topics:
        parts = []
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            r = (moving or {}).get((t.name, p.partition_index))
            parts.append(PartitionInfo(
                partition=p.partition_index, leader=p.leader_id, replicas=list(p.replica_nodes),
                isr=list(p.isr_nodes), offline=list(p.offline_replicas),
                adding=list(r.adding_replicas) if r else [],
                removing=list(r.removing_replicas) if r else []))
        out[t.name] = TopicInfo(t.name, t.error_code, t.topic_id, t.is_internal, parts)
    return out
