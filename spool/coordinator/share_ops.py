"""ShareGroupHeartbeat and the share groups' other operations, as Kafka's GroupMetadataManager.

Pure operations on a ``GroupCoordinator`` (same contract as its classic ones): each
returns ``(Result, answer)``; every state change is a record emitted through
``spool.coordinator.share_group.emit`` (appended and applied at once; a failed append
reverts through the runtime's checkpoint of the group).

``heartbeat(coord, req, limits, topics)`` is Kafka's ``shareGroupHeartbeat``:

- validation (INVALID_REQUEST, ``validate``): a member id (v1: the client makes it) and
  a group id, a non-empty rack id if any; epoch 0 must carry the subscribed topics;
  epochs below -1 are invalid. A group id held by a group of another type is
  GROUP_ID_NOT_FOUND ("Group g is not a share group."); creating a share group beyond
  ``group.share.max.groups`` share groups in its ``__consumer_offsets`` partition
  (``coord.partition_of``: a Kafka coordinator shard counts its own), or a member beyond
  ``group.share.max.size``, is GROUP_MAX_SIZE_REACHED.
- epoch 0 joins (or rejoins with the same member id); a later epoch must name a member
  (UNKNOWN_MEMBER_ID) at its epoch or the previous one (else FENCED_MEMBER_EPOCH: the
  response with the bumped epoch may have been lost); -1 leaves.
- a new member, a changed subscription or changed metadata of the subscribed topics
  (``topics``: the metadata image by name) bumps the group epoch; a group epoch above
  the assignment epoch recomputes the target assignment with the simple assignor
  (``spool.coordinator.share_assignor``) over the *initialized* partitions only; the
  member then takes its target at once, at the assignment epoch (no revocation in a
  share group).
- the response carries the assignment when the member joined, sent its subscription,
  or its assignment changed; ``heartbeat_interval_ms`` is ``limits``'s (the group's
  ``share.heartbeat.interval.ms``, else ``group.share.heartbeat.interval.ms``).
- the session timer (``("share-session", group, member)``, ``limits.session_timeout_ms``)
  fences a silent member as a leave does.

Share-partition state (Kafka's ``maybeCreateInitializeShareGroupStateRequest``): every
partition of a subscribed topic that is neither initialized nor initializing (or whose
initialization is older than ``INITIALIZE_RETRY_MS``) is recorded as initializing
(ShareGroupStatePartitionMetadata) and returned in ``answer.initialize``: the runtime
calls the persister once the records are in (``GroupRuntime.initialize_share_state``)
at state epoch = the group epoch, start offset -1 (``share.auto.offset.reset`` is
decided by the partition leader) for a topic the group never had, 0 for a new partition
of a known topic; then ``initialized(coord, group, outcomes)`` records the outcome and
bumps the group epoch so that the next heartbeat assigns the new partitions.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from spool.coordinator import consumer_ops
from spool.coordinator.consumer_group import TopicMetadata
from spool.coordinator.consumer_ops import blank
from spool.coordinator.coordinator import GroupCoordinator
from spool.coordinator.result import Result
from spool.coordinator.share_assignor import assign
from spool.coordinator.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    InitTopic,
    ShareGroup,
    ShareMember,
    current_assignment_record,
    emit,
    member_record,
    metadata_record,
    partition_metadata_record,
    state_partition_record,
    target_member_record,
    target_metadata_record,
)
from spool.protocol.errors import Errors
from spool.util.logs import fields

log = logging.getLogger("spool.coordinator.share")

INITIALIZE_RETRY_MS = 30_000  # Kafka's group.share.initialize.retry.interval.ms default


@dataclass(frozen=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareLimits:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200
    max_groups: int = 10


@dataclass(frozen=True)
class ToInitialize:
    topic_id: uuid.UUID
    partition: int
    start_offset: int


@dataclass(frozen=True)
class HeartbeatAnswer(consumer_ops.HeartbeatAnswer):
    """A consumer group heartbeat's answer, and the partitions whose share state the
    runtime must initialize through the persister."""

    state_epoch: int = 0  # the group epoch the partitions below are initialized at
    initialize: tuple[ToInitialize, ...] = field(default=())


def _error(code: int, message: str, member_id: str | None = None) -> HeartbeatAnswer:
    return HeartbeatAnswer(code, message, member_id=member_id)


def validate(req: ShareHeartbeat) -> str | None:
    """Why the request is INVALID_REQUEST (Kafka's checks, in Kafka's order), else None."""
    if not req.member_id or blank(req.member_id):
        return "MemberId can't be empty."
    if not req.group_id or blank(req.group_id):
        return "GroupId can't be empty."
    if blank(req.rack_id):
        return "RackId can't be empty."
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return "MemberEpoch is invalid."
    return None


def share_group(coord: GroupCoordinator, group_id: str) -> ShareGroup | HeartbeatAnswer:
    """The share group ``group_id``, or the answer for a missing one or another type."""
    g = coord.groups.get(group_id)
    if isinstance(g, ShareGroup):
        return g
    if g is None:
        return _error(Errors.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
    return _error(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")


def heartbeat(coord: GroupCoordinator, req: ShareHeartbeat, limits: ShareLimits,
              topics: Mapping[str, TopicMetadata]) -> tuple[Result, HeartbeatAnswer]:
    out = Result()
    problem = validate(req)
    if problem is not None:
        return out, _error(Errors.INVALID_REQUEST, problem, req.member_id)
    if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        return _leave(coord, req.group_id, req.member_id, out)
    g = coord.groups.get(req.group_id)
    if g is None and req.member_epoch == 0:
        shard = coord.partition_of(req.group_id)
        if sum(isinstance(x, ShareGroup) and coord.partition_of(gid) == shard
               for gid, x in coord.groups.items()) >= limits.max_groups:
            return out, _error(Errors.GROUP_MAX_SIZE_REACHED,
                               "The maximum number of share groups has been reached.")
        g = ShareGroup(req.group_id)  # created by its first record (emit)
    elif not isinstance(g, ShareGroup):
        found = share_group(coord, req.group_id)
        assert not isinstance(found, ShareGroup)
        return out, found
    if len(g.members) >= limits.max_size and req.member_id not in g.members:
        return out, _error(Errors.GROUP_MAX_SIZE_REACHED,
                           f"The share group has reached its maximum capacity of "
                           f"{limits.max_size} members.")
    old = g.members.get(req.member_id)
    if req.member_epoch > 0:
        code = _check_epoch(g, old, req)
        if code is not None:
            return out, code
    elif old is not None:
        log.info("group %s: member %s rejoins", req.group_id, req.member_id)
    return _heartbeat(coord, g, old, req, limits, topics, out)


def _check_epoch(g: ShareGroup, m: ShareMember | None,
                 req: ShareHeartbeat) -> HeartbeatAnswer | None:
    if m is None:
        return _error(Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of "
                      f"group {g.group_id}.", req.member_id)
    if req.member_epoch > m.member_epoch or (req.member_epoch < m.member_epoch
                                             and req.member_epoch != m.previous_member_epoch):
        side = "greater" if req.member_epoch > m.member_epoch else "smaller"
        return _error(Errors.FENCED_MEMBER_EPOCH,
                      f"The share group member has a {side} member epoch ({req.member_epoch}) "
                      f"than the one known by the group coordinator ({m.member_epoch}). The "
                      "member must abandon all its partitions and rejoin.", req.member_id)
    return None


def _heartbeat(coord: GroupCoordinator, g: ShareGroup, old: ShareMember | None,
               req: ShareHeartbeat, limits: ShareLimits, topics: Mapping[str, TopicMetadata],
               out: Result) -> tuple[Result, HeartbeatAnswer]:
    gid = g.group_id
    member = ShareMember(req.member_id) if old is None else ShareMember(**vars(old))
    if req.rack_id is not None:
        member.rack_id = req.rack_id
    if req.subscribed_topic_names is not None:
        member.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
    member.client_id, member.client_host = req.client_id, req.client_host
    bump = old is None or old.subscribed_topic_names != member.subscribed_topic_names
    if old is None or _metadata(old) != _metadata(member):
        emit(coord, out, member_record(gid, member))
    g = coord.groups[gid]  # type: ignore[assignment]  # created by the record if new
    bump = _update_subscription(coord, g, topics, out) or bump
    if bump:
        emit(coord, out, metadata_record(gid, g.group_epoch + 1))
    initialize = _maybe_initialize(coord, g, out)
    if g.group_epoch > g.assignment_epoch:
        _update_target(coord, g, out)
    member = g.members[req.member_id]
    before = dict(member.assigned)
    target = g.target.get(member.member_id, {})
    if member.member_epoch != g.assignment_epoch or member.assigned != target:
        updated = ShareMember(**vars(member))
        updated.previous_member_epoch = member.member_epoch
        updated.member_epoch = g.assignment_epoch
        updated.assigned = dict(target)
        emit(coord, out, current_assignment_record(gid, updated))
        member = g.members[req.member_id]
    schedule_session(coord, gid, member.member_id, limits.session_timeout_ms)
    send = (req.member_epoch == 0 or req.subscribed_topic_names is not None
            or before != member.assigned)
    return out, HeartbeatAnswer(
        member_id=member.member_id, member_epoch=member.member_epoch,
        heartbeat_interval_ms=limits.heartbeat_interval_ms,
        assignment=dict(member.assigned) if send else None,
        state_epoch=g.group_epoch, initialize=initialize)


def _metadata(m: ShareMember) -> tuple:
    return m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names


def _update_subscription(coord: GroupCoordinator, g: ShareGroup,
                         topics: Mapping[str, TopicMetadata], out: Result) -> bool:
    """Record the subscribed topics' metadata if it changed; True if it did."""
    now = {name: topics[name] for name in sorted(g.subscribed_topic_names()) if name in topics}
    if now == g.subscription:
        return False
    emit(coord, out, partition_metadata_record(g.group_id, now))
    return True


