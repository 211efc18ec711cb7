"""Classic-protocol members in KIP-848 consumer groups, and the conversions between the two
group types (``group.consumer.migration.policy``), as Kafka's GroupMetadataManager.

- Upgrade (policy ``upgrade`` or ``bidirectional``): a consumer-protocol member joining a
  non-empty classic group of protocol type ``consumer`` (at most ``group.consumer.max.size``
  members) turns it into a consumer group. Each classic member keeps its last assignment
  (group epoch, assignment epoch and member epochs = the generation) and becomes a member
  *using the classic protocol* (``ConsumerGroupMember.classic``); parked JoinGroup/SyncGroup
  requests get REBALANCE_IN_PROGRESS. A GroupMetadata tombstone ends the classic group.
- Classic members in a consumer group keep using JoinGroup, SyncGroup, Heartbeat and
  LeaveGroup: a JoinGroup is a heartbeat with the subscription and owned partitions of its
  embedded consumer protocol (no leader: the coordinator assigns; the generation is the
  member epoch), SyncGroup returns the member's assigned partitions in the consumer protocol,
  Heartbeat answers REBALANCE_IN_PROGRESS while the member must rejoin (its epoch is behind
  the group's, it must revoke, or partitions it waits for were released), LeaveGroup removes
  it (the group epoch bumps). Their session timeout is their own (JoinGroup's); one told to
  rejoin must do it, and one that joined must sync, within its rebalance timeout, else it
  is fenced.
- Downgrade (policy ``downgrade`` or ``bidirectional``): when the last consumer-protocol
  member leaves or is fenced and the other members (at least one) all use the classic
  protocol, the group becomes a classic group again: tombstones for every consumer group
  record, a GroupMetadata record with the members and their target assignments, then a
  rebalance (the members rejoin).

Errors are Kafka's: a non-classic member naming itself in SyncGroup/Heartbeat/LeaveGroup
is UNKNOWN_MEMBER_ID; a generation that is not the member epoch ILLEGAL_GENERATION; a
protocol the classic members do not all support INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from spool.coordinator import consumer_ops as ops
from spool.coordinator.consumer_group import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    current_record,
    epoch_record,
    member_record,
    metadata_record,
    target_epoch_record,
    target_record,
)
from spool.coordinator.group import ClassicGroup, GroupState, Member
from spool.coordinator.result import JoinResult, Reply, Result, SyncResult
from spool.protocol._generated import DATA_SCHEMAS
from spool.protocol.errors import Errors

if TYPE_CHECKING:
    from spool.coordinator.coordinator import GroupCoordinator, JoinRequest

log = logging.getLogger("spool.coordinator")

_SUBSCRIPTION = DATA_SCHEMAS["ConsumerProtocolSubscription"]
_ASSIGNMENT = DATA_SCHEMAS["ConsumerProtocolAssignment"]


# ---- the embedded consumer protocol

@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: tuple[tuple[str, tuple[int, ...]], ...]
    rack_id: str | None


def decode_subscription(metadata: bytes) -> Subscription | None:
    """A ``consumer`` protocol subscription (a newer version is read as the newest known, as
    Kafka's ConsumerProtocol); None when malformed."""
    try:
        version = int.from_bytes(metadata[:2], "big", signed=True)
        if len(metadata) < 2 or version < 0:
            return None
        v = min(version, _SUBSCRIPTION.VALID_VERSIONS[1])
        msg, _ = _SUBSCRIPTION.decode(memoryview(metadata), 2, v)
    except Exception:  # noqa: BLE001 - any malformed body is the client's fault
        return None
    owned = tuple((tp.topic, tuple(tp.partitions)) for tp in (msg.owned_partitions or ())) \
        if v >= 1 else ()
    return Subscription(version, tuple(msg.topics or ()), owned,
                        msg.rack_id if v >= 3 else None)


def encode_assignment(parts: Partitions, names: dict[uuid.UUID, str], version: int) -> bytes:
    """``parts`` as a ``consumer`` protocol assignment at the member's version."""
    v = max(0, min(version, _ASSIGNMENT.VALID_VERSIONS[1]))
    tp = _struct_tp()
    msg = _ASSIGNMENT(assigned_partitions=[
        tp(topic=names[t], partitions=sorted(ps))
        for t, ps in sorted(parts.items(), key=lambda kv: names.get(kv[0], "")) if t in names],
        user_data=None)
    return v.to_bytes(2, "big", signed=True) + msg.to_bytes(v)


def _struct_tp() -> Any:
    from spool.protocol._generated.consumer_protocol_assignment import TopicPartition

    return TopicPartition


def decode_assignment(data: bytes) -> list[tuple[str, list[int]]]:
    try:
        version = int.from_bytes(data[:2], "big", signed=True)
        if len(data) < 2 or version < 0:
            return []
        msg, _ = _ASSIGNMENT.decode(memoryview(data), 2, min(version, 3))
        return [(tp.topic, list(tp.partitions)) for tp in msg.assigned_partitions]
    except Exception:  # noqa: BLE001
        return []


def _ids(coord: GroupCoordinator, named) -> Partitions:
    out: Partitions = {}
    for topic, partitions in named:
        t = coord.topics.lookup(topic)
        if t is not None and partitions:
            out[t.topic_id] = out.get(t.topic_id, frozenset()) | frozenset(partitions)
    return out


def _names(coord: GroupCoordinator, group: ConsumerGroup) -> dict[uuid.UUID, str]:
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
    for name in coord.topics.names():
        t = coord.topics.lookup(name)
        if t is not None:
            names.setdefault(t.topic_id, name)
    return names


def _version(member: ConsumerGroupMember) -> int:
    md = member.classic.protocols[0][1] if member.classic and member.classic.protocols else b""
    return int.from_bytes(md[:2], "big", signed=True) if len(md) >= 2 else 0


# ---- policies

def upgrade_enabled(coord: GroupCoordinator) -> bool:
    return coord.config.consumer_migration_policy.lower() in ("upgrade", "bidirectional")


def downgrade_enabled(coord: GroupCoordinator) -> bool:
    return coord.config.consumer_migration_policy.lower() in ("downgrade", "bidirectional")


# ---- upgrade: classic -> consumer

def can_upgrade(coord: GroupCoordinator, group: ClassicGroup) -> bool:
    if not upgrade_enabled(coord):
        log.info("group %s: not upgraded to a consumer group: the online upgrade is disabled",
                 group.group_id)
        return False
    if group.protocol_type != "consumer":
        return False
    return len(group.members) <= coord.config.consumer_max_size


def upgrade(coord: GroupCoordinator, classic: ClassicGroup, out: Result) -> ConsumerGroup:
    """Convert ``classic`` (module doc); its records are applied at once."""
    from spool.coordinator.coordinator import _record

    gid = classic.group_id
    for m in classic.members.values():
        out.reply(m.join_reply, JoinResult(Errors.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        out.reply(m.sync_reply, SyncResult(Errors.REBALANCE_IN_PROGRESS))
        m.join_reply = m.sync_reply = None
        coord.timers.cancel(("heartbeat", gid, m.member_id))
    for mid in list(classic.pending_members):
        coord.timers.cancel(("pending", gid, mid))
    coord.timers.cancel(("join", gid))
    out.records.append(_record(gid, None))  # the classic group ends (guarded live replay)
    coord.touch(gid)  # saved before it goes, should the append fail
    del coord.groups[gid]
    epoch = classic.generation
    members = []
    for m in classic.members.values():
        # the chosen protocol's subscription (mid-rebalance, none is chosen yet: its first)
        meta = m.metadata(classic.protocol_name) or (m.protocols[0][1] if m.protocols else b"")
        sub = decode_subscription(meta) or Subscription(0, (), (), None)
        assigned = _ids(coord, decode_assignment(m.assignment))
        members.append(ConsumerGroupMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id,
            client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=sub.topics,
            rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=epoch,
            previous_member_epoch=epoch, state=MemberState.STABLE, assigned=assigned,
            classic=ClassicMetadata(m.session_timeout_ms,
                                    tuple((n, bytes(md)) for n, md in m.protocols))))
    recs = [member_record(gid, m.member_id, m) for m in members]
    recs.append(epoch_record(gid, epoch))
    recs += [target_record(gid, m.member_id, m.assigned) for m in members]
    recs.append(target_epoch_record(gid, epoch))
    recs += [current_record(gid, m.member_id, m) for m in members]
    ops._commit(coord, out, gid, recs)
    group = coord.groups[gid]
    for m in members:
        ops.schedule_session_timeout(coord, gid, m.member_id, m.classic.session_timeout_ms)
    log.info("group %s: classic group of generation %d upgraded to a consumer group", gid,
             epoch)
    return group


# ---- downgrade: consumer -> classic

def can_downgrade(coord: GroupCoordinator, group: ConsumerGroup, leaving: str) -> bool:
    if not group.all_classic_except(leaving) or len(group.members) <= 1:
        return False
    if not downgrade_enabled(coord):
        log.info("group %s: not downgraded to a classic group: the online downgrade is "
                 "disabled", group.group_id)
        return False
    return len(group.members) - 1 <= coord.config.max_size


def downgrade(coord: GroupCoordinator, group: ConsumerGroup, leaving: str, out: Result) -> None:
    """Convert ``group`` without ``leaving`` to a classic group and start a rebalance."""
    gid = group.group_id
    names = _names(coord, group)
    stay = [m for mid, m in group.members.items() if mid != leaving]
    targets = dict(group.target)
    epoch = group.group_epoch
    for mid in list(group.members):
        ops._cancel_timers(coord, gid, mid)
    ops._commit(coord, out, gid, ops.tombstones(group))
    classic = ClassicGroup(gid, state=GroupState.STABLE, state_timestamp=coord.now(),
                           generation=epoch, protocol_type="consumer")
    for m in stay:
        assert m.classic is not None
        classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                           m.rebalance_timeout_ms, m.classic.session_timeout_ms, "consumer",
                           list(m.classic.protocols)))
    classic.protocol_name = classic.select_protocol()
    for m in stay:
        classic.members[m.member_id].assignment = encode_assignment(
            targets.get(m.member_id, {}), names, _version(m))
    coord.groups[gid] = classic
    coord._write_group(classic, out)
    for m in classic.members.values():
        coord._heartbeat(classic, m)
    log.info("group %s: downgraded to a classic group (generation %d)", gid, epoch)
    coord._prepare_rebalance(classic, out)


