"""``partition_change(...)``: the PartitionChangeRecord that moves a partition to a target.

The rules are Kafka's ``PartitionChangeBuilder`` (metadata.version 3.6: no eligible
leader replicas, no leader epoch bump on a mere ISR shrink), in our own code:

* The target ISR replaces the ISR, except that an ISR never becomes empty: when the
  last in-sync replica goes (its broker fenced), the ISR keeps it and the partition
  is left without a leader (-1) until that broker comes back.
* Election ``ONLINE`` keeps the current leader while it is in the target ISR and
  acceptable (``acceptable(broker_id)``: active, and not the broker being removed);
  otherwise the first replica, in replica order, that is in the target ISR and
  acceptable; otherwise none (-1). ``PREFERRED`` tries the first replica before the
  current leader. ``UNCLEAN`` (``unclean.leader.election.enable``) falls back to the
  first acceptable replica outside the ISR: the ISR becomes that one broker and the
  leader recovery state RECOVERING (1).
* Replaying the record bumps ``partition_epoch`` always and ``leader_epoch`` when the
  leader field is set. No change at all gives ``None`` (nothing to write).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from uuid import UUID

from spool.cluster.image import NO_LEADER, PartitionRegistration
from spool.protocol._generated.partition_change_record import PartitionChangeRecord

RECOVERING = 1  # LeaderRecoveryState after an unclean election


class Election(Enum):
    ONLINE = "online"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


def partition_change(
    topic_id: UUID,
    partition_id: int,
    part: PartitionRegistration,
    acceptable: Callable[[int], bool],
    *,
    target_isr: Sequence[int] | None = None,
    election: Election = Election.ONLINE,
    leader_recovery_state: int | None = None,
) -> PartitionChangeRecord | None:
    """The record taking ``part`` to ``target_isr`` (and ``leader_recovery_state``) with a
    leader elected (module doc)."""
    isr = list(part.isr if target_isr is None else target_isr)
    rec = PartitionChangeRecord(topic_id=topic_id, partition_id=partition_id)
    leader, unclean = _elect(part, isr, acceptable, election)
    if leader != part.leader:
        rec.leader = leader
        if unclean:
            rec.isr = [leader]
            if part.leader_recovery_state != RECOVERING:
                rec.leader_recovery_state = RECOVERING
    if rec.isr is None and isr and tuple(isr) != part.isr:
        rec.isr = isr
    if (leader_recovery_state is not None and rec.leader_recovery_state == -1
            and leader_recovery_state != part.leader_recovery_state):
        rec.leader_recovery_state = leader_recovery_state
    if rec.isr is None and rec.leader == -2 and rec.leader_recovery_state == -1:
        return None
    return rec


def _elect(part: PartitionRegistration, isr: list[int], acceptable: Callable[[int], bool],
           election: Election) -> tuple[int, bool]:
    def valid(r: int) -> bool:
        return r in isr and acceptable(r)

    if election is Election.PREFERRED and part.replicas and valid(part.replicas[0]):
        return part.replicas[0], False
    if valid(part.leader):
        return part.leader, False
    for r in part.replicas:
        if valid(r):
            return r, False
    if election is Election.UNCLEAN:
        for r in part.replicas:
            if acceptable(r):
                return r, True
    return NO_LEADER, False