def _maybe_initialize(coord: GroupCoordinator, g: ShareGroup,
                      out: Result) -> tuple[ToInitialize, ...]:
    now = coord.now()
    todo: list[ToInitialize] = []
    for meta in g.subscription.values():
        done = g.initialized.get(meta.topic_id)
        going = g.initializing.get(meta.topic_id)
        fresh = going is not None and now - going.create_timestamp < INITIALIZE_RETRY_MS
        for p in range(meta.num_partitions):
            if (done is not None and p in done.partitions) or (fresh and p in going.partitions):
                continue
            todo.append(ToInitialize(meta.topic_id, p, 0 if done is not None else -1))
    if not todo:
        return ()
    initializing, initialized = g.init_tables()
    names = {m.topic_id: m.name for m in g.subscription.values()}
    for t in todo:
        entry = initializing.get(t.topic_id)
        if entry is None or now - entry.create_timestamp >= INITIALIZE_RETRY_MS:
            entry = initializing[t.topic_id] = InitTopic(names[t.topic_id], set(), now)
        entry.partitions.add(t.partition)
    emit(coord, out, state_partition_record(g.group_id, initializing, initialized, g.deleting))
    return tuple(todo)


def _update_target(coord: GroupCoordinator, g: ShareGroup, out: Result) -> None:
    ids = {m.name: m.topic_id for m in g.subscription.values()}
    subs = {mid: frozenset(ids[t] for t in m.subscribed_topic_names if t in ids)
            for mid, m in g.members.items()}
    assignable = {}
    for meta in g.subscription.values():
        init = g.initialized.get(meta.topic_id)
        if init is not None:
            assignable[meta.topic_id] = frozenset(p for p in init.partitions
                                                  if p < meta.num_partitions)
    new = assign(subs, assignable, {mid: g.target.get(mid, {}) for mid in g.members})
    for mid, parts in sorted(new.items()):
        if g.target.get(mid) != parts:
            emit(coord, out, target_member_record(g.group_id, mid, parts))
    emit(coord, out, target_metadata_record(g.group_id, g.group_epoch))
    log.info("share group %s rebalanced: epoch %d with %d members", g.group_id, g.group_epoch,
             len(g.members), extra=fields(group=g.group_id, epoch=g.group_epoch,
                                          members=len(g.members),
                                          member_ids=sorted(g.members)[:20]))


