"""KIP-848 consumer group operations: ConsumerGroupHeartbeat and its timers, as Kafka's
GroupMetadataManager.consumerGroupHeartbeat.

``heartbeat(coord, req) -> (Result, HeartbeatAnswer)`` (no I/O; time from the coordinator's
clock). One heartbeat:

1. validates the request (INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION) and finds the group: created by a join (member epoch 0),
   else GROUP_ID_NOT_FOUND; an empty classic group (offsets only) becomes a consumer group,
   a group of another type is GROUP_ID_NOT_FOUND; a new member beyond
   ``group.consumer.max.size`` is GROUP_MAX_SIZE_REACHED.
2. finds the member: a dynamic member must exist unless it joins (UNKNOWN_MEMBER_ID); its
   epoch must be the one the coordinator knows, or the previous one when it owns no more than
   its assigned partitions (a lost response), else FENCED_MEMBER_EPOCH. A static member
   (``instance_id``) joining takes over the instance's member only once that one left
   with epoch -2 (else UNRELEASED_INSTANCE_ID), keeping its assignment; any other request
   naming an instance must name its current member (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID).
3. bumps the group epoch when the member is new or changed its subscribed names or regex,
   or the subscribed topics' metadata changed (topic created, deleted, partitions added:
   seen by the next heartbeat). Regular expressions (RE2/J syntax: ``spool.coordinator.regex``)
   are resolved by the broker against all the topic names, as Kafka, at each heartbeat of
   the group; each result is kept as a record (type 16) and a change bumps the epoch.
4. when the group epoch is ahead of the assignment epoch, computes the target assignment
   with the server assignor (``spool.coordinator.assignors``: the member's
   ``server_assignor``, the most asked for in the group, else the first of
   ``group.consumer.assignors``) and writes the members' targets that changed.
5. reconciles the member towards its target as Kafka's CurrentAssignmentBuilder: the
   partitions it must give up go to ``pending_revocation`` and its epoch stays until a
   heartbeat reports it no longer owns them; a partition still held (assigned or pending
   revocation) by another member is not given until that member released it
   (UNRELEASED_PARTITIONS). So no partition is ever assigned to two members at once. A
   member that must revoke has ``rebalance_timeout_ms`` to do it, else it is fenced.
6. restarts the member's session timer (``consumer.session.timeout.ms`` of the group):
   a member silent that long is fenced (removed; the group epoch bumps).

Leaving: epoch -1 removes the member (tombstones) and bumps the group epoch; a static
member's epoch -2 keeps its place and assignment (epoch -2) until its session times out or
a new member with the same instance id takes it over.

Every change is a record applied at once through ``spool.coordinator.consumer_group.apply``
(its module doc); nothing is changed before validation is over, so an error leaves no trace.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from spool.coordinator import regex
from spool.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    TYPES,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    ResolvedRegex,
    TopicMetadata,
    apply,
    current_record,
    epoch_record,
    member_record,
    metadata_record,
    regex_record,
    replay,
    target_epoch_record,
    target_record,
)
from spool.coordinator.coordinator import register_replayer
from spool.coordinator.records import encode
from spool.coordinator.result import OutRecord, Result
from spool.protocol.errors import Errors
from spool.util.logs import fields

if TYPE_CHECKING:
    from spool.coordinator.coordinator import GroupCoordinator

log = logging.getLogger("spool.coordinator")

register_replayer(TYPES, replay)

SESSION_KEY = "cg-session"
REBALANCE_KEY = "cg-rebalance"
JOIN_KEY = "cg-join"  # a classic member told to rejoin (consumer_classic)
SYNC_KEY = "cg-sync"  # a classic member that joined and must sync


Describable = Callable[[list[str]], Iterable[str]]


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    # the topic names (of those given) the principal may DESCRIBE; None: no authorizer
    describable: Describable | None = None


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged, not sent


class GroupError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---- configuration (per group: broker.group_configs, else the broker keys)

def session_timeout_ms(coord: GroupCoordinator, group_id: str) -> int:
    return int(coord.group_config(group_id, "consumer.session.timeout.ms"))


def heartbeat_interval_ms(coord: GroupCoordinator, group_id: str) -> int:
    return int(coord.group_config(group_id, "consumer.heartbeat.interval.ms"))


def assignors(coord: GroupCoordinator) -> tuple[str, ...]:
    return tuple(coord.config.consumer_assignors)


# ---- records applied at once

def _commit(coord: GroupCoordinator, out: Result, group_id: str, recs: list) -> None:
    for key, value in recs:
        k, v = encode(key, value)
        out.records.append(OutRecord(group_id, k, v))
        apply(coord, key, value)


# ---- the heartbeat

def heartbeat(coord: GroupCoordinator, req: HeartbeatRequest) -> tuple[Result, HeartbeatAnswer]:
    out = Result()
    try:
        _validate(coord, req)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return out, _leave(coord, req, out)
        return out, _heartbeat(coord, req, out)
    except GroupError as e:
        # ``out`` holds records only when a classic group was upgraded before the error: the
        # conversion stands (its records are applied), the member's request fails
        return out, HeartbeatAnswer(e.code, e.message, req.member_id or None, req.member_epoch)


def blank(value: str | None) -> bool:
    """Given but only whitespace: Kafka's throwIfEmptyString refuses it."""
    return value is not None and not value.strip()


