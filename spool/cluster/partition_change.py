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
* Reassignment (``target_replicas`` / ``target_removing`` / ``target_adding``, each
  defaulting to the partition's own): before the election, a reassignment in progress
  completes when the target ISR, without the removing replicas, still has a member
  and holds every replica that stays (Kafka's ``PartitionReassignmentReplicas.
  maybeCompleteReassignment``): the removing replicas leave the replicas and the ISR,
  adding/removing become empty. So *any* change (an AlterPartition that puts the last
  adding replica in the ISR, a broker fenced, the reassignment request itself) may
  finish one. The election then chooses among the target replicas; a replica list
  that loses a member always bumps the leader epoch (the leader field is set, to the
  same leader if it stays).
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
    target_replicas: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
) -> PartitionChangeRecord | None:
    """The record taking ``part`` to ``target_isr`` (and ``leader_recovery_state``, and a
    reassignment's replicas) with a leader elected (module doc)."""
    isr = list(part.isr if target_isr is None else target_isr)
    replicas = list(part.replicas if target_replicas is None else target_replicas)
    removing = list(part.removing_replicas if target_removing is None else target_removing)
    adding = list(part.adding_replicas if target_adding is None else target_adding)
    done = complete_reassignment(replicas, removing, adding, isr)
    if done is not None:
        replicas, isr = done
        removing, adding = [], []
    rec = PartitionChangeRecord(topic_id=topic_id, partition_id=partition_id)
    leader, unclean = _elect(part, replicas, isr, acceptable, election)
    if leader != part.leader:
        rec.leader = leader
        if unclean:
            rec.isr = [leader]
            if part.leader_recovery_state != RECOVERING:
                rec.leader_recovery_state = RECOVERING
    elif not set(part.replicas) <= set(replicas):
        rec.leader = part.leader  # a replica leaves: a new leader epoch (Kafka's rule)
    if rec.isr is None and isr and tuple(isr) != part.isr:
        rec.isr = isr
    if (leader_recovery_state is not None and rec.leader_recovery_state == -1
            and leader_recovery_state != part.leader_recovery_state):
        rec.leader_recovery_state = leader_recovery_state
    if replicas and tuple(replicas) != part.replicas:
        rec.replicas = replicas
    if tuple(removing) != part.removing_replicas:
        rec.removing_replicas = removing
    if tuple(adding) != part.adding_replicas:
        rec.adding_replicas = adding
    if (rec.isr is None and rec.leader == -2 and rec.leader_recovery_state == -1
            and rec.replicas is None and rec.removing_replicas is None
            and rec.adding_replicas is None):
        return None
    return rec


def complete_reassignment(replicas: Sequence[int], removing: Sequence[int],
                          adding: Sequence[int], isr: Sequence[int]
                          ) -> tuple[list[int], list[int]] | None:
    """(replicas, ISR) once a reassignment in progress can finish with ``isr``, else None:
    without the removing replicas the ISR keeps a member and holds every replica left."""
    if not removing and not adding:
        return None
    new_isr = [r for r in isr if r not in removing]
    new_replicas = [r for r in replicas if r not in removing]
    if not new_isr or not new_replicas or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def _elect(part: PartitionRegistration, replicas: list[int], isr: list[int],
           acceptable: Callable[[int], bool], election: Election) -> tuple[int, bool]:
    def valid(r: int) -> bool:
        return r in isr and acceptable(r)

    if election is Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if valid(part.leader):
        return part.leader, False
    for r in replicas:
        if valid(r):
            return r, False
    if election is Election.UNCLEAN:
        for r in replicas:
            if acceptable(r):
                return r, True
    return NO_LEADER, False