def _leave(coord: GroupCoordinator, group_id: str, member_id: str,
           out: Result) -> tuple[Result, HeartbeatAnswer]:
    g = share_group(coord, group_id)
    if not isinstance(g, ShareGroup):
        return out, g
    if member_id not in g.members:
        return out, _error(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of "
                           f"group {group_id}.", member_id)
    log.info("group %s: member %s left", group_id, member_id)
    remove_member(coord, g, member_id, out)
    return out, HeartbeatAnswer(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)


def remove_member(coord: GroupCoordinator, g: ShareGroup, member_id: str, out: Result) -> None:
    """Kafka's removeMember + epoch bump: the member's records go (current assignment,
    target, subscription), the subscribed topics' metadata follows, the group epoch is
    bumped so the next heartbeat recomputes the target assignment."""
    gid = g.group_id
    emit(coord, out, current_assignment_record(gid, None, member_id))
    if member_id in g.target:
        emit(coord, out, target_member_record(gid, member_id, None))
    emit(coord, out, member_record(gid, None, member_id))
    coord.timers.cancel(("share-session", gid, member_id))
    topics = {m.name: m for m in g.subscription.values()}
    _update_subscription(coord, g, topics, out)
    emit(coord, out, metadata_record(gid, g.group_epoch + 1))