def _validate(coord: GroupCoordinator, req: HeartbeatRequest) -> None:
    invalid = Errors.INVALID_REQUEST
    if (req.version >= 1 or req.member_epoch > 0
            or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and not req.member_id.strip():
        raise GroupError(invalid, "MemberId can't be empty.")
    if not req.group_id.strip():
        raise GroupError(invalid, "GroupId can't be empty.")
    if blank(req.instance_id):
        raise GroupError(invalid, "InstanceId can't be empty.")
    if blank(req.rack_id):
        raise GroupError(invalid, "RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise GroupError(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            raise GroupError(invalid, "TopicPartitions must be empty when (re-)joining.")
        if not req.subscribed_topic_names and not req.subscribed_topic_regex:
            raise GroupError(invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set "
                                      "in first request.")
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise GroupError(invalid, "InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise GroupError(invalid, "MemberEpoch is invalid.")
    names = assignors(coord)
    if req.server_assignor is not None and req.server_assignor not in names:
        raise GroupError(Errors.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {req.server_assignor} is not supported. Supported "
                         f"assignors: {', '.join(names)}.")
    if req.subscribed_topic_regex:
        message = regex.validate(req.subscribed_topic_regex)
        if message is not None:
            raise GroupError(Errors.INVALID_REGULAR_EXPRESSION, message)


def consumer_group(coord: GroupCoordinator, group_id: str) -> ConsumerGroup:
    group = coord.groups.get(group_id)
    if group is None:
        raise GroupError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    if not isinstance(group, ConsumerGroup):
        raise GroupError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
    return group


def _group_for_join(coord: GroupCoordinator, group_id: str, out: Result) -> ConsumerGroup:
    from spool.coordinator import consumer_classic

    group = coord.groups.get(group_id)
    if group is None:
        return ConsumerGroup(group_id)  # registered when its first record is applied
    if isinstance(group, ConsumerGroup):
        return group
    if group.type == "classic" and not group.members and not getattr(group, "pending_members",
                                                                     None):
        return ConsumerGroup(group_id)  # an empty classic group (offsets only) is replaced
    if group.type == "classic" and consumer_classic.can_upgrade(coord, group):
        return consumer_classic.upgrade(coord, group, out)
    raise GroupError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")


def _owned_subset(owned, assigned: Partitions) -> bool:
    if owned is None:
        return False
    return all(set(ps) <= assigned.get(tid, frozenset()) for tid, ps in owned)


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned) -> None:
    if epoch > member.member_epoch:
        raise GroupError(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         "member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                        or not _owned_subset(owned, member.assigned)):
        raise GroupError(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a smaller member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         "member must abandon all its partitions and rejoin.")


def _heartbeat(coord: GroupCoordinator, req: HeartbeatRequest, out: Result) -> HeartbeatAnswer:
    group_id = req.group_id
    joining = req.member_epoch == 0
    group = (_group_for_join(coord, group_id, out) if joining
             else consumer_group(coord, group_id))
    check_size(coord, group, req.member_id)
    member_id = req.member_id or coord.new_id()
    member, replaced = find_member(group, member_id, req.instance_id, joining,
                                   req.member_epoch, req.owned)
    pattern = member.subscribed_topic_regex
    if req.subscribed_topic_regex is not None:
        pattern = req.subscribed_topic_regex or None
    updated = replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                              else member.rebalance_timeout_ms),
        server_assignor=(req.server_assignor if req.server_assignor is not None
                         else member.server_assignor),
        subscribed_topic_names=(tuple(req.subscribed_topic_names)
                                if req.subscribed_topic_names is not None
                                else member.subscribed_topic_names),
        subscribed_topic_regex=pattern,
        client_id=req.client_id, client_host=req.client_host, classic=None)
    reconciled = update_member(coord, group, member, updated, replaced, req.owned, out,
                               req.describable)
    schedule_session_timeout(coord, group_id, member_id)
    full = joining or (req.rebalance_timeout_ms != -1 and req.owned is not None and (
        req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
    changed = reconciled.assigned != member.assigned
    return HeartbeatAnswer(0, None, member_id, reconciled.member_epoch,
                           heartbeat_interval_ms(coord, group_id),
                           dict(reconciled.assigned) if full or changed else None)


def check_size(coord: GroupCoordinator, group: ConsumerGroup, member_id: str) -> None:
    if (len(group.members) >= coord.config.consumer_max_size
            and (not member_id or member_id not in group.members)):
        raise GroupError(Errors.GROUP_MAX_SIZE_REACHED,
                         "The consumer group has reached its maximum capacity of "
                         f"{coord.config.consumer_max_size} members.")


def find_member(group: ConsumerGroup, member_id: str, instance_id: str | None, joining: bool,
                epoch: int | None, owned) -> tuple[ConsumerGroupMember,
                                                   ConsumerGroupMember | None]:
    """The member a request names, or a new one when it joins; and the static member it
    replaces, if any. ``epoch`` None: a classic-protocol member (no epoch check, and it may
    replace a static member that did not leave)."""
    group_id = group.group_id
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            log.info("group %s: member %s joins the consumer group", group_id, member_id)
            return ConsumerGroupMember(member_id), None
        if epoch is not None:
            _check_epoch(member, epoch, owned)
        return member, None
    existing = group.static_member(instance_id)
    if joining and existing is None:
        log.info("group %s: static member %s (instance %s) joins", group_id, member_id,
                 instance_id)
        return group.members.get(member_id) or ConsumerGroupMember(member_id), None
    if joining:
        if (epoch is not None and existing.classic is None
                and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            raise GroupError(Errors.UNRELEASED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} "
                             "cannot join the group because the instance id is owned by "
                             f"{existing.member_id} member.")
        log.info("group %s: static member with instance id %s rejoins as %s, replacing %s",
                 group_id, instance_id, member_id, existing.member_id)
        return replace(existing, member_id=member_id, member_epoch=0,
                       previous_member_epoch=0), existing
    if existing is None:
        raise GroupError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise GroupError(Errors.FENCED_INSTANCE_ID,
                         f"Static member {member_id} with instance id {instance_id} "
                         f"was fenced by member {existing.member_id}.")
    if epoch is not None:
        _check_epoch(existing, epoch, owned)
    return existing, None


def update_member(coord: GroupCoordinator, group: ConsumerGroup, member: ConsumerGroupMember,
                  updated: ConsumerGroupMember, replaced: ConsumerGroupMember | None, owned,
                  out: Result, describable: Describable | None = None) -> ConsumerGroupMember:
    """Steps 1-3 of the module doc for ``member`` becoming ``updated`` (replacing the static
    member ``replaced``): its records are applied; returns the reconciled member."""
    group_id, member_id = group.group_id, updated.member_id
    recs: list = []
    if replaced is not None:
        recs += _remove_member_records(group_id, replaced.member_id)
        recs.append(member_record(group_id, member_id, updated))
        recs.append(target_record(group_id, member_id,
                                  group.target.get(replaced.member_id, {})))
        recs.append(current_record(group_id, member_id, updated))
    new_member = member_id not in group.members and replaced is None
    bump = False
    if new_member or updated.subscription() != member.subscription():
        if replaced is None:
            recs.append(member_record(group_id, member_id, updated))
        bump = (new_member or updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex)

    members = {mid: m for mid, m in group.members.items()
               if replaced is None or mid != replaced.member_id}
    members[member_id] = updated
    regexes, regex_recs = _resolve_regexes(coord, group, members.values(),
                                           describable=describable)
    recs += regex_recs
    metadata = _subscription_metadata(coord, group, members.values(), regexes)
    if metadata != group.subscription_metadata:
        recs.append(metadata_record(group_id, metadata))
        bump = True
    group_epoch = group.group_epoch
    if bump or regex_recs:
        group_epoch += 1
        recs.append(epoch_record(group_id, group_epoch))
        log.debug("group %s: group epoch bumped to %d", group_id, group_epoch)

    # 2. the target assignment
    old_targets = dict(group.target)
    if replaced is not None:
        old_targets[member_id] = old_targets.pop(replaced.member_id, {})
    if group_epoch > group.assignment_epoch:
        targets = _compute_target(coord, group, members, metadata, old_targets, regexes)
        log.info("group %s rebalanced: epoch %d with %d members", group_id, group_epoch,
                 len(members), extra=fields(group=group_id, epoch=group_epoch, members=len(members),
                                            member_ids=sorted(members)[:20]))
        for mid, parts in sorted(targets.items()):
            if old_targets.get(mid) != parts or mid not in group.target:
                recs.append(target_record(group_id, mid, parts))
        recs.append(target_epoch_record(group_id, group_epoch))
        target_epoch, target = group_epoch, targets.get(member_id, {})
    else:
        target_epoch, target = group.assignment_epoch, old_targets.get(member_id, {})

    # 3. reconciliation
    reconciled = updated
    if not updated.is_reconciled_to(target_epoch):
        epochs = group.partition_epochs()
        reconciled = reconcile(updated, target_epoch, target, epochs, owned)
        if reconciled.current() != updated.current() or new_member:
            recs.append(current_record(group_id, member_id, reconciled))
    elif new_member:
        recs.append(current_record(group_id, member_id, reconciled))

    _commit(coord, out, group_id, recs)
    if reconciled.current() != updated.current() and reconciled.classic is None:
        if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
            _schedule_rebalance_timeout(coord, group_id, reconciled)
        else:
            coord.timers.cancel((REBALANCE_KEY, group_id, member_id))
    if replaced is not None and replaced.member_id != member_id:
        _cancel_timers(coord, group_id, replaced.member_id)
    return reconciled


def _resolve_regexes(coord: GroupCoordinator, group: ConsumerGroup,
                     members: Iterable[ConsumerGroupMember], refresh: bool = True,
                     describable: Describable | None = None
                     ) -> tuple[dict[str, ResolvedRegex], list]:
    """The group's regexes resolved against the current topic names (``refresh``; else as
    they were), only the topics ``describable`` keeps (the heartbeating principal's DESCRIBE,
    as Kafka's filterTopicDescribeAuthorizedTopics); records for the results that changed,
    tombstones for the regexes no member uses any more."""
    used = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}
    recs: list = []
    out: dict[str, ResolvedRegex] = {}
    if used:
        names = list(coord.topics.names()) if refresh else []
        for pattern in sorted(used):
            old = group.regexes.get(pattern)
            if not refresh and old is not None:
                out[pattern] = old
                continue
            topics = frozenset(regex.resolve(pattern, names))
            if describable is not None and topics:
                topics = frozenset(describable(sorted(topics)))
            if old is not None and old.topics == topics:
                out[pattern] = old
                continue
            out[pattern] = ResolvedRegex(topics, (old.version + 1) if old else 0, coord.now())
            recs.append(regex_record(group.group_id, pattern, out[pattern]))
    for pattern in sorted(set(group.regexes) - used):
        recs.append(regex_record(group.group_id, pattern, None))
    return out, recs


def _subscription_metadata(coord: GroupCoordinator, group: ConsumerGroup,
                           members: Iterable[ConsumerGroupMember],
                           regexes: Mapping[str, ResolvedRegex]) -> dict[str, TopicMetadata]:
    names: set[str] = set()
    for m in members:
        names.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex and m.subscribed_topic_regex in regexes:
            names |= regexes[m.subscribed_topic_regex].topics
    out = {}
    for name in sorted(names):
        t = coord.topics.lookup(name)
        if t is not None and t.num_partitions > 0:
            out[name] = t
    return out


def _member_topics(m: ConsumerGroupMember, metadata: Mapping[str, TopicMetadata],
                   regexes: Mapping[str, ResolvedRegex]) -> frozenset[uuid.UUID]:
    names = set(m.subscribed_topic_names)
    if m.subscribed_topic_regex and m.subscribed_topic_regex in regexes:
        names |= regexes[m.subscribed_topic_regex].topics
    return frozenset(metadata[n].topic_id for n in names if n in metadata)


def _compute_target(coord: GroupCoordinator, group: ConsumerGroup,
                    members: Mapping[str, ConsumerGroupMember],
                    metadata: Mapping[str, TopicMetadata],
                    old_targets: Mapping[str, Partitions],
                    regexes: Mapping[str, ResolvedRegex]) -> dict[str, Partitions]:
    from spool.coordinator import assignors as impl

    name = group.preferred_assignor(members.values()) or assignors(coord)[0]
    specs = {
        mid: impl.MemberSpec(mid, m.instance_id, m.rack_id, _member_topics(m, metadata, regexes),
                             dict(old_targets.get(mid, {})))
        for mid, m in members.items()
    }
    topics = {t.topic_id: impl.TopicSpec(t.topic_id, t.name, t.num_partitions, {})
              for t in metadata.values()}
    try:
        result = impl.assign(name, specs, topics)
    except Exception as e:  # Kafka: PartitionAssignorException -> UNKNOWN_SERVER_ERROR
        log.error("group %s: failed to compute a new target assignment: %s", group.group_id, e)
        raise GroupError(Errors.UNKNOWN_SERVER_ERROR,
                         f"Failed to compute a new target assignment: {e}") from None
    return {mid: {t: frozenset(ps) for t, ps in result.get(mid, {}).items() if ps}
            for mid in members}


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Partitions,
              partition_epochs: Mapping[tuple[uuid.UUID, int], int],
              owned) -> ConsumerGroupMember:
    """Kafka's CurrentAssignmentBuilder: the member's next step towards ``target``."""
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epochs, owned)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epochs,
                     owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epochs, owned)
    if owned is None or owned:
        raise GroupError(Errors.FENCED_MEMBER_EPOCH,
                         "The consumer group member is in a unknown state. The member must "
                         "abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, partition_epochs, owned)


def _owns_any(owned, parts: Partitions) -> bool:
    if owned is None:
        return True  # not told: assume it still owns them
    return any(p in parts.get(tid, ()) for tid, ps in owned for p in ps)


def _with_epoch(member: ConsumerGroupMember, epoch: int, **kw: Any) -> ConsumerGroupMember:
    return replace(member, previous_member_epoch=member.member_epoch, member_epoch=epoch, **kw)


def _next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Partitions,
          partition_epochs: Mapping[tuple[uuid.UUID, int], int], owned) -> ConsumerGroupMember:
    assigned: Partitions = {}
    revoke: Partitions = {}
    pending: Partitions = {}
    unreleased = False
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, frozenset())
        have = member.assigned.get(tid, frozenset())
        keep = have & want
        gone = have - keep
        free = set()
        for p in want - keep:
            if (tid, p) in partition_epochs:
                unreleased = True
            else:
                free.add(p)
        if keep:
            assigned[tid] = frozenset(keep)
        if gone:
            revoke[tid] = frozenset(gone)
        if free:
            pending[tid] = frozenset(free)
    if revoke and _owns_any(owned, revoke):
        return _with_epoch(member, epoch, state=MemberState.UNREVOKED_PARTITIONS,
                           assigned=assigned, pending_revocation=revoke)
    for tid, ps in pending.items():
        assigned[tid] = assigned.get(tid, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=assigned,
                       pending_revocation={})