# ---- classic requests on a consumer group

def _member(group: ConsumerGroup, member_id: str, instance: str | None) -> ConsumerGroupMember:
    if instance is None:
        m = group.members.get(member_id)
        if m is None:
            raise ops.GroupError(Errors.UNKNOWN_MEMBER_ID)
        return m
    m = group.static_member(instance)
    if m is None:
        raise ops.GroupError(Errors.UNKNOWN_MEMBER_ID)
    if m.member_id != member_id:
        raise ops.GroupError(Errors.FENCED_INSTANCE_ID)
    return m


def _classic_member(group: ConsumerGroup, member_id: str, instance: str | None,
                    generation: int) -> ConsumerGroupMember:
    m = _member(group, member_id, instance)
    if m.classic is None:
        raise ops.GroupError(Errors.UNKNOWN_MEMBER_ID)
    if m.member_epoch != generation:
        raise ops.GroupError(Errors.ILLEGAL_GENERATION)
    return m


def join(coord: GroupCoordinator, group: ConsumerGroup, req: JoinRequest, reply: Reply,
         out: Result) -> None:
    """JoinGroup of a classic member to a consumer group (Kafka's
    classicGroupJoinToConsumerGroup); answered at once."""
    unknown = not req.member_id
    member_id = req.member_id or coord._new_member_id(req.client_id)
    try:
        ops.check_size(coord, group, member_id if not unknown else "")
        if not group.supports_classic(req.protocol_type, [n for n, _ in req.protocols]):
            raise ops.GroupError(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and req.group_instance_id is None and req.require_known_member_id:
            out.reply(reply, JoinResult(Errors.MEMBER_ID_REQUIRED, member_id=member_id))
            return
        joining = unknown or member_id not in group.members
        if req.group_instance_id is not None:
            joining = unknown
        member, replaced = ops.find_member(group, member_id, req.group_instance_id, joining,
                                           None, None)
        sub = decode_subscription(req.protocols[0][1])
        if sub is None:
            raise ops.GroupError(Errors.INCONSISTENT_GROUP_PROTOCOL)
        updated = replace(
            member, instance_id=req.group_instance_id or member.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms, subscribed_topic_names=sub.topics,
            client_id=req.client_id, client_host=req.client_host,
            classic=ClassicMetadata(req.session_timeout_ms,
                                    tuple((n, bytes(md)) for n, md in req.protocols)))
        owned = tuple((t, tuple(sorted(ps))) for t, ps in _ids(coord, sub.owned).items())
        reconciled = ops.update_member(coord, group, member, updated, replaced, owned, out)
    except ops.GroupError as e:
        out.reply(reply, JoinResult(e.code, member_id=req.member_id))
        return
    gid = group.group_id
    ops.schedule_session_timeout(coord, gid, member_id, req.session_timeout_ms)
    coord.timers.cancel((ops.JOIN_KEY, gid, member_id))
    ops.schedule_fence(coord, ops.SYNC_KEY, gid, member_id, req.rebalance_timeout_ms,
                       "it did not send SyncGroup within its rebalance timeout")
    out.reply(reply, JoinResult(0, member_id, reconciled.member_epoch, "consumer",
                                req.protocols[0][0], "", ()))


def sync(coord: GroupCoordinator, group: ConsumerGroup, generation: int, member_id: str,
         instance: str | None, protocol_type: str | None, protocol_name: str | None,
         reply: Reply, out: Result) -> None:
    try:
        m = _classic_member(group, member_id, instance, generation)
        name = m.classic.protocols[0][0] if m.classic.protocols else ""
        if (protocol_type and protocol_type != "consumer") or (protocol_name
                                                               and protocol_name != name):
            raise ops.GroupError(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > m.member_epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
            _must_rejoin(coord, group, m)
            raise ops.GroupError(Errors.REBALANCE_IN_PROGRESS)
    except ops.GroupError as e:
        out.reply(reply, SyncResult(e.code))
        return
    ops.schedule_session_timeout(coord, group.group_id, m.member_id, m.classic.session_timeout_ms)
    coord.timers.cancel((ops.SYNC_KEY, group.group_id, m.member_id))
    out.reply(reply, SyncResult(0, "consumer", name,
                                encode_assignment(m.assigned, _names(coord, group), _version(m))))


def _waiting_on_unreleased(group: ConsumerGroup, m: ConsumerGroupMember) -> bool:
    epochs = group.partition_epochs()
    for t, ps in group.target.get(m.member_id, {}).items():
        for p in ps - m.assigned.get(t, frozenset()):
            if (t, p) in epochs:
                return True
    return False


def heartbeat(coord: GroupCoordinator, group: ConsumerGroup, generation: int, member_id: str,
              instance: str | None) -> int:
    try:
        m = _classic_member(group, member_id, instance, generation)
    except ops.GroupError as e:
        return e.code
    ops.schedule_session_timeout(coord, group.group_id, m.member_id, m.classic.session_timeout_ms)
    if (m.member_epoch < group.group_epoch or m.state == MemberState.UNREVOKED_PARTITIONS
            or (m.state == MemberState.UNRELEASED_PARTITIONS
                and not _waiting_on_unreleased(group, m))):
        _must_rejoin(coord, group, m)
        return Errors.REBALANCE_IN_PROGRESS
    return 0


def _must_rejoin(coord: GroupCoordinator, group: ConsumerGroup, m: ConsumerGroupMember) -> None:
    """A classic member told REBALANCE_IN_PROGRESS has its rebalance timeout to rejoin."""
    if (ops.JOIN_KEY, group.group_id, m.member_id) not in coord.timers:
        ops.schedule_fence(coord, ops.JOIN_KEY, group.group_id, m.member_id,
                           m.rebalance_timeout_ms, "it did not rejoin within its rebalance "
                           "timeout")


def leave(coord: GroupCoordinator, group: ConsumerGroup,
          members: list[tuple[str, str | None]], out: Result) -> list[int]:
    gid = group.group_id
    codes = []
    gone: list[str] = []
    for member_id, instance in members:
        try:
            if instance is None:
                m = group.members.get(member_id)
                if m is None:
                    raise ops.GroupError(Errors.UNKNOWN_MEMBER_ID)
            else:
                m = group.static_member(instance)
                if m is None:
                    raise ops.GroupError(Errors.UNKNOWN_MEMBER_ID)
                if member_id and m.member_id != member_id:
                    raise ops.GroupError(Errors.FENCED_INSTANCE_ID)
            if m.classic is None or m.member_id in gone:
                raise ops.GroupError(Errors.UNKNOWN_MEMBER_ID)
        except ops.GroupError as e:
            codes.append(e.code)
            continue
        log.info("group %s: classic member %s left", gid, m.member_id)
        gone.append(m.member_id)
        codes.append(0)
    if gone:
        recs: list = []
        for mid in gone:
            recs += ops._remove_member_records(gid, mid)
            ops._cancel_timers(coord, gid, mid)
        rest = [m for mid, m in group.members.items() if mid not in gone]
        regexes, regex_recs = ops._resolve_regexes(coord, group, rest, refresh=False)
        recs += regex_recs
        metadata = ops._subscription_metadata(coord, group, rest, regexes)
        if metadata != group.subscription_metadata:
            recs.append(metadata_record(gid, metadata))
        recs.append(epoch_record(gid, group.group_epoch + 1))
        ops._commit(coord, out, gid, recs)
    return codes