def schedule_session(coord: GroupCoordinator, group_id: str, member_id: str,
                     timeout_ms: int) -> None:
    coord._at(("share-session", group_id, member_id), timeout_ms,
              lambda out: _session_expired(coord, group_id, member_id, out))


def _session_expired(coord: GroupCoordinator, group_id: str, member_id: str,
                     out: Result) -> None:
    g = coord.groups.get(group_id)
    if isinstance(g, ShareGroup) and member_id in g.members:
        log.info("group %s: member %s fenced: session timed out", group_id, member_id)
        remove_member(coord, g, member_id, out)


def initialized(coord: GroupCoordinator, group_id: str,
                outcomes: list[tuple[uuid.UUID, int, bool]]) -> tuple[Result, None]:
    """The persister's answers for partitions ``heartbeat`` marked initializing: each
    ``(topic_id, partition, ok)`` moves to initialized, or leaves the initializing set to
    be tried again; an initialized one bumps the group epoch (it becomes assignable)."""
    out = Result()
    g = coord.groups.get(group_id)
    if not isinstance(g, ShareGroup):
        return out, None
    initializing, initialized = g.init_tables()
    changed = assignable = False
    for topic_id, partition, ok in outcomes:
        going = initializing.get(topic_id)
        if going is None or partition not in going.partitions:
            continue
        going.partitions.discard(partition)
        if not going.partitions:
            del initializing[topic_id]
        changed = True
        if ok:
            done = initialized.setdefault(topic_id, InitTopic(going.name, set(), -1))
            done.partitions.add(partition)
            assignable = True
    if changed:
        emit(coord, out, state_partition_record(group_id, initializing, initialized,
                                                g.deleting))
    if assignable:
        emit(coord, out, metadata_record(group_id, g.group_epoch + 1))
    return out, None


def share_partitions(g: ShareGroup) -> list[tuple[uuid.UUID, int]]:
    """The partitions whose share state the group has or may have (initialized or
    initializing): what DeleteGroups deletes through the persister first."""
    tps = {(t, p) for table in (g.initialized, g.initializing)
           for t, i in table.items() for p in i.partitions}
    return sorted(tps)


def delete_share_group(coord: GroupCoordinator, g: ShareGroup, out: Result) -> int:
    """DeleteGroups of a share group: NON_EMPTY_GROUP with members, else every record of
    the group gets its tombstone (the group's own last: it removes the group)."""
    if g.members:
        return Errors.NON_EMPTY_GROUP
    gid = g.group_id
    emit(coord, out, state_partition_record(gid, None))
    for mid in sorted(g.target):
        emit(coord, out, target_member_record(gid, mid, None))
    emit(coord, out, target_metadata_record(gid, None))
    emit(coord, out, partition_metadata_record(gid, None))
    emit(coord, out, metadata_record(gid, None))
    return 0


def offsets_reset(coord: GroupCoordinator, group_id: str,
                  done: list[tuple[uuid.UUID, str, int]], state_epoch: int
                  ) -> tuple[Result, None]:
    """AlterShareGroupOffsets: the persister started the state of ``done`` (topic id, name,
    partition) again at ``state_epoch`` (the group epoch + 1): record them initialized and
    the group at that epoch."""
    out = Result()
    g = coord.groups.get(group_id)
    if not isinstance(g, ShareGroup):
        return out, None
    initializing, inited = g.init_tables()
    for tid, name, p in done:
        inited.setdefault(tid, InitTopic(name, set(), -1)).partitions.add(p)
        if tid in initializing:
            initializing[tid].partitions.discard(p)
    emit(coord, out, state_partition_record(group_id, initializing, inited, g.deleting))
    if state_epoch > g.group_epoch:
        emit(coord, out, metadata_record(group_id, state_epoch))
    return out, None


def forget_topics(coord: GroupCoordinator, group_id: str,
                  topic_ids: list[uuid.UUID]) -> tuple[Result, None]:
    """DeleteShareGroupOffsets: the persister deleted these topics' state; the group
    forgets them (a later subscription initializes them again)."""
    out = Result()
    g = coord.groups.get(group_id)
    if not isinstance(g, ShareGroup):
        return out, None
    initializing, inited = g.init_tables()
    for tid in topic_ids:
        initializing.pop(tid, None)
        inited.pop(tid, None)
    emit(coord, out, state_partition_record(group_id, initializing, inited, g.deleting))
    return out, None