# ---- leaving and fencing

def _remove_member_records(group_id: str, member_id: str) -> list:
    return [current_record(group_id, member_id, None), target_record(group_id, member_id, None),
            member_record(group_id, member_id, None)]


def _leave(coord: GroupCoordinator, req: HeartbeatRequest, out: Result) -> HeartbeatAnswer:
    group = consumer_group(coord, req.group_id)
    answer = HeartbeatAnswer(0, None, req.member_id, req.member_epoch)
    if req.instance_id is None:
        member = group.members.get(req.member_id)
        if member is None:
            raise GroupError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {req.member_id} is not a member of group {req.group_id}.")
        log.info("group %s: member %s left the consumer group", req.group_id, req.member_id)
        fence_member(coord, group, member, out)
        return answer
    member = group.static_member(req.instance_id)
    if member is None:
        raise GroupError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
    if member.member_id != req.member_id:
        raise GroupError(Errors.FENCED_INSTANCE_ID,
                         f"Static member {req.member_id} with instance id {req.instance_id} "
                         f"was fenced by member {member.member_id}.")
    if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        log.info("group %s: static member %s (instance %s) temporarily left", req.group_id,
                 member.member_id, req.instance_id)
        leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                          pending_revocation={})
        _commit(coord, out, req.group_id, [current_record(req.group_id, member.member_id,
                                                          leaving)])
        return answer
    log.info("group %s: static member %s (instance %s) left", req.group_id, member.member_id,
             req.instance_id)
    fence_member(coord, group, member, out)
    return answer


def fence_member(coord: GroupCoordinator, group: ConsumerGroup, member: ConsumerGroupMember,
                 out: Result) -> None:
    """Remove ``member`` (tombstones), update the subscription metadata, bump the epoch; or,
    when only classic-protocol members would be left, downgrade the group
    (``spool.coordinator.consumer_classic``)."""
    from spool.coordinator import consumer_classic

    gid = group.group_id
    if consumer_classic.can_downgrade(coord, group, member.member_id):
        consumer_classic.downgrade(coord, group, member.member_id, out)
        return
    recs = _remove_member_records(gid, member.member_id)
    rest = [m for mid, m in group.members.items() if mid != member.member_id]
    regexes, regex_recs = _resolve_regexes(coord, group, rest, refresh=False)
    recs += regex_recs
    metadata = _subscription_metadata(coord, group, rest, regexes)
    if metadata != group.subscription_metadata:
        recs.append(metadata_record(gid, metadata))
    recs.append(epoch_record(gid, group.group_epoch + 1))
    _commit(coord, out, gid, recs)
    _cancel_timers(coord, gid, member.member_id)


def _cancel_timers(coord: GroupCoordinator, group_id: str, member_id: str) -> None:
    for key in (SESSION_KEY, REBALANCE_KEY, JOIN_KEY, SYNC_KEY):
        coord.timers.cancel((key, group_id, member_id))


def schedule_fence(coord: GroupCoordinator, kind: str, group_id: str, member_id: str,
                   timeout_ms: int, why: str) -> None:
    """Fence the member ``timeout_ms`` from now unless the timer ``kind`` is cancelled first
    (the session timer; a classic member's join and sync deadlines: its rebalance timeout)."""
    def expire(out: Result) -> None:
        group = coord.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and member_id in group.members:
            log.info("group %s: member %s fenced: %s", group_id, member_id, why)
            fence_member(coord, group, group.members[member_id], out)

    coord.timers.schedule((kind, group_id, member_id), coord.now() + max(timeout_ms, 0), expire)


def schedule_session_timeout(coord: GroupCoordinator, group_id: str, member_id: str,
                             timeout_ms: int | None = None) -> None:
    """The member's session timer: ``timeout_ms`` (a classic member's own), else the
    group's ``consumer.session.timeout.ms``."""
    timeout = session_timeout_ms(coord, group_id) if timeout_ms is None else timeout_ms
    schedule_fence(coord, SESSION_KEY, group_id, member_id, timeout, "its session expired")


def _schedule_rebalance_timeout(coord: GroupCoordinator, group_id: str,
                                member: ConsumerGroupMember) -> None:
    member_id, epoch, timeout = member.member_id, member.member_epoch, member.rebalance_timeout_ms

    def expire(out: Result) -> None:
        group = coord.groups.get(group_id)
        m = group.members.get(member_id) if isinstance(group, ConsumerGroup) else None
        if m is not None and m.member_epoch == epoch:
            log.info("group %s: member %s fenced: it did not leave epoch %d within %dms",
                     group_id, member_id, epoch, timeout)
            fence_member(coord, group, m, out)

    coord.timers.schedule((REBALANCE_KEY, group_id, member_id), coord.now() + max(timeout, 0),
                          expire)


def loaded(coord: GroupCoordinator, group: ConsumerGroup) -> None:
    """After a load: every member's session timer, and the rebalance timer of those that
    must still revoke partitions."""
    for m in group.members.values():
        schedule_session_timeout(coord, group.group_id, m.member_id,
                                 None if m.classic is None else m.classic.session_timeout_ms)
        if m.state == MemberState.UNREVOKED_PARTITIONS and m.classic is None:
            _schedule_rebalance_timeout(coord, group.group_id, m)


def tombstones(group: ConsumerGroup) -> list:
    """Every record of the group as a tombstone, in Kafka's order (createGroupTombstoneRecords)."""
    gid = group.group_id
    recs = [current_record(gid, mid, None) for mid in group.members]
    recs += [target_record(gid, mid, None) for mid in group.target]
    recs.append(target_epoch_record(gid, None))
    recs += [member_record(gid, mid, None) for mid in group.members]
    recs += [regex_record(gid, regex, None) for regex in group.regexes]
    recs.append(metadata_record(gid, None))
    recs.append(epoch_record(gid, None))
    return recs


def delete_group(coord: GroupCoordinator, group: ConsumerGroup, out: Result) -> None:
    """Tombstones for the whole group, applied at once (the group is gone; its offsets are
    the caller's)."""
    for mid in list(group.members):
        _cancel_timers(coord, group.group_id, mid)
    _commit(coord, out, group.group_id, tombstones(group))
